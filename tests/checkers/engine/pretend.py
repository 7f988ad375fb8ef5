"""Processes that pass for the warm server and its keeper (the marks on their command lines,
the keeper's lock held), and a port something listens on: tests of what finds, replaces and
stops a warm server start no JVM."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from checkers.engine import autostart, session

SLEEPER = "import time; time.sleep(120)"
# Holds the keeper's lock and writes its record, as the keeper does, then says so and sleeps.
KEEPER = (
    "import fcntl, json, os, sys, time\n"
    "fh = open(sys.argv[1], 'a+')\n"
    "fcntl.flock(fh, fcntl.LOCK_EX)\n"
    "fh.truncate(0)\n"
    "fh.write(json.dumps({'pid': os.getpid(), 'idle_minutes': float(sys.argv[2])}))\n"
    "fh.flush()\n"
    "print('held', flush=True)\n"
    "time.sleep(120)\n"
)


@contextlib.contextmanager
def pretend_server() -> Iterator[subprocess.Popen[bytes]]:
    """A process with the warm server's mark, leading a process group of its own as the
    server does (it is stopped by its group)."""
    proc = subprocess.Popen([sys.executable, "-c", SLEEPER, session.ROLE], start_new_session=True)
    try:
        _wait_for_mark(proc.pid, session.ROLE)
        yield proc
    finally:
        _ended(proc)


@contextlib.contextmanager
def pretend_keeper(idle_minutes: float = 30.0) -> Iterator[subprocess.Popen[str]]:
    path = autostart.keeper_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-c", KEEPER, str(path), str(idle_minutes), autostart.KEEPER_MODULE]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "held\n"
        yield proc
    finally:
        _ended(proc)


def record(server: session.Server) -> None:
    """The state file names `server`, as start_server writes it."""
    session.state_file().parent.mkdir(parents=True, exist_ok=True)
    session.state_file().write_text(server.to_json())


def dead_pid() -> int:
    """The pid of a process that has ended."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@contextlib.contextmanager
def listening_port() -> Iterator[int]:
    """A port on 127.0.0.1 something listens on (nothing answers beyond the connection)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def _wait_for_mark(pid: int, mark: str) -> None:
    """Until the process's command line shows: Popen returns as soon as the new program's
    memory is in place, which may be before the kernel has noted where its arguments are."""
    deadline = time.monotonic() + 10
    cmdline = Path(f"/proc/{pid}/cmdline")
    while mark.encode() not in cmdline.read_bytes().split(b"\0"):
        assert time.monotonic() < deadline, f"{pid}: no {mark} on its command line"
        time.sleep(0.01)


def _ended(proc: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()
