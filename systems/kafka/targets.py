"""Topology-aware fault targets for Kafka, resolved from live metadata at the moment of a fault.

A scenario names a role (the leader of a partition, its followers, the ISR, the active
controller, the control-plane quorum), never a fixed broker: leadership moves during a run.
"""

from __future__ import annotations

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
]

# What a step may name besides node lists and @labels: a role, or "stopped" (the nodes the
# nemesis has down).
SELECTOR_ROLES: frozenset[str] = frozenset(get_args(Role)) | {"stopped"}


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
