"""The warm server's kept session: one Spark Connect session that this machine's checks take
turns on, rather than one each.

A Connect session the server has not run a check in yet costs a run-sized check about 2.5 s
more than one it has (measured on 20 000 messages, each check a process of its own: 6.2 s in
a new session, 3.6-3.8 s in the kept one; not the sessions' class loaders, which were ruled
out). So the checks of this machine's warm server share one session, one check at a time: a
check that finds it taken (two checks at once) opens a session of its own, as every check did
before, and releases it when it ends.

The record (in the cache) names the server and the session; its lock is the turn. A check
that did not end cleanly may have left frames or settings in the session: the next check starts
a new one. One that raised releases the old session as it ends (checkers.engine.session); one killed
in its turn leaves it to the server, which drops it once it has been idle for its timeout.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from contract.cache import cache_root, exclusive_now


def record_file() -> Path:
    return cache_root() / "spark-connect-session.json"


@dataclass
class Turn:
    """This check's turn on the kept session of the server `server_pid`."""

    server_pid: int
    session_id: str
    _file: IO[str]
    clean: bool = True

    def renew(self) -> str:
        """A new session in place of one the server has closed (idle past its timeout)."""
        self.session_id = str(uuid.uuid4())
        self._write(clean=False)
        return self.session_id

    def spoil(self) -> None:
        """The check did not end cleanly: the next one starts a new session."""
        self.clean = False

    def _write(self, clean: bool) -> None:
        record = {"server": self.server_pid, "session": self.session_id, "clean": clean}
        self._file.seek(0)
        self._file.truncate()
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()


@contextlib.contextmanager
def turn(server_pid: int) -> Iterator[Turn | None]:
    """This check's turn on the kept session of the server `server_pid`, held until the block
    ends; None when another check holds it."""
    with exclusive_now(record_file()) as fh:
        if fh is None:
            yield None
            return
        fh.seek(0)
        kept = _read(fh.read())
        if kept is None or kept["server"] != server_pid or not kept["clean"]:
            kept = {"session": str(uuid.uuid4())}
        held = Turn(server_pid, str(kept["session"]), fh)
        held._write(clean=False)  # until this check ends cleanly
        try:
            yield held
        except BaseException:
            held.spoil()
            raise
        finally:
            held._write(clean=held.clean)


def _read(text: str) -> dict[str, object] | None:
    """The record, or None when it is none (empty, or written by another version)."""
    try:
        kept = json.loads(text)
    except ValueError:
        return None
    if not isinstance(kept, dict) or not isinstance(kept.get("session"), str):
        return None
    if not isinstance(kept.get("server"), int) or not isinstance(kept.get("clean"), bool):
        return None
    try:
        uuid.UUID(kept["session"])
    except ValueError:
        return None
    return kept
