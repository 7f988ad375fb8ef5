"""`harness diff`: two runs setting by setting."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from contract.manifest import Manifest
from reports.diff import diff_rows
from tests.helpers import ROOT


def run_dir(root: Path, name: str, settings: dict, lost: int) -> Path:
    d = root / name
    d.mkdir()
    Manifest(scenario="K4", run_id=name, kafka_mode="kraft", settings=settings).write(d)
    verdict = {"outcome": "loss" if lost else "safe", "groups": {"final": {"lost": lost}}}
    (d / "verdict.json").write_text(json.dumps(verdict))
    return d


def test_the_settings_that_differ_and_what_each_verdict_said(tmp_path: Path) -> None:
    left = run_dir(tmp_path, "a", {"broker": {"min.insync.replicas": "2", "x": "1"}}, 0)
    right = run_dir(
        tmp_path,
        "b",
        {"broker": {"min.insync.replicas": "1", "x": "1"}, "producer P1": {"acks": "1"}},
        7,
    )
    rows = {(r.scope, r.key): r for r in diff_rows(left, right)}
    assert rows[("broker", "min.insync.replicas")].differs
    assert not rows[("broker", "x")].differs
    assert (rows[("producer P1", "acks")].left, rows[("producer P1", "acks")].right) == ("-", "1")
    assert (rows[("run", "outcome")].left, rows[("run", "outcome")].right) == ("safe", "loss")

    result = subprocess.run(
        [sys.executable, "-m", "harness.cli", "diff", str(left), str(right)],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "min.insync.replicas" in result.stdout and "2 settings differ" in result.stdout
    assert " x " not in result.stdout  # shared settings only with --all


def test_a_directory_without_a_manifest_is_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "harness.cli", "diff", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2 and result.stderr.startswith("error:")
    assert "Traceback" not in result.stderr
