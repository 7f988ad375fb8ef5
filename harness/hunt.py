"""`harness hunt SCENARIO`: a rare anomaly hunted by fresh runs of one scenario until it shows,
and how often it shows: k of n runs, with a 95 % interval, per release line and client.

Each run is an ordinary `harness run` in its own process, bounded in time (harness.trial). A run
is a violation when its verdict does not match the scenario's expectation and shows an anomaly;
a run that is inconclusive or gave no verdict is counted apart, never as a violation nor as a
clean run, so the rate is violations over the runs that judged something. The table goes to
RESULTS/hunt/<scenario>-<time>/hunt.md and hunt.json.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from chaos.shrink import ShrinkOptions
from contract.rundir import MANIFEST, VERDICT
from harness.sequence import Job, Trial, heal, run_jobs
from harness.shrink import VIOLATIONS, ShrinkError, shrink_run
from reports.html import REPORT_NAME
from reports.junit import JUNIT_NAME
from systems.registry import AnyScenario, parse_scenario
from systems.scenario import ScenarioError, scenario_data, to_yaml

# What stays of a clean or inconclusive run: enough to list it, read its verdict and open its
# report, not its history, logs and ids (up to hundreds of megabytes a run, and a hunt makes
# many). A violating run keeps everything: its history is the evidence, and `harness shrink`
# reads it. A run that gave no verdict keeps everything too: its logs are all that says why.
KEPT_OF_A_CLEAN_RUN = frozenset({MANIFEST, VERDICT, REPORT_NAME, JUNIT_NAME})
Z_95 = 1.959963984540054  # the standard normal's 97.5th percentile: a two-sided 95 % interval
# Two runs in a row without a verdict: the harness cannot carry this row out (no image, no
# engine); further runs would fail the same way.
FAILED_IN_A_ROW = 2
TRANSACTION_CLIENTS = ("confluent-kafka", "java")

VIOLATION, CLEAN, INCONCLUSIVE, FAILED = "violation", "clean", "inconclusive", "failed"
TRIMMED = frozenset({CLEAN, INCONCLUSIVE})  # the kinds of run cut to KEPT_OF_A_CLEAN_RUN


def wilson_interval(k: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a rate of k successes in n trials (z = 1.96: 95 %). Unlike
    k/n +- z*sqrt(p(1-p)/n) it stays inside [0, 1] and is not empty at k = 0 or k = n, which is
    where a hunt's rates usually are. No runs: nothing known, [0, 1]."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def kind_of(trial: Trial) -> str:
    """violation | clean | inconclusive | failed. A verdict that does not match the expectation
    is a violation only when its outcome is an anomaly; one that matches, or misses without an
    anomaly (a loss expected and not shown), is clean."""
    v = trial.verdict
    if v is None:
        return FAILED
    outcome = str(v.get("outcome", ""))
    if outcome == INCONCLUSIVE:
        return INCONCLUSIVE
    if not v.get("matched") and VIOLATIONS & set(outcome.split("+")):
        return VIOLATION
    return CLEAN


def transaction_clients(spec: AnyScenario) -> list[str]:
    """The clients of a Kafka scenario's transactional producers and copiers (none: [])."""
    workload = spec.workload
    producers = getattr(workload, "producers", [])
    clients = {p.transaction.client for p in producers if p.transaction is not None}
    clients |= {c.client for c in getattr(workload, "copiers", [])}
    return sorted(clients)


def on_client(spec: AnyScenario, client: str) -> AnyScenario:
    """The scenario with every transactional producer and copier on `client`, judged again (the
    java client refuses librdkafka keys and the mock tier); ScenarioError in one line when it has
    none or the client does not fit it."""
    if client not in TRANSACTION_CLIENTS:
        raise ScenarioError(f"--client takes {' or '.join(TRANSACTION_CLIENTS)}, not {client!r}")
    if not transaction_clients(spec):
        raise ScenarioError(f"--client: {spec.id} has no transactional producer or copier")
    data = scenario_data(spec)
    for producer in data["workload"]["producers"]:
        if producer.get("transaction") is not None:
            producer["transaction"]["client"] = client
    for copier in data["workload"].get("copiers", []):
        copier["client"] = client
    return parse_scenario(to_yaml(data), f"{spec.id} on the {client} client")


@dataclass(frozen=True)
class HuntRun:
    trial: Trial

    @property
    def kind(self) -> str:
        return kind_of(self.trial)

    @property
    def pick_seed(self) -> int | None:
        """The seed of the targets the run drew (`harness run --seed` replays them)."""
        seed = (self.trial.verdict or {}).get("pick_seed")
        if seed is None and self.trial.run_dir is not None:
            try:
                seed = json.loads((self.trial.run_dir / MANIFEST).read_text()).get("pick_seed")
            except (OSError, ValueError):
                seed = None
        return int(seed) if seed is not None else None

    def record(self) -> dict[str, Any]:
        v = self.trial.verdict or {}
        return {
            "run_dir": str(self.trial.run_dir) if self.trial.run_dir else None,
            "kind": self.kind,
            "outcome": v.get("outcome"),
            "reason": v.get("reason") or self.trial.failure,
            "pick_seed": self.pick_seed,
            "seconds": round(self.trial.seconds, 1),
        }


@dataclass(frozen=True)
class Target:
    """One row of the hunt: a release line (None: the scenario's own) and a transactional client
    (None: the scenario has none), and the scenario file its runs run."""

    line: str | None
    client: str | None
    scenario: Path


@dataclass
class Row:
    target: Target
    runs: list[HuntRun] = field(default_factory=list)
    stopped: str = ""  # why it has fewer runs than asked, if it has

    def count(self, kind: str) -> int:
        return sum(1 for r in self.runs if r.kind == kind)

    @property
    def judged(self) -> int:
        """The runs the rate is over: violations and clean runs."""
        return self.count(VIOLATION) + self.count(CLEAN)

    @property
    def releases(self) -> str:
        seen = {
            str(v.get("kafka_version") or v.get("rabbitmq_version"))
            for r in self.runs
            if (v := r.trial.verdict) and (v.get("kafka_version") or v.get("rabbitmq_version"))
        }
        return ", ".join(sorted(seen)) or "-"

    def violating(self) -> list[HuntRun]:
        return [r for r in self.runs if r.kind == VIOLATION]

    def rate_words(self) -> str:
        k, n = self.count(VIOLATION), self.judged
        low, high = wilson_interval(k, n)
        return f"{k} of {n}, 95 % [{low:.3f}, {high:.3f}]"

    def record(self) -> dict[str, Any]:
        k, n = self.count(VIOLATION), self.judged
        return {
            "line": self.target.line,
            "client": self.target.client,
            "releases": self.releases,
            "runs": len(self.runs),
            "violations": k,
            "clean": self.count(CLEAN),
            "inconclusive": self.count(INCONCLUSIVE),
            "failed": self.count(FAILED),
            "rate": k / n if n else None,
            "interval_95": list(wilson_interval(k, n)),
            "violating": [r.record() for r in self.violating()],
            "stopped": self.stopped,
            "every_run": [r.record() for r in self.runs],
        }


@dataclass
class Hunt:
    scenario_id: str
    runs_asked: int
    until_violation: bool
    seed: int | None
    rows: list[Row]
    folder: Path
    interrupted: bool = False
    started: str = field(default_factory=lambda: f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC")

    def first_violation(self) -> HuntRun | None:
        return next((r for row in self.rows for r in row.violating()), None)


def hunt_folder(results: Path, scenario_id: str) -> Path:
    """RESULTS/hunt/<scenario>-<time>/ (made by the first file written there)."""
    return results / "hunt" / f"{scenario_id}-{datetime.now(UTC):%Y%m%dT%H%M%SZ}"


def targets_of(
    spec: AnyScenario, path: Path, lines: Sequence[str | None], clients: Sequence[str], folder: Path
) -> list[Target]:
    """A row for each line and client. A --client rewrites the scenario into the hunt's folder
    (the runs' manifests keep it too); without one the scenario's own clients stay. Every client
    is judged before anything is written."""
    if not clients:
        own = "+".join(transaction_clients(spec)) or None
        return [Target(line, own, path) for line in lines]
    variants = {client: on_client(spec, client) for client in clients}
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for client, variant in variants.items():
        files[client] = folder / f"{spec.id}-{client}.yaml"
        files[client].write_text(to_yaml(scenario_data(variant)))
    return [Target(line, client, file) for line in lines for client, file in files.items()]


def trim(run_dir: Path) -> None:
    """Everything of a run directory but KEPT_OF_A_CLEAN_RUN removed."""
    for part in run_dir.iterdir():
        if part.name in KEPT_OF_A_CLEAN_RUN:
            continue
        if part.is_dir() and not part.is_symlink():
            shutil.rmtree(part, ignore_errors=True)
        else:
            part.unlink(missing_ok=True)


def run_hunt(
    hunt: Hunt,
    targets: list[Target],
    option: str,
    extra: list[str],
    results: Path,
    run_timeout: float,
    budget_s: float,
    say: Callable[[str], None],
    pipelined: bool = True,
) -> Hunt:
    """Up to hunt.runs_asked runs per target, row after row (`option`: --kafka or --rabbitmq
    before a row's line), none started after `budget_s`; with until_violation a row stops at its
    first violation. Pipelined, a run's cluster comes up while the one before is checked
    (harness.sequence). Ctrl-C stops the runs, heals, and the table is still written."""
    deadline = time.monotonic() + budget_s
    seed = ["--seed", str(hunt.seed)] if hunt.seed is not None else []

    def jobs() -> Iterator[Job]:
        for target in targets:
            row = Row(target)
            hunt.rows.append(row)
            on_line = [option, target.line] if target.line else []
            for i in range(hunt.runs_asked):
                if row.stopped:
                    break
                if time.monotonic() >= deadline:
                    row.stopped = "budget spent"
                    break
                name = f"{hunt.scenario_id} {_row_name(target)}"
                say(f"hunt: {name}: run {i + 1} of {hunt.runs_asked}")
                args = (*on_line, *extra, *seed)
                yield Job(target.scenario, hunt.scenario_id, results, run_timeout, args, row)

    try:
        run_jobs(jobs(), _judge(hunt, say), pipelined, wanted=lambda job: not job.tag.stopped)
    except KeyboardInterrupt:
        say("hunt: interrupted; healing what the runs left, then the table")
        heal()
        hunt.interrupted = True
        if hunt.rows:
            hunt.rows[-1].stopped = hunt.rows[-1].stopped or "interrupted"
    for row in hunt.rows:
        say(f"hunt: {_row_name(row.target)}: {row.rate_words()}")
    write_table(hunt)
    return hunt


def _judge(hunt: Hunt, say: Callable[[str], None]) -> Callable[[Job, Trial], bool]:
    """What a hunt does with each run as it ends: counts it in its row, trims a clean one,
    and stops the row at its first violation (until_violation) or when it cannot be run."""

    def judge(job: Job, trial: Trial) -> bool:
        row: Row = job.tag
        run = HuntRun(trial)
        row.runs.append(run)
        if run.kind in TRIMMED and trial.run_dir is not None and trial.run_dir.is_dir():
            trim(trial.run_dir)
        what = (trial.verdict or {}).get("reason") or trial.failure or ""
        say(f"hunt: {_row_name(row.target)}: {run.kind} ({what}) {trial.run_dir or ''}")
        if hunt.until_violation and run.kind == VIOLATION:
            row.stopped = "first violation"
        elif len(row.runs) >= FAILED_IN_A_ROW and all(
            r.kind == FAILED for r in row.runs[-FAILED_IN_A_ROW:]
        ):
            row.stopped = f"{FAILED_IN_A_ROW} runs in a row gave no verdict"
        return True

    return judge


def _row_name(target: Target) -> str:
    client = f", client {target.client}" if target.client else ""
    return f"line {target.line or 'default'}{client}"


HEADER = [
    "line",
    "client",
    "release",
    "runs",
    "violations",
    "inconclusive",
    "failed",
    "rate",
    "95 % interval",
    "violating runs (pick seed, where a step drew)",
]


def table_lines(hunt: Hunt) -> list[str]:
    rows = [HEADER, ["---"] * len(HEADER)]
    for row in hunt.rows:
        k, n = row.count(VIOLATION), row.judged
        low, high = wilson_interval(k, n)
        rows.append(
            [
                row.target.line or "default",
                row.target.client or "-",
                row.releases,
                str(len(row.runs)) + (f" ({row.stopped})" if row.stopped else ""),
                str(k),
                str(row.count(INCONCLUSIVE)),
                str(row.count(FAILED)),
                f"{k} of {n}",
                f"[{low:.3f}, {high:.3f}]",
                " ".join(
                    f"`{r.trial.run_dir}`"
                    + (f" ({r.pick_seed})" if r.pick_seed is not None else "")
                    for r in row.violating()
                )
                or "-",
            ]
        )
    seed = f"--seed {hunt.seed} for every run" if hunt.seed is not None else "seeds drawn per run"
    stop = ", each line stopped at its first violation" if hunt.until_violation else ""
    return [
        f"# Hunt: {hunt.scenario_id}",
        "",
        f"Started {hunt.started}; {hunt.runs_asked} runs asked per row{stop}; {seed}"
        + ("; interrupted" if hunt.interrupted else "")
        + ". The rate is violations over the runs that judged something (inconclusive and "
        "failed runs apart), with its Wilson score interval. Replay a violating run's drawn "
        "targets with `harness run SCENARIO --seed PICK_SEED`.",
        "",
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def write_table(hunt: Hunt) -> tuple[Path, Path]:
    """hunt.md and hunt.json in the hunt's folder."""
    hunt.folder.mkdir(parents=True, exist_ok=True)
    md = hunt.folder / "hunt.md"
    md.write_text("\n".join(table_lines(hunt)) + "\n")
    document = {
        "scenario": hunt.scenario_id,
        "started": hunt.started,
        "runs_asked": hunt.runs_asked,
        "until_violation": hunt.until_violation,
        "seed": hunt.seed,
        "interrupted": hunt.interrupted,
        "rows": [row.record() for row in hunt.rows],
    }
    data = hunt.folder / "hunt.json"
    data.write_text(json.dumps(document, indent=2) + "\n")
    return md, data


def shrink_first_violation(
    hunt: Hunt,
    tries: int,
    results: Path,
    found_dir: Path,
    say: Callable[[str], None],
    budget_s: float = ShrinkOptions.budget_s,
) -> Path | None:
    """The first violating run handed to `harness shrink`: each candidate schedule runs up to
    `tries` times and reproduces when any of them shows the violation (a flaky anomaly would
    otherwise throw away the steps that cause it). The minimal scenario's path, or None."""
    first = hunt.first_violation()
    if first is None or first.trial.run_dir is None:
        return None
    try:
        _, path = shrink_run(
            first.trial.run_dir, ShrinkOptions(tries, 1, budget_s), results, found_dir, say
        )
    except ShrinkError as e:
        say(f"hunt: no shrink: {e}")
        return None
    return path
