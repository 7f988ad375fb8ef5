"""`harness nightly` (make chaos HOURS=H): generated schedules over a matrix of base
configurations until the budget is spent, every violation shrunk while time allows, and
results/chaos/<date>/summary.md + junit.xml + the results index.

A base is "safe" (its configuration promises what its scenario expects: a violation is a
failure) or "unsafe" (a configuration the claims show breaking its promise: a violation is
expected, and its first one is shrunk to a reproducer). Each run is linked with its seed, so
`harness chaos BASE --seed N` replays it.

With scenarios to hunt (`--hunt K4,T3`), the chaos runs get the night but HUNT_SHARE of it, and
then each scenario is hunted in turn (harness.hunt: fresh runs, a violation rate) in an equal
part of what is left.
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from chaos.generator import ChaosError, ChaosOptions
from chaos.schedule import chaos_scenario
from chaos.shrink import ShrinkOptions
from harness.chaos import ChaosResult, chaos_job, run_timeout
from harness.hunt import Hunt, hunt_folder, run_hunt, targets_of
from harness.sequence import Job, Trial, run_jobs
from harness.shrink import ShrinkError, shrink_run
from reports.junit import Case, suite, write
from systems.loading import load_checked
from systems.registry import AnyScenario


@dataclass(frozen=True)
class Base:
    scenario: str  # scenarios/<scenario>.yaml
    mode: str | None = None  # Kafka mode
    unsafe: bool = False

    @property
    def key(self) -> str:
        return self.scenario + (f" ({self.mode})" if self.mode else "")


# The night's order. After the first base come the bases made for the families drawn only by
# name (chaos.faults): clock, membership, disk, each run drawing its family alone (a run of
# NIGHT_MINUTES draws a family at least 7 times, a whole bag of its ops: chaos.menu.Draws), then
# controllers alone, and the paths (upgrade, migrate), each drawing its path to its end with
# partitions and kills between the steps (and RabbitMQ's declare probes in its partitions) in
# the longer traffic its base asks for (chaos.traffic). So the first hour draws every op of those
# families (`planned_runs`). They come before the first unsafe base, whose expected violation
# is shrunk in up to half of what is left of the night, and the disk bases last of the families
# alone (a corruption is the fault a safe configuration is likeliest to lose to).
MATRIX: tuple[Base, ...] = (
    Base("chaos/kafka-safe", "kraft"),
    Base("chaos/rabbitmq4-clock"),
    Base("chaos/kafka-membership", "kraft"),
    Base("chaos/rabbitmq4-membership"),
    Base("chaos/kafka-disk", "kraft"),
    Base("chaos/rabbitmq4-disk"),
    Base("chaos/kafka-controllers", "kraft-dedicated"),
    Base("chaos/kafka-upgrade", "kraft"),
    Base("chaos/rabbitmq-upgrade"),
    Base("chaos/kafka-migration", "zk"),
    Base("chaos/kafka-acks1", "kraft", unsafe=True),
    Base("chaos/kafka-txn-isolation", "kraft"),
    Base("chaos/kafka-txn-eos", "kraft"),
    Base("chaos/kafka-share", "kraft"),
    Base("chaos/rabbitmq-quorum"),
    Base("chaos/rabbitmq-autoheal-mirrored", unsafe=True),
    Base("chaos/rabbitmq4-quorum"),
    Base("chaos/rabbitmq4-stream"),
    Base("chaos/kafka-safe", "zk"),
    Base("chaos/kafka-safe", "kraft-dedicated"),
)
NIGHT_MINUTES = 2.0  # traffic per run (harness nightly --minutes)
# What a run takes besides its traffic (its cluster up and torn down, the recovery, the checks),
# on the 2-core machine, none shrunk: 3 runs of 2 minutes in 16.1 min (`make test-nightly
# HOURS=0.25`, 2026-11-26, docs/claims-findings.md), 5.4 min a run.
RUN_OVERHEAD_MINUTES = 16.1 / 3 - NIGHT_MINUTES
# Runs of the night's traffic an hour holds: 11.
RUNS_PER_HOUR = int(60 // (NIGHT_MINUTES + RUN_OVERHEAD_MINUTES))
SHRINK_SHARE = 0.5  # a shrink may take at most this share of what is left of the budget
SHRINK_RUN_SECONDS = 180.0  # below this much left, no shrink starts
HUNT_SHARE = 0.5  # of the night, what the hunts get when there are scenarios to hunt


def run_minutes(spec: AnyScenario, minutes: float) -> float:
    """How long a run of the base takes, by the measured cost of a run: its traffic (the
    night's, or the longer traffic the base asks for) and the rest of a run."""
    own = spec.chaos.traffic / 60 if spec.chaos is not None else 0.0
    return max(minutes, own) + RUN_OVERHEAD_MINUTES


def planned_runs(
    bases: tuple[Base, ...],
    specs: dict[str, AnyScenario],
    first_seed: int,
    hours: float,
    minutes: float = NIGHT_MINUTES,
) -> list[tuple[Base, int]]:
    """The runs a night of `hours` ends within its budget, none shrunk, by `run_minutes`: the
    bases in turn, each with the next seed, as `run_night` takes them."""
    runs: list[tuple[Base, int]] = []
    spent = 0.0
    while True:
        base = bases[len(runs) % len(bases)]
        spent += run_minutes(specs[base.scenario], minutes)
        if spent > hours * 60:
            return runs
        runs.append((base, first_seed + len(runs)))


@dataclass
class Night:
    date: str
    runs: list[tuple[Base, ChaosResult]] = field(default_factory=list)
    shrinks: list[dict[str, Any]] = field(default_factory=list)
    hunts: list[Hunt] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)


def run_night(
    bases: tuple[Base, ...],
    hours: float,
    minutes: float,
    first_seed: int,
    results: Path,
    scenarios_dir: Path,
    say: Callable[[str], None],
    shrink: bool = True,
) -> Night:
    """Runs the bases in turn, one generated schedule each, until `hours` are spent."""
    deadline = time.monotonic() + hours * 3600
    night = Night(time.strftime("%Y-%m-%d", time.gmtime()))
    loaded = {b.scenario: load_checked(b.scenario, scenarios_dir).scenario for b in bases}
    for b in bases:  # a base the options leave no room for stops the night before it starts
        try:
            chaos_scenario(
                loaded[b.scenario], ChaosOptions(seed=first_seed, seconds=minutes * 60), b.mode
            )
        except ChaosError as e:
            raise ChaosError(f"{b.key}: {e}") from None
    shrunk: set[str] = set()
    night_runs = _NightRuns(first_seed)
    while not night_runs.stopped and (
        not night.runs or time.monotonic() + night_runs.last_run < deadline
    ):
        to_shrink = night_runs.run_until_a_shrink(
            bases, loaded, minutes, deadline, results, night, shrunk if shrink else None, say
        )
        if to_shrink is None:
            break
        shrunk.add(to_shrink[0].key)
        left = deadline - time.monotonic()
        night.shrinks.append(
            _shrink(to_shrink[1], left * SHRINK_SHARE, results, scenarios_dir, say)
        )
    return night


@dataclass
class _NightRuns:
    """The night's chaos runs, pipelined (harness.sequence), seed after seed and base after
    base; a run to shrink stops the sequence (a shrink's runs must not meet the next run's
    workload), and the night goes on with the seed the run after it would have had."""

    seed: int
    turn: int = 0
    last_run: float = 0.0  # seconds the last run took: no run starts that would end too late
    stopped: bool = False

    def run_until_a_shrink(
        self,
        bases: tuple[Base, ...],
        loaded: dict[str, AnyScenario],
        minutes: float,
        deadline: float,
        results: Path,
        night: Night,
        shrunk: set[str] | None,
        say: Callable[[str], None],
    ) -> tuple[Base, ChaosResult] | None:
        """Runs until the budget is spent (None) or a violation is to be shrunk (`shrunk`: the
        bases shrunk already; None: no shrinking tonight)."""
        to_shrink: list[tuple[Base, ChaosResult]] = []
        started = judged = 0

        def jobs(tmp: Path) -> Iterator[Job]:
            nonlocal started
            while not (night.runs or started) or time.monotonic() + self.last_run < deadline:
                base = bases[self.turn % len(bases)]
                options = ChaosOptions(seed=self.seed, seconds=minutes * 60)
                self.turn, self.seed, started = self.turn + 1, self.seed + 1, started + 1
                job = chaos_job(loaded[base.scenario], options, base.mode, None, tmp, results, say)
                yield replace(job, tag=(base, options.seed))

        def judge(job: Job, trial: Trial) -> bool:
            nonlocal judged
            judged += 1
            base, seed = job.tag
            result = ChaosResult(seed, job.scenario_id, trial)
            say(result.line())
            self.last_run = trial.seconds
            night.runs.append((base, result))
            wanted = (
                shrunk is not None
                and result.found == "violation"
                and (not base.unsafe or base.key not in shrunk)
                and trial.run_dir is not None
                and deadline - time.monotonic() >= SHRINK_RUN_SECONDS
            )
            if wanted:
                to_shrink.append((base, result))
                return False
            if result.found == "error" and len(night.runs) >= 2:
                if night.runs[-2][1].found == "error":
                    say("two runs in a row ended without a verdict: the night stops here")
                    self.stopped = True
                    return False
            return True

        with tempfile.TemporaryDirectory(prefix="bj-night-") as tmp:
            run_jobs(jobs(Path(tmp)), judge, show_output=False)
        # A run started and stopped for the shrink gives its seed and base back.
        self.turn, self.seed = self.turn - (started - judged), self.seed - (started - judged)
        return to_shrink[0] if to_shrink else None


def hunt_night(
    night: Night,
    scenarios: list[tuple[AnyScenario, Path]],
    deadline: float,
    runs: int,
    results: Path,
    say: Callable[[str], None],
) -> None:
    """Each scenario hunted in turn on its own line, `runs` runs at most, in an equal part of
    what is left before `deadline` (no run starts after its part)."""
    for i, (spec, path) in enumerate(scenarios):
        left = deadline - time.monotonic()
        if left <= 0:
            say(f"budget spent: {', '.join(s.id for s, _ in scenarios[i:])} not hunted")
            return
        hunt = Hunt(spec.id, runs, False, None, [], hunt_folder(results, spec.id))
        targets = targets_of(spec, path, [None], [], hunt.folder)
        share = left / (len(scenarios) - i)
        run_hunt(hunt, targets, "--kafka", [], results, run_timeout(spec), share, say)
        night.hunts.append(hunt)
        if hunt.interrupted:
            return


def _shrink(
    result: ChaosResult,
    budget_s: float,
    results: Path,
    scenarios_dir: Path,
    say: Callable[[str], None],
) -> dict[str, Any]:
    assert result.trial.run_dir is not None
    opts = ShrinkOptions(tries=2, need=1, budget_s=budget_s)
    try:
        shrunk, found = shrink_run(
            result.trial.run_dir, opts, results, scenarios_dir / "found", say
        )
    except ShrinkError as e:
        return {"run": str(result.trial.run_dir), "error": str(e)}
    return {
        "run": str(result.trial.run_dir),
        "seed": result.seed,
        "found": str(found),
        "original_steps": shrunk.original_steps,
        "minimal_steps": len(shrunk.minimal["nemesis"]),
        "runs_spent": shrunk.runs_spent,
        "reproduced": f"{shrunk.reproduced}/{shrunk.runs_of_minimal}",
    }


# ---- what the night shows ---------------------------------------------------------------------


def case_of(base: Base, r: ChaosResult) -> Case:
    name = f"{base.key} seed {r.seed}"
    classname = f"chaos.{base.scenario.replace('/', '.')}"
    v, seconds = r.trial.verdict, r.trial.seconds
    where = f"{r.trial.run_dir}"
    if r.found == "error":
        return Case(classname, name, seconds, error=f"{r.trial.failure}\n{where}")
    if r.found == "inconclusive":
        return Case(classname, name, seconds, skipped=f"inconclusive: {v and v['reason']}")
    if r.found == "violation" and not base.unsafe:
        return Case(classname, name, seconds, failure=f"{v and v['reason']}\n{where}")
    return Case(classname, name, seconds, output=f"{r.found}: {v and v['reason']}\n{where}")


def summary_markdown(night: Night, bases: tuple[Base, ...]) -> str:
    lines = [
        f"# Nightly chaos, {night.date}",
        "",
        f"{len(night.runs)} runs in {(time.monotonic() - night.started) / 60:.0f} min. "
        "Replay any run with `harness chaos BASE --seed N` "
        "(or `harness run RUN_DIR/schedule.yaml`).",
        "",
        "| base | promise | runs | held | violations | inconclusive | errors |",
        "|---|---|---|---|---|---|---|",
    ]
    for base in bases:
        mine = [r for b, r in night.runs if b == base]
        if not mine:
            continue
        found = Counter(r.found for r in mine)
        promise = "unsafe (violations expected)" if base.unsafe else "safe"
        lines.append(
            f"| {base.key} | {promise} | {len(mine)} | {found['held']} | {found['violation']} "
            f"| {found['inconclusive']} | {found['error']} |"
        )
    lines += ["", "## Coverage: situations the faults reached, in how many runs", ""]
    lines += _coverage_table(night, bases)
    lines += ["", "## Ops: steps the nemesis carried out, by op (in how many runs)", ""]
    lines += _ops_table(night, bases)
    lines += ["", "## Runs", "", "| base | seed | found | why | run |", "|---|---|---|---|---|"]
    for base, r in night.runs:
        why = (r.trial.verdict or {}).get("reason") or r.trial.failure or ""
        lines.append(
            f"| {base.key} | {r.seed} | {r.found} | {why.replace('|', '/')} | {r.trial.run_dir} |"
        )
    if night.shrinks:
        lines += [
            "",
            "## Shrinks",
            "",
            "| run | steps before | after | runs spent | reproduced | scenario |",
        ]
        lines.append("|---|---|---|---|---|---|")
        for s in night.shrinks:
            if "error" in s:
                lines.append(f"| {s['run']} | - | - | - | - | {s['error']} |")
                continue
            lines.append(
                f"| {s['run']} | {s['original_steps']} | {s['minimal_steps']} | "
                f"{s['runs_spent']} | {s['reproduced']} | {s['found']} |"
            )
    if night.hunts:
        lines += ["", "## Hunts", ""]
        lines += ["| scenario | client | runs | violations (95 % interval) | table |"]
        lines.append("|---|---|---|---|---|")
        for hunt in night.hunts:
            for row in hunt.rows:
                lines.append(
                    f"| {hunt.scenario_id} | {row.target.client or '-'} | {len(row.runs)} | "
                    f"{row.rate_words()} | {hunt.folder / 'hunt.md'} |"
                )
    return "\n".join(lines) + "\n"


def _coverage_table(night: Night, bases: tuple[Base, ...]) -> list[str]:
    per_base: dict[str, Counter[str]] = {}
    for base, r in night.runs:
        coverage = (r.trial.verdict or {}).get("coverage") or {}
        seen = per_base.setdefault(base.key, Counter())
        seen.update(k for k, n in (coverage.get("situations") or {}).items() if n)
        seen["(runs with traffic inside faults)"] += bool(coverage.get("acked_in_faults"))
        seen["(vacuous runs)"] += bool(coverage.get("vacuous"))
    names = sorted({k for c in per_base.values() for k in c})
    if not names:
        return ["no run reached the checker"]
    keys = [b.key for b in bases if b.key in per_base]
    out = ["| situation | " + " | ".join(keys) + " |", "|---|" + "---|" * len(keys)]
    for name in names:
        out.append(f"| {name} | " + " | ".join(str(per_base[k][name]) for k in keys) + " |")
    return out


def _ops_table(night: Night, bases: tuple[Base, ...]) -> list[str]:
    """Per op and base: the steps carried out and, in brackets, the runs that had one, so
    that a night shows each op it drew and did (a step a broker refused is not counted)."""
    steps: dict[str, Counter[str]] = {}
    runs: dict[str, Counter[str]] = {}
    for base, r in night.runs:
        ops = ((r.trial.verdict or {}).get("coverage") or {}).get("ops") or {}
        steps.setdefault(base.key, Counter()).update(ops)
        runs.setdefault(base.key, Counter()).update(op for op, n in ops.items() if n)
    names = sorted({op for c in steps.values() for op in c})
    if not names:
        return ["no run reached the checker"]
    keys = [b.key for b in bases if b.key in steps]
    out = ["| op | " + " | ".join(keys) + " |", "|---|" + "---|" * len(keys)]
    for name in names:
        cells = [f"{steps[k][name]} ({runs[k][name]})" if steps[k][name] else "-" for k in keys]
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return out


def write_night(night: Night, bases: tuple[Base, ...], results: Path) -> tuple[Path, Path]:
    out = results / "chaos" / night.date
    out.mkdir(parents=True, exist_ok=True)
    summary = out / "summary.md"
    summary.write_text(summary_markdown(night, bases))
    junit = write(
        suite([case_of(b, r) for b, r in night.runs], "brokerjepsen-chaos"), out / "junit.xml"
    )
    return summary, junit


def first_seed_of(date: str) -> int:
    """A night's seeds start from its date (20261124 -> 20261124000): two nights never draw
    the same schedules, and a seed says which night drew it."""
    return int(date.replace("-", "")) * 1000
