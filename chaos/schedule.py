"""A base scenario with a generated schedule: an ordinary scenario, written as a scenario file.

The base gives the cluster, the workload and what the configuration promises; its own nemesis
is replaced by the drawn steps. The producers send for the schedule's length (their rate times
its seconds), and the workload's bound grows with it. The result is validated by the system's
own schema, so a generated step is held to what a hand-written one is.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from chaos.generator import ChaosError, ChaosOptions, draw_schedule
from chaos.menu import RABBITMQ_ROLES, ClusterShape, Step
from systems.kafka.config import nodes_of
from systems.kafka.scenario import KafkaScenario
from systems.kafka.targets import COORDINATOR_TOPICS, SHARE_COORDINATOR
from systems.kafka.upgrade import upgrade_order
from systems.rabbitmq.scenario import RabbitMQScenario
from systems.registry import AnyScenario, parse_scenario
from systems.scenario import ScenarioError, scenario_data, to_yaml

# Past the schedule, the workload phase's bound leaves the producers this much to finish.
WORKLOAD_MARGIN = 120.0


def shape_of(base: AnyScenario, kafka_mode: str | None = None) -> ClusterShape:
    """What the generator aims at: the base's cluster (in the Kafka mode given, or its first)."""
    if isinstance(base, KafkaScenario):
        mode = mode_of(base, kafka_mode)
        # A spare broker is not started: no drawn fault may aim at it.
        every = nodes_of(base.cluster.config(mode), "0.0.0")  # type: ignore[arg-type]
        nodes = [n for n in every if not n.spare]
        dynamic = base.cluster.controller_quorum == "dynamic"
        return ClusterShape(
            system="kafka",
            brokers=tuple(n.name for n in nodes if n.role in ("broker", "combined")),
            nodes=tuple(n.name for n in nodes),
            partitions=base.cluster.partitions,
            lazy_disks=base.cluster.lazy_disks,
            quorum_apart=mode != "kraft",
            coordinators=coordinators_of(base),
            restartable=tuple(base.workload.client_ids()),
            spares=base.cluster.spare_brokers,
            # What the schema's membership check holds a decommission to.
            keep_brokers=max(base.cluster.replication_factor, base.cluster.min_insync_replicas),
            upgrade_path=upgrade_path_of(base),
            upgradable=tuple(upgrade_order(nodes)),
            migration_controllers=base.cluster.migration_controllers if mode == "zk" else 0,
            # A removed voter is stopped: a combined node (a broker too) is never one to remove.
            voters=tuple(n.name for n in nodes if n.role == "controller") if dynamic else (),
            spare_controllers=base.cluster.spare_controllers if dynamic else 0,
            fake_clock=base.cluster.fake_clock,
        )
    if isinstance(base, RabbitMQScenario):
        names = base.cluster.node_names()
        leader = base.cluster.queue_type in ("quorum", "stream")  # a queue with a leader to aim at
        return ClusterShape(
            "rabbitmq",
            names,
            names,
            lazy_disks=base.cluster.lazy_disks,
            roles=RABBITMQ_ROLES if leader else (),
            load_balancer=base.cluster.load_balancer,
            quorum_queues=base.cluster.queue_type == "quorum",
            fake_clock=base.cluster.fake_clock,
            upgrade_path=upgrade_path_of(base),
            upgradable=names,
        )
    brokers = tuple(str(i) for i in range(1, base.cluster.brokers + 1))
    return ClusterShape("kafka-mock", brokers, brokers, partitions=base.cluster.partitions)


def upgrade_path_of(base: AnyScenario) -> tuple[Step, ...]:
    """The base's upgrade path (chaos.upgrade_path), its steps as the base wrote them."""
    path = base.chaos.upgrade_path if base.chaos is not None else None
    return tuple(dict(step) for step in path or ())


def coordinators_of(base: KafkaScenario) -> tuple[str, ...]:
    """The coordinator roles a drawn fault may aim at: a base with transactional producers or
    copiers, or share consumers, gets each coordinator its clients have (the transaction
    coordinator, the copiers' or a group reader's group coordinator, the share coordinator of
    the share group's state); any other base none, so that each seed still draws the schedule
    it drew before coordinators were targets (a night's seeds, a found scenario's
    generated.seed)."""
    coordinated = base.workload.coordinated()
    if not {"transaction-coordinator", SHARE_COORDINATOR} & set(coordinated):
        return ()
    return tuple(role for role in COORDINATOR_TOPICS if role in coordinated)


def mode_of(base: KafkaScenario, kafka_mode: str | None) -> str:
    mode = kafka_mode or base.cluster.modes[0]
    if mode not in base.cluster.modes:
        raise ScenarioError(f"{base.id} runs in {', '.join(base.cluster.modes)}, not {mode}")
    return mode


def workload_seconds(base: AnyScenario) -> float:
    """How long the base's producers send: the longest count / rate."""
    producers = _producers(base)
    if any(p["rate"] <= 0 for p in producers):
        raise ChaosError(
            f"{base.id}: every producer of a chaos base needs a rate (messages per second), "
            "so the schedule knows how long the traffic lasts"
        )
    return max(p["count"] / p["rate"] for p in producers)


def _producers(base: AnyScenario) -> list[dict[str, Any]]:
    workload = base.workload
    specs = workload.publishers if isinstance(base, RabbitMQScenario) else workload.producers  # type: ignore[union-attr]
    return [{"count": p.count, "rate": p.rate} for p in specs]


def chaos_scenario(
    base: AnyScenario,
    opts: ChaosOptions,
    kafka_mode: str | None = None,
) -> tuple[AnyScenario, list[Step]]:
    """The base with a schedule drawn from opts.seed, over opts.seconds of traffic (its first
    fault no earlier than the base's own `chaos.warmup`)."""
    workload_seconds(base)  # every producer has a rate to stretch
    asked, opts = opts, options_for(base, opts)
    if opts is not asked:
        asked.check()
        try:
            opts.check()  # what fails now is the base's warmup
        except ChaosError as e:
            raise ChaosError(f"{e} (the warmup is {base.id}'s chaos.warmup)") from None
    try:
        steps = draw_schedule(shape_of(base, kafka_mode), opts)
    except ChaosError as e:
        if asked.faults is None and opts.faults is not None:
            raise ChaosError(f"{e} (the families of {base.id}'s chaos.faults)") from None
        raise
    data = scenario_data(base)
    data["id"] = f"{base.id}-s{opts.seed}"
    data["description"] = (
        f"generated by harness chaos from {base.id}, seed {opts.seed}: {len(steps)} steps "
        f"over {opts.seconds:.0f} s"
    )
    data["nemesis"] = steps
    _stretch_workload(base, data, opts.seconds)
    mode = None
    if isinstance(base, KafkaScenario):
        mode = mode_of(base, kafka_mode)
        data["cluster"]["modes"] = [mode]
    data["generated"] = {
        "base": base.id,
        "seed": opts.seed,
        "mode": mode,
        "options": opts.as_dict(),
    }
    return parse_generated(data), steps


def options_for(base: AnyScenario, opts: ChaosOptions) -> ChaosOptions:
    """The options a schedule for this base is drawn with: a base that needs traffic before
    its first fault (`chaos: {warmup: S}`) gets at least that much, one whose schedule needs
    longer than the night's traffic (`chaos: {traffic: S}`: an upgrade path, a migration) gets
    that much traffic at least, and one made for families drawn only by name (`chaos: {faults:
    [disk]}`) draws those when `--faults` names none."""
    own = base.chaos
    if own is None:
        return opts
    if own.faults is not None and opts.faults is None:
        opts = replace(opts, faults=frozenset(own.faults))
    if own.warmup > opts.warmup:
        opts = replace(opts, warmup=own.warmup)
    if own.traffic > opts.seconds:
        opts = replace(opts, seconds=own.traffic)
    return opts


def _stretch_workload(base: AnyScenario, data: dict[str, Any], seconds: float) -> None:
    key = "publishers" if isinstance(base, RabbitMQScenario) else "producers"
    for p in data["workload"][key]:
        p["count"] = max(1, math.ceil(p["rate"] * seconds))
    timeouts = data.setdefault("timeouts", {})
    timeouts["workload"] = min(7200.0, seconds + WORKLOAD_MARGIN)


def parse_generated(data: dict[str, Any]) -> AnyScenario:
    """A generated scenario through the system's schema; a step it refuses is our bug, said in
    one line."""
    try:
        return parse_scenario(to_yaml(data), "<generated schedule>")
    except ScenarioError as e:
        raise ChaosError(f"the generator drew a step the schema refuses: {e}") from None


def steps_yaml(steps: list[Step]) -> str:
    """The schedule alone, as a scenario file's `nemesis:`."""
    return to_yaml({"nemesis": steps})
