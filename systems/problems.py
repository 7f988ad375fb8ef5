"""What is wrong with a scenario file, as a user reads it: every problem on its own line, at the
line and column of the file where it stands, with "did you mean" for a misspelt key.

pydantic says where a problem is as a path of keys and indexes (`workload.producers.0.acks`);
the YAML node tree says where that path is written in the file.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a scenario: where in its fields (`nemesis.2.op`, "" for the whole
    file), what, and at which line and column of the file (1-based; 0 when not known)."""

    where: str
    message: str
    line: int = 0
    column: int = 0

    def summary(self, source: str) -> str:
        """`source: where: message`, the form every command's error line takes."""
        return (
            f"{source}: {self.where}: {self.message}" if self.where else f"{source}: {self.message}"
        )

    def located(self, source: str) -> str:
        """`source:line:column: where: message`, the form editors and compilers use."""
        at = f"{source}:{self.line}:{self.column}" if self.line else source
        return f"{at}: {self.where}: {self.message}" if self.where else f"{at}: {self.message}"


@dataclass(frozen=True)
class KeyProblem:
    """A problem found in a file's data rather than by its schema (a key the release does not
    take): the path of the mapping (`("cluster", "broker_config")`), the key it is about (None:
    the mapping as a whole), and what is wrong."""

    path: tuple[str, ...]
    key: str | None
    message: str


def located_problems(text: str, found: typing.Iterable[KeyProblem]) -> list[Problem]:
    """Each problem at its key's line and column in `text` (the mapping's when no key)."""
    tree = _compose(text)
    problems = []
    for p in found:
        loc = [*p.path, *([p.key] if p.key is not None else [])]
        line, column = _position(tree, loc)
        problems.append(Problem(".".join(map(_shown, p.path)), p.message, line, column))
    return problems


def in_file_order(problems: typing.Iterable[Problem]) -> list[Problem]:
    """Problems as the file has them, top to bottom; those of no known place last."""
    return sorted(problems, key=lambda p: (p.line == 0, p.line, p.column))


def yaml_problem(error: yaml.YAMLError) -> Problem:
    """A YAML syntax error with the parser's reason, line and column."""
    mark = getattr(error, "problem_mark", None)
    reason = getattr(error, "problem", None) or "cannot be parsed"
    context = getattr(error, "context", None)
    message = f"not valid YAML: {reason}" + (f" ({context})" if context else "")
    if mark is None:
        return Problem("", message)
    return Problem("", message, mark.line + 1, mark.column + 1)


# A model validator's message that names its own place ("nemesis.3: no node 'kafka9' ...").
_LEADING_PATH = re.compile(r"^(?P<path>[A-Za-z_][\w-]*(?:\.[\w-]+)*): (?P<rest>.+)$")


def validation_problems(error: ValidationError, model: type[BaseModel], text: str) -> list[Problem]:
    """Every problem pydantic found, in file order, each located in `text` and, for a key the
    schema does not have, with the nearest keys it does have."""
    tree = _compose(text)
    problems = []
    for e in error.errors():
        loc = [str(p) for p in e["loc"]]
        message = e["msg"].removeprefix("Value error, ")
        if not loc and (m := _LEADING_PATH.match(message)) and "." in m["path"]:
            loc, message = m["path"].split("."), m["rest"]
        if e["type"] == "extra_forbidden" and loc:
            message += _extra_hint(loc[-1], _model_at(model, loc[:-1]))
        line, column = _position(tree, loc)
        problems.append(Problem(".".join(map(_shown, loc)), message, line, column))
    return in_file_order(problems)


def _shown(key: str) -> str:
    """A key as the one-line message shows it: quoted when it is no plain name (a key with a
    newline or a space in it)."""
    return key if re.fullmatch(r"[\w.@-]+", key) else repr(key)


def close_names(word: str, names: typing.Iterable[str]) -> list[str]:
    """The names a misspelling most likely meant, nearest first: the same word in another
    spelling (`min.insync.replicas`, `Min-Insync-Replicas`) before near misses."""
    names = list(names)
    squashed = _squash(word)
    same = [n for n in names if _squash(n) == squashed]
    near = difflib.get_close_matches(word, names, n=3, cutoff=0.75)
    return list(dict.fromkeys([*same, *near]))


def did_you_mean(word: str, names: typing.Iterable[str]) -> str:
    """ " (did you mean X?)" when a name is near `word`, else ""."""
    found = close_names(word, names)
    return f" (did you mean {' or '.join(found[:2])}?)" if found else ""


def _extra_hint(key: str, model: type[BaseModel] | None) -> str:
    """What a key the schema does not have may have meant: the key that replaced it (a model's
    `moved_keys`), the nearest keys it has, or the keys there are."""
    moved: dict[str, str] = getattr(model, "moved_keys", {})
    if key in moved:
        return f"; {moved[key]}"
    keys = [] if model is None else [f.alias or n for n, f in model.model_fields.items()]
    return _suggestion(key, [k for k in keys if k != key])


def _suggestion(key: str, keys: list[str]) -> str:
    hint = did_you_mean(key, keys)
    if hint:
        return hint
    if "." in key and "broker_config" in keys:
        return f" (a broker property goes under broker_config: {{{key}: ...}})"
    if 0 < len(keys) <= 10:
        return f" (keys here: {', '.join(keys)})"
    return ""


def _squash(name: str) -> str:
    return re.sub(r"[._\-\s]", "", name).lower()


def _model_at(model: type[BaseModel], loc: list[str]) -> type[BaseModel] | None:
    """The model of the mapping at `loc` (through lists' items and the file's spelling of keys,
    aliases), or None when the place is not a model's."""
    current: Any = model
    for part in loc:
        current = _model_in(current)
        if current is None:
            return None
        if part.isdigit():
            continue  # a list's item: the same model
        field = current.model_fields.get(part) or next(
            (f for f in current.model_fields.values() if f.alias == part), None
        )
        if field is None:
            return None
        current = field.annotation
    return _model_in(current)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model an annotation holds, through Optional, list and Annotated."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (list, typing.Union, types.UnionType, typing.Annotated):
        for arg in typing.get_args(annotation):
            if (found := _model_in(arg)) is not None:
                return found
    return None


def _compose(text: str) -> yaml.Node | None:
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None


def _position(node: yaml.Node | None, loc: list[str]) -> tuple[int, int]:
    """The line and column of the deepest place on `loc` the file has: a key's problem points
    at the key, a missing key at the mapping that lacks it, a list item at the item."""
    if node is None:
        return 0, 0
    mark = node.start_mark
    for part in loc:
        found = _child(node, part)
        if found is None:
            break
        mark, node = found
    return mark.line + 1, mark.column + 1


def _child(node: yaml.Node, part: str) -> tuple[yaml.Mark, yaml.Node] | None:
    """Where `part` of `node` is written (a key's own place) and its value's node."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == part:
                return key.start_mark, value
        return None
    if isinstance(node, yaml.SequenceNode) and part.isdigit() and int(part) < len(node.value):
        item: yaml.Node = node.value[int(part)]
        return item.start_mark, item
    return None
