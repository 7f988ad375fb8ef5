"""Membership faults on a real Kafka cluster: the workload's partitions reassigned while it
produces (`reassign`), a broker decommissioned (`remove-broker`), a spare broker added
(`add-broker`).

The plans are pure functions of the placement (which brokers replicate each partition) and the
brokers in the cluster now; the moves go through Kafka's own reassignment tool inside a broker
(confluent-kafka 2.16's AdminClient has no AlterPartitionReassignments), and a step waits,
asking the metadata, until every moved partition has exactly its new replicas, all in sync, or
its `within` passes: its ok says which (`ended_by`). A throttle stays until a heal or the end
of the run clears it (`end-reassign`). What the end of a run restores: a decommissioned broker
is started again (it registers again, with no replicas: what moved stays moved); a spare added
stays a member.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from contract.topology import Topology
from contract.wait import wait_until
from nemesis.containers import Nemesis, NemesisError
from systems.kafka.targets import Metadata


class KafkaSteps(Protocol):
    """What the membership steps use of the Kafka nemesis (systems.kafka.nemesis, which
    dispatches to them: a protocol here, so that neither module imports the other's)."""

    membership: Membership | None
    net: Nemesis

    @property
    def control(self) -> Any: ...

    def _resolved(self, step: Any, also: Iterable[str] = ()) -> dict[str, list[str]]: ...


# (topic, partition) -> its replicas, preferred leader first.
Placement = dict[tuple[str, int], tuple[int, ...]]
# How often a step asks whether its moves are done.
POLL_SECONDS = 1.0


class MembershipError(NemesisError):
    """A move that cannot be planned: no broker left to take a replica."""


# ---- plans -----------------------------------------------------------------------------------


def shifted(current: Placement, members: Iterable[int]) -> Placement:
    """Each partition to the next replica set in the ring of brokers: the window of as many
    brokers as it has replicas, starting one past its preferred leader. With more brokers than
    replicas one replica moves to a broker that had none; with as many, only the order (the
    preferred leader) changes."""
    ring = sorted(set(members))
    out: Placement = {}
    for tp, replicas in sorted(current.items()):
        if len(replicas) > len(ring):
            raise MembershipError(
                f"{tp[0]}/{tp[1]} has {len(replicas)} replicas and the cluster {len(ring)} brokers"
            )
        start = ring.index(replicas[0]) if replicas[0] in ring else -1
        out[tp] = tuple(ring[(start + 1 + k) % len(ring)] for k in range(len(replicas)))
    return out


def moved_off(current: Placement, gone: int, members: Iterable[int]) -> Placement:
    """Every partition `gone` replicates, with that replica on the member holding the fewest
    replicas of the plan so far (lowest id first): the decommission's plan. The others keep
    their order, so the preferred leader is a replica that already has the data; the newcomer
    goes last."""
    others = sorted(set(members) - {gone})
    load = {b: 0 for b in others}
    for replicas in current.values():
        for r in replicas:
            if r in load:
                load[r] += 1
    out: Placement = {}
    for tp, replicas in sorted(current.items()):
        if gone not in replicas:
            continue
        free = [b for b in others if b not in replicas]
        if not free:
            raise MembershipError(
                f"{tp[0]}/{tp[1]}: no broker but its replicas {list(replicas)} to take the "
                f"replica of {gone}"
            )
        taker = min(free, key=lambda b: (load[b], b))
        load[taker] += 1
        out[tp] = tuple(r for r in replicas if r != gone) + (taker,)
    return out


def moved_onto(current: Placement, newcomer: int) -> Placement:
    """Each partition's last replica moved to the newcomer (a partition it already replicates
    stays): the new broker takes a share of the data, and no preferred leader changes."""
    return {
        tp: replicas[:-1] + (newcomer,)
        for tp, replicas in sorted(current.items())
        if newcomer not in replicas
    }


def still_moving(
    now: Mapping[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]], plan: Placement
) -> list[tuple[str, int]]:
    """The planned partitions whose replicas (`now`: replicas and ISR as the metadata says)
    are not yet exactly the planned ones, all in sync: during a reassignment the metadata
    lists the adding and the removing replicas together."""
    out = []
    for tp, target in sorted(plan.items()):
        replicas, isr = now.get(tp, ((), ()))
        if set(replicas) != set(target) or not set(target) <= set(isr):
            out.append(tp)
    return out


def reassignment_json(plan: Placement) -> dict[str, Any]:
    """The plan as kafka-reassign-partitions --reassignment-json-file reads it."""
    return {
        "version": 1,
        "partitions": [
            {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in sorted(plan.items())
        ],
    }


def _named(plan: Placement, before: Placement, names: Mapping[int, str]) -> dict[str, Any]:
    """What moved where, by node name, for the history."""
    return {
        f"{t}/{p}": {
            "from": [names.get(b, str(b)) for b in before.get((t, p), ())],
            "to": [names.get(b, str(b)) for b in r],
        }
        for (t, p), r in sorted(plan.items())
    }


# ---- the cluster's side ----------------------------------------------------------------------


class MembershipControl(Protocol):
    """What the membership ops ask of the cluster (systems.kafka.admin.KafkaAdmin)."""

    @property
    def kraft(self) -> bool: ...

    def metadata(self, need_controller: bool = False, topic: str | None = None) -> Metadata: ...

    def reassign(self, plan: Placement, throttle: int | None, via: str) -> str:
        """Starts the plan's moves (the tool's answer)."""
        ...

    def clear_throttles(self, brokers: Iterable[int], topics: Iterable[str]) -> None: ...

    def unregister(self, broker: int, via: str) -> str: ...

    def start_broker(self, name: str) -> Topology:
        """Starts a spare broker's container; the cluster's topology with it."""
        ...

    def registered_brokers(self) -> set[int]: ...


@dataclass
class Membership:
    """The cluster's brokers as the membership ops change them, and what a heal must clear."""

    control: MembershipControl
    members: dict[str, int]  # name -> broker id: in the cluster now
    spares: dict[str, int]  # declared, not started yet
    topics: tuple[str, ...]  # the workload's topics, whose replicas the ops move
    removed: dict[str, int] = field(default_factory=dict)  # decommissioned, down
    throttled_brokers: set[int] = field(default_factory=set)
    throttled_topics: set[str] = field(default_factory=set)
    unsettled: bool = False  # a reassignment's ok said it had not settled
    poll: float = POLL_SECONDS
    clock: Callable[[], float] = time.monotonic

    @property
    def names(self) -> dict[int, str]:
        return {b: n for n, b in (self.members | self.removed | self.spares).items()}

    def expected(self, down: Iterable[str]) -> set[int]:
        """The brokers a whole cluster has now: the members, and a decommissioned broker that
        was started again (by a start step or the end of the run)."""
        still_down = set(down)
        back = {n: b for n, b in self.removed.items() if n not in still_down}
        return set(self.members.values()) | set(back.values())

    def placement(self) -> Placement:
        out: Placement = {}
        for topic in self.topics:
            md = self.control.metadata(topic=topic)
            out |= {(p.topic, p.partition): p.replicas for p in md.partitions if p.topic == topic}
        return out

    def _now(self) -> dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]]:
        now: dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]] = {}
        for topic in self.topics:
            md = self.control.metadata(topic=topic)
            now |= {(p.topic, p.partition): (p.replicas, p.isr) for p in md.partitions}
        return now

    def move(
        self, plan: Placement, before: Placement, throttle: int | None, within: float, via: str
    ) -> dict[str, Any]:
        """Starts the plan and waits until it is done or `within` passes: what moved where,
        and which ended the wait."""
        if not plan:
            return {"moved": {}, "completed": True, "ended_by": "nothing to move"}
        answer = self.control.reassign(plan, throttle, via)
        if throttle is not None:
            self.throttled_brokers |= {b for r in (*plan.values(), *before.values()) for b in r}
            self.throttled_topics |= {t for t, _ in plan}
        started = self.clock()
        left: list[tuple[str, int]] = list(plan)

        def done() -> bool:
            nonlocal left
            try:
                left = still_moving(self._now(), plan)
            except Exception:  # noqa: BLE001 - a broker busy with the move: ask again
                return False
            return not left

        completed = wait_until(done, within, interval=self.poll)
        if not completed:
            self.unsettled = True
        return {
            "moved": _named(plan, before, self.names),
            "tool": answer.strip().splitlines()[-1:] if answer.strip() else [],
            "completed": completed,
            "ended_by": "completed" if completed else f"bound ({within:g} s)",
            "waited_s": round(self.clock() - started, 1),
            "still_moving": [f"{t}/{p}" for t, p in left] if not completed else [],
        }

    def via(self, down: Iterable[str], avoid: Iterable[str] = ()) -> str:
        """A running member to run Kafka's tools in."""
        skip = set(down) | set(avoid)
        running = sorted(n for n in self.members if n not in skip)
        if not running:
            raise NemesisError("no running broker to run Kafka's tools in")
        return running[0]

    def end(self) -> dict[str, Any] | None:
        """Clears every throttle a reassignment set; what still moves said. None: nothing to
        clear (no throttle, every reassignment settled)."""
        if not (self.throttled_brokers or self.unsettled):
            return None
        brokers, topics = sorted(self.throttled_brokers), sorted(self.throttled_topics)
        if brokers:
            self.control.clear_throttles(brokers, topics)
        self.throttled_brokers.clear()
        self.throttled_topics.clear()
        self.unsettled = False
        try:
            now = self._now()
            moving = sorted(f"{t}/{p}" for (t, p), (r, isr) in now.items() if set(r) - set(isr))
        except Exception as e:  # noqa: BLE001 - said, not raised: the heal goes on
            moving = [f"unknown: {type(e).__name__}: {e}"]
        names = self.names
        return {
            "brokers": [names.get(b, str(b)) for b in brokers],
            "topics": topics,
            "out_of_sync": moving,
        }


# ---- the steps -------------------------------------------------------------------------------


def _membership(k: KafkaSteps) -> Membership:
    if k.membership is None:
        raise NemesisError("this run's nemesis cannot change the cluster's membership")
    return k.membership


def reassign(k: KafkaSteps, step: Any) -> None:
    """All the workload's partitions (or those the targets lead) to the next replica set."""
    m = _membership(k)
    targets = k._resolved(step).get("target")
    before = m.placement()
    chosen = before
    if targets:
        ids = {m.members[n] for n in targets if n in m.members}
        led = {
            (p.topic, p.partition)
            for topic in m.topics
            for p in k.control.metadata(topic=topic).partitions
            if p.leader in ids
        }
        chosen = {tp: r for tp, r in before.items() if tp in led}
    plan = {tp: r for tp, r in shifted(chosen, m.members.values()).items() if r != before[tp]}
    every = sorted(m.members) if not targets else sorted(targets)
    value = {"nodes": every, "throttle": step.throttle, "within": step.within}

    def act() -> dict[str, Any]:
        out = m.move(plan, before, step.throttle, step.within, m.via(k.net.down))
        return out | {"settled": bool(out["completed"]) and step.throttle is None}

    k.net.logged("reassign", value, act)


def remove_broker(k: KafkaSteps, step: Any) -> None:
    """Decommission: the target's replicas moved off it, a graceful stop, and, in KRaft, its
    registration removed. Stopped even when the move did not end within the bound (the ok
    says so): a decommission an operator forced."""
    m = _membership(k)
    targets = k._resolved(step).get("target", [])
    if len(targets) != 1 or targets[0] not in m.members:
        raise NemesisError(
            f"remove-broker takes one broker of the cluster; its target is {targets or 'none'} "
            f"(brokers now: {', '.join(sorted(m.members))})"
        )
    name = targets[0]
    gone = m.members[name]
    before = m.placement()
    plan = moved_off(before, gone, m.members.values())

    def act() -> dict[str, Any]:
        out = m.move(plan, before, None, step.within, m.via(k.net.down, avoid=[name]))
        k.net.take_down(name)
        m.removed[name] = m.members.pop(name)
        if m.control.kraft:
            try:
                said = m.control.unregister(gone, m.via(k.net.down))
                out["unregistered"] = "ok" if "ERROR" not in said.upper() else said.strip()[-200:]
            except Exception as e:  # noqa: BLE001 - said in the ok: the broker is down anyway
                out["unregistered"] = f"failed: {e}"
        else:
            out["unregistered"] = "not needed (zk: its registration ended with its session)"
        out["restore"] = "a start (or the end of the run) starts it again, with no replicas"
        return out

    k.net.logged("remove-broker", {"nodes": [name], "within": step.within}, act)


def add_broker(k: KafkaSteps, step: Any) -> None:
    """A spare broker started and registered; with `move_onto`, a replica of each partition
    moved onto it."""
    m = _membership(k)
    named = k._resolved(step).get("target") or sorted(m.spares, key=lambda n: m.spares[n])[:1]
    if len(named) != 1 or named[0] not in m.spares:
        raise NemesisError(
            f"add-broker starts one spare broker; {named or 'none'} is not one "
            f"(spares left: {', '.join(sorted(m.spares)) or 'none'})"
        )
    name = named[0]
    broker = m.spares[name]
    value = {"nodes": [name], "move_onto": step.move_onto, "within": step.within}

    def act() -> dict[str, Any]:
        k.net.topology = m.control.start_broker(name)
        m.members[name] = m.spares.pop(name)
        registered = wait_until(
            lambda: broker in m.control.registered_brokers(), step.within, interval=m.poll
        )
        out: dict[str, Any] = {"registered": registered}
        if step.move_onto and registered:
            before = m.placement()
            via = m.via(k.net.down, avoid=[name])
            out |= m.move(moved_onto(before, broker), before, step.throttle, step.within, via)
        settled = registered and out.get("completed", True) and step.throttle is None
        return out | {"settled": settled}

    k.net.logged("add-broker", value, act)


def end_reassignments(k: KafkaSteps) -> None:
    """The throttles cleared at a heal or the end of the run, logged when there were any."""
    m = k.membership
    if m is None or not (m.throttled_brokers or m.unsettled):
        return
    ended: dict[str, Any] = {}

    def act() -> dict[str, Any]:
        ended.update(m.end() or {})
        return ended

    k.net.logged("end-reassign", {"nodes": "all"}, act)
