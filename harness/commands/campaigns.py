"""The commands that run many scenarios and judge them together: `harness claims` (the claims
matrix), `harness chaos` (generated fault schedules over one base), `harness shrink` (a
violation's schedule to its fewest steps), `harness hunt` (fresh runs until a rare anomaly
shows) and `harness nightly` (chaos over the base matrix, and hunts, until a budget)."""

from __future__ import annotations

import contextlib
import functools
import time
from pathlib import Path
from typing import Annotated

import typer

from contract.rundir import DEFAULT_ROOT
from harness.commands.common import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_MISMATCH,
    KAFKA_HELP,
    ONE_AT_A_TIME_HELP,
    SCENARIOS_DIR,
    _count,
    _csv,
    _fail,
    _setup_logging,
    _write_reports,
    err,
    out,
    warm_checker,
)


def claims(
    only: Annotated[
        str | None, typer.Option("--claims", help="claims or scenario ids, e.g. K1,K4,R1")
    ] = None,
    modes: Annotated[str | None, typer.Option(help="Kafka modes, e.g. kraft,zk")] = None,
    kafka: Annotated[
        str | None, typer.Option(help="release lines, Kafka's or RabbitMQ's, e.g. 4.4,4.0")
    ] = None,
    runs: Annotated[int, typer.Option(parser=_count(10), help="runs per cell (loss rows: 3)")] = 1,
    again: Annotated[bool, typer.Option(help="measure the selected cells anew")] = False,
    budget_minutes: Annotated[float, typer.Option(min=1, help="stop starting runs after")] = 240,
    run_timeout: Annotated[float, typer.Option(min=60, help="seconds one run may take")] = 1200,
    results: Annotated[Path, typer.Option(help="results root")] = DEFAULT_ROOT,
    one_at_a_time: Annotated[
        bool, typer.Option("--one-at-a-time", help=ONE_AT_A_TIME_HELP)
    ] = False,
    dry_run: Annotated[bool, typer.Option(help="list the cells, run nothing")] = False,
    add_hunt: Annotated[
        list[Path] | None,
        typer.Option(
            "--add-hunt",
            help="a hunt's folder (RESULTS/hunt/<scenario>-<time>) whose rates join the table; "
            "runs nothing",
        ),
    ] = None,
) -> None:
    """The claims matrix (claim scenario x mode x release line); writes docs/claims-results.md."""
    if add_hunt:
        _record_hunts(add_hunt)
        return
    from harness.claims import (
        DOCS,
        RABBITMQ_LINES,
        cells_of,
        claim_scenarios,
        current_runs,
        junit_cases,
        load_measured,
        machine_line,
        render_table,
        run_matrix,
        select,
    )
    from harness.hunt_rates import hunted_section
    from reports.index import render_index
    from reports.junit import CLAIMS_JUNIT, suite, write
    from systems.kafka.config import KAFKA_LINES, MODES

    wanted_lines = _csv(kafka)
    covered = (*KAFKA_LINES, *RABBITMQ_LINES)
    if wanted_lines and not wanted_lines <= set(covered):
        raise _fail(f"the claims matrix covers the lines {', '.join(covered)}, not {kafka!r}")
    wanted_modes = _csv(modes)
    if wanted_modes and not wanted_modes <= {*MODES, "rabbitmq"}:
        raise _fail(f"--modes takes {', '.join(MODES)} or rabbitmq, not {modes!r}")
    every = [c for s in claim_scenarios(SCENARIOS_DIR) for c in cells_of(s, runs)]
    chosen = select(every, _csv(only), wanted_modes, wanted_lines)
    if not chosen:
        raise _fail("no claim scenario matches that selection")
    measured_file = DOCS / "claims-results.json"
    if dry_run:
        measured = load_measured(measured_file)
        for c in chosen:
            have = len(current_runs(measured.get(c.key, [])))
            out.print(f"{c.key:32} {c.expect:12} runs {have}/{c.runs}", markup=False)
        return
    with warm_checker():
        measured = run_matrix(
            chosen,
            measured_file,
            results,
            again,
            budget_minutes * 60,
            run_timeout,
            lambda s: out.print(s, markup=False),
            pipelined=not one_at_a_time,
        )
    hunted = hunted_section(DOCS, SCENARIOS_DIR)
    table = render_table(every, measured, machine_line(), hunted)
    (DOCS / "claims-results.md").write_text(table)
    out.print(f"table: {DOCS / 'claims-results.md'}", markup=False)
    results.mkdir(parents=True, exist_ok=True)
    junit = write(
        suite(junit_cases(every, measured), "brokerjepsen-claims"), results / CLAIMS_JUNIT
    )
    out.print(f"junit: {junit}", markup=False)
    out.print(f"index: {render_index(results, measured_file)}", markup=False)


def _record_hunts(folders: list[Path]) -> None:
    """Each hunt's rows into docs/claims-hunts.json, and the claims table rendered again."""
    from harness.claims import DOCS, render_docs
    from harness.hunt_rates import HUNTS_NAME, HuntRecordError, record_hunt
    from systems.scenario import ScenarioError

    for folder in folders:
        try:
            rows = record_hunt(folder, DOCS / HUNTS_NAME)
        except (HuntRecordError, ScenarioError) as e:
            raise _fail(str(e)) from None
        out.print(f"recorded: {folder} ({len(rows)} hunted rows in all)", markup=False)
    out.print(f"table: {render_docs(SCENARIOS_DIR, DOCS)}", markup=False)


def _range(name: str, value: str) -> tuple[float, float]:
    """ "5,15" -> (5.0, 15.0)"""
    from systems.scenario import ScenarioError

    try:
        low, high = (float(x) for x in value.split(","))
    except ValueError:
        raise ScenarioError(
            f"--{name} takes LOW,HIGH in seconds, e.g. 5,15; not {value!r}"
        ) from None
    return low, high


def chaos(
    base: Annotated[str, typer.Argument(help="base scenario: id, file, or chaos/<name>")],
    seed: Annotated[int | None, typer.Option(help="first seed (default: drawn, printed)")] = None,
    runs: Annotated[
        int, typer.Option(parser=_count(1000), help="runs, seeds SEED, SEED+1, ...")
    ] = 1,
    minutes: Annotated[float, typer.Option(min=0.5, max=60, help="traffic per run")] = 2.0,
    faults: Annotated[
        str | None,
        typer.Option(
            help="fault families, e.g. partition,kill,pause (default: the base's chaos.faults, "
            "else every default family)"
        ),
    ] = None,
    interval: Annotated[str, typer.Option(help="seconds between faults, LOW,HIGH")] = "5,15",
    duration: Annotated[str, typer.Option(help="seconds a fault lasts, LOW,HIGH")] = "3,15",
    quiet: Annotated[float, typer.Option(min=0, help="seconds without faults at the end")] = 20,
    mode: Annotated[str | None, typer.Option(help="Kafka mode (default: the base's first)")] = None,
    kafka: Annotated[str | None, typer.Option(help=KAFKA_HELP)] = None,
    dry_run: Annotated[bool, typer.Option(help="print the schedule, start nothing")] = False,
    results: Annotated[Path, typer.Option(help="results root")] = DEFAULT_ROOT,
    one_at_a_time: Annotated[
        bool, typer.Option("--one-at-a-time", help=ONE_AT_A_TIME_HELP)
    ] = False,
) -> None:
    """Run BASE with generated fault schedules (seeded, replayable) and judge each run.

    Exit 1 when a run found a violation, else 2 when a run gave no verdict, else 0."""
    import secrets

    from chaos.generator import ChaosError, ChaosOptions
    from chaos.schedule import chaos_scenario, steps_yaml
    from harness.chaos import chaos_runs, tally
    from harness.scenario_options import where_it_runs
    from systems.loading import load_checked
    from systems.scenario import ScenarioError

    _setup_logging(False)
    try:
        spec = load_checked(
            base, SCENARIOS_DIR, kafka=kafka, mode=mode, kafka_as="line", build=not dry_run
        ).scenario
        options = ChaosOptions(
            seed=seed if seed is not None else secrets.randbelow(1_000_000),
            seconds=minutes * 60,
            faults=frozenset(_csv(faults) or ()) if faults else None,
            interval=_range("interval", interval),
            duration=_range("duration", duration),
            quiet=quiet,
        )
        scenario, steps = chaos_scenario(spec, options, mode)
    except (ScenarioError, ChaosError) as e:
        raise _fail(str(e)) from None
    if dry_run:
        where = where_it_runs(scenario)
        out.print(f"# {spec.id}, seed {options.seed}{where}: {len(steps)} steps", markup=False)
        out.print(steps_yaml(steps), markup=False, end="")
        return
    say = functools.partial(out.print, markup=False)
    with warm_checker() if runs > 1 else contextlib.nullcontext():
        found = chaos_runs(
            spec, options, runs, results, mode, kafka, say, pipelined=not one_at_a_time
        )
    counts = tally(found)
    say("chaos: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    if counts["violation"]:
        raise typer.Exit(EXIT_MISMATCH)
    if counts["error"]:
        raise typer.Exit(EXIT_BAD_INPUT)


def shrink(
    run_dir: Annotated[Path, typer.Argument(help="a run directory whose verdict is a violation")],
    tries: Annotated[
        int, typer.Option(parser=_count(20), help="runs of one candidate at most")
    ] = 3,
    need: Annotated[int, typer.Option(parser=_count(20), help="of which must reproduce")] = 1,
    budget_minutes: Annotated[float, typer.Option(min=1, help="stop and keep the best")] = 60,
    results: Annotated[Path, typer.Option(help="results root for the candidates")] = DEFAULT_ROOT,
    found: Annotated[
        Path,
        # The default as the repository names it, not this checkout's absolute path.
        typer.Option(help="where the minimal scenario goes", show_default="scenarios/found"),
    ] = SCENARIOS_DIR / "found",
) -> None:
    """Shrink RUN_DIR's schedule to the fewest steps that still show its violation."""
    from chaos.shrink import ShrinkOptions
    from harness.shrink import ShrinkError, shrink_run

    _setup_logging(False)
    opts = ShrinkOptions(tries=tries, need=need, budget_s=budget_minutes * 60)
    try:
        opts.check()
        say = functools.partial(out.print, markup=False)
        result, path = shrink_run(run_dir, opts, results, found, say)
    except (ShrinkError, ValueError) as e:
        raise _fail(str(e)) from None
    out.print(
        f"shrunk {result.original_steps} steps to {len(result.minimal['nemesis'])} in "
        f"{result.runs_spent} runs (reproduced {result.reproduced} of "
        f"{result.runs_of_minimal}){'; budget spent' if result.budget_spent else ''}",
        markup=False,
    )
    out.print(f"scenario: {path}", markup=False)
    _write_reports(run_dir)


def hunt(
    scenario: Annotated[str, typer.Argument(help="scenario id or file")],
    runs: Annotated[int, typer.Option(parser=_count(1000), help="runs per line and client")] = 10,
    until_violation: Annotated[
        bool, typer.Option(help="stop a line and client at its first violation")
    ] = False,
    kafka: Annotated[
        str | None, typer.Option(help="Kafka lines or releases, e.g. 3.9,4.4 (default: its own)")
    ] = None,
    rabbitmq: Annotated[
        str | None, typer.Option(help="RabbitMQ lines, e.g. 3.10,4.3 (default: its own)")
    ] = None,
    client: Annotated[
        str | None,
        typer.Option(
            help="the transactional producers' and copiers' client: java, confluent-kafka, or "
            "both comma-separated (default: the scenario's)"
        ),
    ] = None,
    mode: Annotated[str | None, typer.Option(help="Kafka mode for every run")] = None,
    seed: Annotated[
        int | None,
        typer.Option(
            min=0, help="--seed of every run, replaying drawn targets (default: each run draws)"
        ),
    ] = None,
    budget_minutes: Annotated[float, typer.Option(min=1, help="stop starting runs after")] = 240,
    run_timeout: Annotated[
        float | None,
        typer.Option(min=60, help="seconds one run may take (default: its phases' bounds)"),
    ] = None,
    results: Annotated[Path, typer.Option(help="results root")] = DEFAULT_ROOT,
    one_at_a_time: Annotated[
        bool, typer.Option("--one-at-a-time", help=ONE_AT_A_TIME_HELP)
    ] = False,
    into_claims: Annotated[
        bool,
        typer.Option(
            "--claims", help="add the hunt's rates to docs/claims-hunts.json and the claims table"
        ),
    ] = False,
    shrink: Annotated[
        bool, typer.Option("--shrink", help="hand the first violating run to harness shrink")
    ] = False,
    tries: Annotated[
        int,
        typer.Option(parser=_count(20), help="--shrink: runs of one candidate at most"),
    ] = 3,
    found: Annotated[
        Path,
        typer.Option(
            help="--shrink: where the minimal scenario goes", show_default="scenarios/found"
        ),
    ] = SCENARIOS_DIR / "found",
) -> None:
    """Fresh runs of one scenario until a rare anomaly shows: its rate (k of n, 95 % interval)
    per line and client, one table, the violating runs kept whole.

    Exit 1 when a run violated the expectation, else 2 when no run gave a verdict, else 0."""
    import docker.errors

    from compose.cli import ComposeError
    from harness.chaos import run_timeout as bound_of
    from harness.hunt import (
        Hunt,
        hunt_folder,
        run_hunt,
        shrink_first_violation,
        table_lines,
        targets_of,
    )
    from harness.scenario_options import judge_on_lines
    from systems.loading import load_checked
    from systems.registry import find_scenario
    from systems.scenario import ScenarioError

    _setup_logging(False)
    if kafka is not None and rabbitmq is not None:
        raise _fail("give --kafka LINES or --rabbitmq LINES, not both")
    option, wanted = ("--rabbitmq", rabbitmq) if rabbitmq is not None else ("--kafka", kafka)
    lines: list[str | None] = [x.strip() for x in (wanted or "").split(",") if x.strip()]
    lines = lines or [None]  # the scenario's own
    clients = [x.strip() for x in (client or "").split(",") if x.strip()]
    try:
        # Each run is a process of its own in the repository: the path is handed on absolute.
        path = find_scenario(scenario, SCENARIOS_DIR).resolve()
        spec = load_checked(path).scenario
        judge_on_lines(path, option, lines, mode)
        folder = hunt_folder(results.resolve(), spec.id)
        targets = targets_of(spec, path, lines, clients, folder)
    except (ScenarioError, ComposeError) as e:
        raise _fail(str(e)) from None
    except docker.errors.DockerException as e:
        raise _fail(f"cannot use the Docker engine: {e}") from None
    say = functools.partial(err.print, markup=False)
    record = Hunt(spec.id, runs, until_violation, seed, [], folder)
    extra = ["--mode", mode] if mode else []
    with warm_checker() if runs > 1 else contextlib.nullcontext():
        run_hunt(
            record,
            targets,
            option,
            extra,
            results.resolve(),
            run_timeout or bound_of(spec),
            budget_minutes * 60,
            say,
            pipelined=not one_at_a_time,
        )
    for line in table_lines(record):
        out.print(line, markup=False)
    out.print(f"table: {folder / 'hunt.md'}", markup=False)
    if into_claims and not record.interrupted:
        _record_hunts([folder])
    if record.interrupted:
        raise typer.Exit(EXIT_INTERRUPTED)
    if shrink and record.first_violation():
        minimal = shrink_first_violation(record, tries, results.resolve(), found, say)
        if minimal:
            out.print(f"shrunk: {minimal}", markup=False)
    if record.first_violation():
        raise typer.Exit(EXIT_MISMATCH)
    if not any(r.trial.verdict for row in record.rows for r in row.runs):
        raise typer.Exit(EXIT_BAD_INPUT)


def nightly(
    hours: Annotated[float, typer.Option(min=0.01, max=24, help="budget: no run starts after")] = 1,
    minutes: Annotated[float, typer.Option(min=0.5, max=60, help="traffic per run")] = 2.0,
    bases: Annotated[
        str | None, typer.Option(help="bases to run, e.g. chaos/kafka-safe (default: the matrix)")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="first seed (default: from the date)")] = None,
    shrink: Annotated[bool, typer.Option(help="shrink the violations found")] = True,
    hunted: Annotated[
        str | None,
        typer.Option("--hunt", help="scenarios to hunt in the budget's last half, e.g. K4,T3"),
    ] = None,
    hunt_runs: Annotated[
        int, typer.Option(parser=_count(1000), help="--hunt: runs per scenario at most")
    ] = 10,
    results: Annotated[Path, typer.Option(help="results root")] = DEFAULT_ROOT,
) -> None:
    """Generated schedules over the base matrix until the budget; summary, JUnit, index.

    Exit 1 when a run found a violation on a base that promises safety, else 2 when no run gave
    a verdict, else 0."""
    from chaos.generator import ChaosError
    from harness.claims import DOCS
    from harness.nightly import (
        HUNT_SHARE,
        MATRIX,
        first_seed_of,
        hunt_night,
        run_night,
        write_night,
    )
    from reports.index import render_index
    from systems.loading import load_checked
    from systems.registry import find_scenario
    from systems.scenario import ScenarioError

    _setup_logging(False)
    chosen = MATRIX
    if bases:
        wanted = _csv(bases) or set()
        chosen = tuple(b for b in MATRIX if b.scenario in wanted)
        if unknown := wanted - {b.scenario for b in MATRIX}:
            raise _fail(
                f"no base {sorted(unknown)[0]!r} in the matrix "
                f"({', '.join(sorted({b.scenario for b in MATRIX}))})"
            )
    say = functools.partial(out.print, markup=False)
    first = seed if seed is not None else first_seed_of(time.strftime("%Y-%m-%d", time.gmtime()))
    deadline = time.monotonic() + hours * 3600
    try:
        paths = [find_scenario(name, SCENARIOS_DIR).resolve() for name in _csv(hunted) or ()]
        to_hunt = [(load_checked(path).scenario, path) for path in paths]
        chaos_hours = hours * (1 - HUNT_SHARE) if to_hunt else hours
        with warm_checker():
            night = run_night(
                chosen, chaos_hours, minutes, first, results, SCENARIOS_DIR, say, shrink
            )
            hunt_night(night, to_hunt, deadline, hunt_runs, results.resolve(), say)
    except (ScenarioError, ChaosError) as e:
        raise _fail(str(e)) from None
    summary, junit = write_night(night, chosen, results)
    say(f"summary: {summary}")
    say(f"junit: {junit}")
    say(f"index: {render_index(results, DOCS / 'claims-results.json')}")
    failed = [r for b, r in night.runs if r.found == "violation" and not b.unsafe]
    if failed:
        raise typer.Exit(EXIT_MISMATCH)
    if all(r.found == "error" for _b, r in night.runs):
        raise typer.Exit(EXIT_BAD_INPUT)
