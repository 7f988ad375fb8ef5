"""The warm server's idle clock: the idle time asked for, the stop decision from a last-used
time (explicit times), and a check in use holding the keeper off."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from checkers.engine import idle

pytestmark = pytest.mark.unit
MINUTE = 60.0


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BJ_CACHE_DIR", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize(
    ("env", "minutes"),
    [
        ({}, 30.0),
        ({idle.IDLE_ENV: ""}, 30.0),
        ({idle.IDLE_ENV: "5"}, 5.0),
        ({idle.IDLE_ENV: "2.5"}, 2.5),
    ],
)
def test_the_idle_time_is_thirty_minutes_unless_told(env: dict[str, str], minutes: float) -> None:
    assert idle.idle_minutes(env) == minutes


@pytest.mark.parametrize("text", ["x", "0", "-3", "inf", "nan"])
def test_an_idle_time_that_is_no_positive_number_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=idle.IDLE_ENV):
        idle.idle_minutes({idle.IDLE_ENV: text})


@pytest.mark.parametrize(
    ("unused_for", "stops"),
    [
        (0.0, False),
        (29 * MINUTE, False),
        (30 * MINUTE - 0.001, False),
        (30 * MINUTE, True),
        (3600, True),
    ],
)
def test_a_server_stops_once_unused_for_its_idle_time(unused_for: float, stops: bool) -> None:
    last_used = 1_000_000.0
    assert idle.is_idle(last_used, last_used + unused_for, 30 * MINUTE) is stops


def test_an_idle_time_of_none_never_stops_it() -> None:
    assert not idle.is_idle(0.0, 1e9, 0.0)
    assert not idle.is_idle(0.0, 1e9, -1.0)


def test_a_check_marks_its_use_as_it_begins_and_ends() -> None:
    assert idle.last_used() is None
    long_ago = 1_000_000.0
    idle.touch()
    os.utime(idle.mark_file(), (long_ago, long_ago))
    with idle.in_use():
        began = idle.last_used()
        assert began is not None and began > long_ago
        os.utime(idle.mark_file(), (long_ago, long_ago))
    ended = idle.last_used()
    assert ended is not None and ended > long_ago


def test_no_keeper_stops_the_server_while_a_check_uses_it() -> None:
    with idle.in_use():
        with idle.unused() as free:
            assert free is False
        with idle.in_use():  # two checks at once use it alike
            pass
    with idle.unused() as free:
        assert free is True
