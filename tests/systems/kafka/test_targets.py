"""Metadata -> fault target resolution, on synthetic metadata and on the kafka-mock tier."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from systems.kafka.targets import (
    Metadata,
    PartitionState,
    TargetError,
    from_cluster_metadata,
    resolve,
    roles_held,
)
from systems.kafka_mock.cluster import MockKafkaCluster

MD = Metadata(
    brokers={1: "kafka1", 2: "kafka2", 3: "kafka3"},
    controller=2,
    partitions=(
        PartitionState("t", 0, leader=1, replicas=(1, 2, 3), isr=(1, 2)),
        PartitionState("t", 1, leader=-1, replicas=(2, 3, 1), isr=()),
    ),
    quorum=("zk1", "zk2", "zk3"),
)


@pytest.mark.parametrize(
    ("role", "expected"),
    [
        ("leader", ["kafka1"]),
        ("followers", ["kafka2", "kafka3"]),
        ("isr", ["kafka1", "kafka2"]),
        ("in-sync-followers", ["kafka2"]),
        ("out-of-sync", ["kafka3"]),
        ("replicas", ["kafka1", "kafka2", "kafka3"]),
        ("controller", ["kafka2"]),
        ("non-controllers", ["kafka1", "kafka3"]),
        ("quorum", ["zk1", "zk2", "zk3"]),
    ],
)
def test_roles_resolve_to_nodes(role: str, expected: list[str]) -> None:
    assert resolve(MD, role, "t", 0) == expected  # type: ignore[arg-type]


def test_roles_that_name_nobody_say_so() -> None:
    with pytest.raises(TargetError, match="has no leader"):
        resolve(MD, "leader", "t", 1)
    with pytest.raises(TargetError, match="no partition t/7"):
        resolve(MD, "leader", "t", 7)
    with pytest.raises(TargetError, match="needs a topic"):
        resolve(MD, "followers")
    no_controller = Metadata(MD.brokers, None, MD.partitions)
    for role in ("controller", "non-controllers", "non-controller"):
        # Not knowing the controller, "every broker but the controller" would take it too.
        with pytest.raises(TargetError, match="no active controller"):
            resolve(no_controller, role)  # type: ignore[arg-type]
    with pytest.raises(TargetError, match="no quorum"):
        resolve(no_controller, "quorum")


def test_every_role_each_node_holds() -> None:
    assert roles_held(MD, "t") == {
        "kafka1": ["leader p0", "replica p1"],  # p1 has no leader: its replicas follow nobody
        "kafka2": ["follower p0", "replica p1", "controller"],
        "kafka3": ["follower p0", "replica p1"],
    }
    assert roles_held(MD, "other") == {"kafka2": ["controller"]}
    down = Metadata({1: "kafka1"}, None, MD.partitions[:1])  # kafka2, kafka3 not registered
    assert roles_held(down, "t") == {"kafka1": ["leader p0"]}


def test_leader_is_read_live_from_the_mock_cluster() -> None:
    """kafka-mock tier: the resolved leader follows a leader move."""
    with MockKafkaCluster(brokers=3) as cluster:
        cluster.create_topic("t", partitions=1, replication_factor=3)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 3})
        for broker in (2, 3, 1):
            cluster.set_leader("t", 0, broker)
            md = from_cluster_metadata(admin.list_topics("t", timeout=10))
            assert resolve(md, "leader", "t", 0) == [f"broker{broker}"]
            assert f"broker{broker}" not in resolve(md, "followers", "t", 0)
            assert len(resolve(md, "replicas", "t", 0)) == 3


@pytest.mark.parametrize(
    ("most", "least", "text", "partition"),
    [
        # Each from Kafka 4.4.0's own Uuid.toString and ShareCoordinatorService.partitionFor
        # (Utils.abs(SharePartitionKey.asCoordinatorKey("share", id, 2).hashCode()) % 50).
        (-1, -1, "_____________________w", 9),
        (0x0FBFFFBF00000000, 1, "D7__vwAAAAAAAAAAAAAAAQ", 43),
        (-5764607523034234880, 4611686018427387904, "sAAAAAAAAABAAAAAAAAAAA", 26),
    ],
)
def test_a_share_partitions_coordinator_key_is_kafkas(
    most: int, least: int, text: str, partition: int
) -> None:
    from confluent_kafka import Uuid

    from systems.kafka.targets import (
        coordinator_partition,
        kafka_uuid,
        share_key_partition,
        share_partition_key,
    )

    assert kafka_uuid(most, least) == text
    if "_" in text or "-" in text:  # librdkafka's own text is standard base64: another key
        assert str(Uuid(most, least)) != text
    key = share_partition_key("share", text, 2)
    assert key == f"share:{text}:2" and share_key_partition(key) == 2
    assert coordinator_partition(key, 50) == partition


def test_the_share_coordinator_is_the_leader_of_its_keys_state_partition() -> None:
    from systems.kafka.targets import coordinator_of, coordinator_partition, share_partition_key

    key = share_partition_key("share", "AAAAAAAAAAAAAAAAAAAAAQ", 0)
    leaders = {coordinator_partition(key, 50): 3}
    md = Metadata(
        brokers={1: "kafka1", 2: "kafka2", 3: "kafka3"},
        controller=1,
        partitions=tuple(
            PartitionState("__share_group_state", p, leaders.get(p, 1), (1, 2, 3), (1, 2, 3))
            for p in range(50)
        ),
    )
    assert coordinator_of(md, "share-coordinator", key) == ["kafka3"]
    with pytest.raises(TargetError, match="__share_group_state does not exist yet"):
        coordinator_of(MD, "share-coordinator", key)
