"""The brokers' own error lines: every ERROR/FATAL entry of a Kafka node's log, every [error],
[critical], [alert] and [emergency] entry (crash reports among them) of a RabbitMQ node's,
counted by message template, each template either on the allow-list of what a faulted run is
known to log (benign_errors.yaml, per system and release line, with the reason) or not.

A multi-line entry (a Java stack trace, an Erlang report) counts once. Its template is its first
line with the parts that vary between repeats (numbers, addresses, node names, ids, Erlang pids,
quoted values) replaced, plus what tells one failure from another under the same words: the
exception a Java entry carries, the call and reason of an Erlang report.

What is not on the allow-list is shown in the verdict's summary and the report, and never
changes the verdict's outcome nor whether it matched: the checker judges what the clients saw,
and a broker that logged an error it did not need to while keeping every promise is a finding to
read, not a broken promise. A safe run stays safe; its summary says what to look at.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from checkers.read import HistoryError
from contract.manifest import Manifest
from contract.versions import line_of, on_spec

ALLOW_LIST = Path(__file__).with_name("benign_errors.yaml")
ANY_RELEASE = "*"
TEMPLATE_CHARS = 300  # a template past this is cut: what follows rarely tells errors apart
SAMPLE_CHARS = 1000
# The cluster's service names: a node's log is named by its own, and other nodes' names vary
# in what a node logs of them.
_NODE_NAME = r"(?:kafka|controller|zk|zookeeper|rabbit)\d+"
# A log saved before the run recorded its topology: a broker node's log by its service name,
# never a client's (a Java client logs ERROR lines in the same log4j layout).
NODE_LOG = re.compile(rf"^{_NODE_NAME}$")

# `docker logs --timestamps` puts its own UTC time first: "2026-11-29T05:53:52.120412345Z ".
_DOCKER_TIME = re.compile(r"^(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z) ?")
# "[2026-11-29 05:53:52,120] ERROR [ReplicaManager broker=1] message (logger)"
_KAFKA_ENTRY = re.compile(
    r"^\[(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] "
    r"(?P<level>TRACE|DEBUG|INFO|WARN|ERROR|FATAL) (?P<text>.*)$"
)
# A ZooKeeper node's (compose/images/zookeeper-entrypoint.sh):
# "2026-11-29 05:53:52,120 [myid:1] ERROR [thread] Class: message"
_ZOOKEEPER_ENTRY = re.compile(
    r"^(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \[myid:\d*\] "
    r"(?P<level>TRACE|DEBUG|INFO|WARN|ERROR|FATAL) +(?P<text>.*)$"
)
_KAFKA_LEVELS = ("ERROR", "FATAL")
# "2026-11-29 05:10:00.123456+00:00 [error] <0.123.0> message" (3.8's lager: no offset)
_RABBIT_ENTRY = re.compile(
    r"^(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+(?:[+-]\d\d:\d\d)?) "
    r"\[(?P<level>\w+)\] (?P<pid><[\d.]+>) ?(?P<text>.*)$"
)
_RABBIT_LEVELS = ("error", "critical", "alert", "emergency")
# The top exception of a Java entry: "org.apache.kafka.common.errors.XyzException: message".
_JAVA_EXCEPTION = re.compile(r"^(?:Caused by: )?(?P<cls>[\w$]+(?:\.[\w$]+)*(?:Exception|Error))\b")
# The lines of an Erlang report that tell one failure from another under the same first line.
_ERLANG_KEYS = re.compile(r"^(initial call|exception \w+|errorContext|reason):")
_ERLANG_REASON = "** Reason for termination"

_REPLACEMENTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b"), "<uuid>"),
    (re.compile(r"#(Ref|Port)<[\d.]+>"), r"#\1<id>"),
    (re.compile(r"<\d+\.\d+\.\d+>"), "<pid>"),
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<addr>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b|\b[0-9a-f]{12,}\b"), "<hex>"),
    (re.compile(rf"\b{_NODE_NAME}\b"), "<node>"),
    (re.compile(r"'[^'\s]*'"), "'<v>'"),
    (re.compile(r'"[^"\s]*"'), '"<v>"'),
    (re.compile(r"\d+"), "<n>"),
)
# A Kafka id (topic, cluster, directory): 16 bytes in URL-safe base64, 22 characters.
_KAFKA_ID = re.compile(r"(?<![\w-])[A-Za-z0-9_-]{22}(?![\w-])")


class AllowListError(HistoryError):
    """An allow-list that cannot be read: one line naming the file and the entry, which stops
    the check as a history that cannot be read does."""


@dataclass
class Entry:
    """One error a node logged: its first line, then its continuation lines."""

    node: str
    level: str
    at: float | None
    first: str
    rest: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Allowed:
    """One allow-list entry: a template as the report shows it, or a regex searched in one."""

    why: str
    template: str | None = None
    match: re.Pattern[str] | None = None

    def covers(self, template: str) -> bool:
        if self.template is not None:
            return template == self.template
        return self.match is not None and self.match.search(template) is not None


def epoch_of(text: str, fmt: str | None = None) -> float | None:
    try:
        if fmt:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC).timestamp()
        # Docker's nanoseconds: Python reads up to microseconds.
        head, _, frac = text.rstrip("Z").partition(".")
        return datetime.fromisoformat(f"{head}.{(frac or '0')[:6]}+00:00").timestamp()
    except ValueError:
        return None


def without_docker_time(raw: str) -> tuple[str, float | None]:
    m = _DOCKER_TIME.match(raw)
    if not m:
        return raw, None
    return raw[m.end() :], epoch_of(m["time"])


def kafka_entries(node: str, text: str) -> Iterator[Entry]:
    """A Kafka or ZooKeeper node's ERROR and FATAL entries, each with the lines that follow it
    up to the next entry (a stack trace)."""
    current: Entry | None = None
    for raw in text.splitlines():
        line, docker_at = without_docker_time(raw)
        m = _KAFKA_ENTRY.match(line) or _ZOOKEEPER_ENTRY.match(line)
        if m is None:
            if current is not None and line.strip():
                current.rest.append(line)
            continue
        if current is not None:
            yield current
        current = None
        if m["level"] in _KAFKA_LEVELS:
            # Docker's time is UTC by construction; log4j's is the container's zone.
            at = docker_at if docker_at is not None else epoch_of(m["time"], "%Y-%m-%d %H:%M:%S,%f")
            current = Entry(node, m["level"], at, m["text"])
    if current is not None:
        yield current


def rabbitmq_entries(node: str, text: str) -> Iterator[Entry]:
    """A RabbitMQ node's entries at error and above. The logger writes each line of a multi-line
    message with the same time, level and pid (or, configured so, indented without them): one
    entry. A crash report always begins one."""
    current: Entry | None = None
    key: tuple[str, str, str] | None = None
    for raw in text.splitlines():
        line, _ = without_docker_time(raw)
        m = _RABBIT_ENTRY.match(line)
        if m is None:
            if current is not None and line.strip():
                current.rest.append(line.strip())
            continue
        this = (m["time"], m["level"], m["pid"])
        if current is not None and this == key and m["text"].strip() != "crasher:":
            current.rest.append(m["text"].strip())
            continue
        if current is not None:
            yield current
        current, key = None, this
        if m["level"] in _RABBIT_LEVELS:
            current = Entry(node, m["level"], epoch_of(m["time"]), m["text"].strip())
    if current is not None:
        yield current


def normalised(text: str) -> str:
    """The text with what varies between repeats of one message replaced."""

    def kafka_id(m: re.Match[str]) -> str:
        s = m.group(0)
        mixed = any(c.isdigit() for c in s) and s.lower() != s and s.upper() != s
        return "<id>" if mixed else s

    text = _KAFKA_ID.sub(kafka_id, text)
    for pattern, replacement in _REPLACEMENTS:
        text = pattern.sub(replacement, text)
    return " ".join(text.split())


def _java_exception(entry: Entry) -> str | None:
    for line in entry.rest:
        m = _JAVA_EXCEPTION.match(line.strip())
        if m:
            return m["cls"]
    return None


def _erlang_details(entry: Entry) -> list[str]:
    details = [line for line in entry.rest if _ERLANG_KEYS.match(line)]
    for i, line in enumerate(entry.rest[:-1]):
        if line.startswith(_ERLANG_REASON):
            details.append("reason: " + entry.rest[i + 1])
    # A message that says its reason on its next line ("closing AMQP connection ...:").
    if not details and entry.rest and entry.first.endswith(":"):
        details.append(entry.rest[0])
    return [d[:100] for d in details]


def template_of(entry: Entry) -> str:
    """The entry's level and first line, normalised; then its Java exception, or the lines
    that name an Erlang report's call and reason."""
    parts = [f"{entry.level.upper()} {entry.first}"]
    if (exception := _java_exception(entry)) is not None:
        parts.append(exception)
    else:
        parts += _erlang_details(entry)
    return normalised(" | ".join(parts))[:TEMPLATE_CHARS]


def sample_of(entry: Entry) -> str:
    """The entry as logged: its first line, and for a stack trace the exception and its root
    cause rather than the frames."""
    java = [line.strip() for line in entry.rest if _JAVA_EXCEPTION.match(line.strip())]
    shown = ([java[0]] + ([java[-1]] if len(java) > 1 else [])) if java else entry.rest[:8]
    return "\n".join([entry.first, *shown])[:SAMPLE_CHARS]


def release_line(version: str | None) -> str | None:
    """ "4.0.5" -> "4.0"."""
    return line_of(version) if version else None


def _on_release(version: str | None, key: str) -> bool:
    """Whether an allow-list key ("*", a line "3.9" or a release "3.9.2") covers a version."""
    if key == ANY_RELEASE:
        return True
    if version is None:
        return False
    try:
        return on_spec(version, key)
    except ValueError:  # a version that is no dotted number matches no line or release
        return False


def read_allow_list(system: str, version: str | None, path: Path = ALLOW_LIST) -> list[Allowed]:
    """The allow-list entries of one system that cover its release."""
    where = str(path)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise AllowListError(f"{where}: {str(e).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise AllowListError(f"{where}: not a mapping of system to release lines")
    by_release = data.get(system) or {}
    if not isinstance(by_release, dict):
        raise AllowListError(f"{where}: {system}: not a mapping of release line to entries")
    out = []
    for key, entries in by_release.items():
        if entries is None or not _on_release(version, str(key)):
            continue
        if not isinstance(entries, list):
            raise AllowListError(f"{where}: {system}: {key}: not a list of entries")
        for i, entry in enumerate(entries):
            out.append(_allowed(entry, f"{where}: {system}: {key}: entry {i + 1}"))
    return out


def _allowed(entry: Any, where: str) -> Allowed:
    if not isinstance(entry, dict) or not isinstance(entry.get("why"), str):
        raise AllowListError(f"{where}: needs a `why` and one of `template` or `match`")
    if isinstance(entry.get("template"), str) == isinstance(entry.get("match"), str):
        raise AllowListError(f"{where}: needs exactly one of `template` or `match`")
    if isinstance(entry.get("template"), str):
        return Allowed(entry["why"], template=entry["template"])
    try:
        return Allowed(entry["why"], match=re.compile(entry["match"]))
    except re.error as e:
        raise AllowListError(f"{where}: `match` is not a regex: {e}") from None


def counted(entries: Iterable[Entry], allowed: list[Allowed]) -> dict[str, Any]:
    """The entries counted by template: unexplained templates first, then the most logged."""
    templates: dict[str, dict[str, Any]] = {}
    lines = 0
    for e in entries:
        lines += 1
        template = template_of(e)
        t = templates.get(template)
        if t is None:
            why = next((a.why for a in allowed if a.covers(template)), None)
            t = templates[template] = {
                "template": template,
                "count": 0,
                "nodes": set(),
                "first": e.at,
                "sample": sample_of(e),
                "allowed": why is not None,
                "why": why,
            }
        t["count"] += 1
        t["nodes"].add(e.node)
        if e.at is not None and (t["first"] is None or e.at < t["first"]):
            t["first"], t["sample"] = e.at, sample_of(e)
    rows = sorted(templates.values(), key=lambda t: (t["allowed"], -t["count"], t["template"]))
    return {
        "lines": lines,
        "templates": [t | {"nodes": sorted(t["nodes"])} for t in rows],
        "unexplained": sum(t["count"] for t in rows if not t["allowed"]),
    }


def node_logs(logs_dir: Path, manifest: Manifest) -> dict[str, Path]:
    """Each broker node's saved log by node name: the topology's nodes, or for a run that did
    not record one, the logs named as broker nodes are."""
    nodes = [n.get("name") for n in (manifest.topology or {}).get("nodes") or []]
    found = {p.stem: p for p in sorted(logs_dir.glob("*.log"))}
    if nodes:
        return {n: found[n] for n in nodes if isinstance(n, str) and n in found}
    return {n: p for n, p in found.items() if NODE_LOG.match(n)}


def broker_errors(
    logs_dir: Path, manifest: Manifest, allow_list: Path = ALLOW_LIST
) -> dict[str, Any] | None:
    """verdict.json's broker_errors: the run's broker error lines counted by template, and how
    many of them the allow-list does not explain; None for a system whose nodes keep no log
    here (the kafka-mock tier)."""
    system = manifest.system or next(iter(manifest.images), None)
    if system not in ("kafka", "rabbitmq"):
        return None
    version = (manifest.images.get(system) or {}).get("version")
    version = str(version) if version is not None else None
    logs = node_logs(logs_dir, manifest)
    read = kafka_entries if system == "kafka" else rabbitmq_entries
    entries = (e for node, p in logs.items() for e in read(node, p.read_text(errors="replace")))
    about = {"system": system, "release_line": release_line(version), "logs": sorted(logs)}
    return about | counted(entries, read_allow_list(system, version, allow_list))


def summary_lines(section: dict[str, Any] | None) -> list[str]:
    """One line when a broker logged errors the allow-list does not explain; it leaves the
    outcome as it was (this module's docstring says why)."""
    if not section or not section.get("unexplained"):
        return []
    shown = [t for t in section.get("templates") or [] if not t.get("allowed")]
    return [
        f"{section['unexplained']} broker error lines of {len(shown)} templates not known to be "
        "benign: see report"
    ]
