"""`harness spark down` and `status` with a warm server a check started (a pretend one and its
pretend keeper: no JVM), and `spark up --idle-minutes` handing an idle time to a keeper."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import typer

import checkers.engine
from checkers.engine import idle, session
from harness.commands import checker
from tests.checkers.engine.pretend import pretend_keeper, pretend_server, record

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BJ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    return tmp_path / "cache"


def test_spark_down_stops_a_server_a_check_started_and_its_keeper(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pretend_server() as server_proc, pretend_keeper() as keeper_proc:
        server = session.Server(
            "sc://127.0.0.1:9", server_proc.pid, "log", 0.0, True, keeper_proc.pid
        )
        record(server)
        checker.spark_down()
        assert server_proc.wait(timeout=10) != 0 and keeper_proc.wait(timeout=10) != 0
    assert capsys.readouterr().out == f"spark: stopped sc://127.0.0.1:9 (pid {server_proc.pid})\n"
    assert session.recorded_server() is None and checkers.engine.living_keeper() is None


def test_spark_down_stops_a_keeper_about_to_start_one(capsys: pytest.CaptureFixture[str]) -> None:
    with pretend_keeper() as proc:
        checker.spark_down()
        assert proc.wait(timeout=10) != 0
    said = capsys.readouterr().out
    assert said == f"spark: stopped the keeper that was to start one (pid {proc.pid})\n"
    checker.spark_down()
    assert capsys.readouterr().out == "spark: no warm session was running\n"


def test_status_says_when_a_kept_server_stops(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(checkers.engine, "warm_url", lambda: "sc://127.0.0.1:15002")
    monkeypatch.setattr(checkers.engine, "listening", lambda _url: True)
    idle.touch()
    four_minutes_ago = time.time() - 4 * 60
    os.utime(idle.mark_file(), (four_minutes_ago, four_minutes_ago))
    with pretend_keeper(30.0), pytest.raises(typer.Exit) as done:
        checker.spark_status()
    assert done.value.exit_code == 0
    assert capsys.readouterr().out == (
        "spark: warm at sc://127.0.0.1:15002 (last used 4 min ago; it stops after 30 min unused)\n"
    )


def test_spark_up_hands_its_idle_time_to_a_keeper_unless_one_keeps_the_server(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    watched: list[float] = []
    monkeypatch.setattr(checkers.engine, "stop_when_idle", watched.append)
    with pretend_server() as proc:
        record(session.Server("sc://127.0.0.1:9", proc.pid, "log", 0.0, True))
        checker.spark_up(idle_minutes=45.0)
        with pretend_keeper(30.0):
            checker.spark_up(idle_minutes=45.0)
        checker.spark_up()
    assert watched == [45.0]
    assert capsys.readouterr().out.splitlines() == [
        f"spark: already up at sc://127.0.0.1:9 (pid {proc.pid})",
        "spark: it stops after 45 min no check used it",
        f"spark: already up at sc://127.0.0.1:9 (pid {proc.pid})",
        "spark: kept already: it stops after 30 min unused",
        f"spark: already up at sc://127.0.0.1:9 (pid {proc.pid})",
    ]
