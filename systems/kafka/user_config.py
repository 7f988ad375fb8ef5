"""A team's own Kafka files on a scenario (`harness run --config`): a server.properties becomes
broker_config, a topic's properties topic_config, a producer's or consumer's properties every
producer's or reader's config.

The file's settings are what the user asks about, so they win or the run does not start: a key
whose typed knob the scenario leaves unset, or sets to its default (what a template writes),
is taken and the knob dropped; a key whose knob the scenario set to another value stops the run
(one line per conflict) unless --config-wins lets the file win. What the harness owns and a
client key librdkafka does not have are left out, each with its reason."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml
from pydantic import BaseModel

from systems.config_files import (
    ConfigFile,
    KeyFate,
    KnobClash,
    conflicts_error,
    knob_clash,
    taken,
)
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
# A typed knob that is a part of a larger one: the producer's `transaction` knob sets
# transaction.timeout.ms through its timeout_ms.
KNOB_PART = {"transaction": "timeout_ms"}


def _knob_of(key: str, typed: Mapping[str, tuple[str, ...]]) -> str | None:
    return next((k for k, props in typed.items() if key in props), None)


def _clash(
    f: ConfigFile, key: str, knob: str, owner: BaseModel, config_wins: bool
) -> tuple[KnobClash | None, BaseModel | None, str]:
    """The clash of a file's key with the knob on `owner` (a cluster or a client), and where the
    knob's value lives (a model and its field) so that it can be dropped."""
    model: BaseModel | None = owner
    field = knob
    if knob in KNOB_PART:
        model, field = getattr(owner, knob), KNOB_PART[knob]
    if model is None:  # a knob part of a larger knob the scenario left out
        return None, None, field
    label = f"{knob}.{field}" if knob in KNOB_PART else knob
    return knob_clash(f.path, key, f.values[key], label, model, field, config_wins), model, field


def _take_over(data: dict[str, Any], knob: str, field: str, key: str, value: str) -> bool:
    """Drop the knob from the scenario's data so the file's key rules; True when the key went into
    the knob itself instead (a part of a larger knob, which the client reads over its config)."""
    if knob in KNOB_PART:
        part = data.get(knob)
        if isinstance(part, dict):
            part.pop(field, None)
            if value.strip().isdigit():
                part[field] = int(value)
                return True
        return False
    data.pop(knob, None)
    return False


def with_config_files(
    spec: KafkaScenario, files: list[ConfigFile], config_wins: bool = False
) -> tuple[KafkaScenario, list[KeyFate]]:
    """The scenario with the files' keys taken in, and the fate of every key of every file.
    Every conflict with a knob the scenario chose is one line of the ScenarioError raised."""
    data = scenario_data(spec)
    fates: list[KeyFate] = []
    conflicts: list[str] = []
    for f in files:
        if f.kind == "rabbitmq":
            raise ScenarioError(f"--config {f.path}: a rabbitmq.conf, and {spec.id} is Kafka's")
        if f.kind in FIELDS:
            fates += _cluster_file(spec, data, f, config_wins, conflicts)
        else:
            fates += _client_file(spec, data, f, config_wins, conflicts)
    if conflicts:
        raise conflicts_error(conflicts)
    text = yaml.safe_dump(data, sort_keys=False)
    merged = parse_scenario(text, f"{spec.id} with --config")
    assert isinstance(merged, KafkaScenario)
    return merged, fates


def _cluster_file(
    spec: KafkaScenario,
    data: dict[str, Any],
    f: ConfigFile,
    config_wins: bool,
    conflicts: list[str],
) -> list[KeyFate]:
    field, typed = FIELDS[f.kind]
    cluster = data["cluster"]
    into = cluster.setdefault(field, {})
    fates: list[KeyFate] = []
    for key, value in f.values.items():
        owned = owned_refusal(key) if f.kind == "broker" else None
        if owned:
            fates.append(
                KeyFate(f.path, f.kind, key, value, "left out", f"the harness sets it ({owned})")
            )
            continue
        knob = _knob_of(key, typed)
        clash, _, part = (
            _clash(f, key, knob, spec.cluster, config_wins) if knob else (None, None, "")
        )
        if clash is not None and clash.fate is None:
            conflicts.append(clash.why)
            continue
        if clash is not None and knob:
            _take_over(cluster, knob, part, key, value)
        into[key] = value
        fates.append(taken(f.path, f.kind, key, value, clash))
    return fates


def _client_file(
    spec: KafkaScenario,
    data: dict[str, Any],
    f: ConfigFile,
    config_wins: bool,
    conflicts: list[str],
) -> list[KeyFate]:
    group, typed = CLIENTS[f.kind]
    fates: list[KeyFate] = []
    for i, client in enumerate(getattr(spec.workload, group)):
        entry = data["workload"][group][i]
        scope = f"{f.kind} {client.id}"
        for key, value in f.values.items():
            refused = client_refusal(f.kind, {key: value})
            if key in OWNED_CLIENT:
                why = f"the harness sets it ({OWNED_CLIENT[key]})"
                fates.append(KeyFate(f.path, scope, key, value, "left out", why))
                continue
            if refused:
                why = refused.removeprefix(f"{f.kind} config: ")
                fates.append(KeyFate(f.path, scope, key, value, "left out", why))
                continue
            knob = _knob_of(key, typed)
            clash, _, part = _clash(f, key, knob, client, config_wins) if knob else (None, None, "")
            if clash is not None and clash.fate is None:
                conflicts.append(f"{scope}: {clash.why}")
                continue
            # A part of a larger knob the client has (a transactional producer's timeout) is
            # read over the client's config: the key goes into the knob, clash or not.
            part_of = knob in KNOB_PART and getattr(client, knob or "") is not None
            into_knob = bool(knob and (clash or part_of)) and _take_over(
                entry, knob or "", part or KNOB_PART.get(knob or "", ""), key, value
            )
            if not into_knob:
                entry.setdefault("config", {})[key] = value
            fates.append(taken(f.path, scope, key, value, clash))
    return fates
