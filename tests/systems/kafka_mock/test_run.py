"""The kafka-mock tier: librdkafka's mock cluster, our Kafka clients, history and checker.

Labelled as the mock tier throughout: it proves our code, not Kafka's replication.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError

from checkers.run import check_run
from contract.history import HistoryWriter
from systems.kafka_mock.cluster import TIER, MockKafkaCluster
from workloads.kafka.base import ProducerConfig, producer_settings
from workloads.kafka.clients import ReaderConfig, delivery_outcome, read_all, run_producer


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (KafkaError._MSG_TIMED_OUT, "info"),  # may have been written
        (KafkaError._TRANSPORT, "info"),
        (KafkaError._TIMED_OUT, "info"),
        (KafkaError._ALL_BROKERS_DOWN, "info"),
        (KafkaError._PURGE_INFLIGHT, "info"),
        (KafkaError.NOT_ENOUGH_REPLICAS, "info"),  # an earlier retry may have been written
        (KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND, "info"),  # written to the leader
        (KafkaError.NOT_LEADER_FOR_PARTITION, "info"),
        (KafkaError.REQUEST_TIMED_OUT, "info"),
        (KafkaError._PURGE_QUEUE, "fail"),
        (KafkaError._UNKNOWN_TOPIC, "fail"),
        (KafkaError.MSG_SIZE_TOO_LARGE, "fail"),  # rejected alike on every attempt
        (KafkaError.INVALID_RECORD, "fail"),
        (KafkaError.TOPIC_AUTHORIZATION_FAILED, "fail"),
    ],
)
def test_delivery_report_outcomes(code: int, expected: str) -> None:
    type_, error = delivery_outcome(KafkaError(code))
    assert type_ == expected
    assert error and KafkaError(code).name() in error
    assert delivery_outcome(None) == ("ok", None)


def test_producer_settings_are_explicit() -> None:
    cfg = ProducerConfig(
        process="P",
        topic="t",
        count=1,
        deadline=0,
        acks="1",
        enable_idempotence=True,
        retries=0,
        max_in_flight=1,
    )
    s = producer_settings(cfg, "127.0.0.1:1")
    assert s["acks"] == "1" and s["enable.idempotence"] is True and s["retries"] == 0
    assert s["max.in.flight.requests.per.connection"] == 1
    assert {"delivery.timeout.ms", "request.timeout.ms"} <= s.keys()


@pytest.mark.spark
def test_mock_tier_end_to_end_through_the_checker(spark: Any, tmp_path: Path) -> None:
    run = tmp_path / "run"
    history = run / "history"
    with MockKafkaCluster(brokers=3) as cluster:
        cluster.create_topic("jepsen", partitions=3, replication_factor=3)
        cfg = ProducerConfig(
            process="P",
            topic="jepsen",
            count=400,
            deadline=time.time() + 60,
            rate=100,
            delivery_timeout_ms=2000,
            request_timeout_ms=1000,
        )
        with HistoryWriter(history, "P", "kafka") as w:
            producer = threading.Thread(
                target=run_producer, args=(cfg, cluster.bootstrap_servers, w)
            )
            producer.start()
            time.sleep(0.8)
            # A rejected record: the next Produce request answers MSG_SIZE_TOO_LARGE.
            cluster.push_produce_errors([KafkaError.MSG_SIZE_TOO_LARGE])
            time.sleep(0.5)
            for broker in cluster.brokers:  # every broker down past the delivery timeout
                cluster.broker_down(broker)
            time.sleep(3.0)
            for broker in cluster.brokers:
                cluster.broker_up(broker)
            producer.join(timeout=90)
            assert not producer.is_alive()
        with HistoryWriter(history, "reader", "kafka") as w:
            reader = ReaderConfig(
                process="reader", topic="jepsen", group="reader", deadline=time.time() + 60
            )
            assert read_all(reader, cluster.bootstrap_servers, w, lambda: True)
    (run / "manifest.json").write_text(json.dumps({"tier": TIER, "groups": ["reader"]}))

    sends = [json.loads(x) for x in (history / "P.jsonl").read_text().splitlines()]
    completions = [e for e in sends if e["type"] != "invoke"]
    assert len(completions) == len([e for e in sends if e["type"] == "invoke"]) == 400
    ok = [e for e in completions if e["type"] == "ok"]
    assert ok and all(e["partition"] is not None and e["offset"] is not None for e in ok)
    timed_out = [e for e in completions if e["type"] == "info"]
    assert any("_MSG_TIMED_OUT" in e["error"] for e in timed_out), "brokers down: no info"
    rejected = [e for e in completions if e["type"] == "fail"]
    assert rejected and all("MSG_SIZE_TOO_LARGE" in e["error"] for e in rejected)

    verdict = check_run(run, spark=spark)
    assert verdict["tier"] == TIER and verdict["counts_toward_claim"] is False
    reader_counts = verdict["groups"]["reader"]
    assert reader_counts["acked"] == len(ok)
    assert reader_counts["lost"] == 0  # the mock keeps every acknowledged record
    assert reader_counts["unexpected"] == 0
    # A rejected record was never written, so it cannot be read back.
    read_ids = {
        json.loads(x)["msg_id"] for x in (history / "reader.jsonl").read_text().splitlines()
    }
    assert not read_ids & {e["msg_id"] for e in rejected}
    assert "kafka-mock" in (run / "summary.txt").read_text()


@pytest.mark.spark
def test_group_reader_records_commits_and_the_checker_counts_their_failures(
    spark: Any, tmp_path: Path
) -> None:
    """K25's plumbing on the mock tier: a consumer-group reader commits every N records; commits
    the coordinator refuses are history lines (f: commit, fail) that expect_errors can demand."""
    run = tmp_path / "run"
    history = run / "history"
    offset_commit_api = 8
    with MockKafkaCluster(brokers=3) as cluster:
        cluster.create_topic("jepsen", partitions=2, replication_factor=3)
        cfg = ProducerConfig(process="P", topic="jepsen", count=300, deadline=time.time() + 60)
        with HistoryWriter(history, "P", "kafka") as w:
            run_producer(cfg, cluster.bootstrap_servers, w)
        # The first two commits are refused as if __consumer_offsets were under its min ISR
        # (librdkafka tries a commit three times: six refusals fail two commits).
        cluster.push_request_errors(offset_commit_api, [KafkaError.NOT_ENOUGH_REPLICAS] * 6)
        with HistoryWriter(history, "group-reader", "kafka") as w:
            reader = ReaderConfig(
                process="group-reader",
                topic="jepsen",
                group="group-reader",
                deadline=time.time() + 60,
                mode="group",
                commit_every=50,
            )
            assert read_all(reader, cluster.bootstrap_servers, w, lambda: True)
    spec = {"expect_errors": [{"f": "commit", "error": "NOT_ENOUGH_REPLICAS"}]}
    manifest = {"tier": TIER, "groups": ["group-reader"], "expect": "safe", "scenario_spec": spec}
    (run / "manifest.json").write_text(json.dumps(manifest))

    events = [json.loads(x) for x in (history / "group-reader.jsonl").read_text().splitlines()]
    commits = [e for e in events if e["f"] == "commit" and e["type"] != "invoke"]
    assert [e["type"] for e in commits[:2]] == ["fail", "fail"]
    assert all("NOT_ENOUGH_REPLICAS" in e["error"] for e in commits[:2])
    assert commits[-1]["type"] == "ok" and commits[-1]["value"]  # offsets committed at the end
    verdict = check_run(run, spark=spark)
    assert verdict["errors"]["commit"] == {"NOT_ENOUGH_REPLICAS": 2}
    assert verdict["groups"]["group-reader"]["lost"] == 0
    assert verdict["matched"], verdict["reason"]
    # Demanding an error nobody saw makes the verdict a mismatch.
    spec["expect_errors"].append({"f": "send", "error": "NOT_ENOUGH_REPLICAS"})
    (run / "manifest.json").write_text(json.dumps(manifest))
    again = check_run(run, spark=spark)
    assert not again["matched"] and "no send failed with NOT_ENOUGH_REPLICAS" in again["reason"]
