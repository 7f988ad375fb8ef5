"""Faults on real Kafka clusters, aimed by role at the moment they start.

A step names its targets as a role (leader, follower, ISR, controller, quorum, ...) resolved
from live metadata when the step runs, as node names, or as "@label": the nodes an earlier
step with that label resolved to (the old leader after a fail-over, say). The network and
process work is the RabbitMQ nemesis's own (`Nemesis`: iptables and tc in each node's
namespace, Docker for processes); what Kafka adds comes through `KafkaControl`.

A step that faults nodes also records every role they held as it began, whatever it aimed at
(the `resolve` event's `held`): a follower drawn at random may be the controller too, and a run
that faulted the controller must say so.
"""

from __future__ import annotations

import functools
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from contract.wait import wait_until
from faults.registry import OPS, window_of
from nemesis.clients import ClientGroups
from nemesis.containers import Nemesis, NemesisError
from systems.client_path import CLIENT_PATH_OPS, apply_client_fault
from systems.clock import CLOCK_OPS, apply_clock_fault
from systems.disks import DISK_OPS, apply_disk_fault
from systems.kafka import membership, migration, quorum, upgrade
from systems.kafka.membership import Membership
from systems.kafka.migration import MigrationControl
from systems.kafka.quorum import Quorum
from systems.kafka.targets import (
    ALL_BUT,
    COORDINATOR_TOPICS,
    SHARE_COORDINATOR,
    Metadata,
    TargetError,
    coordinator_of,
    is_selector,
    resolve,
    roles_held,
    share_key_partition,
)
from systems.kafka.upgrade import UpgradeControl

log = logging.getLogger("harness")

# Roles whose answer needs the active controller (a docker exec in KRaft: asked only then).
_CONTROLLER_ROLES = {"controller", "non-controller", "non-controllers"}

# The ops that fault nodes (their network or their process): each learns, before its fault
# begins, every role the cluster's nodes hold. A heal, a start, an election or a client's pause
# faults no node.
_NODE_FAULT_WINDOWS = (
    "network-start",
    "node-down",
    "node-bounce",
    "disk-start",
    "membership-start",
    "member-out",
    "clock-start",
)
NODE_FAULT_OPS = frozenset(
    o.name
    for o in OPS
    if "kafka" in o.systems and any(window_of(f) in _NODE_FAULT_WINDOWS for f in o.writes)
)
# How long a fault waits to learn those roles: past it, the fault goes ahead on time and its
# step records what went unlearnt (`roles_unknown`).
HELD_ROLES_WITHIN = 2.0

T = TypeVar("T")


def answers_within(
    asks: Mapping[str, Callable[[], T]], seconds: float
) -> tuple[dict[str, T], dict[str, str]]:
    """Every question asked at once, each in a thread of its own: the answers given within
    `seconds`, and for the others why not (the error, or no answer in time). A question still
    open then finishes unheard (a daemon thread): a cluster under a fault may take its client's
    full timeout to answer, and a fault must not wait that long."""
    answers: dict[str, T] = {}
    failures: dict[str, str] = {}
    lock = threading.Lock()

    def ask(name: str, question: Callable[[], T]) -> None:
        try:
            answer = question()
        except Exception as e:  # noqa: BLE001 - an unlearnt role is recorded, never raised
            with lock:
                failures[name] = f"{type(e).__name__}: {e}"
            return
        with lock:
            answers[name] = answer

    threads = [
        threading.Thread(target=ask, args=item, name=f"roles-{item[0]}", daemon=True)
        for item in asks.items()
    ]
    deadline = time.monotonic() + seconds
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    with lock:
        answered, failed = dict(answers), dict(failures)
    for name in asks:
        if name not in answered and name not in failed:
            failed[name] = f"no answer within {seconds:g} s"
    return answered, failed


@dataclass
class RolesNow:
    """What the cluster said of its roles as a step began: the workload topic's metadata (its
    active controller asked for), the broker coordinating each followed id, and, by role, why
    any went unlearnt."""

    metadata: Metadata | None = None
    coordinators: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    unknown: dict[str, str] = field(default_factory=dict)

    def held_by(self, topic: str, nodes: Iterable[str]) -> dict[str, Any]:
        """`held`: each node's roles (an empty list: none of those learnt); `roles_unknown`,
        when any went unlearnt: why, by role."""
        held = roles_held(self.metadata, topic) if self.metadata is not None else {}
        for (role, key), names in self.coordinators.items():
            for name in names:
                held.setdefault(name, []).append(f"{role} {key}")
        value: dict[str, Any] = {"held": {n: sorted(held.get(n, [])) for n in sorted(set(nodes))}}
        if self.unknown:
            value["roles_unknown"] = dict(sorted(self.unknown.items()))
        return value


class KafkaControl(Protocol):
    """What the nemesis asks of the cluster besides its network and processes."""

    def metadata(self, need_controller: bool = False, topic: str | None = None) -> Metadata:
        """The cluster's metadata with the workload's topic's partitions, or `topic`'s."""
        ...

    def elect(self, election: str, partitions: list[int], via: str | None = None) -> dict[str, str]:
        """Per partition: "ok", or the error's name (ELECTION_NOT_NEEDED, ...). `via`: a broker
        the nemesis has not cut, to ask from inside the cluster."""
        ...


class KafkaNemesis:
    def __init__(
        self,
        net: Nemesis,
        control: KafkaControl,
        topic: str,
        partitions: int,
        coordinated: dict[str, str] | None = None,
        clients: ClientGroups | None = None,
        coordinator_keys: list[tuple[str, str]] | None = None,
        membership: Membership | None = None,
        upgrades: UpgradeControl | None = None,
        quorum: Quorum | None = None,
        migrations: MigrationControl | None = None,
    ) -> None:
        self.net = net
        self.control = control
        self.topic = topic
        self.partitions = partitions
        # Per coordinator role, the id a step aimed at that role means (a transactional id, a
        # group id).
        self.coordinated = coordinated or {}
        # (role, id) of every id whose coordinator a faulted node may be: each step says which
        # of them its nodes coordinated.
        self.coordinator_keys = coordinator_keys or list(self.coordinated.items())
        # The workload's client processes (pause-client, resume-client): the run's.
        self.clients = clients
        self.labels: dict[str, list[str]] = {}
        # The roles learnt as the step being applied began (a step faulting nodes): its roles
        # resolve from them, and its `resolve` event records what its nodes held.
        self.now: RolesNow | None = None
        # The brokers as reassign, remove-broker and add-broker change them (the run's).
        self.membership = membership
        # The cluster, for upgrade and finalize-feature (the run's).
        self.upgrades = upgrades
        # The KRaft voters as add-controller and remove-controller change them (a dynamic
        # quorum's; None: a static quorum, or ZooKeeper).
        self.quorum = quorum
        # The cluster, for migrate's phases from ZooKeeper to KRaft (the run's).
        self.migrations = migrations

    @property
    def history(self) -> Any:
        return self.net.history

    def heal_all(self) -> None:
        """Every fault ended: paused clients resumed first (whatever the cluster's heal
        meets, no stopped process may outlive the run), then the cluster's faults (a
        decommissioned broker started again), then a reassignment's throttle, once the
        brokers answer."""
        try:
            if self.clients is not None and self.clients.paused:
                self.resume_clients(sorted(self.clients.paused))
        finally:
            try:
                self.net.heal_all()
            finally:
                try:
                    membership.end_reassignments(self)
                except Exception as e:  # noqa: BLE001 - its fail is in the history; the
                    # recovery goes on (a throttle left slows the catch-up, it loses nothing)
                    log.warning("reassignment throttles not cleared: %s", e)

    def expected_brokers(self, initial: set[int]) -> set[int]:
        """The broker ids a whole cluster has now: `initial` (those it started with) as the
        membership ops changed it."""
        if self.membership is None:
            return set(initial)
        return self.membership.expected(self.net.down)

    # ---- the workload's clients ------------------------------------------------------------

    def _client_groups(self) -> ClientGroups:
        if self.clients is None:
            raise NemesisError("this run's nemesis cannot reach the workload's clients")
        return self.clients

    def pause_clients(self, names: list[str]) -> None:
        """SIGSTOP to each client's process group: a fault until resume_clients."""
        groups = self._client_groups()
        self.net.logged("pause-client", {"clients": names}, lambda: {"groups": groups.pause(names)})

    def end_clients(self, names: list[str], f: str, signum: int) -> None:
        """SIGKILL (kill-client) or SIGTERM (stop-client) to each client's process group."""
        groups = self._client_groups()
        self.net.logged(f, {"clients": names}, lambda: {"groups": groups.end(names, signum)})

    def restart_clients(self, names: list[str]) -> None:
        groups = self._client_groups()
        self.net.logged(
            "restart-client", {"clients": names}, lambda: {"groups": groups.restart(names)}
        )

    def resume_clients(self, names: list[str]) -> None:
        groups = self._client_groups()
        self.net.logged(
            "resume-client", {"clients": names}, lambda: {"groups": groups.resume(names)}
        )

    # ---- targets ---------------------------------------------------------------------------

    def resolve(self, selector: str | list[str] | None, partition: int) -> list[str]:
        if selector is None:
            return []
        if isinstance(selector, list):
            return list(selector)
        if selector.startswith("@"):
            if selector[1:] not in self.labels:
                raise NemesisError(f"no earlier step is labelled {selector[1:]!r}")
            return list(self.labels[selector[1:]])
        if selector == "stopped":
            return sorted(self.net.down)
        if selector in COORDINATOR_TOPICS:
            return self._coordinator(selector, partition)
        if selector in ALL_BUT:
            return self._all_but(ALL_BUT[selector])
        md = self.now.metadata if self.now is not None else None
        if md is None:
            md = self.control.metadata(need_controller=selector in _CONTROLLER_ROLES)
        try:
            names = resolve(md, selector, self.topic, partition)  # type: ignore[arg-type]
        except TargetError as e:
            raise NemesisError(f"cannot aim at {selector}: {e}") from None
        if not names:
            raise NemesisError(f"{selector} of {self.topic}/{partition} names no node right now")
        return names

    def _coordinator(self, role: str, partition: int = 0) -> list[str]:
        key = self._coordinated_key(role, partition)
        if key is None:
            raise NemesisError(f"cannot aim at {role}: the workload has no client it coordinates")
        if self.now is not None and (role, key) in self.now.coordinators:
            return list(self.now.coordinators[(role, key)])
        try:
            return coordinator_of(self.control.metadata(topic=COORDINATOR_TOPICS[role]), role, key)
        except TargetError as e:
            raise NemesisError(f"cannot aim at {role}: {e}") from None

    def _coordinated_key(self, role: str, partition: int) -> str | None:
        """The id whose coordinator a role names: the workload's first of it; for the share
        coordinator, the share group's state of the step's partition."""
        if role != SHARE_COORDINATOR:
            return self.coordinated.get(role)
        keys = (k for r, k in self.coordinator_keys if r == role)
        return next((k for k in keys if share_key_partition(k) == partition), None)

    def _all_but(self, role: str) -> list[str]:
        coordinator = set(self._coordinator(role))
        md = self.now.metadata if self.now is not None else None
        md = md if md is not None else self.control.metadata()
        return [n for n in resolve(md, "brokers") if n not in coordinator]

    def roles_now(self) -> RolesNow:
        """Every role of the cluster now, asked at once and for at most HELD_ROLES_WITHIN: the
        workload topic's leaders and followers and the controller (the active one, in KRaft),
        and the coordinator of each followed id."""
        asks: dict[str, Callable[[], Metadata]] = {
            self.topic: functools.partial(self.control.metadata, need_controller=True)
        }
        for role, _ in self.coordinator_keys:
            topic = COORDINATOR_TOPICS[role]
            asks[topic] = functools.partial(self.control.metadata, topic=topic)
        answers, failures = answers_within(asks, HELD_ROLES_WITHIN)
        now = RolesNow(answers.get(self.topic))
        if now.metadata is None:
            now.unknown["partitions"] = now.unknown["controller"] = failures[self.topic]
        else:
            if not any(p.topic == self.topic for p in now.metadata.partitions):
                now.unknown["partitions"] = f"the metadata holds no partition of {self.topic}"
            if now.metadata.controller is None:
                now.unknown["controller"] = "no active controller in the metadata"
        for role, key in self.coordinator_keys:
            topic = COORDINATOR_TOPICS[role]
            try:
                if topic in failures:
                    raise TargetError(failures[topic])
                now.coordinators[(role, key)] = coordinator_of(answers[topic], role, key)
            except TargetError as e:
                now.unknown[f"{role} {key}"] = str(e)
        return now

    def _resolved(self, step: Any, also: Iterable[str] = ()) -> dict[str, list[str]]:
        """Every selector of the step, resolved once, and logged with the metadata behind it
        and, for a fault, every role its nodes (and `also`: others it touches) held."""
        out = {
            key: self.resolve(sel, step.partition)
            for key, sel in (("target", step.target), ("from", step.from_), ("to", step.to))
            if sel is not None
        }
        roles = {
            k: sel
            for k, sel in (("target", step.target), ("from", step.from_), ("to", step.to))
            if isinstance(sel, str)
        }
        self._log_resolution(step.op, roles, out, step.partition, also)
        if step.label and "target" in out:
            self.labels[step.label] = out["target"]
        return out

    def _log_resolution(
        self,
        op: str,
        roles: dict[str, str],
        nodes: dict[str, list[str]],
        partition: int | None,
        also: Iterable[str] = (),
        now: RolesNow | None = None,
    ) -> None:
        """The `resolve` event: what each role named, and what the nodes held as learnt in
        `now` (the step's, by default)."""
        now = now or self.now
        if not self.history or not (roles or now is not None):
            return
        value: dict[str, Any] = {"op": op, "partition": partition, "roles": roles, "nodes": nodes}
        if now is not None:
            touched = {n for names in nodes.values() for n in names} | set(also)
            value |= now.held_by(self.topic, touched)
        self.history.write("info", "resolve", value=value)

    # ---- steps -----------------------------------------------------------------------------

    def apply(self, step: Any) -> None:
        """One scenario step (systems.kafka.scenario.KafkaStep), by its op's handler."""
        handler = HANDLERS.get(step.op)
        if handler is None:
            raise NemesisError(f"unknown Kafka nemesis op {step.op!r}")
        # Learnt before the fault begins (a leader cut off is soon no leader), and only when
        # there is a history to record them in.
        self.now = self.roles_now() if step.op in NODE_FAULT_OPS and self.history else None
        try:
            handler(self, step)
        finally:
            self.now = None

    def _heal(self, step: Any) -> None:
        self.net.heal(self._resolved(step).get("target") or None)
        membership.end_reassignments(self)

    def _cut(self, step: Any) -> None:
        nodes = self._resolved(step)
        self.net.cut(nodes["from"], nodes["to"])
        if step.both_ways:
            self.net.cut(nodes["to"], nodes["from"])

    def _partition(self, step: Any) -> None:
        """The groups with their roles and @labels resolved now; a node that a role puts in
        a second group too would bridge them, which no one asked for: refused."""
        groups: list[list[str]] = []
        roles: dict[str, str] = {}
        resolved: dict[str, list[str]] = {}
        for i, group in enumerate(step.groups):
            names: list[str] = []
            for entry in group:
                if is_selector(entry):
                    key = f"group {i}: {entry}"
                    roles[key], resolved[key] = entry, self.resolve(entry, step.partition)
                    names += resolved[key]
                else:
                    names.append(entry)
            groups.append(list(dict.fromkeys(names)))
        seen: dict[str, int] = {}
        for i, names in enumerate(groups):
            for name in names:
                if name in seen and roles:
                    raise NemesisError(
                        f"partition: {name} is in group {seen[name]} and, as resolved now, in "
                        f"group {i}: name it by a role in one group only"
                    )
                seen.setdefault(name, i)
        every = [n for group in groups for n in group]
        self._log_resolution(step.op, roles, resolved, step.partition if roles else None, every)
        if step.label:
            self.labels[step.label] = every
        self.net.partition(groups)

    def _cut_from_quorum(self, step: Any) -> None:
        md = self.now.metadata if self.now is not None else None
        whole = (md or self.control.metadata()).quorum
        target = self._resolved(step, also=whole).get("target", [])
        quorum = [q for q in whole if q not in target]
        if not quorum:
            raise NemesisError("cut-from-quorum: the target is the whole quorum")
        self.net.cut(target, quorum)
        self.net.cut(quorum, target)

    def _degrade(self, step: Any) -> None:
        nodes = self._resolved(step)
        self.net.degrade(
            nodes["from"], nodes["to"], step.loss_pct, step.delay_ms, step.jitter_ms, step.rate_kbit
        )

    def _rolling_restart(self, step: Any) -> None:
        target = self._resolved(step).get("target", [])
        self.rolling_restart(target or self.resolve("brokers", 0), step.within)

    def rolling_restart(self, nodes: list[str], within: float) -> None:
        """Restarts each node in turn (graceful stop, start), waiting until it is back in the
        ISR of every partition it replicates before the next: the way operators patch."""
        # Broker ids taken before any restart: a broker that is down or still starting is
        # missing from the metadata, and a check by name alone would find it "in every ISR".
        broker_id = {name: bid for bid, name in self.control.metadata().brokers.items()}
        for name in nodes:
            if name not in broker_id:
                raise NemesisError(f"rolling-restart: {name} is not a registered broker")
            if self.history:  # each restart faults its node afresh: what it holds now
                self._log_resolution("restart", {}, {"target": [name]}, None, now=self.roles_now())
            self.net.restart([name])
            back = wait_until(
                functools.partial(self._rejoined, broker_id[name]), within, interval=1
            )
            if self.history:
                self.history.write(
                    "info", "rejoined", value={"node": name, "in_sync": back, "within": within}
                )

    def _rejoined(self, broker: int) -> bool:
        """The broker is registered again and in the ISR of every partition it replicates (an
        answer without the topic's partitions proves nothing)."""
        try:
            md = self.control.metadata()
        except Exception:  # noqa: BLE001 - the cluster is busy electing; ask again
            return False
        mine = [p for p in md.partitions if broker in p.replicas]
        return broker in md.brokers and bool(md.partitions) and all(broker in p.isr for p in mine)

    def elect(self, election: str, within: float) -> None:
        """Asks for a leader election on every partition of the topic until it takes (or is
        not needed), for at most `within` seconds: an unclean election only succeeds once the
        old leader is fenced, which takes the session timeout."""
        partitions = list(range(self.partitions))
        value: dict[str, Any] = {"election": election, "topic": self.topic}

        def attempt() -> dict[str, Any]:
            deadline, results = time.monotonic() + within, {}
            while True:
                try:
                    results = self.control.elect(election, partitions, self._uncut_broker())
                except Exception as e:  # noqa: BLE001 - no controller yet: try again
                    results = {"*": f"{type(e).__name__}: {e}"}
                if all(r in ("ok", "ELECTION_NOT_NEEDED") for r in results.values()):
                    break
                if time.monotonic() >= deadline:
                    raise NemesisError(
                        f"{election} election did not take in {within:.0f} s: {results}"
                    )
                time.sleep(1)
            return {"results": results}

        self.net.logged("elect", value, attempt)

    def _uncut_broker(self) -> str | None:
        """The running broker fewest cuts touch: a client's election request may land on a
        broker the nemesis isolated (KRaft brokers name a random one as controller) and time
        out. An isolated leader is touched by a cut to every node; a follower cut from that
        leader only by the two between them."""
        try:
            brokers = sorted(self.control.metadata().brokers.values())
        except Exception:  # noqa: BLE001 - no metadata now: let the control choose
            return None
        running = [b for b in brokers if b not in self.net.down]
        cuts = self.net.state.cuts
        touches = {b: sum(b in cut for cut in cuts) for b in running}
        return min(running, key=lambda b: (touches[b], b)) if running else None

    def record_leaders(self, label: str, expect_balanced: bool | None) -> None:
        """Leader placement now: each partition's leader, preferred replica and ISR."""

        def snapshot() -> dict[str, Any]:
            md = self.control.metadata()
            parts = [p for p in md.partitions if p.topic == self.topic]
            leaders = {str(p.partition): md.brokers.get(p.leader) for p in parts}
            preferred = {str(p.partition): md.brokers.get(p.replicas[0]) for p in parts}
            per_broker: dict[str, int] = {name: 0 for name in md.brokers.values()}
            for leader in leaders.values():
                if leader is not None:
                    per_broker[leader] = per_broker.get(leader, 0) + 1
            return {
                "leaders": leaders,
                "preferred": preferred,
                "isr": {str(p.partition): [md.brokers.get(b) for b in p.isr] for p in parts},
                "per_broker": per_broker,
                "balanced": all(leaders[k] == preferred[k] for k in leaders),
            }

        value = {"label": label, "expect_balanced": expect_balanced}
        self.net.logged("leaders", value, snapshot)


def _on_target(name: str) -> Callable[[KafkaNemesis, Any], None]:
    """The common nemesis's op of that name, on the step's resolved target."""

    def handler(k: KafkaNemesis, step: Any) -> None:
        getattr(k.net, name)(k._resolved(step).get("target", []))

    return handler


def _applied(
    apply: Callable[[Nemesis, str, list[str], Any], None], op: str
) -> Callable[[KafkaNemesis, Any], None]:
    """An op both systems' nemeses share (of the clients' path, of the disks), on the step's
    resolved target."""

    def handler(k: KafkaNemesis, step: Any) -> None:
        apply(k.net, op, k._resolved(step).get("target", []), step)

    return handler


HANDLERS: dict[str, Callable[[KafkaNemesis, Any], None]] = {
    "isolate": _on_target("isolate"),
    "partition": KafkaNemesis._partition,
    "cut": KafkaNemesis._cut,
    "cut-clients": _on_target("cut_clients"),
    "cut-from-quorum": KafkaNemesis._cut_from_quorum,
    "degrade": KafkaNemesis._degrade,
    **{op: _applied(apply_client_fault, op) for op in CLIENT_PATH_OPS},
    "heal": KafkaNemesis._heal,
    "kill": _on_target("kill"),
    "stop": _on_target("stop"),
    "start": _on_target("start"),
    "restart": _on_target("restart"),
    "pause": _on_target("pause"),
    "resume": _on_target("resume"),
    "power-loss": _on_target("power_loss"),
    **{op: _applied(apply_disk_fault, op) for op in DISK_OPS},
    **{op: _applied(apply_clock_fault, op) for op in CLOCK_OPS},
    "rolling-restart": KafkaNemesis._rolling_restart,
    "reassign": membership.reassign,
    "remove-broker": membership.remove_broker,
    "add-broker": membership.add_broker,
    "upgrade": upgrade.upgrade,
    "finalize-feature": upgrade.finalize_feature,
    "add-controller": quorum.add_controller,
    "remove-controller": quorum.remove_controller,
    "migrate": migration.migrate,
    "elect": lambda k, s: k.elect(s.election, s.within),
    "leaders": lambda k, s: k.record_leaders(s.label, s.expect_balanced),
    "pause-client": lambda k, s: k.pause_clients([s.client]),
    "resume-client": lambda k, s: k.resume_clients([s.client]),
    "kill-client": lambda k, s: k.end_clients([s.client], "kill-client", signal.SIGKILL),
    "stop-client": lambda k, s: k.end_clients([s.client], "stop-client", signal.SIGTERM),
    "restart-client": lambda k, s: k.restart_clients([s.client]),
}
