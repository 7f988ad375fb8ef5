"""The producer's own bookkeeping: a send librdkafka refuses at once (produce() raising) is a
failed send, and the producer goes on with the next."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from contract.history import HistoryWriter
from workloads.kafka import clients
from workloads.kafka.base import ProducerConfig
from workloads.kafka.clients import run_producer

pytestmark = pytest.mark.unit


class RefusesSeqTwo:
    """A Producer whose metadata does not know the topic for one send, as brokers back from a
    power loss can answer."""

    def __init__(self, _settings: dict[str, Any]) -> None:
        self.pending: list[Callable[..., None]] = []
        self.offset = 0

    def produce(self, topic: str, value: bytes, on_delivery: Callable[..., None]) -> None:
        if json.loads(value)["seq"] == 2:
            raise KafkaException(KafkaError(KafkaError._UNKNOWN_TOPIC))
        self.pending.append(on_delivery)

    def poll(self, _timeout: float = 0) -> int:
        for report in self.pending:
            msg = SimpleNamespace(partition=lambda: 0, offset=lambda o=self.offset: o)
            self.offset += 1
            report(None, msg)
        done, self.pending = len(self.pending), []
        return done

    def flush(self, timeout: float = 0) -> int:
        self.poll()
        return 0


def test_a_send_refused_at_once_is_failed_and_the_next_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(clients, "Producer", RefusesSeqTwo)
    cfg = ProducerConfig(process="P1", topic="t", count=3, deadline=time.time() + 30)
    with HistoryWriter(tmp_path, "P1", "kafka") as history:
        run_producer(cfg, "unused:9092", history)
    events = [json.loads(x) for x in (tmp_path / "P1.jsonl").read_text().splitlines()]
    outcomes = {e["seq"]: (e["type"], e["error"]) for e in events if e["type"] != "invoke"}
    assert outcomes[1] == ("ok", None) and outcomes[3] == ("ok", None)
    assert outcomes[2][0] == "fail" and outcomes[2][1].startswith("_UNKNOWN_TOPIC: ")
    assert [e["seq"] for e in events if e["type"] == "invoke"] == [1, 2, 3]


def test_a_fatal_refusal_ends_the_producer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Fatal(RefusesSeqTwo):
        def produce(self, topic: str, value: bytes, on_delivery: Callable[..., None]) -> None:
            raise KafkaException(KafkaError(KafkaError._FATAL, "fenced", fatal=True))

    monkeypatch.setattr(clients, "Producer", Fatal)
    cfg = ProducerConfig(process="P1", topic="t", count=3, deadline=time.time() + 30)
    with HistoryWriter(tmp_path, "P1", "kafka") as history, pytest.raises(KafkaException):
        run_producer(cfg, "unused:9092", history)
    events = [json.loads(x) for x in (tmp_path / "P1.jsonl").read_text().splitlines()]
    assert [(e["seq"], e["type"]) for e in events] == [(1, "invoke"), (1, "fail")]
