"""The claims matrix (`make claims`): every claim scenario x mode x release line (Kafka's, or
RabbitMQ's), N runs each.

The measured cells live in `docs/claims-results.json` (committed, so the matrix fills in over
several sittings and machines) and are rendered to `docs/claims-results.md` (`render_docs`
renders it again without running anything). A cell already measured is kept unless asked again;
each run is one `harness run` subprocess, bounded in time, and the whole matrix starts no run
once its time budget is spent (so it ends within the budget plus one run's timeout).

Without a line filter the matrix runs the default lines only (DEFAULT_KAFKA_LINES,
DEFAULT_RABBITMQ_LINES); the lines between them run when named (`--kafka 4.1`).
"""

from __future__ import annotations

import functools
import json
import platform
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from checkers.verdict import SYNC_SECONDS, longest_stall_in_faults
from compose.releases import setup_releases
from contract.versions import line_of, version_key
from harness.hunt_rates import hunted_section
from harness.sequence import Job, Trial, run_jobs
from reports.junit import Case, matrix_case
from systems.kafka.config import KAFKA_LINES, mode_refusal
from systems.kafka.scenario import KafkaScenario
from systems.kafka.workload_spec import FINAL_READER
from systems.loading import load_checked
from systems.rabbitmq.scenario import RabbitMQScenario, line_refusal
from systems.scenario import ScenarioError

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
LOSS_RUNS = 3  # a "loss" cell must show its loss in at least 2 of 3 runs, on every mode and line
RABBITMQ_LINES = tuple(line_of(r) for r in setup_releases("rabbitmq"))  # 3.10, 4.0, 4.3
# The lines a bare `make claims` covers: the oldest and newest each broker's setup builds. The
# oldest is the last with what the articles ran on (Kafka 3.9: ZooKeeper; RabbitMQ 3.10: mirrored
# queues), the newest is what users meet now; the lines between cost a sitting each and are
# run when named.
DEFAULT_KAFKA_LINES = (KAFKA_LINES[0], KAFKA_LINES[-1])  # 3.9, 4.4
DEFAULT_RABBITMQ_LINES = (RABBITMQ_LINES[0], RABBITMQ_LINES[-1])  # 3.10, 4.3
NOT_RUN = "not run"
OUTSIDE_DEFAULT_LINES = "outside the default lines"
CANNOT_RUN = "cannot run"


@dataclass(frozen=True)
class Cell:
    scenario: str
    claim: str
    expect: str
    mode: str  # Kafka mode, or "rabbitmq"
    kafka: str  # the release line: Kafka's, or RabbitMQ's for mode "rabbitmq"
    runs: int  # how many runs the matrix asks of this cell
    # Why the line cannot run this cell (a mode or queue type it lacks), or "": such a cell is
    # never run, only shown, so the table says why it is empty.
    refusal: str = ""

    @property
    def key(self) -> str:
        return "/".join(x for x in (self.scenario, self.mode, self.kafka) if x)

    @property
    def on_default_line(self) -> bool:
        defaults = DEFAULT_RABBITMQ_LINES if self.mode == "rabbitmq" else DEFAULT_KAFKA_LINES
        return self.kafka in defaults


@dataclass
class RunRecord:
    run_dir: str
    finished: str  # UTC
    seconds: float
    word: str  # reproduced | not reproduced | refuted | inconclusive | error
    kafka_version: str | None = None
    acked: int = 0
    lost: int = 0
    duplicated: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    unavailable_s: float | None = None
    reason: str = ""
    # Kafka: whether the run had a final read (runs before it existed judged the live readers
    # only; None for RabbitMQ, whose consumers remove what they read).
    final_read: bool | None = None
    rabbitmq_version: str | None = None
    # RabbitMQ's metadata probes against the scenario's expect_declares: "held", "did not hold",
    # or None where the scenario expects none (checkers.declares).
    declares: str | None = None


# Besides the articles' claims (scenarios/*.yaml): the RabbitMQ team's own Jepsen CI cells.
CLAIM_FOLDERS = ("rabbitmq-jepsen",)


def claim_scenarios(scenarios_dir: Path) -> list[RabbitMQScenario | KafkaScenario]:
    """The shipped scenarios that test a claim on a real cluster (mock tier excluded)."""
    out: list[RabbitMQScenario | KafkaScenario] = []
    paths = [*scenarios_dir.glob("*.yaml")]
    paths += [p for folder in CLAIM_FOLDERS for p in (scenarios_dir / folder).glob("*.yaml")]
    for path in sorted(paths, key=lambda p: p.name):
        try:
            spec = load_checked(path).scenario
        except ScenarioError:
            continue
        if spec.claim and isinstance(spec, (RabbitMQScenario, KafkaScenario)):
            out.append(spec)
    return out


def cells_of(spec: RabbitMQScenario | KafkaScenario, runs: int) -> list[Cell]:
    """The cells of one scenario: every mode on every line that runs it, each loss cell with
    LOSS_RUNS runs at least, so "2 of 3" can be judged wherever a loss is claimed. A mode, queue
    type or client a default line lacks is a cell too, carrying the refusal and no runs: the
    table then says why it stays empty (on the other lines such cells are left out)."""
    claim = spec.claim or ""
    want = max(runs, LOSS_RUNS) if spec.expect == "loss" else runs

    def cell(mode: str, line: str, refusal: str | None) -> Cell:
        return Cell(spec.id, claim, spec.expect, mode, line, 0 if refusal else want, refusal or "")

    cells = []
    if not isinstance(spec, KafkaScenario):
        runnable = rabbitmq_lines(spec)
        for line in RABBITMQ_LINES:
            refusal = line_refusal(spec.cluster, line)
            if line in runnable:
                cells.append(cell("rabbitmq", line, None))
            elif refusal and line in DEFAULT_RABBITMQ_LINES and _newer_than_own(spec, line):
                cells.append(cell("rabbitmq", line, refusal))
        return cells
    for line in KAFKA_LINES:
        for mode in spec.cluster.modes:
            refusal = spec.line_refusal(line) or mode_refusal(line, mode)
            if refusal is None or line in DEFAULT_KAFKA_LINES:
                cells.append(cell(mode, line, refusal))
    return cells


def _newer_than_own(spec: RabbitMQScenario, line: str) -> bool:
    own = line_of(spec.cluster.version) if spec.cluster.version else RABBITMQ_LINES[0]
    return version_key(line) >= version_key(own)


def rabbitmq_lines(spec: RabbitMQScenario) -> list[str]:
    """The RabbitMQ lines a scenario runs on: 3.10 for one that names no version (the articles'
    scenarios, on mirrored queues or beside them); else its own line and every newer one."""
    version = spec.cluster.version
    if version is None:
        return [RABBITMQ_LINES[0]]
    return [
        line
        for line in RABBITMQ_LINES
        if version_key(line) >= version_key(line_of(version))
        and line_refusal(spec.cluster, line) is None
    ]


def select(
    cells: Iterable[Cell],
    claims: set[str] | None,
    modes: set[str] | None,
    kafka: set[str] | None,
) -> list[Cell]:
    """The cells to run, filtered by claim or scenario id, mode and release line (None: every
    claim and mode, the default lines). A mode or Kafka filter asks for Kafka cells: RabbitMQ
    rows then stay out unless named as a mode. A cell its line refuses is never selected."""
    return [
        c
        for c in cells
        if not c.refusal
        and (not claims or c.claim in claims or c.scenario in claims)
        and (not modes or c.mode in modes)
        and (c.kafka in kafka if kafka else c.on_default_line)
    ]


# ---- the measured cells ------------------------------------------------------------------------


def load_measured(path: Path) -> dict[str, list[RunRecord]]:
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    return {k: [RunRecord(**r) for r in v] for k, v in data.get("cells", {}).items()}


def measured_machine(path: Path) -> str:
    """The machine line the measured cells were saved with ("" when none)."""
    if not path.exists():
        return ""
    return str(json.loads(path.read_text()).get("machine", ""))


def save_measured(path: Path, measured: dict[str, list[RunRecord]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "machine": machine_line(),
        "cells": {k: [asdict(r) for r in v] for k, v in sorted(measured.items())},
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(path)


def machine_line() -> str:
    cores = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip() or "?"
    python = platform.python_version()
    return f"{platform.system()} {platform.release()}, {cores} cores, Python {python}"


def record_of(run_dir: Path, seconds: float, failure: str | None) -> RunRecord:
    """What one run measured, from its verdict.json (or why it has none)."""
    finished = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    verdict_file = run_dir / "verdict.json"
    if failure or not verdict_file.exists():
        return RunRecord(str(run_dir), finished, seconds, "error", reason=failure or "no verdict")
    v = json.loads(verdict_file.read_text())
    groups = v["groups"].values()
    errors: dict[str, int] = {}
    for names in (v.get("errors") or {}).values():
        for name, count in names.items():
            errors[name] = errors.get(name, 0) + count
    return RunRecord(
        run_dir=str(run_dir),
        finished=finished,
        seconds=round(seconds, 1),
        word=v.get("claim_verdict") or "inconclusive",
        kafka_version=v.get("kafka_version"),
        acked=v["sends"].get("ok", 0),
        lost=max((g["lost"] for g in groups), default=0),
        duplicated=max((g["duplicated"] for g in groups), default=0),
        errors=errors,
        unavailable_s=_unavailable_seconds(v),
        reason=v.get("reason", ""),
        final_read=FINAL_READER in v["groups"] if v.get("kafka_mode") else None,
        rabbitmq_version=_rabbitmq_version(run_dir),
        declares=_declares_word(v.get("declares")),
    )


def _declares_word(section: dict[str, Any] | None) -> str | None:
    held = (section or {}).get("held")
    return None if held is None else ("held" if held else "did not hold")


def _rabbitmq_version(run_dir: Path) -> str | None:
    try:
        manifest = json.loads((run_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    version = ((manifest.get("images") or {}).get("rabbitmq") or {}).get("version")
    return str(version) if version else None


def _unavailable_seconds(v: dict[str, Any]) -> float | None:
    """The longest any producer's sends were refused or unknown, summed over its intervals, or
    the longest a group was blocked inside a fault (confirms held, not refused: R5), whichever
    is longer; verdicts from before per-producer intervals give first to last refusal."""
    producers = v.get("unavailability")
    stalls = v.get("stalls")
    blocked = longest_stall_in_faults(stalls) or longest_stall_in_faults(stalls, SYNC_SECONDS)
    seconds = [float(p["seconds"]) for p in (producers or {}).values()]
    if blocked:
        seconds.append(float(blocked[1]["seconds"]))
    if seconds:
        return max(seconds)
    if "unavailability" in v:
        return None  # checked per producer, and no send was refused
    return (v.get("refused_window") or {}).get("seconds")


# ---- which runs count ---------------------------------------------------------------------------


def current_runs(runs: list[RunRecord]) -> list[RunRecord]:
    """The runs made on today's code: a Kafka run from before the final read was judged from
    its live reader alone, which may have read writes the log later dropped, so it does not
    count towards a cell's runs (it stays in the json)."""
    return [r for r in runs if r.final_read is not False]


def judged_runs(runs: list[RunRecord]) -> list[RunRecord]:
    """The runs a cell is judged and shown by: its current ones, or, until it has any, its runs
    from before the final read (marked in the table) rather than nothing."""
    return current_runs(runs) or runs


def superseded_runs(runs: list[RunRecord]) -> list[RunRecord]:
    """Runs from before the final read that current runs have replaced."""
    return [r for r in runs if r.final_read is False] if current_runs(runs) else []


def missing_runs(cell: Cell, runs: list[RunRecord]) -> int:
    """How many more runs the cell needs before it counts as done. A run that gave no verdict
    (the harness could not carry it out) measured nothing: it stays in the row, and the next
    sitting runs the cell again."""
    if cell.refusal:
        return 0
    measured = [r for r in current_runs(runs) if r.word != "error"]
    return max(0, cell.runs - len(measured))


def still_to_run(cells: Iterable[Cell], measured: dict[str, list[RunRecord]]) -> tuple[int, int]:
    """On the default lines: the cells never run, and the runs the matrix still needs."""
    default = [c for c in cells if c.on_default_line and not c.refusal]
    never = sum(1 for c in default if not measured.get(c.key))
    return never, sum(missing_runs(c, measured.get(c.key, [])) for c in default)


# ---- running ----------------------------------------------------------------------------------


def cell_job(cell: Cell, results: Path, timeout: float) -> Job:
    """One `harness run` of the cell, bounded by `timeout`."""
    extra: tuple[str, ...]
    if cell.mode == "rabbitmq":
        extra = ("--rabbitmq", cell.kafka)
    else:
        extra = ("--mode", cell.mode, "--kafka", cell.kafka)
    return Job(cell.scenario, cell.scenario, results, timeout, extra, cell)


def record_of_trial(cell: Cell, trial: Trial, results: Path) -> RunRecord:
    # No run directory: it failed before starting.
    return record_of(trial.run_dir or results / cell.scenario, trial.seconds, trial.failure)


def run_matrix(
    cells: list[Cell],
    measured_file: Path,
    results: Path,
    again: bool,
    budget_s: float,
    run_timeout: float,
    say: Callable[[str], None],
    pipelined: bool = True,
) -> dict[str, list[RunRecord]]:
    """Runs what each cell still lacks (runs from before the final read do not count), until
    the budget is spent; saves after every run. Breadth first: every cell gets its first run
    before any gets its second, so a sitting cut short by its budget leaves the fewest cells
    unanswered rather than a few answered three times. Pipelined, a run's cluster comes up
    while the one before is checked (harness.sequence)."""
    measured = load_measured(measured_file)
    if again:
        for c in cells:
            measured.pop(c.key, None)
    deadline = time.monotonic() + budget_s
    tried: dict[str, int] = {}  # runs made this sitting: a cell whose runs never count stops
    going: dict[str, int] = {}  # runs started whose record has not come yet (pipelined)

    def had(c: Cell) -> int:
        return c.runs - missing_runs(c, measured.get(c.key, [])) + going.get(c.key, 0)

    def jobs() -> Iterator[Job]:
        for depth in range(1, max((c.runs for c in cells), default=0) + 1):
            for c in cells:
                while (have := had(c)) < min(depth, c.runs) and tried.get(c.key, 0) < depth:
                    if time.monotonic() >= deadline:  # no run starts later; one may end later
                        say(f"budget spent: {c.key} and other cells left for another sitting")
                        return
                    say(f"{c.key}: run {have + 1} of {c.runs}")
                    tried[c.key] = tried.get(c.key, 0) + 1
                    going[c.key] = going.get(c.key, 0) + 1
                    yield cell_job(c, results, run_timeout)

    def recorded(job: Job, trial: Trial) -> bool:
        c: Cell = job.tag
        going[c.key] -= 1
        record = record_of_trial(c, trial, results)
        measured.setdefault(c.key, []).append(record)
        say(f"{c.key}: {record.word} (acked {record.acked}, lost {record.lost}) {record.reason}")
        save_measured(measured_file, measured)
        return True

    run_jobs(jobs(), recorded, pipelined)
    save_measured(measured_file, measured)
    return measured


# ---- the table ----------------------------------------------------------------------------------


def cell_word(cell: Cell, runs: list[RunRecord]) -> str:
    """The cell's verdict over its runs. Safe claims: any refuting run refutes. Loss claims:
    reproduced in at least 2 of 3 runs (or every run, while fewer have run). A cell never run
    says why: its line refuses it, it is on a line the matrix runs only when named, or not yet."""
    if cell.refusal:
        return f"{CANNOT_RUN}: {cell.refusal}"
    words = [r.word for r in runs]
    decisive = [w for w in words if w in ("reproduced", "not reproduced", "refuted")]
    if not decisive:
        if words and all(w == "error" for w in words):
            return "no verdict (the run failed)"
        if words:
            return "inconclusive"
        return NOT_RUN if cell.on_default_line else OUTSIDE_DEFAULT_LINES
    if "refuted" in decisive:
        return "refuted"
    hits = decisive.count("reproduced")
    if cell.expect == "loss":
        need = 2 if len(decisive) >= LOSS_RUNS else len(decisive)
        word = "reproduced" if hits >= need else "not reproduced"
        return f"{word} ({hits}/{len(decisive)})"
    return "reproduced" if hits == len(decisive) else f"not reproduced ({hits}/{len(decisive)})"


NO_FINAL_READ = "†"
COLUMNS = [
    "| claim | scenario | mode | release | runs | acked | lost | duplicated | errors seen "
    "| unavailable (s) | verdict | runs behind it |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|",
]


def _per_run(runs: list[RunRecord], figure: Callable[[RunRecord], object]) -> str:
    return " / ".join(str(figure(r)) for r in runs) or "-"


def _row(c: Cell, runs: list[RunRecord]) -> str:
    versions = sorted({v for r in runs if (v := r.kafka_version or r.rabbitmq_version)})
    errors: dict[str, int] = {}
    for r in runs:
        for name, n in r.errors.items():
            errors[name] = errors.get(name, 0) + n
    per_run = functools.partial(_per_run, runs)
    window = per_run(lambda r: "-" if r.unavailable_s is None else f"{r.unavailable_s:.0f}")
    fields = [
        c.claim,
        c.scenario,
        c.mode,
        ", ".join(versions) or c.kafka or "-",
        str(len(runs)),
        per_run(lambda r: r.acked),
        per_run(lambda r: f"{r.lost}{NO_FINAL_READ if r.final_read is False else ''}"),
        per_run(lambda r: r.duplicated),
        ", ".join(f"{k} {v}" for k, v in sorted(errors.items())) or "-",
        window,
        (cell_word(c, runs) if c.expect != "?" else per_run_words(runs)) + _declares_said(runs),
        " ".join(f"`{Path(r.run_dir).name}`" for r in runs) or "-",
    ]
    return "| " + " | ".join(fields) + " |"


def _declares_said(runs: list[RunRecord]) -> str:
    """A cell's metadata probes, run by run, beside its verdict: only where the scenario
    expects something of them (the verdict already counts a probe that did not hold)."""
    if not any(r.declares for r in runs):
        return ""
    return "; declares " + _per_run(runs, lambda r: r.declares or "-")


def junit_cases(cells: list[Cell], measured: dict[str, list[RunRecord]]) -> list[Case]:
    """One JUnit test case per cell of the matrix, judged as the table judges it."""
    cases = []
    for c in cells:
        runs = judged_runs(measured.get(c.key, []))
        word = cell_word(c, runs) if c.expect != "?" else per_run_words(runs)
        lines = [f"{Path(r.run_dir).name}: {r.word}: {r.reason}" for r in runs]
        cases.append(
            matrix_case(c.key, c.claim, word, sum(r.seconds for r in runs), "\n".join(lines))
        )
    return cases


def per_run_words(runs: list[RunRecord]) -> str:
    return _per_run(runs, lambda r: r.word) if runs else NOT_RUN


def _named(lines: Iterable[str]) -> str:
    return " and ".join(", ".join(lines).rsplit(", ", 1)) or "none"


def _words_for_empty_cells() -> str:
    """What the table says of a cell it has no runs for, and of runs it no longer counts."""
    kafka_between = [line for line in KAFKA_LINES if line not in DEFAULT_KAFKA_LINES]
    rabbitmq_between = [line for line in RABBITMQ_LINES if line not in DEFAULT_RABBITMQ_LINES]
    return (
        f"The default lines are Kafka {_named(DEFAULT_KAFKA_LINES)} and RabbitMQ "
        f"{_named(DEFAULT_RABBITMQ_LINES)} (the oldest and the newest `make setup` builds): "
        "`make claims` runs them unless given lines. A cell never run says why. "
        f"{NOT_RUN}: on a default line, not measured yet. {OUTSIDE_DEFAULT_LINES}: on a line "
        f"between them (Kafka {_named(kafka_between)}, RabbitMQ {_named(rabbitmq_between)}), "
        "run only when named (`make claims KAFKA=4.1`). "
        f"{CANNOT_RUN}: the release lacks what the scenario needs (a mode, a queue type, a "
        "client protocol), and the reason says which; listed on the default lines. "
        f"{NO_FINAL_READ}: a Kafka run from before the final read (a fresh reader of the whole "
        "log after the drain), judged from its live reader alone, which may have read an "
        "isolated leader's writes that the log later dropped. Such runs do not count towards a "
        "cell's runs: the matrix runs the cell again, and once it has runs with the final read "
        "its row shows those alone and the earlier ones are listed at the end."
    )


def render_table(
    cells: list[Cell],
    measured: dict[str, list[RunRecord]],
    machine: str,
    hunted: Iterable[str] = (),
) -> str:
    """The claims table; `hunted`: the section of rates from hunts (harness.hunt_rates)."""
    never, to_run = still_to_run(cells, measured)
    lines = [
        "# Claims: what the tool found",
        "",
        f"Generated on {time.strftime('%Y-%m-%d', time.gmtime())} from `claims-results.json`, "
        f"which `make claims` fills; machine: {machine}. Real clusters only (the kafka-mock "
        "tier never counts). Each row is one scenario in one mode on one release (Kafka's, or "
        "RabbitMQ's for mode rabbitmq); numbers are per run (acked; lost and duplicated in the "
        "group that lost most), errors summed over the row's runs. Verdicts: reproduced (the run "
        "showed what the claim says), not reproduced, refuted (a guarantee broken), "
        f"inconclusive. A loss row needs its loss in 2 of {LOSS_RUNS} runs and gets {LOSS_RUNS} "
        "runs in every mode on every line; until it has them its verdict counts the runs it has "
        "(reproduced (1/1)). Unavailable: the seconds a producer's sends were refused or "
        "unknown, summed over its intervals (the producer with most). A row whose scenario "
        "expects something of RabbitMQ's metadata probes (its declare steps: expect_declares) "
        "says after its verdict whether they held, run by run (declares held / did not hold); "
        "a probe that did not hold makes its run not reproduced.",
        "",
        _words_for_empty_cells(),
        "",
        f"Left on the default lines: {never} cells {NOT_RUN}; {to_run} runs to make in all "
        f"(counting the cells whose runs are all {NO_FINAL_READ} and the loss rows short of "
        f"{LOSS_RUNS} runs).",
        "",
        *COLUMNS,
    ]
    lines += [_row(c, judged_runs(measured.get(c.key, []))) for c in cells]
    retired = sorted(set(measured) - {c.key for c in cells})
    if retired:
        lines += [
            "",
            "Measured in a mode a scenario no longer runs in (its modes changed after what these "
            "runs showed; see claims-findings.md):",
            "",
            *COLUMNS,
        ]
        for key in retired:
            scenario, mode, *line = key.split("/")
            runs = measured[key]
            # Its expectation is the scenario's, not known here: each run's own word stands.
            cell = Cell(scenario, scenario.split("-")[0], "?", mode, "".join(line), len(runs))
            lines.append(_row(cell, runs))
    replaced = [(c, old) for c in cells if (old := superseded_runs(measured.get(c.key, [])))]
    if replaced:
        lines += [
            "",
            f"Runs from before the final read ({NO_FINAL_READ}) that newer runs of the same cell "
            "replaced: kept in claims-results.json, judged here on their own, counted nowhere "
            "above.",
            "",
            *COLUMNS,
            *(_row(c, old) for c, old in replaced),
        ]
    lines += hunted
    return "\n".join(lines) + "\n"


def render_docs(scenarios_dir: Path = ROOT / "scenarios", docs: Path = DOCS) -> Path:
    """docs/claims-results.md again from docs/claims-results.json, running nothing (as after
    `make claims` with its default of one run a cell); returns its path."""
    measured_file = docs / "claims-results.json"
    cells = [c for s in claim_scenarios(scenarios_dir) for c in cells_of(s, 1)]
    hunted = hunted_section(docs, scenarios_dir)
    table = render_table(
        cells, load_measured(measured_file), measured_machine(measured_file), hunted
    )
    out = docs / "claims-results.md"
    out.write_text(table)
    return out


@dataclass(frozen=True)
class CellWord:
    word: str  # as the table shows it
    # A loss cell with some but not all of its runs (a budget stopped it): no verdict yet.
    unfinished: bool = False


def matrix_words(
    scenarios_dir: Path = ROOT / "scenarios", docs: Path = DOCS
) -> dict[str, CellWord]:
    """Every cell's word as the table shows it now, by cell key (the nightly tier compares the
    matrix before and after a night)."""
    measured = load_measured(docs / "claims-results.json")
    cells = [c for s in claim_scenarios(scenarios_dir) for c in cells_of(s, 1)]
    words = {}
    for c in cells:
        runs = measured.get(c.key, [])
        shown = judged_runs(runs)
        word = cell_word(c, shown) if c.expect != "?" else per_run_words(shown)
        have = len(current_runs(runs))
        unfinished = c.expect == "loss" and 0 < have < c.runs
        words[c.key] = CellWord(word, unfinished)
    return words
