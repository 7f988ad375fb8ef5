"""A real Kafka 4.4 KRaft cluster under fake clocks (the clock agent): it forms, and a broker whose
clock the harness sets an hour ahead, then two hours behind, stamps the records it leads with
that time (a topic of LogAppendTime: the leader's own clock writes each record's timestamp),
while a broker left alone stamps true time."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer, TopicPartition

from compose.cli import ComposeError
from contract.wait import wait_until
from systems.kafka.admin import KafkaAdmin
from systems.kafka.cluster import KafkaCluster, KafkaUnavailable, choose_kafka_image
from systems.kafka.config import KafkaClusterConfig
from tests.conftest import missing

pytestmark = [pytest.mark.cluster]
BROKERS = {1, 2, 3}  # their node ids


def stamped_offset(cluster: KafkaCluster, topic: str) -> float:
    """A record written now to `topic`'s one partition: its LogAppendTime less the host's time
    when it was acknowledged, in seconds."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    producer.produce(topic, b"x")
    assert producer.flush(30) == 0
    acked = time.time()
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "group.id": f"g-{time.time()}",
         "enable.auto.commit": False}
    )  # fmt: skip
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        consumer.assign([TopicPartition(topic, 0, high - 1)])
        msg = None
        deadline = time.time() + 30
        while msg is None and time.time() < deadline:
            msg = consumer.poll(1)
        assert msg is not None and msg.error() is None, msg and msg.error()
        kind, millis = msg.timestamp()
        assert kind == TIMESTAMP_LOG_APPEND_TIME
        return millis / 1000 - acked
    finally:
        consumer.close()


def test_a_brokers_fake_clock_stamps_the_records_it_leads(
    docker_client: Any, tmp_path: Path
) -> None:
    try:
        choose_kafka_image(None, "kraft", docker_client, "4.4")
    except KafkaUnavailable as e:
        missing(f"Kafka 4.4 not run: {e}")
    cfg = KafkaClusterConfig(mode="kraft", kafka_line="4.4", fake_clock=True)
    cluster = KafkaCluster(cfg, tmp_path / "cluster", f"clock-{os.getpid()}")
    admin = KafkaAdmin(cluster, "skewed")
    stamped = {"topic.config": {"message.timestamp.type": "LogAppendTime"}}
    try:
        cluster.up(240, lambda: admin.registered_brokers() >= BROKERS)
        assert cluster.clocks is not None
        # Led by kafka1 (skewed), then by kafka2 (true), each alone.
        admin.create_topic(1, 1, [[1]], stamped["topic.config"], 60, name="on-kafka1")
        admin.create_topic(1, 1, [[2]], stamped["topic.config"], 60, name="on-kafka2")
        assert -3 < stamped_offset(cluster, "on-kafka1") < 3
        cluster.clocks.set_offset(["kafka1"], 3600)
        assert 3597 < stamped_offset(cluster, "on-kafka1") < 3603
        assert -3 < stamped_offset(cluster, "on-kafka2") < 3
        cluster.clocks.set_offset(["kafka1"], -7200)
        assert -7203 < stamped_offset(cluster, "on-kafka1") < -7197
        cluster.clocks.reset()
        assert -3 < stamped_offset(cluster, "on-kafka1") < 3
        assert wait_until(lambda: admin.registered_brokers() >= BROKERS, 30, interval=1)
    except ComposeError as e:
        pytest.fail(f"{e} (logs: {tmp_path / 'logs'})")
    finally:
        cluster.save_logs(tmp_path / "logs")
        cluster.down()
