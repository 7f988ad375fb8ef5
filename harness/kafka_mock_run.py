"""A kafka-mock scenario: librdkafka's mock cluster in this process, our Kafka clients as
processes, faults through the mock's API. Proves the harness; never a K-claim."""

from __future__ import annotations

import logging
import signal
import time
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AdminClient

from compose.kafka_mock import TIER, MockKafkaCluster
from harness.history import HistoryWriter
from harness.runner import RunOptions, ScenarioRun
from harness.scenario import KafkaMockScenario, KafkaMockStep
from harness.wait import wait_until
from nemesis.kafka_mock import MockKafkaNemesis
from nemesis.kafka_targets import Metadata, from_cluster_metadata

log = logging.getLogger("harness")


class KafkaMockRun(ScenarioRun):
    scenario: KafkaMockScenario
    nemesis: MockKafkaNemesis | None
    client_module = "workloads.kafka"
    tier = TIER

    def __init__(
        self, scenario: KafkaMockScenario, scenario_file: Path | None, opts: RunOptions
    ) -> None:
        super().__init__(scenario, scenario_file, opts)
        self.cluster: MockKafkaCluster | None = None

    def groups(self) -> list[str]:
        return [r.id for r in self.scenario.workload.readers]

    def _metadata(self) -> Metadata:
        assert self.cluster is not None
        admin = AdminClient({"bootstrap.servers": self.cluster.bootstrap_servers, "log_level": 3})
        return from_cluster_metadata(admin.list_topics(self.scenario.cluster.topic, timeout=10))

    def _cluster_up(self) -> None:
        c = self.scenario.cluster
        self.cluster = MockKafkaCluster(c.brokers)
        self.cluster.create_topic(c.topic, c.partitions, c.replication_factor)
        self.manifest["images"] = {
            "kafka": {"name": "librdkafka mock cluster", "version": confluent_kafka.libversion()[0]}
        }
        self.manifest["bootstrap_servers"] = self.cluster.bootstrap_servers
        self.nemesis = MockKafkaNemesis(
            self.cluster,
            self._metadata,
            c.topic,
            HistoryWriter(self.history_dir, "nemesis", "kafka"),
        )

    def _start_clients(self, start: float) -> list[str]:
        assert self.cluster is not None
        w, t, topic = self.scenario.workload, self.scenario.timeouts, self.scenario.cluster.topic
        common = {"bootstrap_servers": self.cluster.bootstrap_servers, "topic": topic}
        read_deadline = start + t.workload + t.recovery + w.drain_timeout + 30
        for r in w.readers:
            self._spawn("reader", r.id, {**common, "group": r.id, "deadline": read_deadline})
        for p in w.producers:
            self._spawn(
                "producer",
                p.id,
                {
                    **common,
                    **p.model_dump(exclude={"id"}),
                    "deadline": start + t.workload,
                },
            )
        return [p.id for p in w.producers]

    def _apply(self, step: KafkaMockStep) -> None:
        assert self.nemesis is not None
        self.nemesis.apply(step)

    def _recover(self) -> None:
        assert self.nemesis is not None
        self.nemesis.heal_all()
        brokers = self.scenario.cluster.brokers

        def whole() -> bool:
            try:
                return len(self._metadata().brokers) == brokers
            except Exception:  # noqa: BLE001 - metadata unavailable yet
                return False

        self.manifest["cluster_recovered"] = wait_until(whole, self.scenario.timeouts.recovery)

    def _drain(self) -> None:
        readers = self.groups()
        for name in readers:
            self.clients[name].send_signal(signal.SIGUSR1)
        deadline = time.time() + self.scenario.workload.drain_timeout + 30
        codes = {name: self._wait_client(name, deadline) for name in readers}
        self.manifest["consumer_exit_codes"] = codes
        self.manifest["drain_complete"] = all(code == 0 for code in codes.values())

    def _cluster_down(self) -> None:
        if self.cluster is not None:
            self.cluster.close()
