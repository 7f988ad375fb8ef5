"""The partition watch records a partition's leader and ISR when they change, and nothing when
no broker answers; it stops within its bound."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from contract.history import HistoryWriter
from systems.kafka.targets import coordinator_partition
from systems.kafka.watch import PartitionWatch


class Answers:
    """list_topics as a client sees it: a scripted sequence of (leader, isr) or an error."""

    def __init__(self, script: list[tuple[int, list[int]] | Exception]) -> None:
        self.script = script

    def poll(self, timeout: float) -> int:
        return 0  # no log lines queued

    def list_topics(self, topic: str, timeout: float) -> Any:
        step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(step, Exception):
            raise step
        leader, isr = step
        partition = SimpleNamespace(leader=leader, isrs=isr)
        t = SimpleNamespace(error=None, partitions={0: partition})
        return SimpleNamespace(topics={topic: t}, orig_broker_id=1)


def test_changes_are_recorded_once_each_and_silence_is_not_a_state(tmp_path: Path) -> None:
    script: list[tuple[int, list[int]] | Exception] = [
        (2, [2, 3, 4]),
        (2, [2, 3, 4]),
        (2, [2, 3]),
        RuntimeError("timed out"),
        (3, [3]),
        (-1, [3]),
    ]
    node_of = {1: "kafka1", 2: "kafka2", 3: "kafka3", 4: "kafka4"}
    watch = PartitionWatch(
        Answers(script), "t", node_of, HistoryWriter(tmp_path, "partition-watch", "kafka")
    )
    for _ in range(6):
        try:
            watch.poll_once()
        except RuntimeError:
            pass
    watch.stop()
    lines = [json.loads(x) for x in (tmp_path / "partition-watch.jsonl").read_text().splitlines()]
    assert [(e["value"]["leader"], e["value"]["isr"]) for e in lines] == [
        ("kafka2", ["kafka2", "kafka3", "kafka4"]),
        ("kafka2", ["kafka2", "kafka3"]),
        ("kafka3", ["kafka3"]),
        (None, ["kafka3"]),
    ]
    assert {(e["f"], e["type"], e["partition"], e["value"]["answered_by"]) for e in lines} == {
        ("partition-state", "info", 0, "kafka1")
    }


def test_the_thread_stops_within_its_bound(tmp_path: Path) -> None:
    watch = PartitionWatch(
        Answers([(1, [1])]), "t", {1: "kafka1"}, HistoryWriter(tmp_path, "w", "kafka")
    )
    watch.start()
    time.sleep(1.5)
    started = time.monotonic()
    watch.stop()
    assert time.monotonic() - started < 3
    assert len((tmp_path / "w.jsonl").read_text().splitlines()) == 1


class InternalTopics:
    """list_topics of the workload topic (leader 1) and of __transaction_state, whose
    partitions' leaders follow a script (None: the internal topic does not exist yet)."""

    def __init__(self, script: list[dict[int, int] | None]) -> None:
        self.script = script

    def poll(self, timeout: float) -> int:
        return 0  # no log lines queued

    def list_topics(self, topic: str, timeout: float) -> Any:
        if topic == "__transaction_state":
            leaders = self.script.pop(0) if len(self.script) > 1 else self.script[0]
            if leaders is None:
                return SimpleNamespace(topics={}, orig_broker_id=1)
        else:
            leaders = {0: 1}
        partitions = {p: SimpleNamespace(leader=b, isrs=[b]) for p, b in leaders.items()}
        t = SimpleNamespace(error=None, partitions=partitions)
        return SimpleNamespace(topics={topic: t}, orig_broker_id=1)


def test_a_transactional_ids_coordinator_is_recorded_when_it_moves(tmp_path: Path) -> None:
    # Of 4 partitions, "P1" hashes to 1 and "C1" to 2 (Java's String.hashCode, as Kafka).
    assert (coordinator_partition("P1", 4), coordinator_partition("C1", 4)) == (1, 2)
    script: list[dict[int, int] | None] = [
        None,  # no client has asked for a coordinator yet
        {0: 3, 1: 1, 2: 1, 3: 3},
        {0: 2, 1: 2, 2: 1, 3: 3},  # P1's moved; partition 0's move is nobody's
        {0: 2, 1: 2, 2: -1, 3: 3},  # C1's has no leader
    ]
    watch = PartitionWatch(
        InternalTopics(script),
        "t",
        {1: "kafka1", 2: "kafka2", 3: "kafka3"},
        HistoryWriter(tmp_path, "partition-watch", "kafka"),
        [("transaction-coordinator", "P1"), ("transaction-coordinator", "C1")],
    )
    for _ in range(len(script)):  # the script is consumed as it is asked
        watch.poll_once()
    watch.stop()
    lines = [json.loads(x) for x in (tmp_path / "partition-watch.jsonl").read_text().splitlines()]
    coordinators = [e for e in lines if e["f"] == "coordinator-state"]
    assert [(e["value"]["key"], e["partition"], e["value"]["leader"]) for e in coordinators] == [
        ("P1", 1, "kafka1"),
        ("C1", 2, "kafka1"),
        ("P1", 1, "kafka2"),
        ("C1", 2, None),
    ]
    assert {(e["stream"], e["value"]["role"]) for e in coordinators} == {
        ("__transaction_state", "transaction-coordinator")
    }
