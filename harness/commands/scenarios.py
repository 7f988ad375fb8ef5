"""The commands on scenario files: `harness new` (a commented scenario of your own),
`harness validate` (files checked offline, as a run would), `harness schema` (the scenario JSON
Schema and the reference), `harness list` (every shipped scenario) and `harness ops` (the fault
ops a system's steps take)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from harness.commands.common import (
    EXIT_BAD_INPUT,
    KAFKA_HELP,
    SCENARIOS_DIR,
    STRICT_HELP,
    _fail,
    _json_alone_on_stdout,
    _print_json,
    err,
    out,
)


def new(
    name: Annotated[str, typer.Argument(help="the scenario's id")],
    system: Annotated[str, typer.Option(help="kafka or rabbitmq")] = "kafka",
    out_file: Annotated[
        Path | None, typer.Option("--out", help="where to write it (default scenarios/NAME.yaml)")
    ] = None,
) -> None:
    """Write a commented scenario of your own that lists the knobs, ready to edit and run."""
    from harness.new import write_template
    from systems.scenario import ScenarioError

    path = out_file or SCENARIOS_DIR / f"{name}.yaml"
    try:
        write_template(name, system, path)
    except ScenarioError as e:
        raise _fail(str(e)) from None
    out.print(f"wrote {path}: edit it, then make test-scenario SCENARIO={path}", markup=False)


def validate(
    files: Annotated[
        list[Path], typer.Argument(help="scenario files, folders of them, or glob patterns")
    ],
    strict: Annotated[bool, typer.Option("--strict", help=STRICT_HELP)] = False,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="one JSON document on stdout: [{file, ok, errors, warnings}]"),
    ] = False,
    kafka: Annotated[
        str | None,
        typer.Option(
            help=KAFKA_HELP + " whose keys a Kafka scenario's are checked against "
            "(default: its cluster.release, else 3.9)"
        ),
    ] = None,
) -> None:
    """Check scenario files (or scenarios by id) offline, as a run would before it starts;
    one line per problem, at its file, line and column, and a warning where the faults may
    find no traffic to test."""
    from systems.kafka.releases import check_spec
    from systems.loading import load_checked
    from systems.registry import scenario_files, scenario_warnings
    from systems.scenario import ScenarioError
    from systems.vacuity import vacuity_warnings

    try:
        if kafka is not None:
            check_spec(kafka)
    except ScenarioError as e:
        raise _fail(str(e)) from None
    reports = []
    for f in scenario_files(files, SCENARIOS_DIR):
        errors: list[str] = []
        warnings: list[str] = []
        try:
            spec = load_checked(f, kafka=kafka, kafka_as="keys").scenario
            warnings = scenario_warnings(spec) + vacuity_warnings(spec)
        except ScenarioError as e:
            errors = e.problems
        ok = not errors and not (strict and warnings)
        reports.append({"file": str(f), "ok": ok, "errors": errors, "warnings": warnings})
        if as_json:
            continue
        for problem in errors:
            err.print(f"error: {problem}", markup=False)
        for warning in warnings:
            err.print(f"warning: {f}: {warning}", markup=False)
        if ok:
            out.print(f"{f}: ok", markup=False)
    if as_json:
        typer.echo(json.dumps(reports, indent=2))
    raise typer.Exit(0 if all(r["ok"] for r in reports) else EXIT_BAD_INPUT)


def schema(
    ctx: typer.Context,
    out_file: Annotated[
        Path | None, typer.Option("--out", help="write it here (default: print it)")
    ] = None,
    reference: Annotated[
        Path | None,
        typer.Option(help="also write the Markdown reference (fields, fault ops) in this folder"),
    ] = None,
) -> None:
    """The JSON Schema of a scenario file, for editors and other tools (the repository keeps it
    as docs/scenario.schema.json, each shipped scenario's first line pointing at it, and the
    reference generated with it in docs/reference/: make reference)."""
    from harness.reference_pages import write_reference
    from systems.schema import schema_text

    try:
        if out_file is None:
            typer.echo(schema_text(), nl=False)
        else:
            out_file.write_text(schema_text())
            out.print(f"wrote {out_file}", markup=False)
        # The whole `harness` command as it runs: harness.cli assembles it from this package,
        # which does not import it back.
        cli = ctx.find_root().command
        for path in write_reference(reference, cli) if reference is not None else []:
            out.print(f"wrote {path}", markup=False)
    except OSError as e:
        raise _fail(f"cannot write ({e.strerror}: {e.filename})") from None


LIST_COLUMNS = ("scenario", "claim", "runs on", "expect", "description")


@_json_alone_on_stdout
def list_scenarios(
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="stdout is one JSON list, an object a scenario (runs_on for runs on)"
        ),
    ] = False,
) -> None:
    """Every shipped scenario (chaos bases and found schedules too): the name to run it by,
    its claim, where it runs, what it expects; K2 before K10, folder by folder."""
    from harness.scenario_options import scenario_row, scenarios_in_order

    rows = [scenario_row(path, SCENARIOS_DIR) for path in scenarios_in_order(SCENARIOS_DIR)]
    if as_json:
        keys = [column.replace(" ", "_") for column in LIST_COLUMNS]
        _print_json([dict(zip(keys, row, strict=True)) for row in rows])
        return
    header = LIST_COLUMNS
    widths = [max(len(r[n]) for r in (header, *rows)) for n in range(4)]
    for row in (header, *rows):
        line = "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  "
        description = row[4]
        # On a terminal, one line a scenario (the file has the whole description); piped, all.
        room = out.width - len(line)
        if out.is_terminal and len(description) > room:
            description = description[: max(room - 1, 0)] + "…"
        out.print(line + description, markup=False, style="bold" if row is header else None)


OPS_SAID = 100


def ops(
    system: Annotated[str, typer.Argument(help="kafka, rabbitmq or kafka-mock")],
) -> None:
    """The fault ops a system's nemesis steps take, one line each: its name, what it needs
    besides its op, the op that heals it, and what it does (docs/reference/faults.md has it
    all)."""
    from faults.registry import OPS

    taken = [op for op in OPS if system in op.systems]
    if not taken:
        systems = sorted({s for op in OPS for s in op.systems})
        raise _fail(f"no system {system!r} (systems: {', '.join(systems)})")
    width = max(len(op.name) for op in taken)
    for op in taken:
        needs = [
            w for w, on in (("lazy disks", op.needs_lazy_disks), ("proxy", op.needs_proxy)) if on
        ]
        healed = f"healed by {op.healed_by}" if op.healed_by else "no heal"
        # Its first sentence, cut short: one line an op (the reference has the rest).
        first = op.does.split(". ")[0].rstrip(".")
        first = first if len(first) <= OPS_SAID else first[: OPS_SAID - 1] + "…"
        said = f"{op.arguments}; {healed}" + (f"; needs {', '.join(needs)}" if needs else "")
        out.print(f"{op.name.ljust(width)}  {said}  {first}", markup=False, soft_wrap=True)
