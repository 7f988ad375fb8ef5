"""The commands that run scenarios on clusters: `harness run` (one scenario end to end),
`harness compare` (one scenario on several release lines) and `harness heal` (what a killed run
left behind)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

import typer

from checkers.engine import HistoryError
from contract.rundir import DATA_CAP_MIB, DEFAULT_ROOT, RunDir
from harness.commands.common import (
    CONFIG_WINS_HELP,
    EXIT_BAD_INPUT,
    EXIT_CODES_HELP,
    EXIT_INTERRUPTED,
    EXIT_MISMATCH,
    JSON_VERDICT_HELP,
    KAFKA_HELP,
    MASTER_HELP,
    ONE_AT_A_TIME_HELP,
    SCENARIOS_DIR,
    STRICT_HELP,
    _fail,
    _json_alone_on_stdout,
    _print_verdict,
    _setup_logging,
    _write_reports,
    err,
    out,
    warm_checker,
)

RUN_HELP = f"Run one scenario end to end and print its verdict.\n\n{EXIT_CODES_HELP}"
VERBOSE_HELP = "say what it does as it goes; --quiet: only warnings, errors and the verdict"


@_json_alone_on_stdout
def run(
    scenario: Annotated[str, typer.Argument(help="scenario id (scenarios/<id>.yaml) or file")],
    results: Annotated[Path, typer.Option(help="results root")] = DEFAULT_ROOT,
    keep: Annotated[bool, typer.Option(help="leave the cluster running (healed)")] = False,
    master: Annotated[str | None, typer.Option(help=MASTER_HELP)] = None,
    mode: Annotated[
        str | None,
        typer.Option(help="Kafka: zk | kraft | kraft-dedicated (default: the scenario's first)"),
    ] = None,
    kafka: Annotated[str | None, typer.Option(help=KAFKA_HELP + " (default 3.9)")] = None,
    rabbitmq: Annotated[
        str | None,
        typer.Option(help="RabbitMQ line or release: 3.10, 4.0, 4.3 (default: the scenario's)"),
    ] = None,
    config: Annotated[
        list[str] | None,
        typer.Option(
            help="a team's own file, [KIND=]FILE: broker=server.properties, topic=FILE, "
            "producer=FILE, reader=FILE (Kafka), rabbitmq.conf; repeatable"
        ),
    ] = None,
    config_wins: Annotated[bool, typer.Option(help=CONFIG_WINS_HELP)] = False,
    data_cap: Annotated[
        int,
        typer.Option(
            min=1,
            help="MiB of each broker's data files copied out as evidence at most (decoded, and "
            "kept archived when the run finds something)",
        ),
    ] = DATA_CAP_MIB,
    seed: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="the seed of the targets steps draw as they run (random-node, a partition's "
            "shape); default: drawn, and said in the verdict",
        ),
    ] = None,
    strict: Annotated[bool, typer.Option("--strict", help=STRICT_HELP)] = False,
    verbose: Annotated[bool, typer.Option("--verbose/--quiet", "-v/-q", help=VERBOSE_HELP)] = True,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_VERDICT_HELP)] = False,
    in_sequence: Annotated[
        Path | None,
        typer.Option(
            hidden=True,
            help="this run's folder in a sequence of runs (contract.sequence): its workload "
            "waits for the sequence's turn, which it holds until it has been checked",
        ),
    ] = None,
) -> None:
    _setup_logging(verbose)
    import docker.errors
    import requests.exceptions

    from checkers.run import check_run
    from compose.cli import ComposeError
    from compose.engine import EngineLost
    from contract.sequence import SequenceSlot, TurnTimeout
    from harness.progress import RunProgress
    from nemesis.containers import NemesisError
    from systems.evidence import prune_evidence
    from systems.loading import load_checked
    from systems.registry import make_run
    from systems.run import Interrupted, RunOptions
    from systems.scenario import ScenarioError

    runner: Any = None  # the run, once it has a directory
    try:
        # Every problem the file has, offline, before anything is built or started; then the
        # keys a release whose definitions are not shipped takes, as its image says, before the
        # run has a folder.
        loaded = load_checked(
            scenario,
            SCENARIOS_DIR,
            kafka=kafka,
            rabbitmq=rabbitmq,
            mode=mode,
            config_files=config or (),
            config_wins=config_wins,
            build=True,
            release_keys=True,
            on_read=functools.partial(_said_of, strict=strict),
        )
        spec, path = loaded.scenario, loaded.path
        opts = RunOptions(
            results_root=results,
            keep_cluster=keep,
            spark_master=master,
            kafka_mode=mode,
            kafka_line=kafka,
            seed=seed,
            config_files=tuple(f.record() for f in loaded.config_fates),
            data_cap_mib=data_cap,
            slot=SequenceSlot(in_sequence) if in_sequence else None,
        )
        runner = make_run(spec, path, opts, RunProgress if verbose else None)
        if verbose:
            err.print(f"run {spec.id} -> {runner.run_dir}", markup=False)
        runner.execute()
        verdict = check_run(runner.run_dir, master=master)
    except Interrupted as e:
        _reports_of_failed(runner)
        said = f"interrupted by {e}; faults healed and cluster removed"
        raise _fail(said, EXIT_INTERRUPTED) from None
    except EngineLost as e:
        kept = f"; its history is kept in {runner.run_dir}" if runner else ""
        raise _fail(f"the run could not be carried out: {e}{kept}; run harness heal") from None
    except ScenarioError as e:
        _reports_of_failed(runner)
        for problem in e.problems[:-1]:
            err.print(f"error: {problem}", markup=False)
        raise _fail(e.problems[-1]) from None
    except (ComposeError, NemesisError, HistoryError, TurnTimeout) as e:
        _reports_of_failed(runner)
        raise _fail(str(e)) from None
    except docker.errors.DockerException as e:
        _reports_of_failed(runner)
        raise _fail(f"cannot use the Docker engine: {e}") from None
    except requests.exceptions.RequestException as e:  # the engine's socket (an OSError too)
        raise _fail(f"cannot use the Docker engine: {e}") from None
    except OSError as e:  # the results' disk: full, read-only, gone
        healed = runner is None or not runner.manifest.heal_error
        after = "faults healed" if healed else "the heal failed: run harness heal"
        raise _fail(f"cannot write the run's results: {_os_error(e)}; {after}") from None
    code = _print_verdict(verdict, runner.run_dir, verbose=verbose, as_json=as_json)
    _pack_history(runner.run_dir)
    prune_evidence(RunDir(runner.run_dir).evidence, verdict)
    raise typer.Exit(code)


def _said_of(loaded: Any, strict: bool) -> None:
    """What a run says of its scenario once it is read: what became of a team's keys, and why
    its faults may find no traffic."""
    _say_config_fates(loaded.config_fates)
    _warn_of_vacuity(loaded.scenario, strict)


def _warn_of_vacuity(spec: Any, strict: bool) -> None:
    """A line for each reason the scenario's faults may find no traffic; with --strict, the run
    stops there, before anything starts."""
    from systems.scenario import ScenarioError
    from systems.vacuity import vacuity_warnings

    warnings = vacuity_warnings(spec)
    for warning in warnings:
        err.print(f"warning: {warning}", markup=False)
    if strict and warnings:
        raise ScenarioError(f"{spec.id}: {len(warnings)} warning(s) above and --strict: not run")


def _say_config_fates(fates: Iterable[Any]) -> None:
    """A line for each key of a team's file that was not simply taken, and how many were."""
    taken: dict[str, int] = {}
    for fate in fates:
        if fate.fate == "taken":
            taken[str(fate.path)] = taken.get(str(fate.path), 0) + 1
        else:
            err.print(f"config: {fate.line()}", markup=False)
    for path, n in taken.items():
        err.print(f"config: {path}: {n} key(s) taken as they are", markup=False)


def _pack_history(run_dir: Path) -> None:
    """A checked run's history and its complete id lists packed (contract.packed); a pack that
    fails costs a line, and leaves the plain files."""
    from checkers.ids import pack_complete_lists
    from contract.packed import PackError, pack_history

    run = RunDir(run_dir)
    try:
        pack_history(run.history)
        pack_complete_lists(run.ids)
    except (PackError, OSError) as e:
        err.print(f"history left unpacked: {e}", markup=False)


def _os_error(e: OSError) -> str:
    return f"{e.strerror or e}" + (f" ({e.filename})" if e.filename else "")


def _reports_of_failed(runner: Any) -> None:
    """A run that ended without a verdict still gets its junit.xml (an error) and report."""
    run_dir = getattr(runner, "run_dir", None)
    if run_dir is not None and RunDir(run_dir).manifest.exists():
        _write_reports(run_dir)


def compare(
    scenario: Annotated[str, typer.Argument(help="scenario id or file")],
    kafka: Annotated[
        str | None, typer.Option(help="Kafka lines or releases, e.g. 3.9,4.1,4.4")
    ] = None,
    rabbitmq: Annotated[str | None, typer.Option(help="RabbitMQ lines, e.g. 3.10,4.0,4.3")] = None,
    mode: Annotated[str | None, typer.Option(help="Kafka mode for every run")] = None,
    config: Annotated[list[str] | None, typer.Option(help="as harness run --config")] = None,
    config_wins: Annotated[bool, typer.Option(help=CONFIG_WINS_HELP)] = False,
    results: Annotated[Path, typer.Option(help="results root")] = DEFAULT_ROOT,
    one_at_a_time: Annotated[
        bool, typer.Option("--one-at-a-time", help=ONE_AT_A_TIME_HELP)
    ] = False,
    run_timeout: Annotated[float, typer.Option(min=60, help="seconds one run may take")] = 1800,
) -> None:
    """One scenario on several release lines, one run each; one table of their verdicts.

    Exit 0 when every verdict matches the claim, 1 when one does not, 2 when a run gave none."""
    from compose.cli import ComposeError
    from harness.compare import compare as compare_lines
    from harness.compare import table_lines
    from harness.scenario_options import judge_on_lines
    from systems.config_files import absolute_config_option
    from systems.loading import load_checked
    from systems.registry import find_scenario
    from systems.scenario import ScenarioError

    if (kafka is None) == (rabbitmq is None):
        raise _fail("give --kafka LINES or --rabbitmq LINES (comma-separated), one of them")
    option, wanted = ("--kafka", kafka) if kafka is not None else ("--rabbitmq", rabbitmq)
    lines = [x.strip() for x in str(wanted).split(",") if x.strip()]
    try:
        # Each run is a process of its own in the repository: paths are handed on absolute.
        path = find_scenario(scenario, SCENARIOS_DIR).resolve()
        configs = [absolute_config_option(c) for c in config or []]
        judge_on_lines(path, option, list(lines), mode, configs, config_wins)
        spec = load_checked(path).scenario
    except (ScenarioError, ComposeError) as e:
        raise _fail(str(e)) from None
    extra = [
        *(["--mode", mode] if mode else []),
        *(f"--config={c}" for c in configs),
        *(["--config-wins"] if config_wins else []),
    ]
    say = functools.partial(err.print, markup=False)
    with warm_checker() if len(lines) > 1 else contextlib.nullcontext():
        runs, table = compare_lines(
            str(path),
            spec.id,
            option,
            lines,
            results.resolve(),
            extra,
            run_timeout,
            say,
            pipelined=not one_at_a_time,
        )
    for line in table_lines(spec.id, runs):
        out.print(line, markup=False)
    out.print(f"table: {table}", markup=False)
    if any(r.trial.verdict is None for r in runs):
        raise typer.Exit(EXIT_BAD_INPUT)
    raise typer.Exit(0 if all(r.matched for r in runs) else EXIT_MISMATCH)


def heal(
    keep: Annotated[bool, typer.Option(help="heal but do not remove the clusters")] = False,
) -> None:
    """Heal every fault and remove every cluster a killed run left behind."""
    import docker.errors

    from compose.cli import ComposeError
    from harness.cleanup import heal_everything

    try:
        found = heal_everything(remove=not keep, say=lambda s: out.print(s, markup=False))
    except (ComposeError, docker.errors.DockerException) as e:
        raise _fail(str(e)) from None
    out.print(f"{found} cluster(s) found", markup=False)
