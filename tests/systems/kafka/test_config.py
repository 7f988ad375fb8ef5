"""A Kafka cluster's configuration: its nodes and their addresses."""

from __future__ import annotations

from systems.kafka.config import KafkaClusterConfig, nodes_of


def test_nodes_of_give_fixed_distinct_addresses() -> None:
    nodes = nodes_of(KafkaClusterConfig(mode="kraft-dedicated", brokers=4), "10.1.2")
    assert [n.name for n in nodes][:3] == ["controller1", "controller2", "controller3"]
    assert len({n.address for n in nodes}) == len(nodes) == 7
