"""The RabbitMQ nemesis: one handler per fault op the registry gives RabbitMQ.

The network and process steps are the common nemesis's (`Nemesis`: iptables in each node's
namespace, Docker for processes). RabbitMQ adds the steps of the manual resolution of a partition
(R4): block the publishers of a node (memory high watermark 0) and wait until that node's queues
are drained, through `RabbitMQControl`; and the membership steps (a node out of the cluster and
back, a quorum queue's member removed and added back: systems.rabbitmq.membership); the
rolling upgrade steps (a node recreated on another release, a feature flag enabled:
systems.rabbitmq.upgrade); and a probe of the metadata store, a throwaway queue declared through
each target (systems.rabbitmq.declares). A step may name the leader or followers of the first
queue (a quorum queue or stream), resolved as the step runs, or a node or partition shape drawn
anew each step from the run's seed (nemesis.picks)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from nemesis.containers import Nemesis, NemesisError
from nemesis.picks import RANDOM_NODE, draw_groups, draw_node
from systems.client_path import CLIENT_PATH_OPS, apply_client_fault
from systems.clock import CLOCK_OPS, apply_clock_fault
from systems.disks import DISK_OPS, apply_disk_fault
from systems.rabbitmq.declares import Declares
from systems.rabbitmq.membership import Membership
from systems.rabbitmq.scenario import NemesisStep, is_role
from systems.rabbitmq.upgrade import UpgradeControl, finalize_feature, upgrade


class RabbitMQControl(UpgradeControl, Protocol):
    def queue_messages(self, node: str) -> dict[str, int]: ...

    def set_memory_high_watermark(self, node: str, fraction: float) -> None: ...

    def queue_leader(self, queue: str) -> tuple[str, list[str]]: ...

    # The cluster's members as the membership steps leave them (systems.rabbitmq.membership);
    # the upgrade steps' calls are UpgradeControl's (systems.rabbitmq.upgrade).
    membership: Membership
    # The run's metadata probes (systems.rabbitmq.declares).
    declares: Declares


@dataclass
class StepTargets:
    """Resolves a step's roles (leader, followers of one queue), drawn nodes and shapes, and
    @labels to node names when the step runs, and logs each resolution (a `resolve` event)
    beside the step. Step n draws from a generator of its own, seeded by the run's seed and n:
    what one step draws (or fails to) never moves another's draws."""

    queue: str
    nodes: list[str] = field(default_factory=list)  # the cluster's
    seed: int = 0
    labels: dict[str, list[str]] = field(default_factory=dict)
    steps: int = 0  # resolved so far
    rng: random.Random = field(default_factory=random.Random)  # the current step's

    def resolve(self, net: Nemesis, control: RabbitMQControl, step: NemesisStep) -> NemesisStep:
        self.steps += 1
        self.rng = random.Random(f"{self.seed}:{self.steps}")
        fields = {"nodes": step.nodes, "from_": step.from_, "to": step.to}
        if step.shape is not None:
            return self._drawn_sides(net, step)
        if not any(is_role(n) for names in fields.values() for n in names):
            if step.label:  # a label of named nodes: what a later step's @label names
                self.labels[step.label] = list(step.nodes or step.from_)
            return step
        leader_and_members: tuple[str, list[str]] | None = None
        drawn: str | None = None  # one node a step, whichever of its fields names it

        def names_of(name: str) -> list[str]:
            nonlocal leader_and_members, drawn
            if name.startswith("@"):
                if name[1:] not in self.labels:  # its step failed before it named a node
                    raise NemesisError(f"{name} names no node: the step it labels was not applied")
                return list(self.labels[name[1:]])
            if name == RANDOM_NODE:
                drawn = drawn or draw_node(self.nodes, self.rng)
                return [drawn]
            if not is_role(name):
                return [name]
            if leader_and_members is None:
                try:
                    leader_and_members = control.queue_leader(self.queue)
                except Exception as e:  # noqa: BLE001 - no node answered: the step cannot aim
                    raise NemesisError(f"cannot find the leader of {self.queue}: {e}") from None
            leader, members = leader_and_members
            if name == "non-members":
                return [n for n in self.nodes if n not in members]
            return [leader] if name == "leader" else [m for m in members if m != leader]

        resolved = {
            key: sorted({n for name in names for n in names_of(name)})
            for key, names in fields.items()
        }
        if net.history:
            # The resolve event's shape is Kafka's: roles and nodes by target, from and to.
            said = {"nodes": "target", "from_": "from", "to": "to"}
            roles = {said[k]: ",".join(v) for k, v in fields.items() if any(is_role(n) for n in v)}
            nodes = {said[k]: v for k, v in resolved.items() if v}
            value = {"op": step.op, "queue": self.queue, "roles": roles, "nodes": nodes}
            net.history.write("info", "resolve", value=value)
        if step.label:
            self.labels[step.label] = resolved["nodes"] or resolved["from_"]
        return step.model_copy(update=resolved)

    def _drawn_sides(self, net: Nemesis, step: NemesisStep) -> NemesisStep:
        assert step.shape is not None
        groups = draw_groups(step.shape, self.nodes, self.rng)
        if net.history:
            # The sides beside the roles, not under `nodes`: coverage reads that as node lists.
            value = {"op": step.op, "roles": {"groups": step.shape}, "groups": groups}
            net.history.write("info", "resolve", value=value)
        if step.label:
            self.labels[step.label] = groups[0]
        return step.model_copy(update={"groups": groups, "shape": None})


def block_publishers(net: Nemesis, control: RabbitMQControl, nodes: list[str]) -> None:
    """Memory high watermark 0 on each node: its publishers are blocked, consumers go on. A
    runtime setting: a restart of the node brings its configured watermark back."""

    def apply() -> None:
        for node in nodes:
            control.set_memory_high_watermark(node, 0.0)

    net.logged("block-publishers", {"nodes": nodes, "vm_memory_high_watermark": 0}, apply)


def wait_drained(
    net: Nemesis, control: RabbitMQControl, nodes: list[str], within: float, poll: float = 1.0
) -> None:
    """Waits, at most `within` seconds, until every queue each node hosts holds no message. Not
    drained in time is recorded (`drained: false`) and the schedule goes on: the procedure's
    assumption did not hold, and the verdict will say what that cost."""

    def apply() -> dict[str, Any]:
        deadline = time.monotonic() + within
        left: dict[str, dict[str, int]] = {}
        while True:
            left = {}
            for node in nodes:
                try:
                    counts = control.queue_messages(node)
                except Exception:  # noqa: BLE001 - a node busy answering: ask again
                    left[node] = {"(no answer)": 1}
                    continue
                if busy := {q: n for q, n in counts.items() if n}:
                    left[node] = busy
            if not left or time.monotonic() >= deadline:
                return {"drained": not left, "left": left}
            time.sleep(poll)

    net.logged("wait-drained", {"nodes": nodes, "within": within}, apply)


Handler = Callable[[Nemesis, RabbitMQControl, NemesisStep], None]

HANDLERS: dict[str, Handler] = {
    "isolate": lambda n, _c, s: n.isolate(s.nodes),
    "partition": lambda n, _c, s: n.partition(s.groups),
    "cut": lambda n, _c, s: n.cut(s.from_, s.to),
    "cut-clients": lambda n, _c, s: n.cut_clients(s.nodes),
    "heal": lambda n, _c, s: n.heal(s.nodes or None),
    "kill": lambda n, _c, s: n.kill(s.nodes),
    "stop": lambda n, _c, s: n.stop(s.nodes),
    "start": lambda n, _c, s: n.start(s.nodes),
    "restart": lambda n, _c, s: n.restart(s.nodes),
    "pause": lambda n, _c, s: n.pause(s.nodes),
    "resume": lambda n, _c, s: n.resume(s.nodes),
    "power-loss": lambda n, _c, s: n.power_loss(s.nodes),
    **{op: lambda n, _c, s: apply_disk_fault(n, s.op, s.nodes, s) for op in DISK_OPS},
    **{op: lambda n, _c, s: apply_clock_fault(n, s.op, s.nodes, s) for op in CLOCK_OPS},
    "block-publishers": lambda n, c, s: block_publishers(n, c, s.nodes),
    "wait-drained": lambda n, c, s: wait_drained(n, c, s.nodes, s.within),
    "forget-node": lambda n, c, s: c.membership.forget(n, s.nodes),
    "add-node": lambda n, c, s: c.membership.add(n, s.nodes or None),
    "shrink-queue": lambda n, c, s: c.membership.shrink(n, s.nodes),
    "grow-queue": lambda n, c, s: c.membership.grow(n, s.nodes or None),
    "upgrade": lambda n, c, s: upgrade(n, c, s),
    "finalize-feature": lambda n, c, s: finalize_feature(n, c, s),
    "declare": lambda n, c, s: c.declares.probe(n, s.nodes, s.within),
    **{op: lambda n, _c, s: apply_client_fault(n, s.op, s.nodes, s) for op in CLIENT_PATH_OPS},
}


def apply_step(
    net: Nemesis, control: RabbitMQControl, step: NemesisStep, targets: StepTargets | None = None
) -> None:
    """One scenario step, its roles resolved, by its op's handler."""
    handler = HANDLERS.get(step.op)
    if handler is None:
        raise NemesisError(f"no RabbitMQ handler for fault op {step.op!r}")
    if targets is not None:
        step = targets.resolve(net, control, step)
    handler(net, control, step)
