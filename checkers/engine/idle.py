"""The warm server's idle clock: when a check last used it, and whether one uses it now.

Each check on this machine's warm server holds the use mark (a file in the cache) shared while
it runs and touches it as it begins and ends. The server's keeper (checkers.engine.keeper)
stops the server only when it can hold the mark alone, so never under a running check however
long it takes, and when the mark is older than the idle time. A lock the kernel holds for the
process, not a pid in a file: a check killed midway leaves nothing to clean up.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator, Mapping
from pathlib import Path

from contract.cache import cache_root, exclusive_now

IDLE_ENV = "BJ_CHECKER_IDLE_MINUTES"
DEFAULT_IDLE_MINUTES = 30.0


def mark_file() -> Path:
    return cache_root() / "spark-connect.used"


def idle_minutes(env: Mapping[str, str]) -> float:
    """The idle time of a server started for the checks (BJ_CHECKER_IDLE_MINUTES, else 30);
    ValueError when the variable is no positive number."""
    text = env.get(IDLE_ENV, "").strip()
    if not text:
        return DEFAULT_IDLE_MINUTES
    try:
        minutes = float(text)
    except ValueError:
        raise ValueError(f"{IDLE_ENV}={text!r} is not a number of minutes") from None
    if not minutes > 0 or minutes == float("inf"):
        raise ValueError(f"{IDLE_ENV}={text!r}: more than 0 minutes, please")
    return minutes


def is_idle(last_used: float, now: float, idle_seconds: float) -> bool:
    """Whether a server last used at `last_used` has been idle long enough at `now` to stop;
    an idle time of 0 or less is none: it never stops by itself."""
    return idle_seconds > 0 and now - last_used >= idle_seconds


def touch() -> None:
    """Now is when the server was last used (a check on it, its start, its warm-up's end)."""
    path = mark_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


def last_used() -> float | None:
    """When a check last used the server (the mark's time), None when no mark is there."""
    try:
        return mark_file().stat().st_mtime
    except OSError:
        return None


@contextlib.contextmanager
def in_use() -> Iterator[None]:
    """This check uses the warm server until the block ends: the keeper does not stop it
    meanwhile, and the idle time counts from the block's end."""
    mark_file().parent.mkdir(parents=True, exist_ok=True)
    with mark_file().open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_SH)  # waits while the keeper stops an idle server
        try:
            touch()
            yield
        finally:
            touch()
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def unused() -> Iterator[bool]:
    """Whether no check uses the server; while the block runs with True, none begins to (one
    that tries waits for the block's end)."""
    with exclusive_now(mark_file()) as held:
        yield held is not None
