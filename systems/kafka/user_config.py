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
from dataclasses import dataclass, field
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
from systems.kafka.key_check import owned_refusal
from systems.kafka.scenario import KafkaScenario, config_problems
from systems.kafka.settings import (
    OWNED_CLIENT,
    TYPED_BROKER,
    TYPED_PRODUCER,
    TYPED_READER,
    TYPED_TOPIC,
    client_refusal,
)
from systems.parsing import parse_as
from systems.scenario import ScenarioError, scenario_data

FIELDS = {"broker": ("broker_config", TYPED_BROKER), "topic": ("topic_config", TYPED_TOPIC)}
CLIENTS = {"producer": ("producers", TYPED_PRODUCER), "reader": ("readers", TYPED_READER)}
# A typed knob that is a part of a larger one: the producer's `transaction` knob sets
# transaction.timeout.ms through its timeout_ms.
KNOB_PART = {"transaction": "timeout_ms"}


@dataclass(frozen=True)
class _Knob:
    """A typed knob a file's key meets, and where its value sits in the scenario's data: the
    knob's own field, or a part of it (KNOB_PART)."""

    name: str
    field: str
    clash: KnobClash | None  # None: the scenario left it unset

    @property
    def is_part(self) -> bool:
        return self.name in KNOB_PART


def _knob(
    f: ConfigFile, key: str, typed: Mapping[str, tuple[str, ...]], owner: BaseModel, wins: bool
) -> _Knob | None:
    """The typed knob on `owner` (a cluster or a client) that `key` also sets, if any, and how
    the file's value meets the scenario's (systems.config_files.knob_clash)."""
    name = next((k for k, props in typed.items() if key in props), None)
    if name is None:
        return None
    model: BaseModel | None = owner
    field = name
    if name in KNOB_PART:
        model, field = getattr(owner, name), KNOB_PART[name]
    if model is None:  # a part of a larger knob the scenario left out
        return _Knob(name, field, None)
    label = f"{name}.{field}" if name in KNOB_PART else name
    return _Knob(name, field, knob_clash(f.path, key, f.values[key], label, model, field, wins))


def _take_over(data: dict[str, Any], knob: _Knob, value: str) -> bool:
    """Drop the knob from the scenario's data so the file's key rules; True when the key went into
    the knob itself instead (a part of a larger knob, which the client reads over its config)."""
    if knob.is_part:
        part = data.get(knob.name)
        if isinstance(part, dict):
            part.pop(knob.field, None)
            if value.strip().isdigit():
                part[knob.field] = int(value)
                return True
        return False
    data.pop(knob.name, None)
    return False


@dataclass
class _Merge:
    """The files' keys taken into one scenario's data, what became of each, and the conflicts."""

    spec: KafkaScenario
    data: dict[str, Any]
    config_wins: bool
    fates: list[KeyFate] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)

    def cluster_file(self, f: ConfigFile) -> None:
        name, typed = FIELDS[f.kind]
        cluster = self.data["cluster"]
        into = cluster.setdefault(name, {})
        for key, value in f.values.items():
            owned = owned_refusal(key) if f.kind == "broker" else None
            if owned:
                why = f"the harness sets it ({owned})"
                self.fates.append(KeyFate(f.path, f.kind, key, value, "left out", why))
                continue
            knob = _knob(f, key, typed, self.spec.cluster, self.config_wins)
            if self._conflicts(knob, ""):
                continue
            if knob is not None and knob.clash is not None:
                _take_over(cluster, knob, value)
            into[key] = value
            self.fates.append(taken(f.path, f.kind, key, value, knob.clash if knob else None))

    def client_file(self, f: ConfigFile) -> None:
        group, typed = CLIENTS[f.kind]
        for i, client in enumerate(getattr(self.spec.workload, group)):
            entry = self.data["workload"][group][i]
            scope = f"{f.kind} {client.id}"
            for key, value in f.values.items():
                if why := _left_out(f.kind, key, value):
                    self.fates.append(KeyFate(f.path, scope, key, value, "left out", why))
                    continue
                knob = _knob(f, key, typed, client, self.config_wins)
                if self._conflicts(knob, f"{scope}: "):
                    continue
                # A part of a larger knob the client has (a transactional producer's timeout)
                # is read over the client's config: the key goes into the knob, clash or not.
                into_knob = knob is not None and (knob.clash is not None or knob.is_part)
                if not (into_knob and knob is not None and _take_over(entry, knob, value)):
                    entry.setdefault("config", {})[key] = value
                self.fates.append(taken(f.path, scope, key, value, knob.clash if knob else None))

    def _conflicts(self, knob: _Knob | None, where: str) -> bool:
        """Whether the key stops the run (said once, with the others, at the end)."""
        if knob is None or knob.clash is None or knob.clash.fate is not None:
            return False
        self.conflicts.append(where + knob.clash.why)
        return True


def _left_out(kind: str, key: str, value: str) -> str | None:
    """Why a client file's key is not taken: the harness owns it, or librdkafka has no such
    key (a Java client's)."""
    if key in OWNED_CLIENT:
        return f"the harness sets it ({OWNED_CLIENT[key]})"
    if refused := client_refusal(kind, {key: value}):
        return refused.removeprefix(f"{kind} config: ")
    return None


def with_config_files(
    spec: KafkaScenario, files: list[ConfigFile], config_wins: bool = False
) -> tuple[KafkaScenario, list[KeyFate]]:
    """The scenario with the files' keys taken in, and the fate of every key of every file.
    Every conflict with a knob the scenario chose is one line of the ScenarioError raised."""
    merge = _Merge(spec, scenario_data(spec), config_wins)
    for f in files:
        if f.kind == "rabbitmq":
            raise ScenarioError(f"--config {f.path}: a rabbitmq.conf, and {spec.id} is Kafka's")
        if f.kind in FIELDS:
            merge.cluster_file(f)
        else:
            merge.client_file(f)
    if merge.conflicts:
        raise conflicts_error(merge.conflicts)
    text = yaml.safe_dump(merge.data, sort_keys=False)
    merged = parse_as(text, f"{spec.id} with --config", KafkaScenario, config_problems)
    return merged, merge.fates
