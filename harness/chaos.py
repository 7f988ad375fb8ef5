"""`harness chaos`: runs a base scenario with generated schedules, one seed after another.

Each run is an ordinary `harness run` of the generated scenario in its own process, bounded in
time; its run directory holds the schedule (schedule.yaml), the seed in its manifest, and the
coverage in its verdict. What a run found is one of: nothing broken (its promise held and the
faults tested something), a violation, inconclusive (vacuous, or the drain could not confirm),
or an error (no verdict).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from chaos.generator import ChaosOptions
from chaos.schedule import chaos_scenario
from harness.sequence import Job, Trial, run_jobs
from harness.trial import run_once
from systems.kafka.scenario import KafkaScenario
from systems.registry import AnyScenario
from systems.scenario import scenario_data, to_yaml

# Past the phases' own bounds, a run's process gets this long (the checker, the reports).
CHECK_MARGIN = 900.0


@dataclass(frozen=True)
class ChaosResult:
    seed: int
    scenario_id: str
    trial: Trial

    @property
    def found(self) -> str:
        """held | violation | inconclusive | error"""
        v = self.trial.verdict
        if v is None:
            return "error"
        if v["matched"]:
            return "held"
        return "inconclusive" if v["outcome"] == "inconclusive" else "violation"

    def line(self) -> str:
        v = self.trial.verdict
        what = v["reason"] if v else self.trial.failure
        where = self.trial.run_dir or "(no run directory)"
        return f"seed {self.seed}: {self.found} ({what}) in {self.trial.seconds:.0f} s, {where}"


def run_timeout(scenario: AnyScenario) -> float:
    """The bound of one run's process: its phases' bounds plus the check."""
    t = scenario.timeouts
    drain = getattr(scenario.workload, "drain_timeout", None)
    if drain is None:
        drain = scenario.workload.drain.timeout  # type: ignore[union-attr]
    return t.cluster_up + t.workload + t.recovery + drain + CHECK_MARGIN


def run_args(scenario: AnyScenario, kafka_line: str | None) -> list[str]:
    """`harness run`'s options that put a generated Kafka scenario on its mode and line."""
    if not isinstance(scenario, KafkaScenario):
        return []
    args = ["--mode", scenario.cluster.modes[0]]
    return args + (["--kafka", kafka_line] if kafka_line else [])


def run_scenario(
    scenario: AnyScenario,
    results: Path,
    kafka_line: str | None = None,
    show_output: bool = False,
) -> Trial:
    """One run of a scenario that exists only in memory (a generated or shrunk schedule)."""
    with tempfile.TemporaryDirectory(prefix="bj-schedule-") as tmp:
        job = scenario_job(scenario, Path(tmp), results, kafka_line)
        extra = list(job.extra)
        return run_once(job.scenario, job.scenario_id, results, job.timeout, extra, show_output)


def scenario_job(scenario: AnyScenario, folder: Path, results: Path, kafka_line: str | None) -> Job:
    """A run of a scenario that exists only in memory, its file written to `folder` (which
    must outlive the run)."""
    path = folder / f"{scenario.id}.yaml"
    path.write_text(to_yaml(scenario_data(scenario)))
    extra = tuple(run_args(scenario, kafka_line))
    return Job(path, scenario.id, results, run_timeout(scenario), extra)


def chaos_job(
    base: AnyScenario,
    options: ChaosOptions,
    kafka_mode: str | None,
    kafka_line: str | None,
    folder: Path,
    results: Path,
    say: Callable[[str], None],
) -> Job:
    """The run of `base` with the schedule of options.seed, its file in `folder` (which must
    outlive the run); its tag is the seed."""
    scenario, steps = chaos_scenario(base, options, kafka_mode)
    say(f"seed {options.seed}: {len(steps)} steps over {options.seconds:.0f} s ({scenario.id})")
    mine = folder / str(options.seed)
    mine.mkdir()
    return replace(scenario_job(scenario, mine, results, kafka_line), tag=options.seed)


def chaos_runs(
    base: AnyScenario,
    options: ChaosOptions,
    runs: int,
    results: Path,
    kafka_mode: str | None,
    kafka_line: str | None,
    say: Callable[[str], None],
    show_output: bool = True,
    pipelined: bool = True,
) -> list[ChaosResult]:
    """`runs` runs of `base`, seeds options.seed, options.seed + 1, ...; pipelined, each run's
    cluster comes up while the one before is checked (harness.sequence)."""
    out: list[ChaosResult] = []
    with tempfile.TemporaryDirectory(prefix="bj-schedule-") as tmp:
        jobs = (
            chaos_job(
                base,
                replace(options, seed=options.seed + i),
                kafka_mode,
                kafka_line,
                Path(tmp),
                results,
                say,
            )
            for i in range(runs)
        )

        def judged(job: Job, trial: Trial) -> bool:
            out.append(ChaosResult(job.tag, job.scenario_id, trial))
            say(out[-1].line())
            return True

        run_jobs(jobs, judged, pipelined, show_output)
    return out


def tally(results: list[ChaosResult]) -> dict[str, Any]:
    counts = {"held": 0, "violation": 0, "inconclusive": 0, "error": 0}
    for r in results:
        counts[r.found] += 1
    return counts
