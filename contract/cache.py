"""The harness's cache on this machine (BJ_CACHE_DIR, else ~/.cache/brokerjepsen): what is read
once from an image or a JDK and kept, written whole or not at all."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO


def cache_root() -> Path:
    return Path(os.environ.get("BJ_CACHE_DIR") or Path.home() / ".cache" / "brokerjepsen")


def write_whole(path: Path, text: str) -> None:
    """Writes `text` to `path` through a temporary file and a rename: a reader never sees half
    a file, and two writers never mix theirs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


@contextlib.contextmanager
def exclusive(lock: Path) -> Iterator[None]:
    """Holds the lock file `lock` (made if missing) for as long as the block runs: one process
    at a time, the others waiting their turn."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def exclusive_now(lock: Path) -> Iterator[IO[str] | None]:
    """The lock file `lock` (made if missing), held for as long as the block runs, when no other
    process holds it now: the file, open to read and append; None, without waiting, when one
    does."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield None
            return
        try:
            yield fh
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
