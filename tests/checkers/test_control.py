"""The control events on their own: the coordinators' moves from the partition watch (no
Spark)."""

from __future__ import annotations

from typing import Any

from checkers.control import coordinator_moves

TXN = "transaction-coordinator"


def state(t: float, leader: str | None, since: float | None, key: str = "P1") -> dict[str, Any]:
    value = {"role": TXN, "key": key, "leader": leader, "since": since}
    return {
        "time": t,
        "process": "partition-watch",
        "type": "info",
        "f": "coordinator-state",
        "partition": 7,
        "value": value,
    }


def test_a_move_is_bounded_by_the_last_answer_naming_the_old_broker() -> None:
    control = [
        state(1.0, None, None),  # the internal topic still forming: no move
        state(2.0, "kafka1", 1.0),
        state(9.0, "kafka2", 8.0),  # kafka1 named until +8.0, kafka2 from +9.0
        state(12.0, None, 11.0),  # no leader: kafka2 last named at +11.0 ...
        state(14.0, "kafka2", 13.0),  # ... and back: no move
        state(20.0, None, 19.0),
        state(23.0, "kafka3", 22.0),  # kafka2 (last named at +19.0) to kafka3: one move
        state(30.0, "kafka1", 29.0, key="C1"),  # another id's first state
    ]
    assert coordinator_moves(control) == [(TXN, "P1", 8.0, 9.0), (TXN, "P1", 19.0, 23.0)]


def test_a_history_without_since_bounds_a_move_by_the_state_before_it() -> None:
    control = [state(2.0, "kafka1", None), state(9.0, "kafka2", None)]
    assert coordinator_moves(control) == [(TXN, "P1", 2.0, 9.0)]
