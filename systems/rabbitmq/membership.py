"""RabbitMQ's membership faults: a node taken out of the cluster and put back (forget-node,
add-node), a quorum queue's member removed and added back (shrink-queue, grow-queue).

Each is what an operator would type, through `rabbitmqctl` and `rabbitmq-queues` inside the
nodes' containers:

- forget-node: `stop_app` on the target, then `forget_cluster_node rabbit@target` from a
  member that stays. Every release refuses to forget a node whose RabbitMQ application runs;
  the Erlang node itself stays up (4.x's Khepri resets the target's store through it). The CLI
  also removes the node's quorum queue members (3.10 after forgetting it, 4.x before), so the
  queues are smaller afterwards: add-node does not bring those members back, grow-queue does.
- add-node: `reset` on the target, `join_cluster rabbit@member`, `start_app`. A forgotten node
  still lists its old peers; the clustering guide's way back is a reset. Where the metadata
  store is Mnesia (3.x, and 4.0/4.1 unless Khepri was enabled) a reset that the forgotten
  node's stale view makes fail is followed by `force_reset`, which wipes without asking the
  peers; Khepri (4.2 on, where it is always on) refuses force_reset, so there a failed reset
  is the step's error.
- shrink-queue / grow-queue: `rabbitmq-queues delete_member QUEUE rabbit@target` and
  `add_member QUEUE rabbit@target`, from a member that stays.

The members each quorum queue had before the run's first membership step are kept: the end
of the run (`restore`, from the nemesis's heal_all) adds back every forgotten node and grows
every queue to those members again, and says what it could not put back.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from nemesis.containers import Nemesis, NemesisError

log = logging.getLogger("harness")

# The first line whose metadata store is Khepri whatever the feature flags say.
KHEPRI_ALWAYS = (4, 2)


class MembershipControl(Protocol):
    """The CLI calls a membership step makes (systems.rabbitmq.cluster.RabbitMQCluster)."""

    def rabbitmqctl(self, node: str, *args: str, timeout: float = 60) -> str: ...

    def rabbitmq_queues(self, node: str, *args: str, timeout: float = 60) -> str: ...

    def running_nodes(self, node: str) -> list[str]: ...

    def quorum_members(self) -> dict[str, list[str]]:
        """Each quorum queue's members (node names)."""
        ...

    def release(self) -> str | None: ...


def erlang(node: str) -> str:
    """rabbit2 -> rabbit@rabbit2, the name the CLI takes."""
    return f"rabbit@{node}"


@dataclass
class Membership:
    """Who is in the cluster and which queue members the run removed, and the steps that
    change it. `nodes`: the cluster's, as started."""

    control: MembershipControl
    nodes: list[str]
    forgotten: set[str] = field(default_factory=set)
    # Each quorum queue's members before the run's first membership step: what restore grows
    # the queues back to. Empty until then.
    first_members: dict[str, set[str]] = field(default_factory=dict)
    # The members each queue lacks of its first ones, as last asked.
    removed: dict[str, set[str]] = field(default_factory=dict)
    _khepri: bool | None = None

    # ---- steps --------------------------------------------------------------------------

    def forget(self, net: Nemesis, nodes: Iterable[str]) -> None:
        """The nodes out of the cluster (stop_app, then forget_cluster_node from a member)."""
        targets = sorted(set(nodes))
        if already := [n for n in targets if n in self.forgotten]:
            raise NemesisError(f"forget-node: {already[0]} is already out of the cluster")
        if not targets:
            raise NemesisError("forget-node: no node to forget")
        self._remember()
        via = self._member_staying(targets, "forget-node")

        def apply() -> dict[str, Any]:
            stopped: list[str] = []
            try:
                for n in targets:
                    self.control.rabbitmqctl(n, "stop_app", timeout=120)
                    stopped.append(n)
                for n in targets:
                    self.control.rabbitmqctl(via, "forget_cluster_node", erlang(n), timeout=120)
                    self.forgotten.add(n)
            except Exception:
                # Refused (RabbitMQ 4.3 refuses to forget a node whose quorum queue members it
                # cannot remove): what it did not forget runs again, or no later step nor the
                # end of the run would ever start it (it is still a member, with its app down).
                for n in stopped:
                    if n not in self.forgotten:
                        self.control.rabbitmqctl(n, "start_app", timeout=300)
                raise
            self._ask_removed()
            return {"out": self.out()}

        net.logged("forget-node", {"nodes": targets, "via": via}, apply)

    def add(self, net: Nemesis, nodes: Iterable[str] | None = None) -> None:
        """Forgotten nodes (None: every one) back in the cluster: reset, join, start_app."""
        targets = sorted(set(nodes)) if nodes else sorted(self.forgotten)
        if inside := [n for n in targets if n not in self.forgotten]:
            raise NemesisError(
                f"add-node: {inside[0]} is a member of the cluster (forget-node takes one out)"
            )
        if not targets:
            raise NemesisError("add-node: no node is out of the cluster")
        via = self._member_staying(targets, "add-node")

        def apply() -> dict[str, Any]:
            for n in targets:
                self._reset(n)
                self.control.rabbitmqctl(n, "join_cluster", erlang(via), timeout=120)
                self.control.rabbitmqctl(n, "start_app", timeout=300)
                self.forgotten.discard(n)
            self._ask_removed()
            return {"out": self.out()}

        net.logged("add-node", {"nodes": targets, "via": via}, apply)

    def shrink(self, net: Nemesis, nodes: Iterable[str]) -> None:
        """The nodes' members of every quorum queue removed (delete_member); refused before
        anything changes where a queue would be left no member."""
        targets = sorted(set(nodes))
        self._remember()
        members = self.control.quorum_members()
        plan = {q: [n for n in targets if n in m] for q, m in sorted(members.items())}
        plan = {q: ns for q, ns in plan.items() if ns}
        for q, ns in plan.items():
            if not set(members[q]) - set(ns):
                raise NemesisError(
                    f"shrink-queue: {q} would be left no member (its members: "
                    f"{', '.join(sorted(members[q]))})"
                )
        via = self._member_staying(targets, "shrink-queue")

        def apply() -> dict[str, Any]:
            for q, ns in plan.items():
                for n in ns:
                    self.control.rabbitmq_queues(via, "delete_member", q, erlang(n), timeout=120)
            self._ask_removed()
            return {"out": self.out()}

        value = {"nodes": targets, "queues": sorted(plan), "via": via}
        net.logged("shrink-queue", value, apply)

    def grow(self, net: Nemesis, nodes: Iterable[str] | None = None) -> None:
        """Members added on the nodes to every quorum queue that lacks one there; None: every
        member a queue lacks of its first ones (on nodes in the cluster)."""
        targets = sorted(set(nodes)) if nodes else None
        if out := [n for n in targets or [] if n in self.forgotten]:
            raise NemesisError(f"grow-queue: {out[0]} is out of the cluster (add-node it first)")
        self._remember()
        members = self.control.quorum_members()
        if targets is None:
            plan = {
                q: sorted(first - set(members.get(q, [])) - self.forgotten)
                for q, first in self.first_members.items()
            }
        else:
            plan = {q: [n for n in targets if n not in m] for q, m in members.items()}
        plan = {q: ns for q, ns in sorted(plan.items()) if ns}
        via = self._member_staying(targets or [], "grow-queue")

        def apply() -> dict[str, Any]:
            for q, ns in plan.items():
                for n in ns:
                    self.control.rabbitmq_queues(via, "add_member", q, erlang(n), timeout=120)
            self._ask_removed()
            return {"added": plan, "out": self.out()}

        value = {"nodes": targets or "all", "queues": sorted(plan), "via": via}
        net.logged("grow-queue", value, apply)

    # ---- the end of a run ---------------------------------------------------------------

    def changed(self) -> bool:
        """Whether any membership step ran (restore has something to look at)."""
        return bool(self.first_members) or bool(self.forgotten)

    def restore(self, net: Nemesis) -> list[str]:
        """Every forgotten node added back, every queue grown to its first members; what is
        still out afterwards (also written to the history, as a `membership` info). Never
        raises: it runs at the end of a run, on failure too."""
        if not self.changed():
            return []
        if self.forgotten:
            try:
                self.add(net)
            except Exception as e:  # noqa: BLE001 - said below, with what is still out
                log.warning("forgotten nodes not added back: %s", e)
        try:
            self._ask_removed()
            if any(ns - self.forgotten for ns in self.removed.values()):
                self.grow(net)
        except Exception as e:  # noqa: BLE001 - said below, with what is still out
            log.warning("quorum queues not grown back: %s", e)
        left = self.out()
        if left:
            log.warning("membership not restored: %s", ", ".join(left))
            if net.history:
                net.history.write("info", "membership", value={"not_restored": left})
        return left

    def whole(self) -> bool:
        """Every queue with its first members among the cluster's current ones (asked anew):
        a node restore could not add back is said by restore, not waited for."""
        if not self.first_members:
            return True
        self._ask_removed()
        return not any(ns - self.forgotten for ns in self.removed.values())

    def out(self) -> list[str]:
        """What is out, as the history says it: forgotten nodes by name, removed queue
        members as queue@node."""
        members = [f"{q}@{n}" for q, ns in sorted(self.removed.items()) for n in sorted(ns)]
        return sorted(self.forgotten) + members

    # ---- helpers ------------------------------------------------------------------------

    def _remember(self) -> None:
        """The queues' members before the first membership step (a queue first seen later is
        taken as it is then)."""
        try:
            members = self.control.quorum_members()
        except Exception as e:  # noqa: BLE001 - the step itself will say what is wrong
            log.warning("quorum queue members not read: %s", e)
            return
        for q, ns in members.items():
            self.first_members.setdefault(q, set(ns))

    def _ask_removed(self) -> None:
        members = self.control.quorum_members()
        self.removed = {
            q: first - set(members.get(q, [])) for q, first in self.first_members.items()
        }

    def _member_staying(self, targets: list[str], op: str) -> str:
        """A member outside the targets whose RabbitMQ runs: where the CLI call is made from."""
        for n in self.nodes:
            if n in targets or n in self.forgotten:
                continue
            try:
                running = self.control.running_nodes(n)
            except Exception:  # noqa: BLE001 - a node stopped, paused or cut: try the next
                continue
            if erlang(n) in running:
                return n
        left = [n for n in self.nodes if n not in targets and n not in self.forgotten]
        if not left:
            raise NemesisError(f"{op}: it would leave no node in the cluster")
        raise NemesisError(f"{op}: no member outside {', '.join(targets)} answers")

    def _reset(self, node: str) -> None:
        try:
            self.control.rabbitmqctl(node, "reset", timeout=120)
        except Exception as e:
            if self._is_khepri():
                raise
            log.warning("reset of forgotten %s failed (%s): force_reset", node, e)
            self.control.rabbitmqctl(node, "force_reset", timeout=120)

    def _is_khepri(self) -> bool:
        """Whether the store is Khepri for sure (the release says; 4.0/4.1 may have it
        enabled too, where force_reset's own refusal says so)."""
        if self._khepri is None:
            line = re.match(r"(\d+)\.(\d+)", self.control.release() or "")
            self._khepri = line is not None and (int(line[1]), int(line[2])) >= KHEPRI_ALWAYS
        return self._khepri
