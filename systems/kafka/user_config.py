"""A team's own Kafka files on a scenario (`harness run --config`): a server.properties becomes
broker_config, a topic's properties topic_config, a producer's or consumer's properties every
producer's or reader's config. What the harness owns, what a typed knob of the scenario already
sets, and a client key librdkafka does not have are left out, each with its reason."""

from __future__ import annotations

from collections.abc import Mapping

import yaml

from systems.config_files import ConfigFile
from systems.kafka.configdefs import owned_refusal
from systems.kafka.scenario import KafkaScenario
from systems.kafka.settings import (
    OWNED_CLIENT,
    TYPED_BROKER,
    TYPED_PRODUCER,
    TYPED_READER,
    TYPED_TOPIC,
    client_refusal,
)
from systems.registry import parse_scenario
from systems.scenario import ScenarioError, scenario_data

FIELDS = {"broker": ("broker_config", TYPED_BROKER), "topic": ("topic_config", TYPED_TOPIC)}
CLIENTS = {"producer": ("producers", TYPED_PRODUCER), "reader": ("readers", TYPED_READER)}


def _knob_of(key: str, typed: Mapping[str, tuple[str, ...]], chosen: set[str]) -> str | None:
    return next((k for k, props in typed.items() if key in props and k in chosen), None)


def with_config_files(
    spec: KafkaScenario, files: list[ConfigFile]
) -> tuple[KafkaScenario, list[str]]:
    """The scenario with the files' keys taken in (a file's key over the scenario's own), and a
    line for each key left out."""
    data = scenario_data(spec)
    notes: list[str] = []
    for f in files:
        if f.kind == "rabbitmq":
            raise ScenarioError(f"--config {f.path}: a rabbitmq.conf, and {spec.id} is Kafka's")
        if f.kind in FIELDS:
            field, typed = FIELDS[f.kind]
            chosen = set(spec.cluster.model_fields_set)
            taken = data["cluster"].setdefault(field, {})
            for key, value in f.values.items():
                owned = owned_refusal(key) if f.kind == "broker" else None
                knob = _knob_of(key, typed, chosen)
                if owned:
                    notes.append(f"{f.path}: {key} left out: the harness sets it ({owned})")
                elif knob:
                    notes.append(f"{f.path}: {key} left out: the scenario sets {knob}")
                else:
                    taken[key] = value
            continue
        group, typed = CLIENTS[f.kind]
        specs = getattr(spec.workload, group)
        for i, client in enumerate(specs):
            taken = data["workload"][group][i].setdefault("config", {})
            chosen = set(client.model_fields_set)
            for key, value in f.values.items():
                knob = _knob_of(key, typed, chosen)
                refused = client_refusal(f.kind, {key: value})
                if key in OWNED_CLIENT:
                    reason = f"the harness sets it ({OWNED_CLIENT[key]})"
                elif knob:
                    reason = f"{f.kind} {client.id} sets {knob}"
                elif refused:
                    reason = refused.removeprefix(f"{f.kind} config: ")
                else:
                    taken[key] = value
                    continue
                if i == 0 or knob:
                    notes.append(f"{f.path}: {key} left out: {reason}")
    text = yaml.safe_dump(data, sort_keys=False)
    merged = parse_scenario(text, f"{spec.id} with --config")
    assert isinstance(merged, KafkaScenario)
    return merged, notes
