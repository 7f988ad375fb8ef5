"""Where a check runs: a warm Spark Connect server, or a Spark of its own in this process.

A check in a JVM of its own spends most of a run-sized history's time starting that JVM and
compiling its queries. A Spark Connect server (Spark's own, shipped in PySpark's jars) stays up
between checks, warm: `harness spark up` starts one on loopback, `make claims`, `make chaos` and
the test tiers start one for as long as they run, and every `harness run` or `harness check` in
between uses it. With none running a check starts its own local Spark, as before, and says so;
on a laptop it also starts one for the checks after it, which stops once idle
(checkers.engine.autostart). SPARK_REMOTE (sc://host:15002) names a Connect server elsewhere: a
Spark cluster's.

The server's state file (in the cache) says where it listens and which process it is, so a
command in another process finds it, and `harness heal` leaves it alone.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import signal
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from checkers.engine import autostart, idle, kept_session
from checkers.engine.errors import HistoryError
from checkers.engine.jvm import SMALL_INLINING, archive_options, checker_memory
from checkers.engine.kind import CONNECT_MARK, forget_connect_mark, is_connect
from checkers.engine.local import LOG4J, spark_session
from checkers.engine.tuning import CHECKER_CONF
from contract.cache import cache_root, exclusive, write_whole
from contract.process import alive

PORT = 15002  # Spark Connect's own default
START_TIMEOUT = 180.0  # seconds for the server to listen: a JVM loading Spark on 2 busy cores
STOP_TIMEOUT = 30.0
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
ROLE = "-Dbrokerjepsen.role=warm-checker"  # on the server's command line: how it is known
RETRIES = 4  # a client's retries of a call the server did not answer: about 4 s in all


@dataclass(frozen=True)
class Server:
    """A Connect server this machine started: its url, its process and where it logs."""

    url: str
    pid: int
    log: str
    started: float
    detached: bool = False  # `harness spark up`'s: outlives its command, spared by heal
    owner: int = 0  # the process it dies with, unless detached

    def to_json(self) -> str:
        return json.dumps(self.__dict__, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Server | None:
        """The record, or None when it is not one (a file another version or a person wrote)."""
        try:
            fields = json.loads(text)
            server = cls(**fields)
        except (ValueError, TypeError):
            return None
        if not (isinstance(server.pid, int) and isinstance(server.url, str)) or server.pid <= 1:
            return None
        return server


@dataclass(frozen=True)
class Where:
    """What a check ran on: `engine` is pyspark or pyspark-connect; `said` a line for people."""

    engine: str
    master: str
    said: str


def state_file() -> Path:
    return cache_root() / "spark-connect.json"


def log_file() -> Path:
    return cache_root() / "spark-connect.log"


def recorded_server() -> Server | None:
    """The server the state file names, when that process is still the server it started (a
    pid is reused after a reboot: its command line must say so); a stale file is removed."""
    with _locked():
        return _record()


def _record() -> Server | None:
    """recorded_server's work, for a caller that holds the lock."""
    try:
        server = Server.from_json(state_file().read_text())
    except OSError:
        return None
    if server is None or not _is_our_server(server.pid):
        state_file().unlink(missing_ok=True)
        return None
    return server


def warm_url() -> str | None:
    """The Connect server a check should use: SPARK_REMOTE's, else this machine's warm one
    when it listens."""
    remote = os.environ.get("SPARK_REMOTE")
    if remote:
        return remote
    server = recorded_server()
    return server.url if server and listening(server.url) else None


class AlreadyRunning(HistoryError):
    """A Spark Connect server of this machine's runs already (another command started it)."""


def start_server(port: int = PORT, detached: bool = False, keeper: bool = False) -> Server:
    """Starts a Connect server on loopback and waits until it listens. Unless `detached`, it
    ends with the process that started it (the kernel's parent-death signal, sent when the
    thread that started it ends: every caller starts it from its main thread), so it never
    outlives a command that did not ask it to. A `keeper`'s (checkers.engine.keeper) outlives
    the command that asked for it, as a detached one does, and ends with its keeper."""
    url = f"sc://127.0.0.1:{port}"
    with _locked():  # one starter at a time: the check, the start and the record together
        running = _record()
        if running is not None:
            raise AlreadyRunning(f"a Spark Connect server is running already: {running.url}")
        if listening(url):
            raise HistoryError(f"port {port} on 127.0.0.1 is taken by another program")
        proc = _spawn(port, tied=keeper or not detached)
        owner = os.getpid()
        server = Server(url, proc.pid, str(log_file()), time.time(), detached or keeper, owner)
        try:
            write_whole(state_file(), server.to_json())
        except OSError as e:
            _end(proc.pid)
            raise HistoryError(f"cannot record the Spark Connect server: {e}") from None
    try:
        _wait_listening(proc, url)
    except BaseException:  # a refusal, or ^C while it starts: nothing is left behind
        _end(proc.pid)
        with _locked():
            state_file().unlink(missing_ok=True)
        raise
    return server


def _spawn(port: int, tied: bool) -> subprocess.Popen[bytes]:
    log, workdir = log_file(), cache_root() / "spark-connect"
    try:
        # Its own working directory, holding nothing: a relative path that reached it would
        # fail there rather than name another run's files.
        workdir.mkdir(parents=True, exist_ok=True)
        with log.open("w") as out:
            return subprocess.Popen(
                _server_argv(port),
                cwd=workdir,
                env=_server_env(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_dies_with(os.getpid()) if tied else None,
            )
    except OSError as e:
        raise HistoryError(f"cannot start the Spark Connect server: {e}") from None


def _wait_listening(proc: subprocess.Popen[bytes], url: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while not listening(url):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise HistoryError(f"the Spark Connect server did not start: {_last_line(log_file())}")
        time.sleep(0.5)


def stop_server(expected: Server | None = None) -> Server | None:
    """Stops the recorded server (SIGTERM, then SIGKILL), if it is `expected` when that is
    given; returns it, or None if none ran."""
    server = recorded_server()
    if server is None or expected not in (None, server):
        return None
    _end(server.pid)
    with _locked():
        state_file().unlink(missing_ok=True)
    return server


@contextlib.contextmanager
def warm_server() -> Iterator[str | None]:
    """A warm server for a command that checks many runs: the one running already (left
    running; one still starting is waited for), or one of its own, stopped when it ends. None,
    and local checks, when it cannot start one: a slower check is no reason to stop a night's
    work."""
    url = warm_url() or _once_listening(recorded_server())
    if url is not None:
        yield url
        return
    try:
        server = start_server()
    except HistoryError as e:
        print(f"checker: no warm session ({e}); each check starts its own Spark", file=sys.stderr)
        yield None
        return
    try:
        yield server.url
    finally:
        if recorded_server() == server:
            stop_server()


def _once_listening(server: Server | None) -> str | None:
    """The url of a server another command is starting, once it listens; None when none is
    starting, or it does not listen within START_TIMEOUT."""
    deadline = time.monotonic() + START_TIMEOUT
    while server is not None and time.monotonic() < deadline:
        if listening(server.url):
            return server.url
        time.sleep(0.5)
        server = recorded_server()  # None once it has died
    return None


@contextlib.contextmanager
def checker_session(
    master: str | None, history_bytes: int | None, warm_up: Sequence[str] = ()
) -> Iterator[tuple[Any, Where]]:
    """The session a check runs on, for as long as the block runs: `master` when named
    (local[*], spark://..., or sc://... for a Connect server), else the warm server if one
    answers, else a local Spark of this process's own (which stays, as a process's Spark
    does). A warm server of this machine that does not answer (it ended while this check
    began) costs a line and a local Spark; SPARK_REMOTE's or --master's is an error. A check
    on a local Spark for want of a warm server starts one for the next checks, warmed by the
    command `warm_up` (checkers.engine.autostart), and says so."""
    if master and master.startswith("sc://"):
        with _released(connect_session(master)) as spark:
            yield spark, Where("pyspark-connect", master, f"Spark Connect at {master}")
        return
    if not master:
        with contextlib.ExitStack() as held:
            found = _warm_session(held)
            if not isinstance(found, NotWarm):
                yield found
                return
        _say_local(found, warm_up)
    master = master or "local[*]"
    said = f"Spark master {master}" if master != "local[*]" else "local Spark"
    yield spark_session(master, history_bytes), Where("pyspark", master, said)


@dataclass(frozen=True)
class NotWarm:
    """Why a check has no warm session: the server found did not answer (`why`; `unanswered`
    its pid when it is this machine's), else none was found."""

    why: str | None = None
    unanswered: int | None = None


def _warm_session(held: contextlib.ExitStack) -> tuple[Any, Where] | NotWarm:
    """The warm server's session, held until `held` closes, or why there is none."""
    url = _warm_url_in_use(held)
    if url is None:
        return NotWarm()
    try:
        spark = held.enter_context(server_session(url))
    except HistoryError as e:
        if os.environ.get("SPARK_REMOTE"):
            raise
        return NotWarm(str(e), _recorded_pid(url))
    return spark, Where("pyspark-connect", url, f"warm Spark Connect at {url}")


def _say_local(found: NotWarm, warm_up: Sequence[str]) -> None:
    """The line of a check on a local Spark for want of a warm server, once it has done what
    it does for the next checks (checkers.engine.autostart)."""
    starting = recorded_server() is not None
    next_checks = autostart.for_next_checks(found.why, starting, found.unanswered, warm_up)
    line = autostart.local_line(found.why, next_checks)
    if line:
        print(line, file=sys.stderr)


def _warm_url_in_use(held: contextlib.ExitStack) -> str | None:
    """warm_url(), with this check's use of this machine's server marked from now until the
    check ends (checkers.engine.idle): its keeper stops no server a check uses."""
    if not os.environ.get("SPARK_REMOTE") and recorded_server() is not None:
        held.enter_context(idle.in_use())  # waits while a keeper stops it, idle: then none
    return warm_url()


def _recorded_pid(url: str | None) -> int | None:
    server = recorded_server()
    return server.pid if server is not None and server.url == url else None


@contextlib.contextmanager
def server_session(url: str) -> Iterator[Any]:
    """This machine's warm server's kept session when it is free (checkers.engine.kept_session),
    else a session of this check's own; a server elsewhere (SPARK_REMOTE) gets one of its own."""
    server = None if os.environ.get("SPARK_REMOTE") else recorded_server()
    with (
        contextlib.nullcontext(None)
        if server is None or server.url != url
        else kept_session.turn(server.pid)
    ) as held:
        if held is None:
            with _released(connect_session(url)) as spark:
                yield spark
            return
        try:
            spark = connect_session(url, held.session_id)
        except SessionClosed:
            spark = connect_session(url, held.renew())
        spark.release_session_on_close = False  # stop() closes the client and keeps it
        try:
            yield spark
        except BaseException:
            spark.release_session_on_close = True  # what it held goes with it, now
            raise
        finally:
            # The check released its checkpoints (checkers.engine.release); a frame it did not
            # name is released on the server when it is collected: while the client is open.
            gc.collect()
            spark.stop()


@contextlib.contextmanager
def _released(spark: Any) -> Iterator[Any]:
    """A Connect session of this check's own, released on the server when the block ends."""
    try:
        yield spark
    finally:
        spark.stop()


def session_of(spark: Any) -> Where:
    """What a session handed in (a test's, the class archive's training) is."""
    if is_connect(spark):
        url = f"sc://{spark.client._builder.endpoint}"  # noqa: SLF001 (host:port, no API)
        return Where("pyspark-connect", url, f"Spark Connect at {url}")
    master = str(spark.sparkContext.master)
    return Where("pyspark", master, f"Spark master {master}")


class SessionClosed(HistoryError):
    """The server closed the session asked for (idle past its timeout)."""


def connect_session(url: str, session_id: str | None = None) -> Any:
    """A new Connect session to `url`, or the server's session `session_id` (a new one there
    if the server has not seen it); one line when it does not answer."""
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.client.retries import DefaultPolicy

    target = f"{url.rstrip('/')}/;session_id={session_id}" if session_id else url
    session: Any = None
    marked = CONNECT_MARK in os.environ
    try:
        session = SparkSession.builder.remote(target).create()
        # A few seconds of retries, not Spark's ten minutes: a server gone is said, not waited on.
        session.client.set_retry_policies([DefaultPolicy(max_retries=RETRIES)])
        with warnings.catch_warnings():  # the retries' end is said below, in the check's line
            warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]")
            _ = session.version  # the first call that reaches the server
        return session
    except Exception as e:  # noqa: BLE001 (grpc's errors are many: the first line says which)
        if session is not None:
            # No longer this process's default session: PySpark binds the frames a checkpoint
            # returns to that one, whichever session checkpointed them.
            session.release_session_on_close = False
            session.stop()
        if not marked:  # the local Spark a check falls back on could not start beside it
            forget_connect_mark()
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        if session_id and "SESSION_CLOSED" in str(e):
            raise SessionClosed(f"the Spark Connect session {session_id} was closed") from None
        raise HistoryError(f"the Spark Connect server at {url} did not answer: {first}") from None


def _server_argv(port: int) -> list[str]:
    import pyspark

    home = Path(pyspark.__file__).parent
    java = [
        f"-Dlog4j2.configurationFile=file:{LOG4J}",
        ROLE,
        "-XX:G1PeriodicGCInterval=60000",
        *SMALL_INLINING,
        *archive_options(),
    ]
    return [
        str(home / "bin" / "spark-submit"),
        "--class",
        SERVER_CLASS,
        "--name",
        "brokerjepsen-warm-checker",
        "--master",
        "local[*]",
        "--driver-memory",
        checker_memory(),
        "--driver-java-options",
        " ".join(java),
        *_confs(port),
    ]


def _confs(port: int) -> list[str]:
    confs = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        **CHECKER_CONF,
        # A check whose client died (a run killed at its timeout) stops soon, and its session's
        # state goes with it, rather than holding the 2 cores the next run needs.
        "spark.connect.execute.manager.detachedTimeout": "30s",
        "spark.connect.session.manager.defaultSessionTimeout": "10min",
    }
    return [a for k, v in confs.items() for a in ("--conf", f"{k}={v}")]


def _server_env() -> dict[str, str]:
    import pyspark

    env = dict(os.environ)
    env.pop("SPARK_REMOTE", None)
    env["SPARK_HOME"] = str(Path(pyspark.__file__).parent)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    # The one Python task of a check (the dependency cycles) runs this interpreter's packages.
    env["PYSPARK_PYTHON"] = sys.executable
    return env


_PRCTL = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: a forked child must not load
PR_SET_PDEATHSIG = 1


def _dies_with(parent: int) -> Callable[[], None]:
    """What the child runs before exec: SIGTERM when `parent` ends, and an exit at once if it
    ended before the child asked."""

    def arm() -> None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return arm


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """The state file's lock: one process at a time reads, writes or removes it."""
    with exclusive(state_file().with_suffix(".lock")):
        yield


def _is_our_server(pid: int) -> bool:
    """Whether `pid` is alive and is a Connect server this module started (its marker)."""
    if not alive(pid):
        return False
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return ROLE.encode() in argv


def listening(url: str) -> bool:
    """Whether something listens at the url's host and port (a server, most likely)."""
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or PORT), 1):
            return True
    except OSError:
        return False


def _end(pid: int) -> None:
    """SIGTERM to the server's process group, SIGKILL after STOP_TIMEOUT; waits for it."""
    for signum, wait in ((signal.SIGTERM, STOP_TIMEOUT), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signum)
        deadline = time.monotonic() + wait
        while alive(pid) and time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(0.2)
        if not alive(pid):
            return


def _last_line(log: Path) -> str:
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        lines = []
    return lines[-1][:300] if lines else f"no output (log: {log})"
