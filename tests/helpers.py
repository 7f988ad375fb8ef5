"""Helpers shared by the end-to-end tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_harness(
    scenario: str, results: Path, timeout: float = 1500
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`harness run SCENARIO --results RESULTS`; returns the result and the run directory."""
    result = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", scenario, "--results", str(results)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
    )
    latest = results / "latest"
    assert latest.is_symlink(), result.stderr[-2000:]
    return result, latest.resolve()
