"""`harness show RUN_DIR`: the verdict's summary and where the report is; --json the file."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.helpers import harness

VERDICT = {
    "outcome": "safe",
    "matched": True,
    "expect": "safe",
    "reason": "no acknowledged message lost (3 acknowledged)",
    "sends": {"ok": 3},
    "groups": {},
}


def _show(*args: str) -> subprocess.CompletedProcess[str]:
    return harness("show", *args)


def test_show_prints_the_summary_and_json_prints_the_verdict(tmp_path: Path) -> None:
    (tmp_path / "verdict.json").write_text(json.dumps(VERDICT))
    (tmp_path / "report.html").write_text("<html></html>")
    shown = _show(str(tmp_path))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [
        "verdict: safe (matches the expectation safe): no acknowledged message lost "
        "(3 acknowledged)",
        "sends: ok 3",
        f"report: {tmp_path / 'report.html'}",
    ]
    raw = _show(str(tmp_path), "--json")
    assert raw.returncode == 0 and json.loads(raw.stdout) == VERDICT


def test_show_of_a_folder_without_a_verdict_is_one_line(tmp_path: Path) -> None:
    shown = _show(str(tmp_path))
    assert shown.returncode == 2 and "Traceback" not in shown.stderr
    assert shown.stderr.count("\n") == 1 and "no readable verdict.json" in shown.stderr
