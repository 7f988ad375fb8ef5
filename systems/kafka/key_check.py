"""The check of a scenario's Kafka key and value against its release's own config definitions
(`systems.kafka.configdefs`), made before any container starts, and the keys the harness sets
itself."""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from contract.versions import version_key
from systems.kafka.configdefs import (
    NUMERIC,
    ConfigDef,
    Kind,
    committed_releases,
    definitions,
    load,
    release_for,
)
from workloads.kafka.properties import PropertyScalar, to_property

# ---- what the harness sets itself ----------------------------------------------------------------

_INTERNAL_RF = "the internal topics' replication follows cluster.brokers"
HARNESS_OWNED_BROKER: dict[str, str] = {
    "listeners": "the harness wires the listeners",
    "advertised.listeners": "the harness wires the listeners",
    "listener.security.protocol.map": "the harness wires the listeners",
    "inter.broker.listener.name": "the harness wires the listeners",
    "security.inter.broker.protocol": "the harness names the inter-broker listener",
    "controller.listener.names": "the harness wires the listeners",
    "node.id": "node ids follow the node names",
    "broker.id": "node ids follow the node names",
    "process.roles": "the mode decides each node's roles",
    "controller.quorum.voters": "the mode decides the quorum",
    "controller.quorum.bootstrap.servers": "the mode decides the quorum",
    "zookeeper.connect": "the harness runs the ZooKeeper ensemble",
    "zookeeper.metadata.migration.enable": "migrate steps set it, phase by phase",
    "log.dirs": "the data directory is where faults and lazy disks act",
    "log.dir": "the data directory is where faults and lazy disks act",
    "metadata.log.dir": "the data directory is where faults and lazy disks act",
    "broker.rack": "set cluster.racks",
    "auto.create.topics.enable": "the harness creates the workload's topic itself",
    "offsets.topic.replication.factor": _INTERNAL_RF,
    "transaction.state.log.replication.factor": _INTERNAL_RF,
}
# Per-listener overrides (listener.name.<listener>.<key>) re-wire listeners the harness owns.
HARNESS_OWNED_BROKER_PREFIXES: dict[str, str] = {
    "listener.name.": "the harness wires the listeners",
}
# None: the workload topic's shape (partitions, replicas, placement) is given at creation, not
# by configs, and the configs the harness sets (min.insync.replicas, ...) are typed knobs a
# topic_config key may override.
HARNESS_OWNED_TOPIC: dict[str, str] = {}


def _owned_prefix(key: str, kind: Kind) -> str | None:
    if kind == "broker":
        for prefix, reason in HARNESS_OWNED_BROKER_PREFIXES.items():
            if key.startswith(prefix):
                return reason
    return None


def owned_refusal(key: str, kind: Kind = "broker") -> str | None:
    """Why the harness keeps a key to itself, in a few words; None when a scenario may set it."""
    owned = HARNESS_OWNED_BROKER if kind == "broker" else HARNESS_OWNED_TOPIC
    return owned.get(key) or _owned_prefix(key, kind)


# ---- checking a key and its value ----------------------------------------------------------------


_JAVA_INTS = {"short": 15, "int": 31, "long": 63}
_NUMBER = r"-?\d+(?:\.\d+)?"
_RANGE = re.compile(rf"\[({_NUMBER}),\.\.\.(?:,({_NUMBER}))?\](?: or ({_NUMBER}))?")
_ENUM = re.compile(r"(\(case insensitive\) )?\[(\w+(?:, \w+)*)\]")
_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


@dataclass(frozen=True)
class _Range:
    low: float
    high: float | None
    also: float | None

    def allows(self, x: float) -> bool:
        within = x >= self.low and (self.high is None or x <= self.high)
        return within or x == self.also

    def words(self) -> str:
        low, high, also = (_num(v) for v in (self.low, self.high, self.also))
        said = f"of at least {low}" if high is None else f"from {low} to {high}"
        return said + (f" or {also}" if also is not None else "")


@dataclass(frozen=True)
class _Enum:
    items: tuple[str, ...]
    case_insensitive: bool

    def allows(self, s: str) -> bool:
        if self.case_insensitive:
            return s.lower() in (i.lower() for i in self.items)
        return s in self.items

    def words(self) -> str:
        return ", ".join(self.items)


def _num(x: float | None) -> str | None:
    if x is None:
        return None
    return str(int(x)) if float(x).is_integer() else str(x)


def _bound(text: str | None) -> float | None:
    # Whole bounds stay ints: a long's bound is past what a float holds exactly.
    if text is None:
        return None
    return int(text) if re.fullmatch(r"-?\d+", text) else float(text)


def _constraint(d: ConfigDef) -> _Range | _Enum | None:
    """The Valid Values a check enforces: numeric ranges ("[1,...]", "[0,...,100]", "[1,...,9]
    or -1") on numeric keys and enumerations of plain words ("[delete, compact]"). Other forms
    are not enforced: free text ("[partitionId]:[brokerId],..."); an enumeration of versions
    ("[0.8.0, ..., 4.0-IV1]"), whose validator also takes a line alone ("3.9"); "non-empty
    list", printed for keys whose own default is the empty list; and prose that a validator
    prints in place of a rule. ("non-empty string" is checked apart; "non-null string" any YAML
    scalar satisfies.)"""
    if d.type in NUMERIC and (m := _RANGE.fullmatch(d.valid)):
        low, high, also = (_bound(g) for g in m.groups())
        assert low is not None
        return _Range(low, high, also)
    if d.type in ("string", "list") and (m := _ENUM.fullmatch(d.valid)):
        return _Enum(tuple(m.group(2).split(", ")), m.group(1) is not None)
    return None


def _shown(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


_NOUNS = {
    "int": "an int",
    "short": "a short",
    "long": "a long",
    "double": "a number",
    "boolean": "true or false",
    "list": "a list (a string of comma-separated items, or a list of strings)",
    "class": "a class name",
}


def _integral(value: PropertyScalar) -> int | None:
    if isinstance(value, bool | float):
        return None
    if isinstance(value, int):
        return value
    text = value.strip()
    return int(text) if re.fullmatch(r"[+-]?\d+", text) else None


def _real(value: PropertyScalar) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        real = float(value)
    elif _DECIMAL.fullmatch(value.strip()):
        real = float(value.strip())
    else:
        return None
    return real if math.isfinite(real) else None


def _list_refusal(value: object, rule: _Range | _Enum | None) -> str | None:
    if isinstance(value, list | tuple):
        if not all(isinstance(v, str) and "," not in v for v in value):
            return "takes a list of strings (without commas: a comma separates items)"
    elif not isinstance(value, str):
        return f"takes {_NOUNS['list']}"
    text = to_property(value).strip()
    if "\n" in text or "\r" in text:
        return "takes a list on one line"
    items = re.split(r"\s*,\s*", text) if text else []
    # An empty list is let through: whether one is allowed is not in the printed rule.
    if isinstance(rule, _Enum) and not all(rule.allows(i) for i in items):
        return f"takes a list of items from [{rule.words()}]"
    return None


def _value_refusal(d: ConfigDef, value: object) -> str | None:
    """What a key takes, as "takes ...", when the value is not it; None when the release takes
    the value."""
    rule = _constraint(d)
    if d.type == "list":
        return _list_refusal(value, rule)
    noun = _NOUNS.get(d.type, f"a {d.type or 'value'}")
    said = f"takes {noun} {rule.words()}" if isinstance(rule, _Range) else f"takes {noun}"
    if not isinstance(value, PropertyScalar):
        return said
    text = to_property(value)
    if "\n" in text or "\r" in text:
        return f"takes {noun} on one line"
    if d.type == "boolean":
        if isinstance(value, bool) or text.strip().lower() in ("true", "false"):
            return None
        return said
    if d.type in _JAVA_INTS:
        if (number := _integral(value)) is None:
            return said
        bits = _JAVA_INTS[d.type]
        if not -(2**bits) <= number < 2**bits:
            return f"takes {noun} (from {-(2**bits)} to {2**bits - 1})"
        return said if isinstance(rule, _Range) and not rule.allows(number) else None
    if d.type == "double":
        real = _real(value)
        if real is None or (isinstance(rule, _Range) and not rule.allows(real)):
            return said
        return None
    if isinstance(rule, _Enum) and not rule.allows(text.strip()):
        return f"takes one of [{rule.words()}]"
    if d.valid == "non-empty string" and not text.strip():
        return "takes a non-empty string"
    return None


def _unknown_note(kind: Kind, key: str, release: str, known: Iterable[str]) -> str:
    """Why a key may have been meant, in parentheses, or ""."""
    mine = version_key(release)
    older = [r for r in committed_releases() if version_key(r) < mine]
    newer = [r for r in committed_releases() if version_key(r) > mine]
    if had := [r for r in older if key in load(r)[kind]]:
        return f" (a Kafka {had[-1]} setting removed since)"
    topic_defs = load(release)["topic"]
    if kind == "broker" and key in topic_defs:
        server = topic_defs[key].server_default
        return f" (a topic config; the brokers' default for it is {server})" if server else ""
    if kind == "topic":
        for d in topic_defs.values():
            if d.server_default == key:
                return f" (a broker setting; the topic config is {d.name})"
    if has := [r for r in newer if key in load(r)[kind]]:
        return f" (a Kafka {has[0]} setting, not yet in {release})"
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.75)
    return f" (did you mean {close[0]}?)" if close else ""


def setting_refusal(kind: Kind, key: str, value: object, version: str) -> str | None:
    """None when the release takes the key with this value and the harness leaves it to the
    scenario; else what is wrong, starting with the key."""
    release = release_for(version)
    defs = definitions(release, kind)
    # A prefixed key (listener.name.<listener>.<key>) is no definition of its own; a removed key
    # the harness owned is still first of all not a key of this release.
    if key not in defs and _owned_prefix(key, kind) is None:
        what = "broker setting" if kind == "broker" else "topic config"
        note = _unknown_note(kind, key, release, defs)
        return f'"{key}" is not a Kafka {release} {what}{note}'
    if (reason := owned_refusal(key, kind)) is not None:
        return f'"{key}" is set by the harness ({reason})'
    if refusal := _value_refusal(defs[key], value):
        return f'"{key}" {refusal} on Kafka {release}, not {_shown(value)}'
    return None


def check_setting(kind: Kind, key: str, value: object, version: str, where: str) -> str | None:
    """setting_refusal as one line that starts with `where`, the scenario field the key is
    under."""
    refusal = setting_refusal(kind, key, value, version)
    return f"{where}: {refusal}" if refusal else None
