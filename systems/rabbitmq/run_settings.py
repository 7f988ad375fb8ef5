"""A RabbitMQ scenario's settings as a run applies and records them: the rabbitmq.conf keys its
cluster gets, the policies a run sets (the harness's mirroring policy first), and the manifest's
record of every setting that is not RabbitMQ's or pika's default (what the scenario chose among
them apart). The knobs, the keys they become and what the scenario may not set are
systems.rabbitmq.settings', which the scenario's schema checks against; this reads the
scenario.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from fnmatch import fnmatchcase
from typing import Any

from systems.rabbitmq.scenario import RabbitMQClusterSpec, RabbitMQScenario
from systems.rabbitmq.settings import (
    MIRRORING_POLICY,
    TYPED_CONF,
    TYPED_POLICY,
    connection_of,
    consumer_process,
    covers,
    declare_arguments_of,
    rendered,
    typed_conf,
)


def conf_of(c: RabbitMQClusterSpec) -> dict[str, str]:
    """A scenario's rabbitmq.conf keys (typed knobs and passthrough), rendered."""
    return typed_conf(
        c.partition_handling,
        c.net_ticktime,
        c.pause_if_all_down_nodes,
        c.pause_if_all_down_recover,
        rendered(c.rabbitmq_conf),
    )


# ---- what a run applies ------------------------------------------------------------------------


def mirroring_definition(c: RabbitMQClusterSpec) -> dict[str, Any]:
    """The harness's mirroring policy: every node, synchronised automatically unless the
    scenario says otherwise."""
    settings = {
        key: getattr(c, knob) for knob, key in TYPED_POLICY.items() if getattr(c, knob) is not None
    }
    return {"ha-mode": "all", **settings}


def effective_policies(c: RabbitMQClusterSpec, queues: Sequence[str]) -> list[dict[str, Any]]:
    """Every policy a run sets, in order: with mirrored queues the harness's on the workload's
    queues first, then the scenario's. A queue follows one policy only (the highest priority),
    so a scenario policy that covers a mirrored workload queue carries the mirroring keys too
    (its own ha-* keys over them), or it would unmirror the queue."""
    out: list[dict[str, Any]] = []
    mirrored = c.queue_type == "mirrored"
    ha = mirroring_definition(c) if mirrored else {}
    if mirrored:
        out.append(
            {
                "name": MIRRORING_POLICY,
                "pattern": "^(" + "|".join(re.escape(q) for q in queues) + ")$",
                "definition": ha,
                "apply_to": "queues",
                "priority": 0,
            }
        )
    for p in c.policies:
        definition = dict(p.definition)
        if mirrored and any(covers(p, q) for q in queues):
            definition = {**ha, **definition}
        out.append(
            {
                "name": p.name,
                "pattern": p.pattern,
                "definition": definition,
                "apply_to": p.apply_to,
                "priority": p.priority,
            }
        )
    return out


# ---- the manifest's record ---------------------------------------------------------------------


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def settings_of(spec: RabbitMQScenario) -> dict[str, dict[str, str]]:
    """Every setting of a run that is not RabbitMQ's or pika's default, by section: the
    scenario's own and the typed knobs as the keys they become (the harness's wiring left out)."""
    c, w = spec.cluster, spec.workload
    clients: dict[str, str] = {}
    for p in w.publishers:
        for key, value in connection_of(p.connection.overrides()).items():
            clients[f"{p.id}.{key}"] = str(value)
        clients[f"{p.id}.in_flight"] = str(p.in_flight)
        clients[f"{p.id}.confirm_timeout"] = str(p.confirm_timeout)
    for i, consumer in enumerate(w.consumers, 1):
        name = consumer_process(i, consumer.queue)
        for key, value in connection_of(consumer.connection.overrides()).items():
            clients[f"{name}.{key}"] = str(value)
        clients[f"{name}.prefetch"] = str(consumer.prefetch)
    queue_arguments = {
        q: _compact(args)
        for q in w.queues
        if (args := declare_arguments_of(c.queue_type, q, w.queue_arguments))
    }
    return {
        "rabbitmq_conf": conf_of(c),
        "advanced_config": {"advanced.config": c.advanced_config} if c.advanced_config else {},
        "policies": {
            p["name"]: _compact({k: v for k, v in p.items() if k != "name"})
            for p in effective_policies(c, w.queues)
        },
        "queue_arguments": queue_arguments,
        "clients": clients,
    }


def chosen_settings(
    spec: RabbitMQScenario, settings: dict[str, dict[str, str]]
) -> dict[str, list[str]]:
    """Of settings_of's keys, those the scenario chose (the rest are typed knobs left at the
    harness's defaults, and the harness's own mirroring policy)."""
    c, w = spec.cluster, spec.workload
    chosen_knobs = set(c.model_fields_set)
    conf = [
        k
        for k in settings.get("rabbitmq_conf", {})
        if k in c.rabbitmq_conf
        or any(
            knob in chosen_knobs and any(fnmatchcase(k, p) for p in patterns)
            for knob, patterns in TYPED_CONF.items()
        )
    ]
    own_policies = {p.name for p in c.policies}
    clients = []
    for p in w.publishers:
        clients += [f"{p.id}.{k}" for k in connection_of(p.connection.overrides())]
        clients += [
            f"{p.id}.{k}" for k in ("in_flight", "confirm_timeout") if k in p.model_fields_set
        ]
    for i, consumer in enumerate(w.consumers, 1):
        name = consumer_process(i, consumer.queue)
        clients += [f"{name}.{k}" for k in connection_of(consumer.connection.overrides())]
        clients += [f"{name}.prefetch"] if "prefetch" in consumer.model_fields_set else []
    return {
        "rabbitmq_conf": sorted(conf),
        "advanced_config": sorted(settings.get("advanced_config", {})),
        "policies": sorted(k for k in settings.get("policies", {}) if k in own_policies),
        "queue_arguments": sorted(w.queue_arguments),
        "clients": sorted(clients),
    }
