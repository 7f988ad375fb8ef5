"""The exactly-once copier on Kafka's Java client: its build, its settings, its schema, and a run
against no cluster at all (no cluster)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from systems.kafka.clients_run import KafkaClientsRun
from systems.kafka.scenario import KafkaScenario
from systems.registry import parse_scenario
from systems.scenario import ScenarioError
from workloads.kafka import java_client
from workloads.kafka.clients import READER_NOT_CAUGHT_UP
from workloads.kafka.copier import CopierConfig, copier_java_properties, run_java_copier

RELEASE = "4.4.0"


def scenario(copier: str, system: str = "kafka") -> str:
    return f"""
id: c
expect: safe
cluster: {{system: {system}}}
workload:
  producers: [{{id: P, count: 1}}]
  readers: [{{id: r, topic: output}}]
  copiers: [{copier}]
"""


def test_the_java_client_builds_the_copier_beside_the_producer() -> None:
    d = java_client.ensure(RELEASE)
    for main in (java_client.MAIN_CLASS, java_client.COPIER_CLASS, "History"):
        assert (d / "classes" / f"{main}.class").exists()
    assert {s.stem for s in java_client.SOURCES} >= {
        java_client.MAIN_CLASS,
        java_client.COPIER_CLASS,
        "History",
    }
    assert java_client.built(RELEASE)


def test_the_java_copier_takes_the_copiers_knobs_in_the_java_clients_names() -> None:
    cfg = CopierConfig(
        "C1",
        "jepsen",
        "jepsen-copy",
        "copy",
        deadline=0,
        size=20,
        timeout_ms=15000,
        request_timeout_ms=3000,
        client="java",
        java_version=RELEASE,
    )
    props = copier_java_properties(cfg, "b:9092")
    assert all(k.startswith(("producer.", "consumer.")) for k in props)
    assert props["producer.bootstrap.servers"] == props["consumer.bootstrap.servers"] == "b:9092"
    assert props["producer.transactional.id"] == "C1"
    assert props["producer.transaction.timeout.ms"] == "15000"
    assert props["producer.delivery.timeout.ms"] == "15000"  # bounded by the transaction's
    assert props["producer.request.timeout.ms"] == "3000"
    assert props["producer.enable.idempotence"] == "true" and props["producer.acks"] == "all"
    assert props["producer.max.block.ms"] == "10000"
    assert props["consumer.group.id"] == "copy"
    assert props["consumer.isolation.level"] == "read_committed"
    assert props["consumer.enable.auto.commit"] == "false"
    assert props["consumer.auto.offset.reset"] == "earliest"
    assert props["consumer.max.poll.records"] == "20"
    assert props["consumer.default.api.timeout.ms"] == "10000"
    assert not any(k.endswith((".log_level", ".debug")) for k in props)
    named = CopierConfig("C1", "i", "o", "g", 0, transactional_id="tx-1", client="java")
    assert copier_java_properties(named, "b")["producer.transactional.id"] == "tx-1"


def test_a_copier_may_be_on_the_java_client() -> None:
    s = parse_scenario(scenario("{id: C, client: java}"))
    assert isinstance(s, KafkaScenario)
    assert s.workload.copiers[0].client == "java"
    default = parse_scenario(scenario("{id: C}"))
    assert isinstance(default, KafkaScenario)
    assert default.workload.copiers[0].client == "confluent-kafka"
    with pytest.raises(ScenarioError, match="request_timeout_ms \\+ 5"):
        parse_scenario(scenario("{id: C, client: java, delivery_timeout_ms: 10000}"))


def test_the_settings_shown_for_a_java_copier_are_the_java_clients() -> None:
    s = parse_scenario(scenario("{id: C, client: java, size: 7}"))
    run = object.__new__(KafkaClientsRun)
    run.scenario = s  # client_settings reads the scenario alone
    shown = run.client_settings()
    assert shown["copier C producer"]["max.block.ms"] == "10000"
    assert shown["copier C producer"]["transactional.id"] == "C"
    assert shown["copier C consumer"]["max.poll.records"] == "7"
    assert "bootstrap.servers" not in shown["copier C consumer"]


def test_a_copiers_default_delivery_timeout_gives_way_to_a_shorter_transaction() -> None:
    """Left at its default (30 s), the delivery timeout is never refused as if the scenario had
    written it: it becomes the transaction's; one the scenario wrote still is."""
    s = parse_scenario(scenario("{id: C, timeout_ms: 20000}"))
    assert isinstance(s, KafkaScenario)
    copier = s.workload.copiers[0]
    assert copier.effective_delivery_timeout_ms() == 20000
    run = object.__new__(KafkaClientsRun)
    run.scenario = s
    assert run.client_settings()["copier C producer"]["delivery.timeout.ms"] == "20000"
    with pytest.raises(ScenarioError, match="delivery_timeout_ms 30000 outlives"):
        parse_scenario(scenario("{id: C, timeout_ms: 20000, delivery_timeout_ms: 30000}"))


def test_the_mock_tier_has_no_java_copier() -> None:
    with pytest.raises(ScenarioError, match="copier C: the java client needs a real cluster"):
        parse_scenario(scenario("{id: C, client: java}", system="kafka-mock"))


def test_the_java_copier_runs_to_its_deadline_without_a_cluster(tmp_path: Path) -> None:
    """No broker at 127.0.0.1:1: the copier announces itself, cannot start a transactional
    producer (each initTransactions gives up after max.block.ms, between its init-txn marks),
    and ends at its deadline with the exit code of a copier that did not drain, though asked
    to."""
    cfg = CopierConfig(
        "C1",
        "jepsen",
        "jepsen-copy",
        "copy",
        deadline=time.time() + 5,
        client="java",
        java_version=RELEASE,
    )
    history = tmp_path / "history" / "C1.jsonl"
    started = time.monotonic()
    code = run_java_copier(cfg, "127.0.0.1:1", history, tmp_path, lambda: True)
    assert code == READER_NOT_CAUGHT_UP
    assert time.monotonic() - started < 25
    events = [json.loads(line) for line in history.read_text().splitlines()]
    assert [(e["type"], e["f"]) for e in events[:3]] == [
        ("ok", "open"),
        ("invoke", "init-txn"),
        ("info", "init-txn"),
    ]
    assert {(e["type"], e["f"]) for e in events[3:]} <= {
        ("invoke", "init-txn"),
        ("info", "init-txn"),
    }
    assert events[1]["value"] == {"transactional_id": "C1"}
    assert events[2]["error"].startswith("TimeoutException")
    opened = events[0]
    assert opened["process"] == opened["producer"] == "C1" and opened["system"] == "kafka"
    assert opened["stream"] is None and opened["seq"] is None and opened["msg_id"] is None
    assert opened["value"] == {
        "client": f"kafka-clients {RELEASE} (Java)",
        "transactional_id": "C1",
        "copy": {"group": "copy", "input": "jepsen"},
    }
    assert (tmp_path / "C1.java.properties").exists()
