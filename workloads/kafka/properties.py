"""Configuration values as the strings Kafka reads: a scenario's YAML value (a bool, a number, a
list) becomes what server.properties, a topic's config or a client takes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

PropertyScalar = str | int | float | bool


def to_property(value: PropertyScalar | Sequence[PropertyScalar]) -> str:
    """A YAML value as written into server.properties, a topic's config or a client's."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    return ",".join(to_property(v) for v in value)


def properties(values: Mapping[str, PropertyScalar | Sequence[PropertyScalar]]) -> dict[str, str]:
    """A passthrough map as the strings Kafka reads."""
    return {key: to_property(value) for key, value in values.items()}
