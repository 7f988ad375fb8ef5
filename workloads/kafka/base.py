"""What every Kafka client process of ours builds on, below the plain producer and reader
(workloads.kafka.clients), the transactional producer (transactions) and the exactly-once copier
(copier): a producer's configuration and the librdkafka settings it becomes, the wait for its
start time, librdkafka's debug contexts, and a topic's partitions as the brokers' metadata says
them."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaException

from workloads.kafka.properties import properties

# The clients' logger: a line logged here reads as it did when this was workloads.kafka.clients.
log = logging.getLogger("workloads.kafka.clients")


@dataclass(frozen=True)
class ProducerConfig:
    process: str
    topic: str
    count: int
    deadline: float  # Unix time
    acks: str = "all"  # "0", "1" or "all"
    enable_idempotence: bool = False
    retries: int = 2147483647
    delivery_timeout_ms: int = 30000
    request_timeout_ms: int = 10000
    max_in_flight: int = 5
    rate: float = 0.0  # messages per second; 0 = as fast as the client takes them
    linger_ms: int = 5
    compression: str = "none"
    config: dict[str, Any] = field(default_factory=dict)  # the scenario's own librdkafka keys
    not_before: float = 0.0  # Unix time of its first send (the scenario's start_at); 0: at once
    # A restarted instance (restart-client) goes on in its producer's id space: the messages
    # carry `producer_id` (its first instance's process) from `first_seq` on.
    producer_id: str = ""
    first_seq: int = 1

    @property
    def id_space(self) -> str:
        """The producer its messages name: its own process, or its first instance's."""
        return self.producer_id or self.process


def wait_to_start(cfg: ProducerConfig) -> None:
    """A producer that starts late waits until its time (never past its deadline)."""
    time.sleep(max(0.0, min(cfg.not_before, cfg.deadline) - time.time()))


def client_diagnostics() -> dict[str, Any]:
    """librdkafka's debug contexts (BJ_RDKAFKA_DEBUG, e.g. "metadata,broker"), written to the
    client's log: which broker answered metadata and when a new leader was learnt is not in
    the history, and is how one finds out why a client did or did not see a fault."""
    contexts = os.environ.get("BJ_RDKAFKA_DEBUG", "").strip()
    return {"debug": contexts, "log_level": 7} if contexts else {}


def producer_settings(cfg: ProducerConfig, bootstrap_servers: str) -> dict[str, Any]:
    """Every setting the scenario depends on, explicit (never the client's defaults)."""
    return (
        {
            "bootstrap.servers": bootstrap_servers,
            "acks": cfg.acks,
            "enable.idempotence": cfg.enable_idempotence,
            "retries": cfg.retries,
            "delivery.timeout.ms": cfg.delivery_timeout_ms,
            "request.timeout.ms": cfg.request_timeout_ms,
            "max.in.flight.requests.per.connection": cfg.max_in_flight,
            "linger.ms": cfg.linger_ms,
            "compression.type": cfg.compression,
            "log_level": 3,
        }
        | properties(cfg.config)
        | client_diagnostics()
    )


class TopicNotFound(Exception):
    """The topic never showed partitions in this client's metadata."""


def partitions_of(consumer: Consumer, topic: str, deadline: float) -> list[int]:
    """The topic's partitions, asked until some broker's metadata holds them: a KRaft broker
    applies a new topic a moment after the one the harness asked, and a reader that took
    "no partitions" for an answer would read nothing and call itself caught up."""
    while True:
        try:
            tm = consumer.list_topics(topic, timeout=10).topics.get(topic)
            if tm is not None and tm.error is None and tm.partitions:
                return sorted(tm.partitions)
        except KafkaException as e:
            log.warning("metadata for %s: %s", topic, e)
        if time.time() >= deadline:
            raise TopicNotFound(f"topic {topic} has no partitions in the brokers' metadata")
        time.sleep(0.5)
