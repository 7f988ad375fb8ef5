"""One `harness run` in a process of its own, bounded in time: what the claims matrix, chaos
and the shrinker run many of. A run that overruns is killed and whatever it left is healed; a
run that fails says why in one line. A run ends with the campaign that started it: killed or
stopped, the campaign's run is sent SIGTERM (its parent-death signal), which heals its faults
and removes its cluster as `harness run` does on SIGTERM."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contract.process import dies_with
from contract.rundir import VERDICT

ROOT = Path(__file__).resolve().parent.parent
HEAL_TIMEOUT = 300


@dataclass(frozen=True)
class Trial:
    run_dir: Path | None  # None: it failed before it had one
    seconds: float
    failure: str | None  # why there is no verdict
    verdict: dict[str, Any] | None


def run_once(
    scenario: str | Path,
    scenario_id: str,
    results: Path,
    timeout: float,
    extra: list[str] | None = None,
    show_output: bool = False,
) -> Trial:
    """`harness run SCENARIO --results RESULTS [extra]` in its own process, bounded by
    `timeout`; the run directory it made under RESULTS/<scenario_id>/, and its verdict."""
    argv = run_argv(scenario, results, extra or [])
    runs = results / scenario_id
    before = set(runs.glob("*")) if runs.exists() else set()
    started = time.monotonic()
    failure = None
    try:
        proc = subprocess.run(
            argv,
            capture_output=not show_output,
            text=True,
            timeout=timeout,
            cwd=ROOT,
            check=False,
            preexec_fn=dies_with(os.getpid()),
        )
        if proc.returncode not in (0, 1):
            said = [ln for ln in (proc.stderr or "").splitlines() if ln.startswith("error:")]
            failure = said[-1] if said else f"harness run exited {proc.returncode}"
    except subprocess.TimeoutExpired:
        failure = f"the run did not finish in {timeout:.0f} s"
        heal = [sys.executable, "-m", "harness.cli", "heal"]
        subprocess.run(heal, cwd=ROOT, timeout=HEAL_TIMEOUT, capture_output=True, check=False)
    made = sorted(set(runs.glob("*")) - before) if runs.exists() else []
    run_dir = made[-1] if made else None
    return Trial(run_dir, time.monotonic() - started, failure, _verdict(run_dir, failure))


def run_argv(scenario: str | Path, results: Path, extra: list[str]) -> list[str]:
    return [
        sys.executable, "-m", "harness.cli", "run", str(scenario), "--results", str(results),
        *extra,
    ]  # fmt: skip


def _verdict(run_dir: Path | None, failure: str | None) -> dict[str, Any] | None:
    if failure or run_dir is None:
        return None
    try:
        verdict: dict[str, Any] = json.loads((run_dir / VERDICT).read_text())
    except (OSError, ValueError):
        return None
    return verdict
