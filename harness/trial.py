"""One `harness run` in a process of its own, bounded in time: what the shrinker runs, and a
campaign of one. A run that overruns is stopped and whatever it left is healed; a run that fails
says why in one line. A run ends with the campaign that started it: killed or stopped, the
campaign's run is sent SIGTERM (its parent-death signal), which heals its faults and removes its
cluster as `harness run` does on SIGTERM. Campaigns of many runs overlap them
(harness.sequence)."""

from __future__ import annotations

from pathlib import Path

from harness.sequence import HEAL_TIMEOUT, ROOT, Job, Trial, run_jobs

__all__ = ["HEAL_TIMEOUT", "ROOT", "Trial", "run_once"]


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
    trials: list[Trial] = []

    def kept(_job: Job, trial: Trial) -> bool:
        trials.append(trial)
        return True

    job = Job(scenario, scenario_id, results, timeout, tuple(extra or ()))
    run_jobs([job], kept, False, show_output)
    return trials[0]
