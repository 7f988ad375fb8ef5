"""The processes of runs whose harness is gone, found in /proc and stopped.

A client ends by itself within a second of its harness (workloads.lifeline); this finds what
did not: a client stuck where no signal is taken, or one of a harness older than the tie. A
client is `python -m workloads.<system>.clients ROLE RUN_DIR/logs/<process>.config.json`, and its
run's manifest names the harness that started it: a client whose parent is not that harness
is an orphan. The checker's JVM ends when its Python driver does, unless it is busy shutting
down; one whose parent is no Python process any more is an orphan too. A process of a live
run is left alone.
"""

from __future__ import annotations

import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from contract.manifest import ManifestError, read_manifest
from contract.process import alive

PROC = Path("/proc")
_CLIENT_MODULE = re.compile(r"workloads\.\w+\.clients")
# The checker's driver JVM is started with our log4j configuration (checkers.engine), in
# checkers/engine/ (checkers/ before it was there: a JVM an older harness started is one too).
_CHECKER_JVM = re.compile(
    r"-Dlog4j2\.configurationFile=file:\S*/checkers/(?:engine/)?log4j2\.properties"
)
STOP_TIMEOUT = 5.0  # seconds between SIGTERM and SIGKILL


@dataclass(frozen=True)
class Client:
    pid: int
    parent: int
    process: str  # the history's process name, from its config file's name
    run_dir: Path | None  # None: the config is not where a run keeps it

    def __str__(self) -> str:
        run = f" of {self.run_dir}" if self.run_dir else ""
        return f"client {self.process} (pid {self.pid}){run}"


@dataclass(frozen=True)
class CheckerJvm:
    pid: int
    parent: int

    def __str__(self) -> str:
        return f"checker JVM (pid {self.pid})"


def _argv(pid_dir: Path) -> list[str]:
    try:
        return (pid_dir / "cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:  # gone meanwhile, or not ours to read
        return []


def _stat(pid_dir: Path) -> list[str]:
    """/proc/PID/stat's fields after the command name: state, ppid, ...; [] when gone."""
    try:
        stat = (pid_dir / "stat").read_text()
    except OSError:
        return []
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after it.
    return stat.rsplit(")", 1)[1].split()


def _parent(pid_dir: Path) -> int:
    fields = _stat(pid_dir)
    return int(fields[1]) if fields else 0


def _client(pid_dir: Path) -> Client | None:
    argv = _argv(pid_dir)
    if len(argv) != 5 or argv[1] != "-m" or not _CLIENT_MODULE.fullmatch(argv[2]):
        return None
    config = Path(argv[4])
    if not config.is_absolute():
        try:
            config = Path(os.readlink(pid_dir / "cwd")) / config
        except OSError:
            return None
    process = config.name.removesuffix(".config.json")
    run_dir = config.parent.parent if config.parent.name == "logs" else None
    return Client(int(pid_dir.name), _parent(pid_dir), process, run_dir)


def clients(proc: Path = PROC) -> list[Client]:
    """Every client process of any run on this machine."""
    found = (_client(d) for d in proc.iterdir() if d.name.isdigit())
    return sorted((c for c in found if c is not None), key=lambda c: c.pid)


def _harness_of(client: Client) -> int | None:
    if client.run_dir is None:
        return None
    try:
        return read_manifest(client.run_dir).harness_pid
    except ManifestError:
        return None


def orphan_clients(proc: Path = PROC) -> list[Client]:
    """The clients whose parent is not the harness their run recorded."""
    return [c for c in clients(proc) if c.parent != _harness_of(c)]


def checker_jvms(proc: Path = PROC) -> list[CheckerJvm]:
    """Every checker driver JVM on this machine."""
    found = []
    for d in proc.iterdir():
        if d.name.isdigit() and any(_CHECKER_JVM.fullmatch(a) for a in _argv(d)):
            found.append(CheckerJvm(int(d.name), _parent(d)))
    return sorted(found, key=lambda j: j.pid)


def orphan_checker_jvms(proc: Path = PROC) -> list[CheckerJvm]:
    """The checker JVMs whose Python driver is gone (their parent is no Python process), but
    for the warm Spark Connect server `harness spark up` started, which has none by design (a
    server started for a command that is gone is an orphan like any other)."""
    from checkers.engine import recorded_server

    warm = recorded_server()
    return [
        j
        for j in checker_jvms(proc)
        if "python" not in " ".join(_argv(proc / str(j.parent)))
        and not (warm is not None and warm.detached and j.pid == warm.pid)
    ]


def _signal(pid: int, signum: int) -> None:
    # A client leads a process group of its own (the harness starts it in a new session):
    # the group takes anything it started with it. The checker's JVM takes its Python workers.
    if os.getpgid(pid) == pid:
        os.killpg(pid, signum)
    else:
        os.kill(pid, signum)


def stop(pid: int, timeout: float = STOP_TIMEOUT) -> str:
    """SIGTERM, then SIGKILL if the process outlives `timeout`; says how it ended."""
    try:
        _signal(pid, signal.SIGTERM)
        # A client paused by the nemesis (pause-client) holds the SIGTERM pending until it runs.
        _signal(pid, signal.SIGCONT)
    except ProcessLookupError:
        return "had ended"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return "stopped"
        time.sleep(0.1)
    try:
        _signal(pid, signal.SIGKILL)
    except ProcessLookupError:
        return "stopped"
    return "killed"
