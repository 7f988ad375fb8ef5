"""The retention policy: what it removes, and what it never removes (planted runs of
each kind), a dry run that removes nothing, and a week of nightly results kept under budget."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from contract.retention import (
    DAY,
    Policy,
    decide,
    folder_size,
    prune,
    referenced_run_ids,
    runs_under,
)
from tests.helpers import ROOT

NOW = time.time()


def plant(
    root: Path,
    scenario: str,
    days_ago: float,
    matched: bool = True,
    running: bool = False,
    size: int = 1000,
) -> Path:
    started = NOW - days_ago * DAY
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started)) + f"-{os.urandom(2).hex()}"
    folder = root / scenario / run_id
    (folder / "history").mkdir(parents=True)
    (folder / "history" / "P1.jsonl").write_bytes(b"x" * size)
    manifest = {"scenario": scenario, "run_id": run_id, "started": started}
    if running:
        manifest["harness_pid"] = os.getpid()  # this process: alive
    else:
        manifest["ended"] = started + 120
        verdict = {"outcome": "safe", "matched": matched, "reason": "", "sends": {}, "groups": {}}
        (folder / "verdict.json").write_text(json.dumps(verdict))
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def test_the_policy_removes_old_runs_and_never_the_protected_ones(tmp_path: Path) -> None:
    old_pass = plant(tmp_path, "K4", 30)
    old_failure = plant(tmp_path, "K4", 30, matched=False)
    ancient_failure = plant(tmp_path, "K4", 120, matched=False)
    referenced = plant(tmp_path, "K4", 200)
    running = plant(tmp_path, "K4", 40, running=True)
    recent = [plant(tmp_path, "K4", d) for d in (3, 2, 1)]
    lone = plant(tmp_path, "R1", 365)  # the newest (and only) run of its scenario
    decisions = decide(runs_under(tmp_path), Policy(), {referenced.name}, NOW)
    removed = {d.run.path for d in decisions if d.remove}
    assert removed == {old_pass, ancient_failure}
    kept = {d.run.path: d.why for d in decisions if not d.remove}
    assert kept[referenced] == "referenced by the repository"
    assert kept[running] == "still running"
    assert kept[lone] == "among its scenario's newest"
    assert old_failure in kept and all(r in kept for r in recent)
    freed = folder_size(old_pass) + folder_size(ancient_failure)
    assert prune(decisions, dry_run=True) == freed and old_pass.exists()
    assert prune(decisions, dry_run=False) == freed
    assert not old_pass.exists() and not ancient_failure.exists() and referenced.exists()


def test_a_week_of_nights_stays_under_its_budget_keeping_failures_and_references(
    tmp_path: Path,
) -> None:
    """Fifteen runs a night for a week, one in five a failure, 1 MB each: a 0.05 GB budget
    removes the oldest passing runs and nothing else."""
    failures: list[Path] = []
    passes: list[Path] = []
    for night in range(7):
        for n in range(15):
            run = plant(tmp_path, f"chaos-s{n}", 7 - night, matched=n % 5 != 0, size=1024**2)
            (passes if n % 5 else failures).append(run)
    referenced = passes[0]
    decisions = decide(
        runs_under(tmp_path), Policy(keep_last=1, max_gb=0.05), {referenced.name}, NOW
    )
    prune(decisions, dry_run=False)
    left = runs_under(tmp_path)
    assert sum(r.size for r in left) <= 0.05 * 1024**3 + 21 * 1024**2  # protected ones stay
    assert all(f.exists() for f in failures[-3:]) and referenced.exists()
    assert all(r.path.exists() for r in left)
    assert {r.scenario for r in left} == {f"chaos-s{n}" for n in range(15)}  # newest of each


def test_the_repositorys_own_references_are_found() -> None:
    ids = referenced_run_ids(ROOT)
    assert ids and all(len(i) == 21 for i in ids)
