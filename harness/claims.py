"""The claims matrix (`make claims`): every claim scenario x mode x release line (Kafka's, or
RabbitMQ's), N runs each.

The measured cells live in `docs/claims-results.json` (committed, so the matrix fills in over
several sittings and machines) and are rendered to `docs/claims-results.md`. A cell already
measured is kept unless asked again; each run is one `harness run` subprocess, bounded in time,
and the whole matrix starts no run once its time budget is spent (so it ends within the budget
plus one run's timeout).
"""

from __future__ import annotations

import functools
import json
import platform
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from checkers.verdict import SYNC_SECONDS, longest_stall_in_faults
from compose.releases import line_of, setup_releases, version_key
from harness.trial import run_once
from reports.junit import Case, matrix_case
from systems.kafka.config import KAFKA_LINES, mode_refusal
from systems.kafka.scenario import FINAL_READER, KafkaScenario
from systems.rabbitmq.scenario import RabbitMQScenario, queue_type_refusal
from systems.registry import load_scenario
from systems.scenario import ScenarioError

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
LOSS_RUNS = 3  # a "loss" row must show its loss in at least 2 of 3 runs on one mode
RABBITMQ_LINES = tuple(line_of(r) for r in setup_releases("rabbitmq"))  # 3.10, 4.0, 4.3


@dataclass(frozen=True)
class Cell:
    scenario: str
    claim: str
    expect: str
    mode: str  # Kafka mode, or "rabbitmq"
    kafka: str  # the release line: Kafka's, or RabbitMQ's for mode "rabbitmq"
    runs: int  # how many runs the matrix asks of this cell

    @property
    def key(self) -> str:
        return "/".join(x for x in (self.scenario, self.mode, self.kafka) if x)


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


def claim_scenarios(scenarios_dir: Path) -> list[RabbitMQScenario | KafkaScenario]:
    """The shipped scenarios that test a claim on a real cluster (mock tier excluded)."""
    out: list[RabbitMQScenario | KafkaScenario] = []
    for path in sorted(scenarios_dir.glob("*.yaml")):
        try:
            spec = load_scenario(path)
        except ScenarioError:
            continue
        if spec.claim and isinstance(spec, (RabbitMQScenario, KafkaScenario)):
            out.append(spec)
    return out


def cells_of(spec: RabbitMQScenario | KafkaScenario, runs: int) -> list[Cell]:
    """The cells of one scenario: every mode on every Kafka line that runs it. A loss row gets
    LOSS_RUNS runs on its first mode of the default line, so "2 of 3" can be judged."""
    claim = spec.claim or ""
    if not isinstance(spec, KafkaScenario):
        lines = rabbitmq_lines(spec)
        want = max(runs, LOSS_RUNS) if spec.expect == "loss" else runs
        return [
            Cell(spec.id, claim, spec.expect, "rabbitmq", line, want if i == 0 else runs)
            for i, line in enumerate(lines)
        ]
    cells = []
    for line in (line for line in KAFKA_LINES if spec.line_refusal(line) is None):
        for i, mode in enumerate(m for m in spec.cluster.modes if mode_refusal(line, m) is None):
            first = i == 0 and line == KAFKA_LINES[0]
            want = max(runs, LOSS_RUNS) if spec.expect == "loss" and first else runs
            cells.append(Cell(spec.id, claim, spec.expect, mode, line, want))
    return cells


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
        and queue_type_refusal(spec.cluster.queue_type, line) is None
    ]


def select(
    cells: Iterable[Cell],
    claims: set[str] | None,
    modes: set[str] | None,
    kafka: set[str] | None,
) -> list[Cell]:
    """Cells filtered by claim or scenario id, mode and Kafka line (None: all). A mode or Kafka
    filter asks for Kafka cells: RabbitMQ rows then stay out unless named as a mode."""
    return [
        c
        for c in cells
        if (not claims or c.claim in claims or c.scenario in claims)
        and (not modes or c.mode in modes)
        and (not kafka or c.kafka in kafka)
    ]


# ---- the measured cells ------------------------------------------------------------------------


def load_measured(path: Path) -> dict[str, list[RunRecord]]:
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    return {k: [RunRecord(**r) for r in v] for k, v in data.get("cells", {}).items()}


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
    )


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


# ---- running ----------------------------------------------------------------------------------


def run_cell_once(cell: Cell, results: Path, timeout: float) -> RunRecord:
    """One `harness run` of the cell in its own process, bounded by `timeout`."""
    if cell.mode == "rabbitmq":
        extra = ["--rabbitmq", cell.kafka]
    else:
        extra = ["--mode", cell.mode, "--kafka", cell.kafka]
    trial = run_once(cell.scenario, cell.scenario, results, timeout, extra)
    # No run directory: it failed before starting.
    run_dir = trial.run_dir or results / cell.scenario
    return record_of(run_dir, trial.seconds, trial.failure)


def run_matrix(
    cells: list[Cell],
    measured_file: Path,
    results: Path,
    again: bool,
    budget_s: float,
    run_timeout: float,
    say: Callable[[str], None],
) -> dict[str, list[RunRecord]]:
    """Runs what each cell still lacks, until the budget is spent; saves after every run."""
    measured = load_measured(measured_file)
    if again:
        for c in cells:
            measured.pop(c.key, None)
    deadline = time.monotonic() + budget_s
    for c in cells:
        have = measured.setdefault(c.key, [])
        while len(have) < c.runs:
            if time.monotonic() >= deadline:  # no run starts later; one may end run_timeout on
                say(f"budget spent: {c.key} and later cells left for another sitting")
                save_measured(measured_file, measured)
                return measured
            say(f"{c.key}: run {len(have) + 1} of {c.runs}")
            record = run_cell_once(c, results, run_timeout)
            have.append(record)
            say(
                f"{c.key}: {record.word} (acked {record.acked}, lost {record.lost}) {record.reason}"
            )
            save_measured(measured_file, measured)
    return measured


# ---- the table ----------------------------------------------------------------------------------


def cell_word(cell: Cell, runs: list[RunRecord]) -> str:
    """The cell's verdict over its runs. Safe claims: any refuting run refutes. Loss claims:
    reproduced in at least 2 of 3 runs (or every run, when fewer were asked)."""
    words = [r.word for r in runs]
    decisive = [w for w in words if w in ("reproduced", "not reproduced", "refuted")]
    if not decisive:
        if words and all(w == "error" for w in words):
            return "no verdict (the run failed)"
        return "inconclusive" if words else "not run"
    if "refuted" in decisive:
        return "refuted"
    hits = decisive.count("reproduced")
    if cell.expect == "loss":
        need = 2 if len(decisive) >= LOSS_RUNS else len(decisive)
        word = "reproduced" if hits >= need else "not reproduced"
        return f"{word} ({hits}/{len(decisive)})"
    return "reproduced" if hits == len(decisive) else f"not reproduced ({hits}/{len(decisive)})"


NO_FINAL_READ = "†"


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
        cell_word(c, runs) if c.expect != "?" else per_run_words(runs),
        " ".join(f"`{Path(r.run_dir).name}`" for r in runs) or "-",
    ]
    return "| " + " | ".join(fields) + " |"


def junit_cases(cells: list[Cell], measured: dict[str, list[RunRecord]]) -> list[Case]:
    """One JUnit test case per cell of the matrix, judged as the table judges it."""
    cases = []
    for c in cells:
        runs = measured.get(c.key, [])
        word = cell_word(c, runs) if c.expect != "?" else per_run_words(runs)
        lines = [f"{Path(r.run_dir).name}: {r.word}: {r.reason}" for r in runs]
        cases.append(
            matrix_case(c.key, c.claim, word, sum(r.seconds for r in runs), "\n".join(lines))
        )
    return cases


def per_run_words(runs: list[RunRecord]) -> str:
    return _per_run(runs, lambda r: r.word) if runs else "not run"


def render_table(cells: list[Cell], measured: dict[str, list[RunRecord]], machine: str) -> str:
    lines = [
        "# Claims: what the tool found",
        "",
        f"Generated by `make claims` on {time.strftime('%Y-%m-%d', time.gmtime())}; machine: "
        f"{machine}. Real clusters only (the kafka-mock tier never counts). Each row is one "
        "scenario in one mode on one release (Kafka's, or RabbitMQ's for mode rabbitmq); numbers "
        "are per run (acked; lost and "
        "duplicated in the group that lost most), errors summed over the row's runs. Verdicts: "
        "reproduced (the run showed what the claim says), not reproduced, refuted (a guarantee "
        "broken), inconclusive. A loss row needs its loss in 2 of 3 runs. Unavailable: the "
        "seconds a producer's sends were refused or unknown, summed over its intervals (the "
        "producer with most). "
        f"{NO_FINAL_READ}: a Kafka run from before the final read (a fresh reader of the whole "
        "log after the drain), judged from its live reader alone, which may have read an "
        "isolated leader's writes that the log later dropped.",
        "",
        "| claim | scenario | mode | release | runs | acked | lost | duplicated | errors seen "
        "| unavailable (s) | verdict | runs behind it |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [_row(c, measured.get(c.key, [])) for c in cells]
    retired = sorted(set(measured) - {c.key for c in cells})
    if retired:
        lines += [
            "",
            "Measured in a mode a scenario no longer runs in (its modes changed after what these "
            "runs showed; see claims-findings.md):",
            "",
            *lines[4:6],
        ]
        for key in retired:
            scenario, mode, *line = key.split("/")
            runs = measured[key]
            # Its expectation is the scenario's, not known here: each run's own word stands.
            cell = Cell(scenario, scenario.split("-")[0], "?", mode, "".join(line), len(runs))
            lines.append(_row(cell, runs))
    return "\n".join(lines) + "\n"
