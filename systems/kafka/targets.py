"""Topology-aware fault targets for Kafka, resolved from live metadata at the moment of a fault.

A scenario names a role (the leader of a partition, its followers, the ISR, the active
controller, the control-plane quorum), never a fixed broker: leadership moves during a run.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

Role = Literal[
    "leader",
    "follower",  # one follower: the lowest broker id (stable within a run)
    "followers",
    "isr",
    "in-sync-followers",
    "out-of-sync",
    "replicas",
    "controller",
    "quorum",
    "non-controllers",
    "non-controller",  # one broker that is not the controller: the lowest id
    "brokers",
    # The broker coordinating the workload's first transactional producer (the leader of the
    # __transaction_state partition its transactional id hashes to), and its first consumer
    # group's (the leader of the __consumer_offsets partition of the group id).
    "transaction-coordinator",
    "group-coordinator",
    # The broker holding the share group's state of one partition of the workload's topic (the
    # leader of the __share_group_state partition its "group:topic-id:partition" key hashes to,
    # KIP-932): the step's `partition` says which (0 by default).
    "share-coordinator",
    # Every broker but that transaction coordinator: where the producer's records go and its
    # EndTxn does not (a hold there outlasts a transaction its client can still abort).
    "non-transaction-coordinators",
]

# What a step may name besides node lists and @labels: a role, or "stopped" (the nodes the
# nemesis has down).
SELECTOR_ROLES: frozenset[str] = frozenset(get_args(Role)) | {"stopped"}


def is_selector(name: str) -> bool:
    """A role or an @label, resolved when its step runs, rather than a node's name."""
    return name in SELECTOR_ROLES or name.startswith("@")


# The internal topic whose partition leader coordinates each coordinator role's key.
SHARE_COORDINATOR = "share-coordinator"
COORDINATOR_TOPICS = {
    "transaction-coordinator": "__transaction_state",
    "group-coordinator": "__consumer_offsets",
    SHARE_COORDINATOR: "__share_group_state",
}
# A role resolved as every broker but the one playing another (a coordinator) role.
ALL_BUT = {"non-transaction-coordinators": "transaction-coordinator"}


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (UTF-16 code units, 32-bit two's complement): how Kafka places
    a transactional or group id on a partition of its internal topic."""
    h = 0
    for unit in _utf16_units(text):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def _utf16_units(text: str) -> list[int]:
    data = text.encode("utf-16-be")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


def coordinator_partition(key: str, partitions: int) -> int:
    """The internal topic's partition for a transactional or group id: Kafka takes the hash's
    absolute value (0 for the one int without one) modulo the partition count."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def kafka_uuid(most: int, least: int) -> str:
    """A Kafka Uuid as Kafka writes it (Uuid.toString: its 16 bytes in URL-safe base64, no
    padding), from its two signed 64-bit halves; librdkafka's own text uses the standard
    alphabet, which would name another key."""
    raw = (most & (2**64 - 1)).to_bytes(8, "big") + (least & (2**64 - 1)).to_bytes(8, "big")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def share_partition_key(group: str, topic_id: str, partition: int) -> str:
    """The share coordinator's key of a share group's state of one topic partition
    (SharePartitionKey.asCoordinatorKey: group, topic id and partition, colon-separated); a
    group id has no colon here (its pattern), so the partition is what follows the last."""
    return f"{group}:{topic_id}:{partition}"


def share_key_partition(key: str) -> int:
    """The topic partition a share-partition key names."""
    return int(key.rsplit(":", 1)[1])


class TargetError(Exception):
    """A role that names no node right now (no leader, unknown partition)."""


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    leader: int  # -1 when the partition has no leader
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class Metadata:
    brokers: Mapping[int, str]  # broker id -> node name
    controller: int | None
    partitions: tuple[PartitionState, ...]
    quorum: tuple[str, ...] = ()  # ZooKeeper ensemble or KRaft controller nodes

    def partition(self, topic: str, partition: int) -> PartitionState:
        for p in self.partitions:
            if p.topic == topic and p.partition == partition:
                return p
        raise TargetError(f"no partition {topic}/{partition} in the metadata")


def resolve(md: Metadata, role: Role, topic: str | None = None, partition: int = 0) -> list[str]:
    """Node names playing `role` now, sorted; partition roles need a topic."""
    if role == "controller":
        if md.controller is None or md.controller not in md.brokers:
            raise TargetError("no active controller in the metadata")
        return [md.brokers[md.controller]]
    if role in ("non-controllers", "non-controller"):
        if md.controller is None:  # every broker would be one, the controller among them
            raise TargetError("no active controller in the metadata")
        ids = sorted(b for b in md.brokers if b != md.controller)
        return [md.brokers[b] for b in (ids[:1] if role == "non-controller" else ids)]
    if role == "brokers":
        return sorted(md.brokers.values())
    if role == "quorum":
        if not md.quorum:
            raise TargetError("the metadata names no quorum nodes")
        return sorted(md.quorum)
    if topic is None:
        raise TargetError(f"{role} needs a topic")
    if role in COORDINATOR_TOPICS or role in ALL_BUT:
        raise TargetError(f"{role} is resolved from its internal topic (coordinator_of)")
    p = md.partition(topic, partition)
    if role == "leader":
        if p.leader < 0:
            raise TargetError(f"{topic}/{partition} has no leader")
        ids = [p.leader]
    elif role in ("followers", "follower"):
        ids = sorted(r for r in p.replicas if r != p.leader)
        ids = ids[:1] if role == "follower" else ids
    elif role == "isr":
        ids = list(p.isr)
    elif role == "in-sync-followers":
        ids = [r for r in p.isr if r != p.leader]
    elif role == "out-of-sync":
        ids = [r for r in p.replicas if r not in p.isr]
    elif role == "replicas":
        ids = list(p.replicas)
    else:
        raise TargetError(f"unknown role {role!r}")
    return sorted(md.brokers[i] for i in ids if i in md.brokers)


def from_cluster_metadata(
    cm: Any, node_of: Mapping[int, str] | None = None, quorum: tuple[str, ...] = ()
) -> Metadata:
    """From confluent-kafka's ClusterMetadata (AdminClient/Producer list_topics)."""
    brokers = {bid: (node_of or {}).get(bid, f"broker{bid}") for bid in sorted(cm.brokers)}
    partitions = tuple(
        PartitionState(t, pid, pm.leader, tuple(pm.replicas), tuple(pm.isrs))
        for t, tm in sorted(cm.topics.items())
        for pid, pm in sorted(tm.partitions.items())
    )
    controller = cm.controller_id if cm.controller_id >= 0 else None
    return Metadata(brokers, controller, partitions, quorum)


def coordinator_of(md: Metadata, role: str, key: str) -> list[str]:
    """The node coordinating `key` (a transactional or group id, a share-partition key) in
    `md`, which holds the role's internal topic (COORDINATOR_TOPICS)."""
    topic = COORDINATOR_TOPICS[role]
    count = sum(1 for p in md.partitions if p.topic == topic)
    if not count:
        raise TargetError(f"{topic} does not exist yet (no client has asked for a coordinator)")
    p = md.partition(topic, coordinator_partition(key, count))
    if p.leader < 0 or p.leader not in md.brokers:
        raise TargetError(f"{topic}/{p.partition} (of {key!r}) has no leader")
    return [md.brokers[p.leader]]


def roles_held(md: Metadata, topic: str) -> dict[str, list[str]]:
    """Every role each node holds in `md`, as words: "leader p<n>" for each partition of `topic`
    it leads, "follower p<n>" for each it replicates under a leader ("replica p<n>" while the
    partition has none), and "controller". A node holding none is absent."""
    held: dict[str, list[str]] = {}
    for p in md.partitions:
        if p.topic != topic:
            continue
        for r in p.replicas:
            if r not in md.brokers:  # a broker down or not registered: no name to give it
                continue
            role = "leader" if r == p.leader else "follower" if p.leader >= 0 else "replica"
            held.setdefault(md.brokers[r], []).append(f"{role} p{p.partition}")
    if md.controller is not None and md.controller in md.brokers:
        held.setdefault(md.brokers[md.controller], []).append("controller")
    return held
