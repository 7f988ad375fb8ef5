"""The command line: `harness run | check | report | heal | validate | list | claims | chaos |
shrink | hunt | nightly | show`.

Bad input gets one line and exit 2; a verdict that does not match its claim exits 1; a bug
exits 3 with its traceback (EXIT_MEANINGS, which `harness --help` lists).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import logging
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, ParamSpec

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

# typer vendors click; its base exception is not re-exported
from typer._click.exceptions import ClickException

from checkers.engine import HistoryError, forget_connect_mark
from checkers.verdict import summary_lines
from contract.expectations import known_expectation
from contract.numbers import parse_count
from contract.retention import DEFAULT_KEEP_DAYS, DEFAULT_KEEP_FAILURES_DAYS, DEFAULT_KEEP_LAST
from contract.rundir import DATA_CAP_MIB, DEFAULT_ROOT, RunDir
from harness.progress import STATUS_CONSOLE

# Commands import the scenarios', the engine's and the nemesis' modules where they use them:
# `harness check` on a warm server takes a few seconds, and importing those took a third of a
# second of it.

SCENARIOS_DIR = Path(__file__).resolve().parent.parent / "scenarios"
EXIT_MATCHED, EXIT_MISMATCH, EXIT_BAD_INPUT, EXIT_BUG, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
# What each code means to a script or a CI job that reads it; scripts/exit-meaning.sh says the
# same words (a test holds them together).
EXIT_MEANINGS = {
    EXIT_MATCHED: "the verdict matches the claim",
    EXIT_MISMATCH: "the verdict does not match the claim (not reproduced, refuted or inconclusive)",
    EXIT_BAD_INPUT: "bad input, or the run could not be carried out "
    "(no engine, a broker that never started)",
    # A crash must not read as a verdict that does not match.
    EXIT_BUG: "a bug in the harness (its traceback is above)",
    EXIT_INTERRUPTED: "interrupted; faults healed and the cluster removed",
}
EXIT_CODES_HELP = "Exit codes:\n" + "\n".join(
    f"{code:<5}{meaning}." for code, meaning in EXIT_MEANINGS.items()
)
VERBOSE_HELP = "say what it does as it goes; --quiet: only warnings, errors and the verdict"
JSON_VERDICT_HELP = (
    'stdout is one JSON document, {"verdict": verdict.json\'s content, "run_dir", "reports"} '
    "(nothing when there is no verdict)"
)
KAFKA_HELP = (
    "Kafka release line or release from 3.7 on: 3.9, 4.1, 4.4, 4.3.1, ... (built on first use)"
)

CONFIG_WINS_HELP = (
    "a --config key wins over a typed knob the scenario set to other than its default (without "
    "it, such a conflict stops the run before anything starts)"
)
STRICT_HELP = "a warning (faults that may find no traffic to test) fails it, as an error does"
MASTER_HELP = (
    "Spark master for the checker: local[*], spark://host:7077, sc://host:15002 (default: the "
    "warm Spark Connect session when one runs, else a local Spark)"
)

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    epilog=EXIT_CODES_HELP,
)
err = STATUS_CONSOLE
out = Console(highlight=False, soft_wrap=True)


def _fail(message: str, code: int = EXIT_BAD_INPUT) -> typer.Exit:
    err.print(f"error: {message}", markup=False)
    return typer.Exit(code)


def _count(most: int) -> Callable[[str], int]:
    """A count option's parser: the README's forms (3, 1k), from 1 to `most`."""

    def parse(text: str | int) -> int:
        if isinstance(text, int):  # the option's default
            return text
        try:
            value = parse_count(text)
        except ValueError as e:
            raise typer.BadParameter(str(e)) from None
        if value > most:
            raise typer.BadParameter(f"{text!r} is more than {most}")
        return value

    return parse


def _setup_logging(verbose: bool) -> None:
    level = logging.INFO if verbose else logging.WARNING
    if err.is_terminal:  # log lines print above the live status line, not through it
        from rich.logging import RichHandler

        handler = RichHandler(console=err, show_path=False, omit_repeated_times=False)
        logging.basicConfig(level=level, format="%(name)s %(message)s", handlers=[handler])
    else:
        logging.basicConfig(level=level, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("pika", "py4j", "docker", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


# Under --json, the file descriptor of the real stdout, where only the JSON document goes.
_JSON_STDOUT: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "json_stdout", default=None
)
P = ParamSpec("P")


def _json_alone_on_stdout(command: Callable[P, None]) -> Callable[P, None]:
    """A command whose `as_json` parameter, when true, makes stdout the JSON document alone: while
    the command works, what it or a process it starts writes to stdout (a library's print, a
    Java client's banner) goes to stderr, with the status lines."""

    @functools.wraps(command)
    def with_stdout_aside(*args: P.args, **kwargs: P.kwargs) -> None:
        if not kwargs.get("as_json"):
            command(*args, **kwargs)
            return
        sys.stdout.flush()
        real = os.dup(1)
        os.dup2(2, 1)
        token = _JSON_STDOUT.set(real)
        try:
            with contextlib.redirect_stdout(sys.stderr):  # where sys.stdout is not fd 1
                command(*args, **kwargs)
        finally:
            _JSON_STDOUT.reset(token)
            sys.stdout.flush()
            os.dup2(real, 1)
            os.close(real)

    return with_stdout_aside


def _print_json(document: object) -> None:
    """One JSON document on stdout (the real one under --json)."""
    text = json.dumps(document, indent=2) + "\n"
    real = _JSON_STDOUT.get()
    if real is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        os.write(real, text.encode())


def _write_reports(run_dir: Path) -> list[Path]:
    """report.html and junit.xml; a report that cannot be built costs a line, not the verdict."""
    from reports.run_data import ReportError
    from reports.write import write_run_reports

    try:
        return write_run_reports(run_dir)
    except (ReportError, OSError) as e:
        err.print(f"no report: {e}", markup=False)
    except Exception as e:  # noqa: BLE001 - a report's bug must not hide the run's verdict
        err.print(f"no report (a bug in reports/): {type(e).__name__}: {e}", markup=False)
    return []


def _print_verdict(
    verdict: dict, run_dir: Path, *, verbose: bool = True, as_json: bool = False
) -> int:
    """The verdict's lines, where the run and its reports are, and the exit code of the verdict;
    as_json: the same as one document, {"verdict": verdict.json's content, "run_dir", "reports"}."""
    checker = verdict.get("checker") or {}
    if verbose and checker.get("session"):
        err.print(f"checked on {checker['session']} in {checker['seconds']} s", markup=False)
    written = _write_reports(run_dir)
    if as_json:
        reports = {path.stem: str(path) for path in written}
        _print_json({"verdict": verdict, "run_dir": str(run_dir), "reports": reports})
        return EXIT_MATCHED if verdict["matched"] else EXIT_MISMATCH
    for line in summary_lines(verdict):
        out.print(line, markup=False)
    out.print(f"results: {run_dir}", markup=False)
    for path in written:
        out.print(f"{path.stem}: {path}", markup=False)
    return EXIT_MATCHED if verdict["matched"] else EXIT_MISMATCH


@app.command(help=f"Run one scenario end to end and print its verdict.\n\n{EXIT_CODES_HELP}")
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
) -> None:
    _setup_logging(verbose)
    import docker.errors
    import requests.exceptions

    from checkers.run import check_run
    from compose.cli import ComposeError
    from compose.engine import EngineLost
    from harness.progress import RunProgress
    from harness.scenario_options import (
        check_kafka_options,
        check_release_keys,
        on_rabbitmq,
        rabbitmq_option,
    )
    from nemesis.containers import NemesisError
    from systems.evidence import prune_evidence
    from systems.kafka.releases import check_spec
    from systems.registry import find_scenario, load_scenario, make_run, with_config_files
    from systems.run import Interrupted, RunOptions
    from systems.scenario import ScenarioError

    runner: Any = None  # the run, once it has a directory
    try:
        path = find_scenario(scenario, SCENARIOS_DIR)
        if kafka is not None:
            check_spec(kafka)
        # Every problem the file has, offline, before anything is built or started.
        spec = load_scenario(path, rabbitmq_option(rabbitmq), kafka)
        spec = on_rabbitmq(spec, rabbitmq)
        spec, fates = with_config_files(spec, config or [], config_wins)
        _say_config_fates(fates)
        _warn_of_vacuity(spec, strict)
        check_kafka_options(spec, mode, kafka)
        # Keys a release whose definitions are not shipped takes, as its image says, before the
        # run has a folder.
        check_release_keys(spec, mode)
        opts = RunOptions(
            results_root=results,
            keep_cluster=keep,
            spark_master=master,
            kafka_mode=mode,
            kafka_line=kafka,
            seed=seed,
            config_files=tuple(f.record() for f in fates),
            data_cap_mib=data_cap,
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
    except (ComposeError, NemesisError, HistoryError) as e:
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


def _say_config_fates(fates: list[Any]) -> None:
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


@app.command()
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
    run_timeout: Annotated[float, typer.Option(min=60, help="seconds one run may take")] = 1800,
) -> None:
    """One scenario on several release lines, one run each; one table of their verdicts.

    Exit 0 when every verdict matches the claim, 1 when one does not, 2 when a run gave none."""
    from compose.cli import ComposeError
    from harness.compare import compare as compare_lines
    from harness.compare import table_lines
    from harness.scenario_options import judge_on_lines
    from systems.config_files import absolute_config_option
    from systems.registry import find_scenario, load_scenario
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
        spec = load_scenario(path)
    except (ScenarioError, ComposeError) as e:
        raise _fail(str(e)) from None
    extra = [
        *(["--mode", mode] if mode else []),
        *(f"--config={c}" for c in configs),
        *(["--config-wins"] if config_wins else []),
    ]
    say = functools.partial(err.print, markup=False)
    runs, table = compare_lines(
        str(path), spec.id, option, lines, results.resolve(), extra, run_timeout, say
    )
    for line in table_lines(spec.id, runs):
        out.print(line, markup=False)
    out.print(f"table: {table}", markup=False)
    if any(r.trial.verdict is None for r in runs):
        raise typer.Exit(EXIT_BAD_INPUT)
    raise typer.Exit(0 if all(r.matched for r in runs) else EXIT_MISMATCH)


@app.command()
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


@app.command()
def diff(
    left: Annotated[Path, typer.Argument(help="a run directory")],
    right: Annotated[Path, typer.Argument(help="another run directory")],
    every: Annotated[bool, typer.Option("--all", help="the settings they share too")] = False,
) -> None:
    """Two runs setting by setting: what differed in their configuration, releases and
    verdicts (the settings each run's manifest recorded)."""
    from contract.manifest import ManifestError
    from reports.diff import diff_rows

    try:
        rows = diff_rows(left, right)
    except ManifestError as e:
        raise _fail(str(e)) from None
    shown = [r for r in rows if every or r.differs or r.scope == "run"]
    table = Table("scope", "setting", left.name, right.name, box=None, pad_edge=False)
    for r in shown:
        # Text, not markup: a value may hold brackets (a policy's pattern, a regex).
        cells = [Text(x) for x in (r.scope, r.key, r.left, r.right)]
        table.add_row(*cells, style="bold" if r.differs else "")
    out.print(table)
    differing = sum(r.differs for r in rows if r.scope != "run")
    out.print(f"{differing} settings differ", markup=False)


@app.command()
def report(
    run_dir: Annotated[Path | None, typer.Argument(help="a run directory")] = None,
    index: Annotated[bool, typer.Option("--index", help="write RESULTS/index.html")] = False,
    results: Annotated[Path, typer.Option(help="results root (--index)")] = DEFAULT_ROOT,
) -> None:
    """Rebuild a run's report.html and junit.xml, or (--index) the index of every run."""
    from reports.index import render_index
    from reports.run_data import ReportError
    from reports.write import write_run_reports

    if (run_dir is None) == (not index):
        raise _fail("give a run directory, or --index (not both)")
    try:
        if run_dir is not None:
            written = write_run_reports(run_dir)
        else:
            from harness.claims import DOCS

            written = [render_index(results, DOCS / "claims-results.json")]
    except (ReportError, OSError) as e:
        raise _fail(str(e)) from None
    for path in written:
        out.print(f"{path.stem}: {path}", markup=False)


@app.command()
@_json_alone_on_stdout
def check(
    run_dir: Annotated[Path, typer.Argument(help="a run directory with history/")],
    master: Annotated[str | None, typer.Option(help=MASTER_HELP)] = None,
    expect: Annotated[
        str | None,
        typer.Option(help="loss | safe | unavailable | duplicates | no-duplicates | reordered"),
    ] = None,
    profile: Annotated[
        bool, typer.Option(help="print the wall time, Spark jobs and stages of each phase")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_VERDICT_HELP)] = False,
) -> None:
    """Check a run's history with PySpark; write verdict.json, ids/ and summary.txt.

    Exit 0 when the verdict matches the expectation, 1 when it does not, 2 on bad input
    (harness --help lists every code)."""
    from checkers.run import check_run

    if expect is not None:
        try:
            known_expectation(expect)
        except ValueError as e:
            raise _fail(f"--expect: {e}") from None
    try:
        with _check_status():
            verdict = check_run(run_dir, master=master, expect=expect, profile=profile)
    except HistoryError as e:
        raise _fail(str(e)) from None
    if profile:
        _print_profile(verdict["checker"])
    raise typer.Exit(_print_verdict(verdict, run_dir, as_json=as_json))


@contextlib.contextmanager
def _check_status() -> Iterator[None]:
    """On a terminal, the phase a check is in, as it goes (nothing is printed when piped)."""
    from checkers.engine import watching

    with err.status("checking: starting Spark") as status:
        with watching(lambda name: status.update(f"checking: {name}")):
            yield


@contextlib.contextmanager
def _warm_checker() -> Iterator[None]:
    """For a command that checks many runs: each run's check on one warm Spark Connect server
    (the one up already, or one that ends with this command), said in a line."""
    from checkers.engine import warm_server

    with warm_server() as url:
        if url:
            err.print(
                f"checker: every run's check on the warm Spark Connect at {url}", markup=False
            )
        yield


def _print_profile(checker: dict) -> None:
    from checkers.engine import Phase, Profile, cpu_said

    phases = [Phase(**p) for p in checker["profile"]]
    out.print(f"checker: {checker['session']}", markup=False)
    out.print(f"session: {checker['session_seconds']:.2f} s to get it", markup=False)
    for line in Profile(None, phases).lines():
        out.print(line, markup=False)
    if checker.get("jvm_cpu"):
        out.print(cpu_said(checker["jvm_cpu"]), markup=False)


spark_app = typer.Typer(no_args_is_help=True, help="the warm checker: a Spark Connect server")
app.add_typer(spark_app, name="spark")


@spark_app.command("up")
def spark_up(
    port: Annotated[int, typer.Option(help="its port on 127.0.0.1", min=1024, max=65535)] = 15002,
    warm_checks: Annotated[
        int,
        typer.Option(
            help="checks of a synthetic run-sized history it runs before it is up (0: none)",
            min=0,
            max=20,
        ),
    ] = 4,
) -> None:
    """Start a Spark Connect server that every check on this machine uses until spark down,
    warmed by a few checks of a synthetic history so a run's first check is not a cold one."""
    from checkers.engine import recorded_server, start_server
    from checkers.rehearsal import MESSAGES, warm_up

    running = recorded_server()
    if running is not None:
        out.print(f"spark: already up at {running.url} (pid {running.pid})", markup=False)
        return
    try:
        server = start_server(port, detached=True)
    except HistoryError as e:
        raise _fail(str(e)) from None
    out.print(f"spark: up at {server.url} (pid {server.pid}, log {server.log})", markup=False)
    if warm_checks == 0:
        return
    # Checks begun meanwhile run beside the warm-up, on the server that is up already.
    out.print(f"spark: warming it with {warm_checks} checks of {MESSAGES} synthetic messages")
    try:
        took = warm_up(server.url, warm_checks, said=_said_warm_check)
    except HistoryError as e:  # it stays up: a cold first check is slower, not wrong
        raise _fail(
            f"spark: up at {server.url}, not warmed: its warm-up check failed: {e}", 1
        ) from None
    except KeyboardInterrupt:
        err.print(f"spark: up at {server.url}, not warmed (interrupted)", markup=False)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    out.print(f"spark: warm after {len(took)} checks in {sum(took):.0f} s", markup=False)


def _said_warm_check(n: int, seconds: float) -> None:
    out.print(f"spark: warm-up check {n} took {seconds:.1f} s", markup=False)


@spark_app.command("down")
def spark_down() -> None:
    """Stop the warm Spark Connect server."""
    from checkers.engine import stop_server

    server = stop_server()
    said = f"stopped {server.url} (pid {server.pid})" if server else "no warm session was running"
    out.print(f"spark: {said}", markup=False)


@spark_app.command("status")
def spark_status() -> None:
    """Which Spark a check would run on now; exit 0 when a warm session answers, else 1."""
    from checkers.engine import listening, warm_url

    url = warm_url()
    if url and not listening(url):
        raise _fail(f"spark: SPARK_REMOTE names {url}, which does not answer", 1)
    out.print(f"spark: {'warm at ' + url if url else 'none running: checks start a local Spark'}")
    raise typer.Exit(0 if url else 1)


@app.command()
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


@app.command()
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
    from systems.registry import load_scenario, scenario_files, scenario_warnings
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
            spec = load_scenario(f, kafka=kafka)
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


@app.command()
def schema(
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
    from harness.reference import write_reference
    from systems.schema import schema_text

    try:
        if out_file is None:
            typer.echo(schema_text(), nl=False)
        else:
            out_file.write_text(schema_text())
            out.print(f"wrote {out_file}", markup=False)
        for path in write_reference(reference) if reference is not None else []:
            out.print(f"wrote {path}", markup=False)
    except OSError as e:
        raise _fail(f"cannot write ({e.strerror}: {e.filename})") from None


@app.command(
    help="Remove old run folders by a retention policy. Never removes a run still running, a run "
    "docs/claims-results.md or scenarios/found/ refers to, or the newest --keep-last runs of a "
    f"scenario ({DEFAULT_KEEP_LAST} unless told), not even over --max-gb."
)
def prune(
    results: Annotated[Path, typer.Option(help="results root")] = DEFAULT_ROOT,
    keep_days: Annotated[
        float, typer.Option(min=0, help="keep a run that matched this many days")
    ] = DEFAULT_KEEP_DAYS,
    keep_failures_days: Annotated[
        float, typer.Option(min=0, help="keep a failed run (no verdict, or a mismatch) this long")
    ] = DEFAULT_KEEP_FAILURES_DAYS,
    keep_last: Annotated[
        int, typer.Option(min=1, help="keep the newest N runs of each scenario whatever their age")
    ] = DEFAULT_KEEP_LAST,
    max_gb: Annotated[
        float | None, typer.Option(min=0, help="then remove the oldest runs left over this size")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option(help="say what would be removed, remove nothing")
    ] = False,
) -> None:
    from contract.retention import Policy, apply_policy

    if not results.is_dir():
        raise _fail(f"--results {results}: no such folder")
    policy = Policy(keep_days, keep_failures_days, keep_last, max_gb)
    pruning = apply_policy(results, policy, dry_run)
    verb = "would remove" if dry_run else "removed"
    for d in pruning.removed:
        out.print(f"{verb} {d.run.path} ({_mb(d.run.size)}): {d.why}", markup=False)
    out.print(
        f"{'would free' if dry_run else 'freed'} {_mb(pruning.freed)} of "
        f"{len(pruning.decisions)} runs; {_mb(pruning.left)} left in {results}",
        markup=False,
    )


def _mb(size: int) -> str:
    return f"{size / 1024**2:.1f} MB"


@app.command()
def export(
    run_dir: Annotated[Path, typer.Argument(help="a run directory with history/")],
    jsonl: Annotated[
        bool, typer.Option("--jsonl", help="the history as plain JSONL, one file a process")
    ] = False,
    to: Annotated[
        Path | None,
        typer.Option(help="write the files here and leave the run packed (default: in place)"),
    ] = None,
    salvage: Annotated[
        bool,
        typer.Option(help="of a damaged packed file, the whole frames before the damage"),
    ] = False,
) -> None:
    """Give a run's history back as plain JSONL, byte for byte as the clients wrote it: in
    place (the run is plain again) or, with --to, as a copy."""
    from contract.packed import PackError, history_paths, unpack_history

    if not jsonl:
        raise _fail("export: say the form, --jsonl (the only one there is)")
    history = RunDir(run_dir).history
    if not history.is_dir() or not history_paths(history):
        raise _fail(f"{run_dir}: no history (history/*.jsonl or *.jsonl.zst)")
    if to is not None and to.resolve() == history.resolve():
        to = None
    try:
        written = unpack_history(history, to, salvage)
    except (PackError, OSError) as e:
        raise _fail(f"export: {e}") from None
    size = sum(p.stat().st_size for p in written)
    out.print(f"{len(written)} files, {_mb(size)}: {written[0].parent}", markup=False)


LIST_COLUMNS = ("scenario", "claim", "runs on", "expect", "description")


@app.command("list")
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


def _csv(value: str | None) -> set[str] | None:
    return {v.strip() for v in value.split(",") if v.strip()} if value else None


@app.command()
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
    with _warm_checker():
        measured = run_matrix(
            chosen,
            measured_file,
            results,
            again,
            budget_minutes * 60,
            run_timeout,
            lambda s: out.print(s, markup=False),
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


@app.command()
def chaos(
    base: Annotated[str, typer.Argument(help="base scenario: id, file, or chaos/<name>")],
    seed: Annotated[int | None, typer.Option(help="first seed (default: drawn, printed)")] = None,
    runs: Annotated[
        int, typer.Option(parser=_count(1000), help="runs, seeds SEED, SEED+1, ...")
    ] = 1,
    minutes: Annotated[float, typer.Option(min=0.5, max=60, help="traffic per run")] = 2.0,
    faults: Annotated[
        str | None, typer.Option(help="fault families, e.g. partition,kill,pause (default all)")
    ] = None,
    interval: Annotated[str, typer.Option(help="seconds between faults, LOW,HIGH")] = "5,15",
    duration: Annotated[str, typer.Option(help="seconds a fault lasts, LOW,HIGH")] = "3,15",
    quiet: Annotated[float, typer.Option(min=0, help="seconds without faults at the end")] = 20,
    mode: Annotated[str | None, typer.Option(help="Kafka mode (default: the base's first)")] = None,
    kafka: Annotated[str | None, typer.Option(help=KAFKA_HELP)] = None,
    dry_run: Annotated[bool, typer.Option(help="print the schedule, start nothing")] = False,
    results: Annotated[Path, typer.Option(help="results root")] = DEFAULT_ROOT,
) -> None:
    """Run BASE with generated fault schedules (seeded, replayable) and judge each run.

    Exit 1 when a run found a violation, else 2 when a run gave no verdict, else 0."""
    import secrets

    from chaos.generator import ChaosError, ChaosOptions
    from chaos.schedule import chaos_scenario, steps_yaml
    from harness.chaos import chaos_runs, tally
    from harness.scenario_options import check_kafka_options, where_it_runs
    from systems.registry import find_scenario, load_scenario
    from systems.scenario import ScenarioError

    _setup_logging(False)
    try:
        spec = load_scenario(find_scenario(base, SCENARIOS_DIR))
        check_kafka_options(spec, mode, kafka, build=not dry_run)
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
    with _warm_checker() if runs > 1 else contextlib.nullcontext():
        found = chaos_runs(spec, options, runs, results, mode, kafka, say)
    counts = tally(found)
    say("chaos: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    if counts["violation"]:
        raise typer.Exit(EXIT_MISMATCH)
    if counts["error"]:
        raise typer.Exit(EXIT_BAD_INPUT)


@app.command()
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


@app.command()
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
    from systems.registry import find_scenario, load_scenario
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
        spec = load_scenario(path)
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
    with _warm_checker() if runs > 1 else contextlib.nullcontext():
        run_hunt(
            record,
            targets,
            option,
            extra,
            results.resolve(),
            run_timeout or bound_of(spec),
            budget_minutes * 60,
            say,
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


@app.command()
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
    from systems.registry import find_scenario, load_scenario
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
        to_hunt = [(load_scenario(path), path) for path in paths]
        chaos_hours = hours * (1 - HUNT_SHARE) if to_hunt else hours
        with _warm_checker():
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


@app.command("show")
def show(
    run_dir: Annotated[Path, typer.Argument(help="a run directory")],
    as_json: Annotated[bool, typer.Option("--json", help="the whole verdict.json")] = False,
) -> None:
    """A run's verdict: its summary, and where its report is (--json: verdict.json itself)."""
    from checkers.verdict import summary_lines

    try:
        verdict = json.loads((run_dir / "verdict.json").read_text())
    except (OSError, ValueError) as e:
        raise _fail(f"{run_dir}: no readable verdict.json ({e})") from None
    if as_json:
        out.print_json(json.dumps(verdict))
        return
    try:
        lines = summary_lines(verdict)
    except (KeyError, TypeError) as e:
        raise _fail(f"{run_dir}: verdict.json lacks {e} (harness show --json shows it)") from None
    for line in lines:
        out.print(line, markup=False)
    if (run_dir / "report.html").exists():
        out.print(f"report: {run_dir / 'report.html'}", markup=False)


def main() -> None:
    """The `harness` command: a usage error (an unknown option, a value out of range) is one
    line and exit 2, as every other bad input."""
    forget_connect_mark()  # a new process has no Connect session open, whatever it inherited
    run_app(app)


def run_app(app: typer.Typer) -> None:
    """Runs a typer app with usage errors as one line and exit 2, and a bug as its traceback and
    exit 3 (Python's own 1 would read as a verdict that does not match)."""
    try:
        code = app(standalone_mode=False)
    except ClickException as e:
        err.print(f"error: {e.format_message()}", markup=False)
        raise SystemExit(e.exit_code) from None
    except typer.Abort:
        raise SystemExit(EXIT_INTERRUPTED) from None
    except Exception as e:  # noqa: BLE001 - a bug: its traceback, and not a verdict's code
        traceback.print_exc()
        err.print(f"error: a bug in the harness: {type(e).__name__}: {e}", markup=False)
        raise SystemExit(EXIT_BUG) from None
    raise SystemExit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
