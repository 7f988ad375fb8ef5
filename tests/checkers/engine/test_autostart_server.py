"""A warm server the checks start themselves, on a real Spark Connect server: the first
`harness check` runs locally and starts one in the background, the next uses it, it stops once
idle, `harness spark down` stops it, and one that stops answering is replaced.

Nightly: each waits for a server to start and be warmed (about two minutes on 2 cores)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from checkers.engine import autostart, session
from checkers.engine.keeper import NICENESS
from checkers.synthetic import synth_run
from tests.checkers.engine.test_session import _free_port, _gone_within, _harness

pytestmark = [pytest.mark.spark, pytest.mark.nightly]
STARTED_AND_WARMED = 900.0


@pytest.fixture
def laptop(tmp_path: Path) -> dict[str, str]:
    """A laptop's checks, as far as starting a server goes (in a test, asked to), with a cache
    and a port of their own."""
    return {
        "BJ_CACHE_DIR": str(tmp_path / "cache"),
        autostart.WARM_ENV: "1",
        "BJ_CHECKER_PORT": str(_free_port()),
        "BJ_CHECKER_IDLE_MINUTES": "1",
    }


def _until(done: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(1)
    return True


def _keeper_said(env: dict[str, str], words: str, times: int = 1) -> bool:
    log = Path(env["BJ_CACHE_DIR"]) / "spark-connect-keeper.log"
    return log.is_file() and log.read_text().count(words) >= times


def _niceness(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def _checked(run: Path, env: dict[str, str]) -> str:
    done = _harness("check", str(run), env=env)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
    return done.stderr


def test_the_first_check_starts_a_warm_server_the_next_one_uses_until_idle(
    laptop: dict[str, str], tmp_path: Path
) -> None:
    run = synth_run(tmp_path / "run", 2_000)
    first = _checked(run, laptop)
    assert "a warm one starts in the background for the next checks" in first, first
    assert "checked on local Spark" in first
    assert _until(lambda: _keeper_said(laptop, "warmed"), STARTED_AND_WARMED)
    server = session.Server.from_json(
        (Path(laptop["BJ_CACHE_DIR"]) / "spark-connect.json").read_text()
    )
    # Behind a run's processes: ten steps nicer than whoever ran the check (19 at most).
    assert server is not None and _niceness(server.pid) == min(19, os.nice(0) + NICENESS)
    url = f"sc://127.0.0.1:{laptop['BJ_CHECKER_PORT']}"
    assert f"checked on warm Spark Connect at {url}" in _checked(run, laptop)
    assert _until(lambda: _keeper_said(laptop, "stopped after 1 min unused"), 180)
    assert not (Path(laptop["BJ_CACHE_DIR"]) / "spark-connect.json").exists()


def test_spark_down_stops_a_server_a_check_started(laptop: dict[str, str], tmp_path: Path) -> None:
    _checked(synth_run(tmp_path / "run", 2_000), laptop)
    state = Path(laptop["BJ_CACHE_DIR"]) / "spark-connect.json"
    assert _until(state.exists, STARTED_AND_WARMED)
    server = session.Server.from_json(state.read_text())
    assert server is not None
    down = _harness("spark", "down", env=laptop)
    assert down.returncode == 0 and "stopped" in down.stdout, down.stderr
    assert _gone_within(server.pid, 60) and not state.exists()


def test_a_server_that_stops_answering_is_replaced(laptop: dict[str, str], tmp_path: Path) -> None:
    run = synth_run(tmp_path / "run", 2_000)
    _checked(run, laptop)
    assert _until(lambda: _keeper_said(laptop, "warmed"), STARTED_AND_WARMED)
    state = Path(laptop["BJ_CACHE_DIR"]) / "spark-connect.json"
    stuck = session.Server.from_json(state.read_text())
    assert stuck is not None
    os.kill(stuck.pid, signal.SIGSTOP)  # it listens, and answers nothing
    try:
        said = _checked(run, laptop)
        assert "did not answer" in said and "a fresh one starts in the background" in said, said
        assert "checked on local Spark" in said
        assert _gone_within(stuck.pid, 120)
        assert _until(lambda: _keeper_said(laptop, "warmed", times=2), STARTED_AND_WARMED)
        assert "checked on warm Spark Connect" in _checked(run, laptop)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(stuck.pid, signal.SIGCONT)
        _harness("spark", "down", env=laptop)
