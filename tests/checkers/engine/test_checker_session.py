"""Which Spark a check runs on, and what it does for the checks after it, with every Spark
faked: the first check that finds no warm server starts one in the background (and none under
each opt-out), one that finds it starting leaves it be, one whose server does not answer has it
replaced, and one on a warm server marks its use."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from checkers.engine import autostart, idle, session
from checkers.engine.errors import HistoryError
from tests.checkers.engine.pretend import listening_port, pretend_keeper, pretend_server, record

pytestmark = pytest.mark.unit
WARM_UP = ("python", "-m", "warm-up")


@pytest.fixture(autouse=True)
def fakes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its cache in tmp_path, and a local Spark that is none."""
    monkeypatch.setenv("BJ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(session, "spark_session", lambda master, _size: f"local Spark {master}")


def on_a_laptop(monkeypatch: pytest.MonkeyPatch) -> None:
    """A laptop's environment: no CI, no test said, nothing asked. In the test's body: pytest
    says each phase of a test anew (PYTEST_CURRENT_TEST)."""
    for name in ("SPARK_REMOTE", "CI", "PYTEST_CURRENT_TEST", autostart.WARM_ENV, idle.IDLE_ENV):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def keepers(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The keepers' commands the checks started (none is)."""
    started: list[list[str]] = []

    def start(argv: list[str]) -> int:
        started.append(list(argv))
        return 4243

    monkeypatch.setattr(autostart, "start_keeper", start)
    return started


def _checked(master: str | None = None) -> tuple[Any, session.Where]:
    with session.checker_session(master, 1000, WARM_UP) as (spark, where):
        return spark, where


def _server_answers(monkeypatch: pytest.MonkeyPatch, error: str | None) -> None:
    @contextlib.contextmanager
    def server_session(url: str) -> Iterator[str]:
        if error:
            raise HistoryError(f"the Spark Connect server at {url} did not answer: {error}")
        yield f"session at {url}"

    monkeypatch.setattr(session, "server_session", server_session)


def test_the_first_check_runs_locally_and_starts_a_warm_server_for_the_next(
    keepers: list[list[str]], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    on_a_laptop(monkeypatch)
    spark, where = _checked()
    assert spark == "local Spark local[*]" and where.engine == "pyspark"
    [argv] = keepers
    assert argv[argv.index("--after") + 1] == str(os.getpid())
    assert argv[argv.index("--idle-minutes") + 1] == "30" and "--replace" not in argv
    assert argv[argv.index("--") + 1 :] == list(WARM_UP)
    said = capsys.readouterr().err.strip().splitlines()
    assert said == [
        "checker: no warm Spark Connect server; a local Spark for this check; a warm one starts"
        " in the background for the next checks (it stops after 30 min unused)"
    ]


@pytest.mark.parametrize(
    ("master", "env"),
    [
        ("local[*]", {}),
        ("local[2]", {}),
        (None, {autostart.WARM_ENV: "0"}),
        (None, {"CI": "true"}),
        (None, {"PYTEST_CURRENT_TEST": "tests/x.py::test_y (call)"}),
    ],
)
def test_no_check_starts_one_when_opted_out(
    master: str | None,
    env: dict[str, str],
    keepers: list[list[str]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    on_a_laptop(monkeypatch)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    spark, _where = _checked(master)
    assert spark == f"local Spark {master or 'local[*]'}"
    assert keepers == [] and capsys.readouterr().err == ""


def test_the_idle_time_asked_for_is_the_keepers(
    keepers: list[list[str]], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    on_a_laptop(monkeypatch)
    monkeypatch.setenv(idle.IDLE_ENV, "5")
    _checked()
    assert keepers[0][keepers[0].index("--idle-minutes") + 1] == "5"
    assert "it stops after 5 min unused" in capsys.readouterr().err


def test_a_check_while_one_starts_starts_no_other(
    keepers: list[list[str]], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    on_a_laptop(monkeypatch)
    with pretend_keeper():  # waiting for its check's process to end
        _checked()
    with pretend_server() as proc:  # recorded, not listening yet
        record(session.Server("sc://127.0.0.1:9", proc.pid, "log", 0.0, detached=True))
        _checked()
    assert keepers == []
    said = capsys.readouterr().err.strip().splitlines()
    assert (
        said
        == [
            "checker: no warm Spark Connect server; a local Spark for this check; one is starting"
            " for the next checks"
        ]
        * 2
    )


def test_a_server_that_does_not_answer_is_replaced_and_the_check_runs_locally(
    keepers: list[list[str]], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    on_a_laptop(monkeypatch)
    _server_answers(monkeypatch, "UNAVAILABLE")
    with pretend_server() as proc, listening_port() as port, pretend_keeper():
        url = f"sc://127.0.0.1:{port}"
        record(session.Server(url, proc.pid, "log", 0.0, detached=True))
        spark, where = _checked()
    assert spark == "local Spark local[*]" and where.said == "local Spark"
    [argv] = keepers  # its keeper lives on: the new one stops it
    assert argv[argv.index("--replace") + 1] == str(proc.pid)
    said = capsys.readouterr().err.strip()
    assert said.startswith(
        f"checker: the Spark Connect server at {url} did not answer: UNAVAILABLE;"
    )
    assert "a local Spark for this check; a fresh one starts in the background" in said


def test_opted_out_a_server_that_does_not_answer_costs_a_line_as_before(
    keepers: list[list[str]], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    on_a_laptop(monkeypatch)
    monkeypatch.setenv("CI", "true")
    _server_answers(monkeypatch, "UNAVAILABLE")
    with pretend_server() as proc, listening_port() as port:
        record(session.Server(f"sc://127.0.0.1:{port}", proc.pid, "log", 0.0))
        _checked()
    assert keepers == []
    assert capsys.readouterr().err.strip().endswith("UNAVAILABLE; a local Spark instead")


def test_a_start_that_failed_lately_is_said_not_tried(
    keepers: list[list[str]], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    on_a_laptop(monkeypatch)
    autostart.record_failure("port 15002 on 127.0.0.1 is taken by another program")
    _checked()
    assert keepers == []
    said = capsys.readouterr().err
    assert "no warm one is started: the last start failed 0 min ago (port 15002" in said


def test_a_check_on_the_warm_server_marks_its_use_and_starts_nothing(
    keepers: list[list[str]], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    on_a_laptop(monkeypatch)
    _server_answers(monkeypatch, None)
    with pretend_server() as proc, listening_port() as port:
        url = f"sc://127.0.0.1:{port}"
        record(session.Server(url, proc.pid, "log", 0.0, detached=True))
        with session.checker_session(None, 1000, WARM_UP) as (spark, where):
            assert spark == f"session at {url}" and where.said == f"warm Spark Connect at {url}"
            with idle.unused() as free:
                assert free is False  # no keeper stops it under this check
        used = idle.last_used()
    assert used is not None and keepers == [] and capsys.readouterr().err == ""
