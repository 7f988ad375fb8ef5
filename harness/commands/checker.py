"""The checker's commands: `harness check` (a run's history, with PySpark) and `harness spark`
(the warm Spark Connect server every check on this machine uses while it is up; a check that
finds none starts one for the next checks: checkers.engine.autostart)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from checkers.engine import HistoryError
from contract.expectations import known_expectation
from harness.commands.common import (
    EXIT_INTERRUPTED,
    JSON_VERDICT_HELP,
    MASTER_HELP,
    _fail,
    _json_alone_on_stdout,
    _print_verdict,
    err,
    out,
)


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
    idle_minutes: Annotated[
        float | None,
        typer.Option(
            help="stop it after this many minutes no check used it (default: at spark down)",
            min=1,
        ),
    ] = None,
) -> None:
    """Start a Spark Connect server that every check on this machine uses until spark down,
    warmed by a few checks of a synthetic history so a run's first check is not a cold one."""
    from checkers.engine import recorded_server, start_server
    from checkers.rehearsal import MESSAGES, warm_up

    running = recorded_server()
    if running is not None:
        out.print(f"spark: already up at {running.url} (pid {running.pid})", markup=False)
        _stop_when_idle(idle_minutes)
        return
    try:
        server = start_server(port, detached=True)
    except HistoryError as e:
        raise _fail(str(e)) from None
    out.print(f"spark: up at {server.url} (pid {server.pid}, log {server.log})", markup=False)
    _stop_when_idle(idle_minutes)
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


def _stop_when_idle(minutes: float | None) -> None:
    """A keeper stops the server after `minutes` unused, unless one keeps it already (a server
    a check started: its keeper's idle time stands)."""
    from checkers.engine import living_keeper, stop_when_idle

    if minutes is None:
        return
    keeper = living_keeper()
    if keeper is not None:
        kept = f"{keeper.get('idle_minutes', 0):g}"
        out.print(f"spark: kept already: it stops after {kept} min unused", markup=False)
        return
    try:
        stop_when_idle(minutes)
    except HistoryError as e:
        raise _fail(f"spark: up, yet nothing will stop it when idle: {e}", 1) from None
    out.print(f"spark: it stops after {minutes:g} min no check used it", markup=False)


@spark_app.command("down")
def spark_down() -> None:
    """Stop the warm Spark Connect server, whoever started it (spark up, or a check for the
    checks after it), and the keeper that would stop it when idle."""
    from checkers.engine import stop_keeper, stop_server

    keeper = stop_keeper()  # first: it would start or replace one as the server ends
    server = stop_server()
    if server is not None:
        said = f"stopped {server.url} (pid {server.pid})"
    elif keeper is not None:
        said = f"stopped the keeper that was to start one (pid {keeper})"
    else:
        said = "no warm session was running"
    out.print(f"spark: {said}", markup=False)


@spark_app.command("status")
def spark_status() -> None:
    """Which Spark a check would run on now; exit 0 when a warm session answers, else 1."""
    from checkers.engine import listening, warm_url

    url = warm_url()
    if url and not listening(url):
        raise _fail(f"spark: SPARK_REMOTE names {url}, which does not answer", 1)
    said = f"warm at {url}{_kept_said()}" if url else "none running: checks start a local Spark"
    out.print(f"spark: {said}", markup=False)
    raise typer.Exit(0 if url else 1)


def _kept_said() -> str:
    """When the warm server stops by itself, if it does."""
    import time

    from checkers.engine import last_used, living_keeper

    keeper, used = living_keeper() or {}, last_used()
    minutes = keeper.get("idle_minutes", 0)
    if minutes <= 0 or used is None:
        return ""
    ago = max(0.0, time.time() - used) / 60
    return f" (last used {ago:.0f} min ago; it stops after {minutes:g} min unused)"
