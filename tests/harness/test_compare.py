"""`harness compare`: one scenario on several release lines, one table of verdicts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.compare import LineRun, table_lines, write_table
from harness.sequence import Trial
from tests.helpers import ROOT


def test_the_table_has_a_row_per_line_with_its_verdict_or_why_there_is_none(tmp_path: Path) -> None:
    safe = {
        "outcome": "safe",
        "claim_verdict": "reproduced",
        "matched": True,
        "kafka_version": "3.9.2",
        "reason": "no loss | none",
        "groups": {"final": {"lost": 0}},
    }
    lossy = {
        "outcome": "loss",
        "matched": False,
        "kafka_version": "4.4.0",
        "groups": {"final": {"lost": 12}, "reader": {"lost": 3}},
    }
    runs = [
        LineRun("3.9", Trial(tmp_path / "r1", 100.0, None, safe)),
        LineRun("4.4", Trial(tmp_path / "r2", 100.0, None, lossy)),
        LineRun("4.1", Trial(None, 5.0, "error: the cluster never formed", None)),
    ]  # fmt: skip
    lines = table_lines("K4", runs)
    assert lines[4] == "| 3.9 | 3.9.2 | safe | reproduced | 0 | no loss / none | `r1` |"
    assert "| 4.4 | 4.4.0 | loss | not matched | 15 |" in lines[5]
    assert "no verdict" in lines[6] and "never formed" in lines[6]
    assert [r.matched for r in runs] == [True, False, False]
    assert write_table("K4", runs, tmp_path).read_text().count("\n| ") == 5


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["K4"], "give --kafka LINES or --rabbitmq LINES"),
        (["R10", "--rabbitmq", "4.3,four"], "takes a release line"),
        (["K4", "--rabbitmq", "4.3"], "--rabbitmq is for RabbitMQ scenarios"),
        (["R1", "--rabbitmq", "3.10,4.3"], "mirrored"),
    ],
)
def test_a_line_that_cannot_run_is_refused_before_any_run(args: list[str], message: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "harness.cli", "compare", *args],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("error:") and message in result.stderr, result.stderr
    assert "compare:" not in result.stderr  # no run started
