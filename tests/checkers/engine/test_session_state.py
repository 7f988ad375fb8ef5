"""Which Spark a check uses, from the state file and SPARK_REMOTE alone (no JVM started)."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from checkers.engine import session
from tests.checkers.engine.pretend import dead_pid, pretend_server, record


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BJ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SPARK_REMOTE", raising=False)


def test_no_state_file_means_no_warm_session() -> None:
    assert session.recorded_server() is None and session.warm_url() is None


def test_a_state_file_of_a_process_gone_is_removed() -> None:
    record(session.Server("sc://127.0.0.1:15002", dead_pid(), "log", 0.0))
    assert session.recorded_server() is None
    assert not session.state_file().exists()


def test_a_live_server_that_does_not_listen_is_not_used() -> None:
    """A server still starting (its port not open) is recorded but no check uses it yet."""
    with pretend_server() as proc:
        alive = session.Server("sc://127.0.0.1:9", proc.pid, "log", 0.0)
        record(alive)
        assert session.recorded_server() == alive
        assert session.warm_url() is None


def test_a_pid_now_of_another_program_is_no_server() -> None:
    """After a reboot the recorded pid may be anybody's: stop must not signal it."""
    record(session.Server("sc://127.0.0.1:15002", os.getpid(), "log", 0.0))
    assert session.recorded_server() is None and session.stop_server() is None
    assert not session.state_file().exists()


@pytest.mark.parametrize("text", ["{", "[]", '{"url": 1, "pid": "x", "log": "", "started": 0}'])
def test_a_state_file_that_is_no_record_is_ignored(text: str) -> None:
    session.state_file().parent.mkdir(parents=True, exist_ok=True)
    session.state_file().write_text(text)
    assert session.recorded_server() is None and session.warm_url() is None


def test_spark_remote_names_a_server_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_REMOTE", "sc://spark.example:15002")
    assert session.warm_url() == "sc://spark.example:15002"


def test_stop_without_a_server_says_none() -> None:
    assert session.stop_server() is None


def test_the_warm_server_starts_from_the_archive_with_the_heap_a_checks_own_jvm_gets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from checkers.engine import jvm

    monkeypatch.setenv("BJ_CHECKER_MEMORY", "3g")
    argv = session._server_argv(15002)
    assert argv[argv.index("--driver-memory") + 1] == "3g" == jvm.checker_memory()
    assert "SharedArchiveFile" not in " ".join(argv)
    jvm.archive_path().parent.mkdir(parents=True, exist_ok=True)
    jvm.archive_path().write_bytes(b"")
    argv = session._server_argv(15002)
    java = argv[argv.index("--driver-java-options") + 1].split()
    archive = jvm.archive_options()
    assert archive and java[-len(archive) :] == archive
    assert jvm.driver_options(None).split()[: len(archive)] == archive


def test_a_command_that_checks_many_runs_waits_for_a_server_still_starting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One a check started for the next checks, say: the command starts none beside it."""
    monkeypatch.setattr(session, "start_server", lambda *a, **k: pytest.fail("one is starting"))
    with pretend_server() as proc, socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"sc://127.0.0.1:{sock.getsockname()[1]}"
        record(session.Server(url, proc.pid, "log", 0.0, detached=True))
        threading.Timer(0.5, sock.listen).start()  # it listens half a second on
        with session.warm_server() as warm:
            assert warm == url
        assert session.recorded_server() is not None  # not its own: left running


def test_a_server_that_dies_as_it_starts_is_not_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session, "start_server", lambda *a, **k: pytest.fail("not started here"))
    monkeypatch.setattr(session, "START_TIMEOUT", 30.0)
    with pretend_server() as proc:
        record(session.Server("sc://127.0.0.1:9", proc.pid, "log", 0.0, detached=True))
        threading.Timer(0.5, proc.kill).start()
        began = time.monotonic()
        assert session._once_listening(session.recorded_server()) is None
        assert time.monotonic() - began < 10
