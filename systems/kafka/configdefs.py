"""Every Kafka release's own config definitions (broker `server.properties` keys and topic
configs), as `systems.kafka.key_check` checks a scenario's keys against them.

Kafka prints its definitions as HTML (`kafka.server.KafkaConfig` and
`org.apache.kafka.storage.internals.log.LogConfig` have a main that does): the releases setup
builds are committed here as compact JSON (`configdefs/<release>.json`, no documentation text);
any other release is read once from its local image and kept in the cache (`systems.definitions`
finds them).

    python -m systems.kafka.configdefs --write 4.4.0   # the committed file, from the image
    python -m systems.kafka.configdefs --ensure        # the cache, for local images lacking one
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Literal, get_args

from compose.releases import RELEASE_PATTERN
from contract.cache import write_whole
from contract.versions import line_of, on_spec, version_key
from systems.definitions import ReleaseFiles, docker, has_image, run_once
from systems.scenario import ScenarioError

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


NUMERIC = {"int", "short", "long", "double"}


def _default(raw: str | None, type_: str) -> str | None:
    if raw is None or raw in ("", "null"):
        return None
    if raw == '""':
        return ""
    # Durations and sizes are printed with a reading aid: "60000 (1 minute)".
    if type_ in NUMERIC and (m := re.fullmatch(r"(\S+) \(.*\)", raw)):
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


FILES = ReleaseFiles(COMMITTED_DIR, "kafka-configdefs", from_json)


def cache_dir() -> Path:
    return FILES.cache_dir()


def committed_releases() -> list[str]:
    """The releases whose definitions are committed, oldest first."""
    return FILES.committed_releases()


def _docker(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    missing = KafkaConfigDefsError("no docker command to read Kafka's config definitions with")
    return docker(args, timeout, missing, text=True)


def extract(release: str, timeout_s: float = EXTRACT_TIMEOUT_S) -> Definitions:
    """The definitions as the release's local image prints them (one container, bounded)."""
    image = IMAGE.format(release=release)
    if not has_image(_docker, image):
        raise KafkaConfigDefsError(
            f"Kafka {release}'s config definitions are neither committed nor cached, and there "
            f"is no image {image} to read them from (make setup, or a run with --kafka "
            f"{release}, builds it)"
        )
    late = KafkaConfigDefsError(
        f"reading Kafka {release}'s config definitions from {image} took over "
        f"{timeout_s:.0f} s; gave up"
    )
    args = ["--hostname", "localhost", "--entrypoint", "bash", image, "-c", _EXTRACT_SCRIPT]
    done = run_once(_docker, "configdefs", args, timeout_s, late)
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
def load(release: str) -> Definitions:
    """A release's definitions: committed, else cached, else read from its local image into the
    cache."""
    if (found := FILES.kept(release)) is not None:
        return found
    defs = extract(release)
    FILES.keep(release, to_json(release, defs))
    return defs


def release_for(version: str) -> str:
    """The release whose definitions judge `version`."""
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
        release = release_for(version)
    except KafkaConfigDefsError:
        return None
    return release if FILES.here(release) else None


def has_definitions(version: str, image: str) -> bool:
    """Whether a release's definitions can be had for a run of `image`: committed or cached,
    or readable from the image because it is one of ours (an official image lays its jars
    out otherwise)."""
    return image.startswith(IMAGE.split(":")[0] + ":") or shipped_release(version) is not None


def definitions(version: str, kind: Kind) -> dict[str, ConfigDef]:
    """A release's definitions of one kind, by key: committed, else cached, else read from its
    local image into the cache."""
    return dict(load(release_for(version))[kind])


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
        if release in have or FILES.read(FILES.cached(release)) is not None:
            continue
        write_whole(FILES.cached(release), to_json(release, extract(release)))
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
            write_whole(FILES.committed(release), to_json(release, defs))
            counts = ", ".join(f"{len(defs[k])} {k}" for k in KINDS)
            print(f"configdefs: wrote {release}.json ({counts})")
    except KafkaConfigDefsError as e:
        print(f"configdefs: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
