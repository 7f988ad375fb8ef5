"""The one-line checks of a scenario's rabbitmq.conf keys and values against a release's schema
(`systems.rabbitmq.cuttlefish.ConfSchema`), made before any container starts: a key no mapping
names, a value its datatype plainly refuses, a plugin's key where no plugin runs, and the keys
the release says it ignores."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from systems.rabbitmq.cuttlefish import ConfSchema, Datatype

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
