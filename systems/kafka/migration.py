"""A ZooKeeper-mode cluster migrated to KRaft under load, as Kafka 3.9's documentation ("ZooKeeper
to KRaft Migration") has an operator do it, one phase per `migrate` step so that faults can be
scheduled between the phases:

  controllers  the declared KRaft controllers formatted with ZooKeeper's cluster id (/cluster/id)
               and started in migration mode (zookeeper.connect, zookeeper.metadata.migration
               .enable): once a leader is elected they wait for the brokers, nothing copied yet
  brokers      each broker recreated with the migration's settings added (the controllers'
               quorum and listener, inter.broker.protocol.version) while still in ZooKeeper
               mode, back in the ISR before the next; once the last has registered with the
               controllers, the active controller copies ZooKeeper's metadata and becomes the
               cluster's controller, writing every change to ZooKeeper too (dual write)
  kraft        each broker recreated in KRaft mode (process.roles=broker, node.id = its
               broker.id, no zookeeper.connect), back in the ISR before the next; the controllers
               still write to ZooKeeper
  finalize     each controller recreated without the migration's flag and without
               zookeeper.connect, caught up before the next; the first that leads after writes
               that the migration is over, and ZooKeeper is read no more

Each node's move is one event (`migrate`, its node down from the invoke to the ok, as an
upgrade's), with what the node says as it comes back: the line its log or the active
controller's log holds when the step it ends has happened (`signal`, `phase_signal`), for no
tool or metric here says so (Kafka's ZkMigrationState is a JMX metric; the images expose no JMX).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, get_args

from contract.topology import Topology
from contract.wait import wait_until
from nemesis.containers import NemesisError
from systems.kafka.config import Node, NodeStage
from systems.kafka.node_steps import NodeSteps

Phase = Literal["controllers", "brokers", "kraft", "finalize"]
PHASES: tuple[Phase, ...] = get_args(Phase)
# How often a moved node is asked whether it is back.
POLL_SECONDS = 1.0

# Per phase: the role of the nodes it moves, and how they run after it.
MOVES: dict[Phase, tuple[Literal["controller", "broker"], NodeStage]] = {
    "controllers": ("controller", "migrating"),
    "brokers": ("broker", "migrating"),
    "kraft": ("broker", "kraft"),
    "finalize": ("controller", "kraft"),
}
# What a moved node's own log says once it is what the phase made it (Kafka 3.9's words): a
# ZooKeeper-mode broker registered with the KRaft controllers (BrokerLifecycleManager), a KRaft
# broker's server started (BrokerServer).
NODE_SIGNALS: dict[Phase, str] = {
    "brokers": "Successfully registered broker",
    "kraft": "Transition from STARTING to STARTED",
}
# What the active controller's log says once the phase's last node has moved
# (KRaftMigrationDriver, ActivationRecordsGenerator): the quorum ready and waiting for the
# brokers; ZooKeeper's metadata copied (the migration proper); the migration finished by a
# controller leading without the flag (ZkMigrationState POST_MIGRATION).
PHASE_SIGNALS: dict[Phase, str] = {
    "controllers": "Controller Quorum is ready for Zk to KRaft migration",
    "brokers": "Completed migration of metadata from ZooKeeper to KRaft",
    "finalize": "Completing the ZK migration since this controller was configured with",
}


class MigrationControl(Protocol):
    """What the migration asks of the cluster (systems.kafka.cluster.KafkaCluster)."""

    @property
    def nodes(self) -> list[Node]: ...

    def stage_of(self, node: str) -> NodeStage: ...

    def started(self, node: str) -> bool: ...

    def zookeeper_cluster_id(self, via: str) -> str: ...

    def adopt_cluster_id(self, cluster_id: str) -> None: ...

    def migrate_node(self, node: str, stage: NodeStage, timeout: float = 180) -> Topology: ...

    def logged_line(self, nodes: Sequence[str], text: str, since: float) -> str | None: ...

    def active_controller(self, candidates: list[str]) -> str | None: ...

    def controller_caught_up(self, controller: str, since_ms: int, via: str) -> bool: ...


class MigrationSteps(NodeSteps, Protocol):
    """What the migration uses of the Kafka nemesis (systems.kafka.nemesis dispatches to it)."""

    migrations: MigrationControl | None


def phase_nodes(nodes: Iterable[Node], phase: Phase) -> list[Node]:
    """The nodes a phase moves, by id: every broker but the spares, or the migration's
    controllers (a zk cluster's, declared spare)."""
    role, _ = MOVES[phase]
    chosen = [
        n for n in nodes if n.role == role and (n.spare if role == "controller" else not n.spare)
    ]
    return sorted(chosen, key=lambda n: n.node_id)


def order_refusal(phases: Sequence[str]) -> str | None:
    """One line when a schedule's phases are not Kafka's order, each once: controllers, brokers,
    kraft, finalize (a schedule may stop before the end)."""
    for i, phase in enumerate(phases):
        if i >= len(PHASES):
            return f"migrate {phase}: every phase has run already (each runs once)"
        if phase != PHASES[i]:
            before = f"after {PHASES[i - 1]}" if i else "first"
            return (
                f"migrate {phase}: the phase {before} is {PHASES[i]} (phases run in order, "
                f"each once: {', '.join(PHASES)})"
            )
    return None


def phase_refusal(
    phase: Phase, stages: dict[str, NodeStage | None], nodes: Sequence[Node]
) -> str | None:
    """Why the cluster as it runs now cannot take the phase (a phase before it did not end).
    `stages`: how each Kafka node runs, None for a controller declared and not started."""
    controllers = [stages[n.name] for n in phase_nodes(nodes, "controllers")]
    if not controllers:
        return "the cluster declares no migration controllers (cluster.migration_controllers)"
    brokers = [stages[n.name] for n in phase_nodes(nodes, "brokers")]
    needs = {
        "controllers": (all(s == "zk" for s in brokers), "its brokers run in ZooKeeper mode"),
        "brokers": (
            None not in controllers and "kraft" not in brokers,
            "its migration controllers run and no broker runs in KRaft mode yet",
        ),
        "kraft": ("zk" not in brokers, "every broker runs with the migration's settings"),
        "finalize": (all(s == "kraft" for s in brokers), "every broker runs in KRaft mode"),
    }
    holds, what = needs[phase]
    return None if holds else f"migrate {phase} needs a cluster where {what}"


def _control(k: MigrationSteps) -> MigrationControl:
    if k.migrations is None:
        raise NemesisError("this run's nemesis cannot migrate the cluster")
    return k.migrations


def _running_broker(control: MigrationControl, down: Iterable[str], avoid: str = "") -> str:
    """A broker that runs now, to run Kafka's tools in."""
    skip = set(down) | {avoid}
    for n in phase_nodes(control.nodes, "brokers"):
        if n.name not in skip:
            return n.name
    raise NemesisError("no running broker to run Kafka's tools in")


@dataclass(frozen=True)
class PhaseRun:
    """One phase as it runs: where its nodes go, when it began (epoch seconds: the logs are read
    from then), each node's bound, how many nodes it moves, and what every ok says besides."""

    phase: Phase
    stage: NodeStage
    began: float
    within: float
    count: int
    extra: dict[str, Any]


def migrate(k: MigrationSteps, step: Any) -> None:
    """The step's phase, node by node, each back before the next; a node that runs as the
    phase leaves it already is left as it is."""
    control = _control(k)
    phase: Phase = step.phase
    stages: dict[str, NodeStage | None] = {
        n.name: control.stage_of(n.name) if control.started(n.name) else None
        for n in control.nodes
        if n.role != "zookeeper"
    }
    if refusal := phase_refusal(phase, stages, control.nodes):
        raise NemesisError(refusal)
    _, stage = MOVES[phase]
    moving = [n for n in phase_nodes(control.nodes, phase) if stages[n.name] != stage]
    extra: dict[str, Any] = {}
    if phase == "controllers" and moving:
        # The controllers join the cluster the brokers form: formatted with its id, which the
        # first broker wrote to ZooKeeper.
        cluster_id = control.zookeeper_cluster_id(_running_broker(control, k.net.down))
        control.adopt_cluster_id(cluster_id)
        extra["cluster_id"] = cluster_id
    run = PhaseRun(phase, stage, time.time(), step.within, len(moving), extra)
    for nth, node in enumerate(moving, start=1):
        _migrate_one(k, control, run, node, nth)


def _migrate_one(
    k: MigrationSteps, control: MigrationControl, run: PhaseRun, node: Node, nth: int
) -> None:
    """One node's move (the phase's `nth`), one event."""
    value = {"nodes": [node.name], "phase": run.phase, "within": run.within}
    if k.history:  # each node faulted afresh: what it holds as its turn comes
        k._log_resolution("migrate", {}, {"target": [node.name]}, None, now=k.roles_now())

    def act() -> dict[str, Any]:
        started = time.monotonic()
        k.net.replaced(node.name, control.migrate_node(node.name, run.stage))
        back = _back(k, control, node, run, nth, since_ms=int(time.time() * 1000))
        signals = _signals(control, node, run, last=nth == run.count)
        in_sync: bool | None = None
        if back is None:
            ended = "a minority of the controllers runs: no leader to wait for"
        else:
            ready = back
            done = wait_until(
                lambda: ready() and all(said() is not None for said in signals.values()),
                run.within,
                interval=POLL_SECONDS,
            )
            in_sync = done or back()
            ended = "in sync" if done else f"bound ({run.within:g} s)"
        return {
            "stage": run.stage,
            **run.extra,
            **{key: said() for key, said in signals.items()},
            "in_sync": in_sync,
            "ended_by": ended,
            "waited_s": round(time.monotonic() - started, 1),
        }

    k.net.logged("migrate", value, act)


def _back(
    k: MigrationSteps,
    control: MigrationControl,
    node: Node,
    run: PhaseRun,
    nth: int,
    since_ms: int,
) -> Callable[[], bool] | None:
    """Whether the moved node is back, as its phase means it: a broker registered and in the
    ISR of every partition it replicates; a controller of the first start, once a majority of
    them runs, in a quorum with a leader (None before: a minority has none to wait for); a
    finalized controller seen caught up by the quorum's leader since it started again."""
    if node.role == "broker":
        return lambda: k._rejoined(node.node_id)
    if run.phase == "controllers":
        if nth <= run.count // 2:
            return None
        return lambda: control.active_controller([]) is not None

    def caught_up() -> bool:
        via = _running_broker(control, k.net.down)
        return control.controller_caught_up(node.name, since_ms, via)

    return caught_up


def _signals(
    control: MigrationControl, node: Node, run: PhaseRun, last: bool
) -> dict[str, Callable[[], str | None]]:
    """The lines the node's move waits for, by the ok's key: its own log's (`signal`) and, for
    the phase's last node, the controllers' (`phase_signal`)."""
    out: dict[str, Callable[[], str | None]] = {}
    if text := NODE_SIGNALS.get(run.phase):
        out["signal"] = lambda: control.logged_line([node.name], text, run.began)
    if last and (said := PHASE_SIGNALS.get(run.phase)):
        controllers = [n.name for n in phase_nodes(control.nodes, "controllers")]
        out["phase_signal"] = lambda: control.logged_line(controllers, said, run.began)
    return out
