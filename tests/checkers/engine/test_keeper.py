"""The warm server's keeper without a JVM: it stops an idle server and none in use, ends when
the server is gone, replaces a server that died or does not answer, records a start that
failed, and, as a process, waits for the check, starts, warms and stops its server."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from checkers.engine import autostart, idle, keeper, session
from tests.checkers.engine.pretend import dead_pid, pretend_keeper, pretend_server, record

pytestmark = pytest.mark.unit
MINUTE = 60.0


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BJ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    return tmp_path / "cache"


def _server(pid: int, port: int = 15002) -> session.Server:
    return session.Server(f"sc://127.0.0.1:{port}", pid, "log", 0.0, detached=True)


@pytest.fixture
def stops(monkeypatch: pytest.MonkeyPatch) -> list[session.Server | None]:
    """The servers the keeper stopped (none is: they are recorded stopped)."""
    stopped: list[session.Server | None] = []
    monkeypatch.setattr(keeper, "stop_server", lambda expected=None: stopped.append(expected))
    return stopped


def _used_at(when: float) -> None:
    idle.touch()
    os.utime(idle.mark_file(), (when, when))


def test_an_idle_server_is_stopped_and_one_used_lately_is_not(
    stops: list[session.Server | None],
) -> None:
    server = _server(4242)
    used = 1_000_000.0
    _used_at(used)
    assert not keeper.stopped_if_idle(server, 30 * MINUTE, used + 29 * MINUTE)
    assert stops == []
    assert keeper.stopped_if_idle(server, 30 * MINUTE, used + 30 * MINUTE)
    assert stops == [server]


def test_a_server_a_check_uses_is_not_stopped_however_long_ago_it_began(
    stops: list[session.Server | None],
) -> None:
    with idle.in_use():
        _used_at(1_000_000.0)
        assert not keeper.stopped_if_idle(_server(4242), 30 * MINUTE, 1e9)
    assert stops == []


def _recorded_twice_then_gone(monkeypatch: pytest.MonkeyPatch) -> session.Server:
    """The server the keeper finds recorded twice, then no more (spark down stopped it)."""
    server = _server(4242)
    looks = iter([server, server, None])
    monkeypatch.setattr(keeper, "recorded_server", lambda: next(looks))
    return server


def test_the_keeper_watches_until_its_server_is_gone_or_idle(
    monkeypatch: pytest.MonkeyPatch, stops: list[session.Server | None]
) -> None:
    server = _recorded_twice_then_gone(monkeypatch)
    slept: list[float] = []
    _used_at(time.time())
    said = keeper.keep(server, 30 * MINUTE, tick=5.0, sleep=slept.append)
    assert said.startswith("gone") and slept == [5.0, 5.0] and stops == []

    monkeypatch.setattr(keeper, "recorded_server", lambda: server)
    clock = iter([time.time(), time.time() + 31 * MINUTE])
    said = keeper.keep(server, 30 * MINUTE, tick=5.0, clock=lambda: next(clock), sleep=slept.append)
    assert said == "stopped after 30 min unused" and stops == [server]


def test_a_dead_server_is_replaced() -> None:
    record(_server(dead_pid()))
    assert keeper.replaced(4242, lambda _url: pytest.fail("a dead server is not asked"))
    assert not session.state_file().exists()


def test_a_server_that_still_does_not_answer_is_stopped_with_its_keeper() -> None:
    with pretend_server() as server_proc, pretend_keeper() as keeper_proc:
        server = _server(server_proc.pid)
        record(server)
        assert keeper.replaced(server_proc.pid, lambda url: url != server.url)
        assert server_proc.wait(timeout=10) != 0 and keeper_proc.wait(timeout=10) != 0
    assert session.recorded_server() is None


def test_a_server_that_answers_again_or_was_replaced_is_kept() -> None:
    with pretend_server() as proc:
        server = _server(proc.pid)
        record(server)
        assert not keeper.replaced(proc.pid, lambda _url: True)
        assert not keeper.replaced(proc.pid + 1, lambda _url: pytest.fail("not asked"))
        assert session.recorded_server() == server and proc.poll() is None


def test_a_start_that_failed_is_recorded_and_one_running_already_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refused(port: int, keeper: bool) -> session.Server:
        raise session.HistoryError(f"port {port} on 127.0.0.1 is taken by another program")

    monkeypatch.setattr(keeper, "start_server", refused)
    assert keeper.started(15002) is None
    failure = autostart.last_failure()
    assert failure is not None and "15002" in failure.error

    def running(port: int, keeper: bool) -> session.Server:
        raise session.AlreadyRunning("a Spark Connect server is running already")

    autostart.clear_failure()
    monkeypatch.setattr(keeper, "start_server", running)
    assert keeper.started(15002) is None and autostart.last_failure() is None


def test_a_server_that_started_clears_the_last_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    autostart.record_failure("it did not start")
    started: list[tuple[int, bool]] = []

    def start(port: int, keeper: bool) -> session.Server:
        started.append((port, keeper))
        return _server(4242, port)

    monkeypatch.setattr(keeper, "start_server", start)
    monkeypatch.setenv(keeper.PORT_ENV, "15123")
    assert keeper.started(keeper.port(dict(os.environ))) == _server(4242, 15123)
    assert started == [(15123, True)] and autostart.last_failure() is None


@pytest.mark.parametrize(
    ("text", "port"), [("", 15002), ("15123", 15123), ("80", 15002), ("x", 15002)]
)
def test_the_port_of_a_server_the_checks_start(text: str, port: int) -> None:
    assert keeper.port({keeper.PORT_ENV: text}) == port


def test_the_keeper_process_starts_warms_and_stops_its_server_once_idle(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """main() as the keeper's process runs it, its server a pretend one: it waits for the check
    (gone), starts the server, runs the warm-up with the url, and stops it once idle."""
    with pretend_server() as proc:
        server = _server(proc.pid)

        def start(port: int, keeper: bool) -> session.Server:
            record(server)
            return server

        monkeypatch.setattr(keeper, "start_server", start)
        monkeypatch.setattr(keeper, "TICK", 0.05)
        warmed = tmp_path / "warmed"
        warm_up = [
            sys.executable,
            "-c",
            f"import sys; open({str(warmed)!r}, 'w').write(sys.argv[1])",
        ]
        argv = ["--idle-minutes", "0.002", "--after", str(dead_pid()), "--", *warm_up]
        assert keeper.main(argv) == 0
        assert proc.wait(timeout=10) != 0  # stopped: its process group was signalled
    assert warmed.read_text() == server.url
    assert "stopped after 0.002 min unused" in capsys.readouterr().out
    assert session.recorded_server() is None and autostart.living_keeper() is None


def test_a_second_keeper_leaves_the_work_to_the_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(keeper, "start_server", lambda *a, **k: pytest.fail("not started twice"))
    with pretend_keeper():
        assert keeper.main(["--after", str(dead_pid())]) == 0


def test_the_keeper_of_spark_up_s_server_watches_the_one_running(
    monkeypatch: pytest.MonkeyPatch, stops: list[session.Server | None]
) -> None:
    _recorded_twice_then_gone(monkeypatch)
    monkeypatch.setattr(keeper, "start_server", lambda *a, **k: pytest.fail("it is running"))
    monkeypatch.setattr(keeper, "TICK", 0.0)
    assert keeper.main(["--idle-minutes", "30", "--watch"]) == 0
    assert stops == []


def test_a_keeper_replacing_a_server_that_answers_again_starts_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(keeper, "replaced", lambda pid, answers: False)
    monkeypatch.setattr(keeper, "start_server", lambda *a, **k: pytest.fail("not replaced"))
    assert keeper.main(["--after", str(dead_pid()), "--replace", "4242"]) == 0
