"""Whether a check starts a warm server for the next ones (and under which opt-out it does
not), the keeper's command, its start detached from the check's command, and its lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from checkers.engine import autostart, idle
from checkers.engine.kind import CONNECT_MARK
from tests.checkers.engine.pretend import pretend_keeper
from tests.helpers import ROOT

pytestmark = pytest.mark.unit
LAPTOP: dict[str, str] = {"HOME": "/home/someone"}  # no CI, no test, nothing asked


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BJ_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_a_check_on_a_laptop_starts_one() -> None:
    assert autostart.opted_out(None, LAPTOP) is None


@pytest.mark.parametrize(
    ("master", "env", "why"),
    [
        ("local[*]", {}, "--master"),
        ("spark://host:7077", {}, "--master"),
        (None, {"SPARK_REMOTE": "sc://spark.example:15002"}, "SPARK_REMOTE"),
        (None, {autostart.WARM_ENV: "0"}, "BJ_CHECKER_WARM=0"),
        (None, {"CI": "true"}, "in CI"),
        (None, {"CI": "1"}, "in CI"),
        (None, {"PYTEST_CURRENT_TEST": "tests/x.py::test_y (call)"}, "in a test"),
        # Told not to, even where it would be told to start one.
        (None, {autostart.WARM_ENV: "0", "CI": "false"}, "BJ_CHECKER_WARM=0"),
    ],
)
def test_each_opt_out_starts_none(master: str | None, env: dict[str, str], why: str) -> None:
    said = autostart.opted_out(master, {**LAPTOP, **env})
    assert said is not None and why in said


@pytest.mark.parametrize("env", [{"CI": "true"}, {"PYTEST_CURRENT_TEST": "t (call)"}])
def test_asked_for_it_starts_one_even_in_ci_or_a_test(env: dict[str, str]) -> None:
    assert autostart.opted_out(None, {**env, autostart.WARM_ENV: "1"}) is None
    # A master named is where the check runs: nothing to ask a warm server for.
    assert autostart.opted_out("local[2]", {**env, autostart.WARM_ENV: "1"}) is not None


def test_a_start_that_failed_is_not_tried_again_for_a_while() -> None:
    failed = autostart.Failure(1_000.0, "port 15002 on 127.0.0.1 is taken by another program")
    soon = autostart.held_back(LAPTOP, failed, 1_000.0 + 3 * 60)
    assert soon is not None and "failed 3 min ago" in soon and "taken by another" in soon
    later = 1_000.0 + autostart.RETRY_MINUTES * 60
    assert autostart.held_back(LAPTOP, failed, later) is None
    assert autostart.held_back(LAPTOP, None, later) is None


def test_an_idle_time_that_is_no_number_starts_none_and_says_why() -> None:
    said = autostart.held_back({idle.IDLE_ENV: "soon"}, None, 0.0)
    assert said is not None and "BJ_CHECKER_IDLE_MINUTES='soon'" in said


def test_a_failure_is_recorded_in_one_line_and_cleared() -> None:
    assert autostart.last_failure() is None
    autostart.record_failure("the Spark Connect server did not start: boom\n  at a.b.C")
    failure = autostart.last_failure()
    assert failure is not None and failure.error == "the Spark Connect server did not start: boom"
    assert abs(failure.at - time.time()) < 60
    autostart.clear_failure()
    assert autostart.last_failure() is None


def test_the_keeper_waits_for_the_check_replaces_a_server_and_warms_with_the_command() -> None:
    argv = autostart.keeper_argv(30.0, 4242, None, ["python", "-m", "w", "warm-up"])
    assert argv[:3] == [sys.executable, "-m", autostart.KEEPER_MODULE]
    assert argv[3:] == [
        "--idle-minutes",
        "30",
        "--after",
        "4242",
        "--",
        "python",
        "-m",
        "w",
        "warm-up",
    ]
    replacing = autostart.keeper_argv(2.5, 4242, 99, [])
    assert replacing[3:] == ["--idle-minutes", "2.5", "--after", "4242", "--replace", "99"]


def test_the_keeper_is_started_detached_from_its_checks_command(
    monkeypatch: pytest.MonkeyPatch, cache: Path
) -> None:
    spawned: dict[str, Any] = {}

    def popen(argv: list[str], **kwargs: Any) -> SimpleNamespace:
        spawned.update(kwargs, argv=argv, log=kwargs["stdout"].name)
        return SimpleNamespace(pid=4243)

    monkeypatch.setattr(autostart.subprocess, "Popen", popen)
    monkeypatch.setenv(CONNECT_MARK, "1")
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    assert autostart.start_keeper(["keeper"]) == 4243
    assert spawned["argv"] == ["keeper"] and spawned["start_new_session"] is True
    assert spawned["stdin"] == subprocess.DEVNULL and spawned["stderr"] == subprocess.STDOUT
    assert spawned["log"] == str(autostart.keeper_log())
    assert CONNECT_MARK not in spawned["env"]
    assert spawned["env"]["PYTHONPATH"].split(os.pathsep) == [str(ROOT), "/elsewhere"]


def test_a_command_whose_output_is_read_to_its_end_does_not_wait_for_its_keeper(
    cache: Path,
) -> None:
    """`harness run | tee`, a test's subprocess.run: the keeper holds none of their pipes."""
    script = (
        "import sys\n"
        "from checkers.engine import autostart\n"
        "sleeper = 'import time; print(1, flush=True); time.sleep(30)'\n"
        "print(autostart.start_keeper([sys.executable, '-c', sleeper]))\n"
    )
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=25,
        check=True,
    )
    assert time.monotonic() - began < 20
    keeper = int(done.stdout)
    deadline = time.monotonic() + 10
    while autostart.keeper_log().read_text() != "1\n" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert autostart.keeper_log().read_text() == "1\n"
    os.kill(keeper, signal.SIGTERM)


def test_the_living_keeper_is_found_by_its_lock_and_stopped() -> None:
    assert autostart.living_keeper() is None and autostart.stop_keeper() is None
    with pretend_keeper(12.0) as proc:
        assert autostart.living_keeper() == {"pid": proc.pid, "idle_minutes": 12.0}
        assert autostart.stop_keeper() == proc.pid
        assert proc.wait(timeout=10) != 0
    assert autostart.living_keeper() is None  # its record outlives it; its lock does not


def test_a_keeper_is_the_only_one_while_it_lives() -> None:
    with autostart.keeping(30.0) as mine:
        assert mine
        assert autostart.living_keeper() == {"pid": os.getpid(), "idle_minutes": 30.0}
        with autostart.keeping(30.0) as other:
            assert other is False
    with autostart.keeping(5.0) as again:
        assert again


def test_a_pid_now_of_another_program_is_no_keeper_to_stop() -> None:
    """A record with a lock held by something that is no keeper (its pid reused): not signalled."""
    with autostart.keeping(30.0):
        assert autostart.stop_keeper() is None  # this process: no keeper's command line
