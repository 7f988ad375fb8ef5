"""Every Kafka release's own config definitions (broker `server.properties` keys and topic
configs) and the one-line check of a scenario's key and value against them, made before any
container starts.

Kafka prints its definitions as HTML (`kafka.server.KafkaConfig` and
`org.apache.kafka.storage.internals.log.LogConfig` have a main that does): the releases setup
builds are committed here as compact JSON (`configdefs/<release>.json`, no documentation text);
any other release is read once from its local image and kept in the cache.

    python -m systems.kafka.configdefs --write 4.4.0   # the committed file, from the image
    python -m systems.kafka.configdefs --ensure        # the cache, for local images lacking one
"""

from __future__ import annotations

import argparse
import difflib
import functools
import json
import math
import re
import subprocess
import sys
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Literal, get_args

from compose.releases import RELEASE_PATTERN, releases_named_in
from contract.cache import cache_root, write_whole
from contract.versions import line_of, on_spec, version_key
from systems.scenario import ScenarioError
from workloads.kafka.properties import PropertyScalar, to_property

Kind = Literal["broker", "topic"]
KINDS: tuple[Kind, ...] = get_args(Kind)
COMMITTED_DIR = Path(__file__).resolve().parent / "configdefs"
# Bumped when the JSON's shape changes, so a cache written by older code is read again.
FORMAT = 1
# systems.kafka.cluster names the same image; importing it here would be circular (it imports
# the settings that import this module).
IMAGE = "brokerjepsen/kafka:{release}-debian"
EXTRACT_TIMEOUT_S = 180
_TOPIC_MARK = "@@brokerjepsen-topic-configs@@"
# Two JVMs print the two tables. log4j looks up the container's own name as it starts and, in a
# container without a network, prints the failure's stack trace on stdout among the HTML: the
# container is named localhost, which resolves.
_EXTRACT_SCRIPT = (
    'cd /opt/kafka && java -cp "libs/*" kafka.server.KafkaConfig '
    f"&& echo {_TOPIC_MARK} "
    '&& java -cp "libs/*" org.apache.kafka.storage.internals.log.LogConfig'
)


class KafkaConfigDefsError(ScenarioError):
    """A release whose config definitions cannot be had: one line saying why."""


@dataclass(frozen=True)
class ConfigDef:
    """One key as the release defines it. `default` is None when Kafka has none (it prints
    "null", or nothing for a required key); `valid` is Kafka's own words ("[1,...]", "[delete,
    compact]", free text) or ""; `server_default` (topic configs): the broker key a topic
    without the config follows."""

    name: str
    type: str
    default: str | None
    valid: str
    importance: str
    server_default: str | None = None


# ---- Kafka's HTML -----------------------------------------------------------------------------


class _ConfigHtml(HTMLParser):
    """Each `<h4>` names a key; the `<table>` after it holds rows of `<th>` label and `<td>`
    value. The documentation paragraphs between are skipped."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.entries: list[tuple[str, dict[str, str]]] = []
        self._text: list[str] | None = None
        self._name: str | None = None
        self._rows: dict[str, str] | None = None
        self._label: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "h4":
            self._text = []
        elif tag == "table" and self._name is not None:
            self._rows = {}
        elif tag in ("th", "td") and self._rows is not None:
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._text is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        text = "".join(self._text).strip() if self._text is not None else None
        if tag == "h4" and text is not None:
            self._name, self._text = text, None
        elif tag == "th" and self._rows is not None and text is not None:
            self._label, self._text = text.rstrip(":").strip(), None
        elif tag == "td" and self._rows is not None and text is not None:
            if self._label is not None:
                self._rows[self._label] = text
            self._label, self._text = None, None
        elif tag == "table" and self._rows is not None and self._name:
            self.entries.append((self._name, self._rows))
            self._name, self._rows = None, None


_NUMERIC = {"int", "short", "long", "double"}


def _default(raw: str | None, type_: str) -> str | None:
    if raw is None or raw in ("", "null"):
        return None
    if raw == '""':
        return ""
    # Durations and sizes are printed with a reading aid: "60000 (1 minute)".
    if type_ in _NUMERIC and (m := re.fullmatch(r"(\S+) \(.*\)", raw)):
        return m.group(1)
    return raw


def parse_config_html(html: str) -> dict[str, ConfigDef]:
    """The definitions in one of Kafka's config tables, by key."""
    parser = _ConfigHtml()
    parser.feed(html)
    parser.close()
    out: dict[str, ConfigDef] = {}
    for name, rows in parser.entries:
        type_ = rows.get("Type", "")
        out[name] = ConfigDef(
            name=name,
            type=type_,
            default=_default(rows.get("Default"), type_),
            valid=rows.get("Valid Values", ""),
            importance=rows.get("Importance", ""),
            server_default=rows.get("Server Default Property") or None,
        )
    return out


# ---- the definitions of a release ---------------------------------------------------------------

Definitions = dict[Kind, dict[str, ConfigDef]]


def cache_dir() -> Path:
    return cache_root() / "kafka-configdefs"


def committed_releases() -> list[str]:
    """The releases whose definitions are committed, oldest first."""
    return releases_named_in(COMMITTED_DIR)


def to_json(release: str, defs: Definitions) -> str:
    """One key a line, sorted, so a new release's file diffs against the last one's."""
    lines = ["{", f'  "format": {FORMAT},', f'  "kafka": {json.dumps(release)},']
    for i, kind in enumerate(KINDS):
        entries = []
        for name in sorted(defs[kind]):
            d = defs[kind][name]
            fields: dict[str, str | None] = {
                "type": d.type,
                "default": d.default,
                "valid": d.valid,
                "importance": d.importance,
            }
            if d.server_default is not None:
                fields["server_default"] = d.server_default
            entries.append(f"    {json.dumps(name)}: {json.dumps(fields, ensure_ascii=False)}")
        last = i == len(KINDS) - 1
        lines += [f'  "{kind}": {{', ",\n".join(entries), "  }" if last else "  },"]
    lines.append("}")
    return "\n".join(lines) + "\n"


def from_json(text: str) -> Definitions | None:
    """The definitions a file holds; None when it is of another format or unreadable."""
    try:
        data = json.loads(text)
        if data.get("format") != FORMAT:
            return None
        return {
            kind: {name: ConfigDef(name=name, **fields) for name, fields in data[kind].items()}
            for kind in KINDS
        }
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _read(path: Path) -> Definitions | None:
    try:
        return from_json(path.read_text())
    except OSError:
        return None


def _docker(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["docker", *args], capture_output=True, text=True, timeout=timeout, check=False
        )
    except FileNotFoundError:
        raise KafkaConfigDefsError(
            "no docker command to read Kafka's config definitions with"
        ) from None


def extract(release: str, timeout_s: float = EXTRACT_TIMEOUT_S) -> Definitions:
    """The definitions as the release's local image prints them (one container, bounded)."""
    image = IMAGE.format(release=release)
    if _docker(["image", "inspect", image], 60).returncode != 0:
        raise KafkaConfigDefsError(
            f"Kafka {release}'s config definitions are neither committed nor cached, and there "
            f"is no image {image} to read them from (make setup, or a run with --kafka "
            f"{release}, builds it)"
        )
    name = f"brokerjepsen-configdefs-{uuid.uuid4().hex[:12]}"
    run = ["run", "--rm", "--name", name, "--network", "none", "--hostname", "localhost"]
    try:
        done = _docker([*run, "--entrypoint", "bash", image, "-c", _EXTRACT_SCRIPT], timeout_s)
    except subprocess.TimeoutExpired:
        # The client gave up, not the container: stop it rather than leave a JVM running.
        _docker(["rm", "-f", name], 60)
        raise KafkaConfigDefsError(
            f"reading Kafka {release}'s config definitions from {image} took over "
            f"{timeout_s:.0f} s; gave up"
        ) from None
    broker_html, mark, topic_html = done.stdout.partition(_TOPIC_MARK)
    defs: Definitions = {"broker": parse_config_html(broker_html)}
    defs["topic"] = parse_config_html(topic_html)
    if done.returncode != 0 or not mark or not defs["broker"] or not defs["topic"]:
        why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise KafkaConfigDefsError(
            f"could not read Kafka {release}'s config definitions from {image}: {why}"
        )
    return defs


@functools.cache
def _load(release: str) -> Definitions:
    if (found := _read(COMMITTED_DIR / f"{release}.json")) is not None:
        return found
    cached = cache_dir() / f"{release}.json"
    if (found := _read(cached)) is not None:
        return found
    defs = extract(release)
    try:
        write_whole(cached, to_json(release, defs))
    except OSError:
        pass  # an unwritable cache costs one container a run, nothing else
    return defs


def _release(version: str) -> str:
    if re.match(RELEASE_PATTERN, version):
        return version
    # An official image may say only its line ("3.9"): its newest committed release stands in
    # (a line's releases bring fixes, seldom keys).
    on_line = [r for r in committed_releases() if on_spec(r, line_of(version))]
    if on_line:
        return on_line[-1]
    raise KafkaConfigDefsError(
        f"Kafka {version} names no release (X.Y.Z), and no release of its line is committed"
    )


def shipped_release(version: str) -> str | None:
    """The release whose definitions judge `version` here with no Docker engine: committed or
    cached (a line: its newest committed release); None when only its image can tell."""
    try:
        release = _release(version)
    except KafkaConfigDefsError:
        return None
    here = (COMMITTED_DIR / f"{release}.json", cache_dir() / f"{release}.json")
    return release if any(path.exists() for path in here) else None


def has_definitions(version: str, image: str) -> bool:
    """Whether a release's definitions can be had for a run of `image`: committed or cached,
    or readable from the image because it is one of ours (an official image lays its jars
    out otherwise)."""
    return image.startswith(IMAGE.split(":")[0] + ":") or shipped_release(version) is not None


def definitions(version: str, kind: Kind) -> dict[str, ConfigDef]:
    """A release's definitions of one kind, by key: committed, else cached, else read from its
    local image into the cache."""
    return dict(_load(_release(version))[kind])


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
    "zookeeper.metadata.migration.enable": "the harness runs no ZooKeeper-to-KRaft migration",
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
    if d.type in _NUMERIC and (m := _RANGE.fullmatch(d.valid)):
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
    if had := [r for r in older if key in _load(r)[kind]]:
        return f" (a Kafka {had[-1]} setting removed since)"
    topic_defs = _load(release)["topic"]
    if kind == "broker" and key in topic_defs:
        server = topic_defs[key].server_default
        return f" (a topic config; the brokers' default for it is {server})" if server else ""
    if kind == "topic":
        for d in topic_defs.values():
            if d.server_default == key:
                return f" (a broker setting; the topic config is {d.name})"
    if has := [r for r in newer if key in _load(r)[kind]]:
        return f" (a Kafka {has[0]} setting, not yet in {release})"
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.75)
    return f" (did you mean {close[0]}?)" if close else ""


def setting_refusal(kind: Kind, key: str, value: object, version: str) -> str | None:
    """None when the release takes the key with this value and the harness leaves it to the
    scenario; else what is wrong, starting with the key."""
    release = _release(version)
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


# ---- the command line ---------------------------------------------------------------------------


def local_releases() -> list[str]:
    """The releases of the local Kafka images, oldest first."""
    done = _docker(["image", "ls", IMAGE.split(":")[0], "--format", "{{.Tag}}"], 60)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["docker image ls failed"])[-1]
        raise KafkaConfigDefsError(f"cannot list the local Kafka images: {last}")
    tags = (re.fullmatch(r"(\d+\.\d+\.\d+)-debian", t.strip()) for t in done.stdout.split())
    return sorted({m.group(1) for m in tags if m}, key=version_key)


def ensure() -> list[str]:
    """Reads into the cache the definitions of every local image's release that has neither a
    committed nor a cached file; the releases it read."""
    have = set(committed_releases())
    read = []
    for release in local_releases():
        if release in have or _read(cache_dir() / f"{release}.json") is not None:
            continue
        write_whole(cache_dir() / f"{release}.json", to_json(release, extract(release)))
        read.append(release)
    return read


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m systems.kafka.configdefs", description=__doc__.splitlines()[0]
    )
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", nargs="+", metavar="RELEASE", help="commit these releases'")
    group.add_argument("--ensure", action="store_true", help="cache every local image's")
    args = parser.parse_args(argv)
    try:
        if args.ensure:
            for release in ensure():
                print(f"configdefs: Kafka {release}'s config definitions cached in {cache_dir()}")
            return 0
        for release in args.write:
            if not re.match(RELEASE_PATTERN, release):
                raise KafkaConfigDefsError(f"--write takes releases (4.4.0), not {release!r}")
            defs = extract(release)
            write_whole(COMMITTED_DIR / f"{release}.json", to_json(release, defs))
            counts = ", ".join(f"{len(defs[k])} {k}" for k in KINDS)
            print(f"configdefs: wrote {release}.json ({counts})")
    except KafkaConfigDefsError as e:
        print(f"configdefs: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
