"""The partition watch records a partition's leader and ISR when they change, and nothing when
no broker answers; it stops within its bound."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from contract.history import HistoryWriter
from systems.kafka.watch import PartitionWatch


class Answers:
    """list_topics as a client sees it: a scripted sequence of (leader, isr) or an error."""

    def __init__(self, script: list[tuple[int, list[int]] | Exception]) -> None:
        self.script = script

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
