"""Every RabbitMQ release's own list of rabbitmq.conf settings, and the one-line check of a
scenario's key and value against it, made before any container starts.

A node reads rabbitmq.conf through cuttlefish, against the schemas of every application in its
plugins directory (`<app>/priv/schema/*.schema`, whether the plugin is enabled or not, with the
`.partial` blocks they include since 4.3): a key no `{mapping, "a.b.$name", ...}` names stops
the node at boot, and so does a value its datatype cannot convert. The schemas are Erlang
terms; this module reads their mappings (the key pattern, the datatype, the application) as
cuttlefish merges them, and keeps, per release, a compact JSON of them: committed for the
releases setup builds (`confschema/<release>.json`), and read once from the local image into
the cache for any other.

    python -m systems.rabbitmq.confschema --write 4.3.6   # the committed file, from the image
    python -m systems.rabbitmq.confschema --image rabbitmq:3.13-management   # into the cache

A key is valid when a mapping's pattern matches it segment by segment, a `$name` segment
matching any one segment. A value is checked where the datatype says plainly what it takes
(integers and their bounds, enumerations, booleans, decimals, `host:port`); anything else is
accepted, and the node's own boot error says the rest.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import io
import json
import re
import subprocess
import sys
import tarfile
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compose.releases import RELEASE_PATTERN, releases_named_in
from contract.cache import cache_root, write_whole
from contract.versions import line_of, on_spec, version_key
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
# Comments above a mapping that say the release ignores it.
_IGNORED_NOTE = re.compile(r"^(DEPRECATED\b.*|No longer used\b.*)$", re.IGNORECASE)


class ConfSchemaError(ScenarioError):
    """A release whose settings cannot be had: one line saying why."""


# ---- Erlang terms -------------------------------------------------------------------------------


class Atom(str):
    """An Erlang atom, told apart from a string (a char list)."""


class _Unreadable(Exception):
    """A term outside the plain data a mapping is written in (a fun, a variable)."""


_TOKEN = re.compile(
    r"""
      (?P<ws>\s+)
    | (?P<comment>%[^\n]*)
    | (?P<string>"(?:[^"\\]|\\.)*")
    | (?P<qatom>'(?:[^'\\]|\\.)*')
    | (?P<char>\$(?:\\(?:x\{[0-9A-Fa-f]+\}|[0-7]{1,3}|\^.|.)|.))
    | (?P<number>\d[\d_]*\#[0-9A-Za-z_]+|\d[\d_]*(?:\.\d[\d_]*(?:[eE][+-]?\d+)?)?)
    | (?P<atom>[a-z][A-Za-z0-9_@]*)
    | (?P<var>[A-Z_][A-Za-z0-9_@]*)
    | (?P<dot>\.(?=\s|%|\Z))
    | (?P<op>->|=>|:=|<<|>>|\|\||=:=|=/=|==|/=|=<|>=|\+\+|--|::|\.\.\.|\.\.|<-|<=|.)
    """,
    re.VERBOSE | re.DOTALL,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "s": " ", "e": "\x1b", "d": "\x7f", "b": "\b"}


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str


@dataclass
class _Form:
    tokens: list[_Tok]
    comments: list[str]  # the comment lines between the form before and this one


def _unescape(body: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m[1], m[1]), body)


def _forms(text: str) -> Iterator[_Form]:
    """The top-level forms of an Erlang terms file, each with the comments above it."""
    tokens: list[_Tok] = []
    comments: list[str] = []
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup or "op"
        if kind == "ws":
            continue
        if kind == "comment":
            if not tokens:
                comments.append(m.group().lstrip("%").strip())
            continue
        if kind == "dot":
            if tokens:
                yield _Form(tokens, comments)
            tokens, comments = [], []
            continue
        tokens.append(_Tok(kind, m.group()))


class _Terms:
    """Plain Erlang data (atoms, numbers, strings, lists, tuples) from a form's tokens."""

    def __init__(self, tokens: list[_Tok]) -> None:
        self.tokens = tokens
        self.i = 0

    def _next(self) -> _Tok:
        if self.i >= len(self.tokens):
            raise _Unreadable("the form ends early")
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def _peek(self) -> _Tok | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def term(self) -> Any:
        tok = self._next()
        if tok.kind == "atom":
            return Atom(tok.text)
        if tok.kind == "qatom":
            return Atom(_unescape(tok.text[1:-1]))
        if tok.kind == "string":
            parts = [_unescape(tok.text[1:-1])]
            while (nxt := self._peek()) is not None and nxt.kind == "string":
                parts.append(_unescape(self._next().text[1:-1]))
            return "".join(parts)
        if tok.kind == "number":
            return _number(tok.text)
        if tok.kind == "char":
            body = tok.text[1:]
            return ord(_unescape(body)[0]) if body.startswith("\\") else ord(body)
        if tok.text == "-" and (nxt := self._peek()) is not None and nxt.kind == "number":
            return -_number(self._next().text)
        if tok.text in ("{", "["):
            close = "}" if tok.text == "{" else "]"
            items = self._sequence(close)
            return tuple(items) if close == "}" else items
        raise _Unreadable(f"{tok.text!r} is not plain data")

    def _sequence(self, close: str) -> list[Any]:
        items: list[Any] = []
        if (nxt := self._peek()) is not None and nxt.text == close:
            self.i += 1
            return items
        while True:
            items.append(self.term())
            sep = self._next()
            if sep.text == close:
                return items
            if sep.text != ",":
                raise _Unreadable(f"{sep.text!r} in a {close} sequence")


def _number(text: str) -> int | float:
    text = text.replace("_", "")
    if "#" in text:
        base, digits = text.split("#", 1)
        return int(digits, int(base))
    return float(text) if "." in text else int(text)


def parse_terms(text: str) -> Any:
    """The first term of an Erlang terms text (an enabled_plugins file); ValueError if none."""
    for form in _forms(text):
        try:
            return _Terms(form.tokens).term()
        except _Unreadable as e:
            raise ValueError(str(e)) from None
    raise ValueError("no term")


_OPENERS = {"(": ")", "[": "]", "{": "}", "<<": ">>"}
_CLOSERS = set(_OPENERS.values())


def terms_refusal(text: str) -> str | None:
    """Why a text is not one Erlang list closed by `].` with its brackets balanced (the shape
    of advanced.config), else None. What the terms mean is the node's to say."""
    stack: list[tuple[str, int]] = []
    tokens: list[str] = []
    for m in _TOKEN.finditer(text):
        kind, tok = m.lastgroup or "op", m.group()
        if kind in ("ws", "comment"):
            continue
        line = text.count("\n", 0, m.start()) + 1
        if tokens and tokens[-1] == "." and not stack:
            return f"more than one term (line {line}): it holds one list, [{{app, [...]}}]."
        if kind == "op" and tok in ('"', "'"):
            return f"the quote {tok} at line {line} is never closed"
        if kind == "op" and tok in _OPENERS:
            stack.append((tok, line))
        elif kind == "op" and tok in _CLOSERS:
            if not stack:
                return f"{tok} at line {line} closes nothing"
            opened, at = stack.pop()
            if _OPENERS[opened] != tok:
                return f"{tok} at line {line} does not close the {opened} of line {at}"
        elif kind == "dot" and stack:
            opened, at = stack[-1]
            return f"the term ends at line {line} inside the {opened} of line {at}"
        tokens.append("." if kind == "dot" else tok)
    if stack:
        opened, at = stack[-1]
        return f"the {opened} of line {at} is never closed"
    if tokens[-2:] != ["]", "."] or tokens[0] != "[":
        return "it must be one list ending with ].: [{rabbit, [{key, value}]}]."
    return None


# ---- mappings -----------------------------------------------------------------------------------

# A datatype as the JSON keeps it: a name ("integer", "string", "ip") or one key naming its kind
# ({"enum": [...]}, {"integer": {"min": 1}}, {"atom": "infinity"}, {"list": ...}); {"erlang":
# text} for what this module does not model (accepted unchecked).
Datatype = str | dict[str, Any]


@dataclass(frozen=True)
class Mapping:
    """One rabbitmq.conf key pattern as the release's schema maps it."""

    key: str  # "listeners.tcp.$name"
    app: str  # the application whose schema holds it: rabbit, rabbitmq_management, ...
    datatype: tuple[Datatype, ...]  # cuttlefish tries each in turn; one that fits takes it
    note: str | None = None  # the schema's own word that the release ignores it
    alias_of: str | None = None  # an old name the release still takes for this key


@dataclass
class SchemaFile:
    """What one schema (or partial) file says: its mappings in file order, each with the
    application setting it feeds, and the settings its translations compute."""

    mappings: list[tuple[Mapping, str]] = field(default_factory=list)
    translations: set[str] = field(default_factory=set)
    aliases: dict[str, str] = field(default_factory=dict)  # old name -> the key it names


# A partial by (application, partial name): a shared block (TLS options, TCP listen options)
# that schemas take in under prefixes of their own.
Partials = dict[tuple[str, str], SchemaFile]


def _datatype(term: Any) -> Datatype:
    if isinstance(term, Atom):
        return str(term)
    if isinstance(term, tuple) and len(term) == 2 and isinstance(term[0], Atom):
        kind, arg = term
        if kind == "enum" and isinstance(arg, list):
            return {"enum": [_word(v) for v in arg]}
        if kind == "atom" and isinstance(arg, Atom):
            return {"atom": str(arg)}
        if kind in ("integer", "float") and (bounds := _bounds(arg)) is not None:
            return {str(kind): bounds}
        if kind == "list":
            return {"list": _datatype(arg)}
        if kind == "duration" and isinstance(arg, Atom):
            return {"duration": str(arg)}
    return {"erlang": _show(term)}


def _bounds(arg: Any) -> dict[str, Any] | None:
    """Cuttlefish's numeric constraints: `positive`, `non_negative`, or a list of them and of
    {min|max|gt|lt, N}; a named or fun validator only narrows further, so it is left to the
    node."""
    items = arg if isinstance(arg, list) else [arg]
    out: dict[str, Any] = {}
    for item in items:
        if item == "positive":
            out["min"] = 1
        elif item == "non_negative":
            out["min"] = 0
        elif item == "allow_infinity":
            out["infinity"] = True
        elif (
            isinstance(item, tuple)
            and len(item) == 2
            and item[0] in ("min", "max", "gt", "lt")
            and isinstance(item[1], int | float)
        ):
            out[str(item[0])] = item[1]
        elif not (isinstance(item, tuple) and item and item[0] == "validator"):
            return None
    return out


def _word(value: Any) -> str:
    return str(value) if not isinstance(value, float) else repr(value)


def _show(term: Any) -> str:
    if isinstance(term, Atom):
        return str(term)
    if isinstance(term, str):
        return json.dumps(term)
    if isinstance(term, tuple):
        return "{" + ", ".join(_show(t) for t in term) + "}"
    if isinstance(term, list):
        return "[" + ", ".join(_show(t) for t in term) + "]"
    return str(term)


def _ignored_note(comments: list[str]) -> str | None:
    return next((c for c in comments if _IGNORED_NOTE.match(c)), None)


def _aliases(props: list[Any]) -> list[str]:
    """The old names a mapping still answers to (`{alias, "old"}`, cuttlefish 3.9)."""
    out: list[str] = []
    for p in props:
        if isinstance(p, tuple) and len(p) == 2 and p[0] == "alias":
            names = p[1] if isinstance(p[1], list) else [p[1]]
            out += [n[0] if isinstance(n, tuple) else n for n in names]
    return [n for n in out if isinstance(n, str) and not isinstance(n, Atom)]


def _mapping(form: _Form, app: str, aliases: dict[str, str]) -> tuple[Mapping, str] | None:
    """`{mapping, Key, Setting, Props}`; a mapping this reader cannot follow still names its
    key: the key counts, its value goes unchecked."""
    try:
        term = _Terms(form.tokens).term()
        key, target = term[1], term[2]
        props = term[3] if len(term) > 3 else []
        if not isinstance(key, str) or not isinstance(target, str) or not isinstance(props, list):
            raise _Unreadable("not {mapping, Key, Setting, Props}")
    except (_Unreadable, IndexError, TypeError):
        strings = [_unescape(t.text[1:-1]) for t in form.tokens[2:6] if t.kind == "string"]
        if not strings:
            return None
        target = strings[1] if len(strings) > 1 else ""
        return Mapping(strings[0], app, ({"erlang": "unread"},)), target
    given = next(
        (p[1] for p in props if isinstance(p, tuple) and len(p) == 2 and p[0] == "datatype"),
        Atom("string"),  # cuttlefish's default
    )
    types = given if isinstance(given, list) else [given]
    datatype = tuple(_datatype(t) for t in types)
    aliases.update(dict.fromkeys(_aliases(props), key))
    return Mapping(key, app, datatype, _ignored_note(form.comments)), target


def _include(form: _Form, app: str, partials: Partials, into: SchemaFile) -> None:
    """`{include_partial, {App, Name}, [{prefix, P}, {app_prefix, A}, {disable_with, X},
    {exclude, Keys}]}`: the partial's keys under `P.`, its settings under `A.`, and `P = X` to
    turn the block off."""
    try:
        _, (owner, name), opts = _Terms(form.tokens).term()
        options = {str(o[0]): o[1] for o in opts if isinstance(o, tuple) and len(o) == 2}
        prefix, app_prefix = options["prefix"], options.get("app_prefix", "")
        excluded = set(options.get("exclude", []))
    except (_Unreadable, ValueError, TypeError, KeyError):
        return
    partial = partials.get((str(owner), str(name)), SchemaFile())
    for m, target in partial.mappings:
        if m.key not in excluded:
            into.mappings.append(
                (Mapping(f"{prefix}.{m.key}", app, m.datatype, m.note), f"{app_prefix}.{target}")
            )
    into.translations |= {f"{app_prefix}.{t}" for t in partial.translations}
    if "disable_with" in options:
        guard = Mapping(prefix, app, ({"enum": [_word(options["disable_with"])]},))
        into.mappings.append((guard, app_prefix))


def parse_schema(text: str, app: str, partials: Partials | None = None) -> SchemaFile:
    """One cuttlefish schema or partial file: its mappings in file order (the partials it
    includes in their place), and its translations."""
    out = SchemaFile()
    for form in _forms(text):
        toks = form.tokens
        head = toks[1].text if len(toks) > 2 and toks[0].text == "{" else ""
        if head == "mapping":
            if (found := _mapping(form, app, out.aliases)) is not None:
                out.mappings.append(found)
        elif head in ("translation", "partial_translation") and toks[3].kind == "string":
            out.translations.add(_unescape(toks[3].text[1:-1]))
        elif head == "include_partial":
            _include(form, app, partials or {}, out)
    return out


def merge(files: list[SchemaFile]) -> dict[str, Mapping]:
    """The mappings the node goes by, as cuttlefish merges its schema files: a later mapping
    of a key replaces an earlier one; and where several keys feed one application setting that
    no translation computes, only the first of them is a setting at all."""
    merged: dict[str, tuple[Mapping, str]] = {}
    translations: set[str] = set()
    aliases: dict[str, str] = {}
    for f in files:
        translations |= f.translations
        aliases |= f.aliases
        for m, target in f.mappings:
            merged.pop(m.key, None)  # cuttlefish moves a replaced key to the end
            merged[m.key] = (m, target)
    first: dict[str, str] = {}
    out: dict[str, Mapping] = {}
    for key, (m, target) in merged.items():
        if target not in translations and first.setdefault(target, key) != key:
            continue
        out[key] = m
    # An old name is read as its key's (a line in the node's log says it was renamed).
    for old, key in aliases.items():
        if key in out and old not in out:
            m = out[key]
            out[old] = Mapping(old, m.app, m.datatype, m.note, alias_of=key)
    return out


# ---- a release's schema -------------------------------------------------------------------------


@dataclass
class ConfSchema:
    release: str
    mappings: dict[str, Mapping]
    # The plugins the image enables (/etc/rabbitmq/enabled_plugins); empty: none runs.
    plugins_enabled: tuple[str, ...] = ()
    _by_length: dict[int, list[Mapping]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        # The patterns with fewer `$` segments first: the more literal one names a key.
        for m in sorted(self.mappings.values(), key=lambda m: m.key.count("$")):
            if "$" in m.key:
                self._by_length.setdefault(m.key.count(".") + 1, []).append(m)

    def match(self, key: str) -> Mapping | None:
        """The mapping that takes a key: the one that names it, else the first pattern whose
        `$` segments stand for the key's."""
        if (m := self.mappings.get(key)) is not None:
            return m
        parts = key.split(".")
        for m in self._by_length.get(len(parts), []):
            pattern = m.key.split(".")
            if all(p.startswith("$") or p == k for p, k in zip(pattern, parts, strict=True)):
                return m
        return None

    def suggestion(self, key: str) -> str | None:
        """The setting nearest to a key that names none, its `$` segments filled from the
        key's where the lengths agree."""
        parts = key.split(".")
        candidates = {}
        for m in self.mappings.values():
            pattern = m.key.split(".")
            if "$" in m.key and len(pattern) == len(parts):
                filled = [
                    k if p.startswith("$") else p for p, k in zip(pattern, parts, strict=True)
                ]
                candidates[".".join(filled)] = m.key
            else:
                candidates[m.key] = m.key
        close = difflib.get_close_matches(key, list(candidates), n=1, cutoff=0.75)
        return close[0] if close else None


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


def cache_dir() -> Path:
    return cache_root() / "rabbitmq-confschema"


def committed_releases() -> list[str]:
    """The releases whose schemas are committed, oldest first."""
    return releases_named_in(COMMITTED_DIR)


def _known_releases() -> list[str]:
    cached = (p.stem for p in cache_dir().glob("*.json"))
    found = {*committed_releases(), *(r for r in cached if re.match(RELEASE_PATTERN, r))}
    return sorted(found, key=version_key)


def _read(path: Path) -> ConfSchema | None:
    try:
        return from_json(path.read_text())
    except OSError:
        return None


def _docker(args: list[str], timeout: float) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["docker", *args], capture_output=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise ConfSchemaError("no docker command to read RabbitMQ's schemas with") from None


def extract(image: str, timeout_s: float = EXTRACT_TIMEOUT_S) -> ConfSchema:
    """The schema of the release an image holds, read from its files (one short container, no
    network, the broker never started)."""
    if _docker(["image", "inspect", image], 60).returncode != 0:
        raise ConfSchemaError(f"no image {image} to read RabbitMQ's settings from")
    name = f"brokerjepsen-confschema-{uuid.uuid4().hex[:12]}"
    run = ["run", "--rm", "--name", name, "--network", "none", "--entrypoint", "sh"]
    try:
        done = _docker([*run, image, "-c", _EXTRACT_SCRIPT], timeout_s)
    except subprocess.TimeoutExpired:
        _docker(["rm", "-f", name], 60)
        raise ConfSchemaError(
            f"reading RabbitMQ's schemas from {image} took over {timeout_s:.0f} s; gave up"
        ) from None
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
    if (found := _read(COMMITTED_DIR / f"{release}.json")) is not None:
        return found
    cached = cache_dir() / f"{release}.json"
    if (found := _read(cached)) is not None:
        return found
    schema = extract(LOCAL_IMAGE.format(release=release))
    _keep(schema)
    return schema


def _keep(schema: ConfSchema) -> None:
    try:
        write_whole(cache_dir() / f"{schema.release}.json", to_json(schema))
    except OSError:
        pass  # an unwritable cache costs one short container a run, nothing else


def for_version(version: str | None, default: str) -> ConfSchema | None:
    """The schema a scenario's `version` is checked against before anything runs: a release's
    own, the newest known of a line's, `default`'s when no version is given; None when none is
    known yet (the run reads it from the image it starts)."""
    spec = version or default
    if re.match(RELEASE_PATTERN, spec):
        known = [spec] if spec in _known_releases() else []
    else:
        known = [r for r in _known_releases() if on_spec(r, line_of(spec))]
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
        for path in (COMMITTED_DIR / f"{release}.json", cache_dir() / f"{release}.json"):
            if (found := _read(path)) is not None:
                return found
    schema = extract(image)
    _keep(schema)
    return schema


# ---- checking a key and its value ---------------------------------------------------------------

_INTEGER = re.compile(r"[+-]?\d+")
# Erlang's list_to_float: digits on both sides of the point.
_DECIMAL = re.compile(r"[+-]?\d+\.\d+(?:[eE][+-]?\d+)?")
_HOST_PORT = re.compile(r".+:\d+")
# Datatypes whose every value converts.
_ANYTHING = {"string", "atom", "binary", "tagged_binary", "tagged_string", "file", "directory"}


def _within(x: float, bounds: dict[str, Any]) -> bool:
    return (
        x >= bounds.get("min", x)
        and x <= bounds.get("max", x)
        and ("gt" not in bounds or x > bounds["gt"])
        and ("lt" not in bounds or x < bounds["lt"])
    )


def fits(datatype: Datatype, text: str) -> bool | None:
    """Whether a value converts to the datatype; None when this module cannot tell."""
    if isinstance(datatype, str):
        if datatype in _ANYTHING:
            return True
        if datatype == "integer":
            return bool(_INTEGER.fullmatch(text))
        if datatype == "float":
            return bool(_DECIMAL.fullmatch(text))
        if datatype == "boolean":
            return text in ("true", "false")
        if datatype == "ip":
            return None if _HOST_PORT.fullmatch(text) else False
        return None
    ((kind, arg),) = datatype.items()
    if kind == "enum":
        return text in arg
    if kind == "atom":
        return text == arg
    if kind in ("integer", "float"):
        if arg.get("infinity") and text == "infinity":
            return True
        pattern = _INTEGER if kind == "integer" else _DECIMAL
        return bool(pattern.fullmatch(text)) and _within(float(text), arg)
    return None


def _words(datatype: Datatype) -> str:
    if isinstance(datatype, str):
        return {
            "integer": "an integer",
            "float": "a decimal number such as 0.5",
            "boolean": "true or false",
            "ip": "host:port",
        }.get(datatype, datatype)
    ((kind, arg),) = datatype.items()
    if kind == "enum":
        return "one of " + ", ".join(arg)
    if kind == "atom":
        return str(arg)
    if kind in ("integer", "float"):
        said = []
        if "min" in arg and "max" in arg:
            said.append(f"from {arg['min']} to {arg['max']}")
        else:
            said += [f"of at least {arg['min']}"] if "min" in arg else []
            said += [f"of at most {arg['max']}"] if "max" in arg else []
        said += [f"above {arg['gt']}"] if "gt" in arg else []
        said += [f"below {arg['lt']}"] if "lt" in arg else []
        noun = "an integer" if kind == "integer" else "a decimal number"
        text = f"{noun} {' and '.join(said)}" if said else _words(kind)
        return text + (" or infinity" if arg.get("infinity") else "")
    return kind


def key_refusal(schema: ConfSchema, key: str) -> str | None:
    """One line when the release has no such setting, else None."""
    if schema.match(key) is not None:
        return None
    near = schema.suggestion(key)
    hint = f" (did you mean {near}?)" if near else ""
    return f"{json.dumps(key)} is not a RabbitMQ {schema.release} setting{hint}"


def value_refusal(schema: ConfSchema, key: str, text: str) -> str | None:
    """One line when the key's datatype plainly refuses the value, else None (a key the
    release lacks is key_refusal's)."""
    mapping = schema.match(key)
    if mapping is None:
        return None
    verdicts = [fits(d, text) for d in mapping.datatype]
    if any(v is not False for v in verdicts):
        return None
    wanted = " or ".join(_words(d) for d in mapping.datatype)
    return (
        f"{key}: {json.dumps(text)} is not a value RabbitMQ {schema.release} takes "
        f"(it must be {wanted})"
    )


def plugin_refusal(schema: ConfSchema, key: str) -> str | None:
    """One line when the key belongs to a plugin and the image enables none: the setting
    would be read and change nothing."""
    mapping = schema.match(key)
    if mapping is None or schema.plugins_enabled:
        return None
    plugin = mapping.app.startswith("rabbitmq_") and mapping.app != "rabbitmq_prelaunch"
    if not plugin:
        return None
    return (
        f"{key} is the {mapping.app} plugin's setting, and the RabbitMQ {schema.release} "
        "nodes run no plugin: it would change nothing"
    )


def refusals(schema: ConfSchema, conf: dict[str, str]) -> Iterable[str]:
    """Each key of a rendered rabbitmq.conf map the release refuses, with why."""
    for key, text in conf.items():
        refused = key_refusal(schema, key) or value_refusal(schema, key, text)
        refused = refused or plugin_refusal(schema, key)
        if refused:
            yield refused


def ignored(schema: ConfSchema, keys: Iterable[str]) -> dict[str, str]:
    """The keys the release's schema says it no longer uses, with its words."""
    out = {}
    for key in keys:
        mapping = schema.match(key)
        if mapping is not None and mapping.note:
            out[key] = mapping.note
    return out


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
            path = COMMITTED_DIR / f"{schema.release}.json"
            write_whole(path, to_json(schema))
        else:
            schema = extract(args.image)
            _keep(schema)
            path = cache_dir() / f"{schema.release}.json"
    except ConfSchemaError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{path}: RabbitMQ {schema.release}, {len(schema.mappings)} settings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
