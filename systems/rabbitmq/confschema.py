"""Every RabbitMQ release's own list of rabbitmq.conf settings, as `systems.rabbitmq.key_check`
checks a scenario's keys and values against it before any container starts.

A node reads rabbitmq.conf through cuttlefish, against the schemas of every application in its
plugins directory (`<app>/priv/schema/*.schema`, whether the plugin is enabled or not, with the
`.partial` blocks they include since 4.3): a key no `{mapping, "a.b.$name", ...}` names stops
the node at boot, and so does a value its datatype cannot convert. The schemas are Erlang
terms; `systems.rabbitmq.cuttlefish` reads their mappings (the key pattern, the datatype, the
application) as cuttlefish merges them, and this module keeps, per release, a compact JSON of
them: committed for the releases setup builds (`confschema/<release>.json`), and read once from
the local image into the cache for any other (`systems.definitions` finds them).

    python -m systems.rabbitmq.confschema --write 4.3.6   # the committed file, from the image
    python -m systems.rabbitmq.confschema --image rabbitmq:3.13-management   # into the cache

A key is valid when a mapping's pattern matches it segment by segment, a `$name` segment
matching any one segment. A value is checked where the datatype says plainly what it takes
(integers and their bounds, enumerations, booleans, decimals, `host:port`); anything else is
accepted, and the node's own boot error says the rest.
"""

from __future__ import annotations

import argparse
import functools
import io
import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

from compose.releases import RELEASE_PATTERN
from contract.cache import write_whole
from contract.versions import line_of, on_spec
from systems.definitions import ReleaseFiles, docker, has_image, run_once
from systems.rabbitmq.cuttlefish import ConfSchema, Mapping, Partials, merge, parse_schema
from systems.rabbitmq.erlang_terms import parse_terms
from systems.scenario import ScenarioError

COMMITTED_DIR = Path(__file__).resolve().parent / "confschema"
# Bumped when the JSON's shape changes, so that a cache written by older code is read again.
FORMAT = 1
# systems.rabbitmq.cluster names the same images; importing it here would be circular (it
# imports the settings, which import this module).
LOCAL_IMAGE = "brokerjepsen/rabbitmq:{release}-debian"
EXTRACT_TIMEOUT_S = 120
# The schema directories of the applications in a plugins directory, as the broker looks for
# them, and the enabled-plugins file; found by path so that the official images, which keep
# RabbitMQ under /opt, are read the same way.
_EXTRACT_SCRIPT = (
    "{ find / -xdev -path '*/plugins/*/priv/schema/*' -type f 2>/dev/null; "
    "ls /etc/rabbitmq/enabled_plugins 2>/dev/null; } | tar -cf - -T - 2>/dev/null"
)
_SCHEMA_PATH = re.compile(
    r"/plugins/(?P<app>[A-Za-z0-9_]+)-(?P<vsn>[^/]+)/priv/schema/(?P<f>[^/]+)$"
)


class ConfSchemaError(ScenarioError):
    """A release whose settings cannot be had: one line saying why."""


def to_json(schema: ConfSchema) -> str:
    """One mapping a line, sorted, so that a new release's file diffs against the last one's."""
    entries = []
    for key in sorted(schema.mappings):
        m = schema.mappings[key]
        fields: dict[str, Any] = {"app": m.app, "datatype": list(m.datatype)}
        if m.note:
            fields["note"] = m.note
        if m.alias_of:
            fields["alias_of"] = m.alias_of
        entries.append(f"    {json.dumps(key)}: {json.dumps(fields, separators=(',', ':'))}")
    return (
        "{\n"
        f'  "format": {FORMAT},\n'
        f'  "rabbitmq": {json.dumps(schema.release)},\n'
        f'  "plugins_enabled": {json.dumps(list(schema.plugins_enabled))},\n'
        '  "mappings": {\n' + ",\n".join(entries) + "\n  }\n}\n"
    )


def from_json(text: str) -> ConfSchema | None:
    """The schema a file holds; None when it is of another format or unreadable."""
    try:
        data = json.loads(text)
        if data.get("format") != FORMAT:
            return None
        mappings = {
            key: Mapping(key, f["app"], tuple(f["datatype"]), f.get("note"), f.get("alias_of"))
            for key, f in data["mappings"].items()
        }
        return ConfSchema(str(data["rabbitmq"]), mappings, tuple(data["plugins_enabled"]))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def schema_from_files(files: dict[str, str]) -> ConfSchema:
    """A release's schema from its schema files (path -> text; the paths as in the image) and
    its enabled_plugins file, as the broker reads them: each application's schema directory,
    its `.schema` files in name order (a `.partial` is only ever included)."""
    release = None
    plugins: tuple[str, ...] = ()
    schemas: list[tuple[str, str]] = []
    partials: Partials = {}
    for path in sorted(files):
        if path.endswith("/enabled_plugins"):
            try:
                enabled = parse_terms(files[path])
            except ValueError:
                enabled = []
            plugins = tuple(str(p) for p in enabled) if isinstance(enabled, list) else ()
            continue
        m = _SCHEMA_PATH.search(path)
        if not m or m["f"].startswith("."):
            continue
        if m["app"] == "rabbit":
            release = m["vsn"]
        if m["f"].endswith(".partial"):
            partials[(m["app"], m["f"].removesuffix(".partial"))] = parse_schema(files[path], "")
        else:
            schemas.append((path, m["app"]))
    mappings = merge([parse_schema(files[path], app, partials) for path, app in schemas])
    if release is None or not mappings:
        raise ConfSchemaError("no rabbit application schema among the files")
    return ConfSchema(release, mappings, plugins)


FILES = ReleaseFiles(COMMITTED_DIR, "rabbitmq-confschema", from_json)


def cache_dir() -> Path:
    return FILES.cache_dir()


def committed_releases() -> list[str]:
    """The releases whose schemas are committed, oldest first."""
    return FILES.committed_releases()


def _docker(args: list[str], timeout: float) -> subprocess.CompletedProcess[bytes]:
    missing = ConfSchemaError("no docker command to read RabbitMQ's schemas with")
    return docker(args, timeout, missing, text=False)


def extract(image: str, timeout_s: float = EXTRACT_TIMEOUT_S) -> ConfSchema:
    """The schema of the release an image holds, read from its files (one short container, no
    network, the broker never started)."""
    if not has_image(_docker, image):
        raise ConfSchemaError(f"no image {image} to read RabbitMQ's settings from")
    late = ConfSchemaError(
        f"reading RabbitMQ's schemas from {image} took over {timeout_s:.0f} s; gave up"
    )
    done = run_once(
        _docker, "confschema", ["--entrypoint", "sh", image, "-c", _EXTRACT_SCRIPT], timeout_s, late
    )
    files: dict[str, str] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(done.stdout), mode="r:") as tar:
            for member in tar:
                handle = tar.extractfile(member) if member.isfile() else None
                if handle is not None:
                    files["/" + member.name] = handle.read().decode("utf-8", "replace")
    except tarfile.TarError:
        files = {}
    if not files:
        why = (done.stderr.decode(errors="replace").strip().splitlines() or ["nothing read"])[-1]
        raise ConfSchemaError(f"could not read RabbitMQ's schemas from {image}: {why}")
    return schema_from_files(files)


@functools.cache
def load(release: str) -> ConfSchema:
    """A release's schema: committed, else cached, else read from its local image into the
    cache."""
    if (found := FILES.kept(release)) is not None:
        return found
    schema = extract(LOCAL_IMAGE.format(release=release))
    _keep(schema)
    return schema


def _keep(schema: ConfSchema) -> None:
    FILES.keep(schema.release, to_json(schema))


def for_version(version: str | None, default: str) -> ConfSchema | None:
    """The schema a scenario's `version` is checked against before anything runs: a release's
    own, the newest known of a line's, `default`'s when no version is given; None when none is
    known yet (the run reads it from the image it starts)."""
    spec = version or default
    if re.match(RELEASE_PATTERN, spec):
        known = [spec] if spec in FILES.known_releases() else []
    else:
        known = [r for r in FILES.known_releases() if on_spec(r, line_of(spec))]
    if not known:
        return None
    try:
        return load(known[-1])
    except ConfSchemaError:
        return None


def of_image(image: str, release: str | None) -> ConfSchema:
    """The schema of the image a run starts: by its release when that is known and kept, else
    read from the image (and kept in the cache)."""
    if release and re.match(RELEASE_PATTERN, release):
        if (found := FILES.kept(release)) is not None:
            return found
    schema = extract(image)
    _keep(schema)
    return schema


# ---- command line -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m systems.rabbitmq.confschema")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--write", metavar="RELEASE", help="the committed JSON, from its image")
    what.add_argument("--image", help="any image's schema, into the cache")
    args = parser.parse_args(argv)
    try:
        if args.write:
            schema = extract(LOCAL_IMAGE.format(release=args.write))
            if schema.release != args.write:
                raise ConfSchemaError(
                    f"the image holds RabbitMQ {schema.release}, not {args.write}"
                )
            path = FILES.committed(schema.release)
            write_whole(path, to_json(schema))
        else:
            schema = extract(args.image)
            _keep(schema)
            path = FILES.cached(schema.release)
    except ConfSchemaError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{path}: RabbitMQ {schema.release}, {len(schema.mappings)} settings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
