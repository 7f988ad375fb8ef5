"""What the commands share: the consoles (`out` for results, `err` for status lines and
errors), the exit codes and their meanings, the help texts several commands use, option parsers,
logging, --json's stdout, the verdict's lines and reports, and `run_app`, which runs an app with
usage errors as one line and exit 2.

Commands import the scenarios', the engine's and the nemesis' modules where they use them:
`harness check` on a warm server takes a few seconds, and importing those took a third of a
second of it. So this module, and the top of every module of harness.commands, imports only
light things (the standard library, typer, rich, contract, the checker's small modules).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import logging
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ParamSpec

import typer
from rich.console import Console

# typer vendors click; its base exception is not re-exported
from typer._click.exceptions import ClickException

from checkers.summary import summary_lines
from contract.numbers import parse_count
from harness.progress import STATUS_CONSOLE

SCENARIOS_DIR = Path(__file__).resolve().parent.parent.parent / "scenarios"
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
ONE_AT_A_TIME_HELP = (
    "start each run when the one before has ended (default: its cluster comes up while the one "
    "before is checked; no check ever runs beside a workload)"
)
STRICT_HELP = "a warning (faults that may find no traffic to test) fails it, as an error does"
MASTER_HELP = (
    "Spark master for the checker: local[*], spark://host:7077, sc://host:15002 (default: the "
    "warm Spark Connect session when one runs, else a local Spark, and a warm one started in "
    "the background for the next checks; a master named starts none)"
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


def _csv(value: str | None) -> set[str] | None:
    return {v.strip() for v in value.split(",") if v.strip()} if value else None


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


@contextlib.contextmanager
def warm_checker() -> Iterator[None]:
    """For a command that checks many runs: each run's check on one warm Spark Connect server
    (the one up already, or one that ends with this command), said in a line."""
    from checkers.engine import warm_server

    with warm_server() as url:
        if url:
            err.print(
                f"checker: every run's check on the warm Spark Connect at {url}", markup=False
            )
        yield
