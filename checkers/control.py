"""The run's control events: the nemesis's, and the leader/ISR and coordinator changes the
partition watch recorded (Kafka). A few rows per run, collected once, from which the checker
draws the fault steps and windows, the partitions' states and the coordinators' moves."""

from __future__ import annotations

from typing import Any

from checkers.frames import in_spark_order
from contract.history import COORDINATOR_STATE, NEMESIS_PROCESS, PARTITION_STATE, event_value

DataFrame = Any  # pyspark.sql.DataFrame; pyspark is imported where a query runs


def _F() -> Any:
    from pyspark.sql import functions as F

    return F


# Of a control event; `error`: why a nemesis step failed (a failed upgrade's, in the releases).
CONTROL = ("time", "process", "type", "f", "partition", "value", "error")


def control_rows(events: DataFrame) -> DataFrame:
    """(*CONTROL, file, line) of every nemesis event and every leader/ISR and coordinator change
    the partition watch recorded (Kafka): a few rows per run, collected once (control_events)
    for the fault steps, windows, leader-placement snapshots, the partitions' states and the
    coordinators' moves."""
    F = _F()
    watched = F.col("f").isin(PARTITION_STATE, COORDINATOR_STATE)
    return events.filter((F.col("process") == NEMESIS_PROCESS) | watched).select(
        *CONTROL, "file", "line"
    )


def control_events(rows: list[Any]) -> list[dict[str, Any]]:
    """The collected control_rows as (*CONTROL) dicts, in order (of time, then as written)."""
    return [{k: r[k] for k in CONTROL} for r in in_spark_order(rows, "time", "file", "line")]


def nemesis_events(control: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The nemesis's (time, type, f, value, error) among the control events."""
    keys = ("time", "type", "f", "value", "error")
    return [{k: e[k] for k in keys} for e in control if e["process"] == NEMESIS_PROCESS]


def partition_states(control: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The partition watch's (time, partition, value) among the control events."""
    keys = ("time", "partition", "value")
    return [{k: e[k] for k in keys} for e in control if e["f"] == PARTITION_STATE]


def coordinator_moves(control: list[dict[str, Any]]) -> list[tuple[str, str, float, float]]:
    """(role, id, left, moved) of every move of the broker coordinating an id the partition
    watch followed, from one broker to another (a spell with no leader between them is part of
    the move; the same broker back after one is no move): it happened after `left`, the last
    answer that still named the old broker, and by `moved`, the first that named the new one.
    (A history without the watch's `since` bounds a move by the state before it, wider.)"""
    named: dict[tuple[str, str], tuple[str, float]] = {}  # a broker, and the last answer naming it
    in_gap: set[tuple[str, str]] = set()  # ids whose last state had no leader
    moves = []
    for e in control:
        if e["f"] != COORDINATOR_STATE:
            continue
        v = event_value(e["value"])
        key, leader, at = (str(v.get("role")), str(v.get("key"))), v.get("leader"), float(e["time"])
        before = named.get(key)
        if before is None or leader == before[0]:
            if leader is not None:
                named[key] = (leader, at)
            in_gap.discard(key)
            continue
        old, last_named = before
        since = v.get("since")
        if key not in in_gap and isinstance(since, (int, float)):
            last_named = max(last_named, float(since))  # the answer before this one named it
        if leader is None:
            named[key] = (old, last_named)
            in_gap.add(key)
            continue
        moves.append((key[0], key[1], last_named, at))
        named[key] = (leader, at)
        in_gap.discard(key)
    return moves
