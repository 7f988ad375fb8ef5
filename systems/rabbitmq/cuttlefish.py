"""A RabbitMQ release's rabbitmq.conf settings as cuttlefish reads them from its schema files:
each `{mapping, "a.b.$name", ...}` (the key pattern, the datatype, the application), the
`.partial` blocks schemas include, and the schemas merged as the node merges them into one
`ConfSchema`, which finds the mapping that takes a key."""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from systems.rabbitmq.erlang_terms import Atom, Form, Terms, Unreadable, forms, unescape

# Comments above a mapping that say the release ignores it.
_IGNORED_NOTE = re.compile(r"^(DEPRECATED\b.*|No longer used\b.*)$", re.IGNORECASE)


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


def _mapping(form: Form, app: str, aliases: dict[str, str]) -> tuple[Mapping, str] | None:
    """`{mapping, Key, Setting, Props}`; a mapping this reader cannot follow still names its
    key: the key counts, its value goes unchecked."""
    try:
        term = Terms(form.tokens).term()
        key, target = term[1], term[2]
        props = term[3] if len(term) > 3 else []
        if not isinstance(key, str) or not isinstance(target, str) or not isinstance(props, list):
            raise Unreadable("not {mapping, Key, Setting, Props}")
    except (Unreadable, IndexError, TypeError):
        strings = [unescape(t.text[1:-1]) for t in form.tokens[2:6] if t.kind == "string"]
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


def _include(form: Form, app: str, partials: Partials, into: SchemaFile) -> None:
    """`{include_partial, {App, Name}, [{prefix, P}, {app_prefix, A}, {disable_with, X},
    {exclude, Keys}]}`: the partial's keys under `P.`, its settings under `A.`, and `P = X` to
    turn the block off."""
    try:
        _, (owner, name), opts = Terms(form.tokens).term()
        options = {str(o[0]): o[1] for o in opts if isinstance(o, tuple) and len(o) == 2}
        prefix, app_prefix = options["prefix"], options.get("app_prefix", "")
        excluded = set(options.get("exclude", []))
    except (Unreadable, ValueError, TypeError, KeyError):
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
    for form in forms(text):
        toks = form.tokens
        head = toks[1].text if len(toks) > 2 and toks[0].text == "{" else ""
        if head == "mapping":
            if (found := _mapping(form, app, out.aliases)) is not None:
                out.mappings.append(found)
        elif head in ("translation", "partial_translation") and toks[3].kind == "string":
            out.translations.add(unescape(toks[3].text[1:-1]))
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
