"""The warm server's kept session: checks take turns on one, a second check at once gets none,
and a check that did not end cleanly, or a new server, starts a new one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkers.engine import kept_session

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BJ_CACHE_DIR", str(tmp_path))
    return tmp_path


def _turn_id(server: int) -> str:
    with kept_session.turn(server) as held:
        assert held is not None
        return held.session_id


def test_checks_one_after_another_share_the_session() -> None:
    first = _turn_id(101)
    assert _turn_id(101) == first
    record = json.loads(kept_session.record_file().read_text())
    assert record == {"server": 101, "session": first, "clean": True}


def test_a_second_check_at_once_gets_no_turn() -> None:
    with kept_session.turn(101) as held:
        assert held is not None
        with kept_session.turn(101) as other:
            assert other is None
    assert _turn_id(101) == held.session_id


def test_a_check_that_failed_leaves_a_new_session_to_the_next() -> None:
    first = _turn_id(101)
    with pytest.raises(RuntimeError), kept_session.turn(101) as held:
        assert held is not None and held.session_id == first
        raise RuntimeError("the check failed")
    assert json.loads(kept_session.record_file().read_text())["clean"] is False
    assert _turn_id(101) != first


def test_a_check_killed_in_its_turn_leaves_a_new_session_to_the_next() -> None:
    first = _turn_id(101)
    record = {"server": 101, "session": first, "clean": False}  # what a killed turn leaves
    kept_session.record_file().write_text(json.dumps(record))
    assert _turn_id(101) != first


def test_another_server_gets_a_session_of_its_own() -> None:
    first = _turn_id(101)
    assert _turn_id(202) != first


def test_a_renewed_session_is_the_one_kept() -> None:
    with kept_session.turn(101) as held:
        assert held is not None
        old = held.session_id
        renewed = held.renew()
    assert renewed != old and _turn_id(101) == renewed


NEW_ID = "0b3c6a8e-4f1d-4e8a-9d6b-2a1f5c7e9d30"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        "[]",
        '{"session": 3}',
        '{"session": "x"}',
        f'{{"session": "{NEW_ID}"}}',
        f'{{"session": "{NEW_ID}", "server": "101", "clean": true}}',
        f'{{"session": "{NEW_ID}", "server": 101, "clean": "yes"}}',
    ],
)
def test_a_record_that_is_none_is_replaced(text: str) -> None:
    kept_session.record_file().write_text(text)
    assert len(_turn_id(101)) == 36 and _turn_id(101) != NEW_ID
