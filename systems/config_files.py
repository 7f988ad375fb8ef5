"""A team's own configuration files for `harness run --config [KIND=]FILE`: a Kafka
server.properties, a topic's or a client's .properties, a rabbitmq.conf. Each file is read as
its owner reads it (Java's properties format; RabbitMQ's `key = value` lines) into keys the
system's scenario then takes, ignoring with a reason the ones the harness owns."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import javaproperties

from systems.scenario import ScenarioError, read_user_file

KINDS = ("broker", "topic", "producer", "reader", "rabbitmq")
# A file named as its owner names it says what it configures.
BY_NAME = {
    "server.properties": "broker",
    "producer.properties": "producer",
    "consumer.properties": "reader",
    "rabbitmq.conf": "rabbitmq",
}


@dataclass(frozen=True)
class ConfigFile:
    kind: str  # one of KINDS
    path: Path
    values: dict[str, str]


def parse_config_option(option: str) -> tuple[str, Path]:
    """`KIND=FILE`, or a FILE whose name says its kind (server.properties, rabbitmq.conf)."""
    kind, sep, rest = option.partition("=")
    if sep and kind in KINDS:
        return kind, Path(rest)
    path = Path(option)
    if path.name in BY_NAME:
        return BY_NAME[path.name], path
    if path.suffix == ".conf":
        return "rabbitmq", path
    kinds = ", ".join(f"{k}=FILE" for k in KINDS)
    raise ScenarioError(f"--config {option}: say what the file configures ({kinds})")


def absolute_config_option(option: str) -> str:
    """`KIND=FILE` with FILE absolute, for a run in a process of its own elsewhere."""
    kind, path = parse_config_option(option)
    return f"{kind}={path.resolve()}"


def read_config_file(option: str) -> ConfigFile:
    kind, path = parse_config_option(option)
    text = read_user_file(path, f"--config {path}")
    values = read_rabbitmq_conf(text, path) if kind == "rabbitmq" else _properties(text, path)
    return ConfigFile(kind, path, values)


def _properties(text: str, path: Path) -> dict[str, str]:
    try:
        return dict(javaproperties.loads(text))
    except ValueError as e:
        raise ScenarioError(f"--config {path}: not a Java properties file ({e})") from None


def read_rabbitmq_conf(text: str, path: Path) -> dict[str, str]:
    """rabbitmq.conf's sysctl-like format: `key = value` a line, `#` comments."""
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ScenarioError(f"--config {path}: line {number} is not `key = value`")
        values[key.strip()] = value.split(" #", 1)[0].strip()
    return values
