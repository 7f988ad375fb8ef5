"""`make bench-runs`: how much of a campaign's wall time its fault schedules get. A fixed
sequence of real runs (K4 on Kafka 4.4 KRaft, then T1 on the confluent-kafka client and on
Kafka's own Java client, BENCH_RUNS times each, default 3) is run twice on the same machine: one
run at a time, as campaigns once ran, then pipelined (harness.sequence: a run's cluster comes up
while the one before is checked). For each: the efficiency, schedule seconds (every run's
workload phase) over wall seconds (the first run's start to the last one's end), where each
run's time went, and every verdict; the pipelined verdicts must be the runs' own, the same as
one at a time (outcome and whether the claim held). Figures, not assertions: the exit status is
1 only when the verdicts differ or a run gave none.

BENCH_RUNS (default 3), BENCH_KAFKA (default 4.4), BENCH_RESULTS (default results/bench).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from contract.manifest import ManifestError, read_manifest
from contract.numbers import parse_count
from harness.chaos import run_timeout
from harness.commands.common import warm_checker
from harness.sequence import Job, Trial, run_jobs
from systems.loading import load_checked

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"
SEQUENCE = ("K4", "T1", "T1-java")  # T1 on both clients of a transaction
MODE = "kraft"


@dataclass(frozen=True)
class RunFigures:
    scenario: str
    seconds: float  # the run's process, start to end
    cluster_up: float
    turn_wait: float  # cluster up, waiting for the run before to be checked
    schedule: float  # the workload phase: the fault schedule with traffic
    recovery_and_drain: float
    teardown: float  # evidence, logs, cluster removed
    check: float  # the check, reports and packing: the rest of the process
    steps: dict[str, dict[str, float]]  # cluster_up's and the teardown's steps
    outcome: str | None
    matched: bool | None
    failure: str | None
    ended_at: float = 0.0  # wall clock, when its process ended

    @property
    def started_at(self) -> float:
        return self.ended_at - self.seconds

    @property
    def verdict(self) -> tuple[str, str | None, bool | None]:
        return (self.scenario, self.outcome, self.matched)


@dataclass(frozen=True)
class SequenceFigures:
    how: str  # "one at a time" | "pipelined"
    wall: float
    runs: list[RunFigures]

    @property
    def schedule(self) -> float:
        return sum(r.schedule for r in self.runs)

    @property
    def efficiency(self) -> float:
        return self.schedule / self.wall if self.wall else 0.0

    def efficiency_of(self, scenario: str) -> float:
        """The scenario's schedule over the wall time its runs added to the sequence: each
        run from the end of the run before (or its own start, when later) to its own end."""
        schedule = spent = 0.0
        previous_end = 0.0
        for r in self.runs:
            if r.scenario == scenario:
                schedule += r.schedule
                spent += r.ended_at - max(r.started_at, previous_end)
            previous_end = r.ended_at
        return schedule / spent if spent else 0.0


def jobs(runs: int, line: str, results: Path) -> Iterator[Job]:
    for scenario in SEQUENCE:
        spec = load_checked(scenario, SCENARIOS, kafka=line, mode=MODE).scenario
        for _ in range(runs):
            extra = ("--kafka", line, "--mode", MODE, "--quiet")
            yield Job(scenario, spec.id, results, run_timeout(spec), extra, scenario)


def phase_seconds(manifest: Any, name: str) -> float:
    p = manifest.phases.get(name) or {}
    return float(p.get("end", 0) - p.get("start", 0)) if p else 0.0


def figures_of(scenario: str, trial: Trial) -> RunFigures:
    try:
        manifest = read_manifest(trial.run_dir) if trial.run_dir else None
    except ManifestError:
        manifest = None
    seconds = round(trial.seconds, 1)
    if manifest is None:
        return RunFigures(scenario, seconds, 0, 0, 0, 0, 0, 0, {}, None, None, trial.failure)
    phase = {n: phase_seconds(manifest, n) for n in ("cluster_up", "turn", "workload")}
    drained = manifest.phases.get("drain", {}).get("end") or manifest.ended or 0
    workload_end = manifest.phases.get("workload", {}).get("end") or drained
    v = trial.verdict or {}
    return RunFigures(
        scenario,
        seconds,
        round(phase["cluster_up"], 1),
        round(phase["turn"], 1),
        round(phase["workload"], 1),
        round(max(0.0, drained - workload_end), 1),
        round(max(0.0, (manifest.ended or drained) - drained), 1),
        round(max(0.0, (manifest.started or 0) + trial.seconds - (manifest.ended or drained)), 1),
        manifest.phase_steps,
        v.get("outcome"),
        v.get("matched"),
        trial.failure,
    )


def run_sequence(how: str, runs: int, line: str, results: Path) -> SequenceFigures:
    made: list[RunFigures] = []

    def kept(job: Job, trial: Trial) -> bool:
        made.append(replace(figures_of(job.tag, trial), ended_at=round(time.time(), 1)))
        r = made[-1]
        print(
            f"  {how}: {r.scenario} {r.outcome or r.failure} in {r.seconds:.0f} s "
            f"(up {r.cluster_up:.0f}, waited {r.turn_wait:.0f}, schedule {r.schedule:.0f}, "
            f"recovery+drain {r.recovery_and_drain:.0f}, teardown {r.teardown:.0f}, "
            f"check {r.check:.0f})",
            flush=True,
        )
        return True

    started = time.monotonic()
    run_jobs(jobs(runs, line, results / how.replace(" ", "-")), kept, how == "pipelined")
    return SequenceFigures(how, round(time.monotonic() - started, 1), made)


def main() -> int:
    runs = parse_count(os.environ.get("BENCH_RUNS", "3"))
    line = os.environ.get("BENCH_KAFKA", "4.4")
    results = Path(os.environ.get("BENCH_RESULTS", "results/bench")).resolve()
    print(f"bench-runs: {', '.join(SEQUENCE)} x{runs} on Kafka {line} {MODE}, {results}")
    with warm_checker():  # both sequences check on the same warm server
        measured = [
            run_sequence(how, runs, line, results) for how in ("one at a time", "pipelined")
        ]
    for s in measured:
        print(
            f"{s.how}: {len(s.runs)} runs, schedule {s.schedule:.0f} s over {s.wall:.0f} s "
            f"wall: efficiency {s.efficiency:.0%} ("
            + ", ".join(f"{name} {s.efficiency_of(name):.0%}" for name in SEQUENCE)
            + ")"
        )
    alone, pipelined = ([r.verdict for r in s.runs] for s in measured)
    same = sorted(alone, key=str) == sorted(pipelined, key=str)
    failed = [r for s in measured for r in s.runs if r.failure]
    print(f"verdicts {'the same' if same else 'DIFFERENT'} one at a time and pipelined")
    for r in failed:
        print(f"no verdict: {r.scenario}: {r.failure}")
    results.mkdir(parents=True, exist_ok=True)
    out = results / "bench-runs.json"
    out.write_text(
        json.dumps([asdict(s) | {"efficiency": round(s.efficiency, 3)} for s in measured], indent=2)
    )
    print(f"figures: {out}")
    return 0 if same and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
