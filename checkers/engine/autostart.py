"""A warm server started by the checks themselves: whether a check starts one for the checks
after it, and the keeper process that does (checkers.engine.keeper), found by its lock.

A check that finds no warm server runs on a local Spark, as before, and starts the keeper, a
small Python process detached from the check's command (as a build tool's daemon is), which
starts the server once that command has ended, warms it, and stops it after its idle time. It
does not wait for the server: a JVM starting on 2 busy cores and then a fresh server's first
check, the slowest it runs (28-32 s on a run-sized history: docs/checker.md), take longer than
the local check they would replace (20-40 s). And not beside the local check either: two
checker JVMs at once would each get half the cores and together twice the heap a check is
given (checkers.engine.jvm.checker_memory); the local one ends with its process.

No check starts one when told where to check (--master, SPARK_REMOTE) or told not to
(BJ_CHECKER_WARM=0), nor in CI or a test (tests/conftest.py starts the tiers' server; a test's
`harness run` uses it, or a local Spark as before), unless BJ_CHECKER_WARM=1. A start that
failed is not tried again for RETRY_MINUTES: each check would pay for it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from checkers.engine.errors import HistoryError
from checkers.engine.idle import idle_minutes
from checkers.engine.kind import CONNECT_MARK
from contract.cache import cache_root, exclusive_now, write_whole
from contract.process import alive

WARM_ENV = "BJ_CHECKER_WARM"  # 0: no check starts a server; 1: even in CI or a test
RETRY_MINUTES = 10.0
KEEPER_MODULE = "checkers.engine.keeper"
STOP_TIMEOUT = 10.0
ENGINE_ROOT = Path(__file__).resolve().parents[2]  # the directory holding the checkers package


def opted_out(master: str | None, env: Mapping[str, str]) -> str | None:
    """Why a check starts no warm server for the next ones, said by nobody (the behaviour of a
    check before checks started servers), or None when nothing forbids it."""
    if master:
        return "--master names the Spark"
    if env.get("SPARK_REMOTE"):
        return "SPARK_REMOTE names the Spark"
    wanted = env.get(WARM_ENV, "").strip()
    if wanted == "0":
        return f"{WARM_ENV}=0"
    if wanted == "1":
        return None
    if env.get("CI", "").lower() in ("1", "true", "yes"):
        return "in CI"
    if env.get("PYTEST_CURRENT_TEST"):
        return "in a test"
    return None


@dataclass(frozen=True)
class Failure:
    """The last automatic start that failed: when, and its error."""

    at: float
    error: str


def held_back(env: Mapping[str, str], failure: Failure | None, now: float) -> str | None:
    """Why a check that may start a warm server does not, said in its line; None: it starts."""
    try:
        idle_minutes(env)
    except ValueError as e:
        return f"no warm one is started: {e}"
    if failure is not None and now - failure.at < RETRY_MINUTES * 60:
        ago = max(0.0, now - failure.at) / 60
        return (
            f"no warm one is started: the last start failed {ago:.0f} min ago ({failure.error}); "
            f"tried again {RETRY_MINUTES:g} min after it"
        )
    return None


def for_next_checks(
    why: str | None, starting: bool, replace: int | None, warm_up: Sequence[str]
) -> str:
    """What a check on a local Spark for want of a warm server does for the checks after it,
    as a clause of its line: start one in the background (in place of the server `replace`,
    which did not answer: `why`), or why it does not; '' when it says nothing (opted out).
    `starting`: a server is recorded, not listening yet."""
    if opted_out(None, os.environ):
        return ""
    if why is None and (starting or living_keeper() is not None):
        return "one is starting for the next checks"
    held = held_back(os.environ, last_failure(), time.time())
    return held or _keeper_started(replace, warm_up)


def _keeper_started(replace: int | None, warm_up: Sequence[str]) -> str:
    """Starts the keeper of a server for the next checks; says so."""
    minutes = idle_minutes(os.environ)
    try:
        start_keeper(keeper_argv(minutes, os.getpid(), replace, warm_up))
    except HistoryError as e:
        return str(e)
    which = "a fresh one" if replace is not None else "a warm one"
    return (
        f"{which} starts in the background for the next checks "
        f"(it stops after {minutes:g} min unused)"
    )


def local_line(why: str | None, next_checks: str) -> str | None:
    """The check's line on why it runs on a local Spark, and what it did for the next checks."""
    if not next_checks:
        return f"checker: {why}; a local Spark instead" if why else None
    head = why or "no warm Spark Connect server"
    return f"checker: {head}; a local Spark for this check; {next_checks}"


def failure_file() -> Path:
    return cache_root() / "spark-connect.failed"


def last_failure() -> Failure | None:
    path = failure_file()
    try:
        return Failure(path.stat().st_mtime, path.read_text().strip())
    except OSError:
        return None


def record_failure(error: str) -> None:
    first = (error.strip().splitlines() or ["no error said"])[0]
    write_whole(failure_file(), first[:300] + "\n")


def clear_failure() -> None:
    failure_file().unlink(missing_ok=True)


def keeper_file() -> Path:
    """The keeper's record, {"pid", "idle_minutes"}; its lock is held while a keeper lives."""
    return cache_root() / "spark-connect-keeper.json"


def keeper_log() -> Path:
    return cache_root() / "spark-connect-keeper.log"


@contextlib.contextmanager
def keeping(idle: float) -> Iterator[bool]:
    """This process is the keeper for as long as the block runs with True; False when another
    one is."""
    with exclusive_now(keeper_file()) as fh:
        if fh is None:
            yield False
            return
        try:
            fh.truncate(0)
            fh.write(json.dumps({"pid": os.getpid(), "idle_minutes": idle}) + "\n")
            fh.flush()
            yield True
        finally:
            fh.truncate(0)


def living_keeper() -> dict[str, float] | None:
    """The living keeper's record, None when no keeper lives."""
    path = keeper_file()
    try:
        with path.open() as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return _record(path.read_text())
            fcntl.flock(fh, fcntl.LOCK_UN)
            return None
    except OSError:
        return None


def _record(text: str) -> dict[str, float]:
    """The record as the keeper wrote it; {} in the instant between its lock and its write."""
    try:
        record = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(record, dict):
        return {}
    return {k: v for k, v in record.items() if isinstance(v, int | float)}


def stop_keeper() -> int | None:
    """Ends the living keeper (and with it a server it started: it dies with its keeper);
    returns its pid, or None when none lived."""
    record = living_keeper()
    pid = int(record.get("pid", 0)) if record is not None else 0
    if pid <= 1 or not _is_keeper(pid):
        return None
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return pid


def _is_keeper(pid: int) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return KEEPER_MODULE.encode() in argv


def keeper_argv(idle: float, after: int, replace: int | None, warm_up: Sequence[str]) -> list[str]:
    """The keeper's command: start a server once process `after` has ended (in place of the
    server `replace`, if that still does not answer), warm it with `warm_up` + its url, and
    stop it after `idle` minutes unused."""
    argv = [*_keeper_command(idle), "--after", str(after)]
    if replace is not None:
        argv += ["--replace", str(replace)]
    return [*argv, "--", *warm_up] if warm_up else argv


def stop_when_idle(idle: float) -> None:
    """The recorded server (`harness spark up`'s) stops after `idle` minutes unused: a keeper
    watches it."""
    start_keeper([*_keeper_command(idle), "--watch"])


def _keeper_command(idle: float) -> list[str]:
    return [sys.executable, "-m", KEEPER_MODULE, "--idle-minutes", f"{idle:g}"]


def start_keeper(argv: Sequence[str]) -> int:
    """Starts the keeper detached: a session of its own (the terminal's ^C is its command's),
    nothing of its command's standard streams (a caller reading the command's output to its
    end would wait for the keeper's), its lines in keeper_log(). Returns its pid."""
    log = keeper_log()
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        with log.open("a") as out:
            return subprocess.Popen(
                list(argv),
                cwd=log.parent,
                env=_keeper_env(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            ).pid
    except OSError as e:
        raise HistoryError(f"cannot start the warm server's keeper: {e}") from None


def _keeper_env() -> dict[str, str]:
    env = dict(os.environ)
    # The mark of a Connect session this process opened is no fact of the keeper's.
    env.pop(CONNECT_MARK, None)
    # This very code, wherever the command ran from (a checkout, a worktree), not another copy
    # the interpreter would find from the keeper's working directory.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ENGINE_ROOT), env.get("PYTHONPATH")) if p)
    return env
