"""A kafka-mock scenario: librdkafka's mock cluster in this process, our Kafka clients as
processes, faults through the mock's API. Proves the harness; never a K-claim."""

from __future__ import annotations

import logging

import confluent_kafka
from confluent_kafka.admin import AdminClient

from contract.history import HistoryWriter
from contract.wait import wait_until
from systems.kafka.admin import ADMIN_LOG, librdkafka_log
from systems.kafka.clients_run import KafkaClientsRun
from systems.kafka.targets import Metadata, from_cluster_metadata
from systems.kafka_mock.cluster import TIER, MockKafkaCluster
from systems.kafka_mock.nemesis import MockKafkaNemesis
from systems.kafka_mock.scenario import KafkaMockScenario, KafkaMockStep

log = logging.getLogger("harness")


class KafkaMockRun(KafkaClientsRun):
    scenario: KafkaMockScenario
    nemesis: MockKafkaNemesis | None
    cluster: MockKafkaCluster | None  # None until the cluster is up (the skeleton's start)
    tier = TIER

    @property
    def bootstrap_servers(self) -> str:
        assert self.cluster is not None
        return self.cluster.bootstrap_servers

    def _metadata(self) -> Metadata:
        assert self.cluster is not None
        admin = AdminClient(
            {"bootstrap.servers": self.cluster.bootstrap_servers, "log_level": 3},
            logger=librdkafka_log(self.paths.logs / ADMIN_LOG),
        )
        return from_cluster_metadata(admin.list_topics(self.scenario.cluster.topic, timeout=10))

    def _cluster_up(self) -> None:
        c = self.scenario.cluster
        self.cluster = MockKafkaCluster(c.brokers)
        for topic in self.topics():
            self.cluster.create_topic(topic, c.partitions, c.replication_factor)
        self.manifest.images = {
            "kafka": {"name": "librdkafka mock cluster", "version": confluent_kafka.libversion()[0]}
        }
        self.manifest.bootstrap_servers = self.cluster.bootstrap_servers
        self.nemesis = MockKafkaNemesis(
            self.cluster,
            self._metadata,
            c.topic,
            HistoryWriter(self.history_dir, "nemesis", "kafka", keep_going=True),
        )

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

        self.manifest.cluster_recovered = wait_until(whole, self.scenario.timeouts.recovery)

    def _cluster_down(self) -> None:
        if self.cluster is not None:
            self.cluster.close()
