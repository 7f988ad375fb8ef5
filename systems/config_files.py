"""A team's own configuration files for `harness run --config [KIND=]FILE`: a Kafka
server.properties, a topic's or a client's .properties, a rabbitmq.conf. Each file is read as
its owner reads it (Java's properties format; RabbitMQ's `key = value` lines) into keys the
system's scenario then takes, ignoring with a reason the ones the harness owns."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import javaproperties
from pydantic import BaseModel

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


@dataclass(frozen=True)
class KeyFate:
    """What became of one key of a team's file: taken as it is, taken over a typed knob of the
    scenario (its default, or its value under --config-wins), or left out with the reason."""

    path: Path
    scope: str  # what the key configures: broker, topic, producer P1, reader r, rabbitmq
    key: str
    value: str
    fate: str  # one of FATES
    why: str = ""

    def line(self) -> str:
        said = {
            "taken": "taken",
            "replaced": "taken over",
            "overrode": "taken over",
            "left out": "left out:",
        }[self.fate]
        return f"{self.path}: {self.key}={self.value} ({self.scope}) {said} {self.why}".rstrip()

    def record(self) -> dict[str, str]:
        return {
            "file": str(self.path),
            "scope": self.scope,
            "key": self.key,
            "value": self.value,
            "fate": self.fate,
            "why": self.why,
        }


FATES = ("taken", "replaced", "overrode", "left out")


@dataclass(frozen=True)
class KnobClash:
    """A file's key against a typed knob the scenario set: the fate, or the conflict's line."""

    fate: str | None  # "replaced" or "overrode"; None: a conflict that stops the run
    why: str


def knob_clash(
    path: Path,
    key: str,
    value_in_file: str,
    knob: str,
    model: BaseModel,
    field: str,
    config_wins: bool,
) -> KnobClash | None:
    """None when the scenario left the knob `field` of `model` unset (the key is taken as it is).
    A knob set to its default is what a template writes, not a choice: the file's key replaces
    it. A knob set to another value is the scenario's choice: the run stops on it, unless
    --config-wins lets the file win."""
    if field not in model.model_fields_set:
        return None
    value = getattr(model, field)
    default = type(model).model_fields[field].get_default(call_default_factory=True)
    if value == default:
        return KnobClash("replaced", f"the scenario's {knob}: {_shown(value)} (its default)")
    if _shown(value) == value_in_file.strip().lower():
        return KnobClash("replaced", f"the scenario's {knob}, which says the same")
    if config_wins:
        return KnobClash("overrode", f"the scenario's {knob}: {_shown(value)} (--config-wins)")
    return KnobClash(
        None,
        f"--config {path}: {key} and the scenario's {knob}: {_shown(value)} both set it: "
        f"remove {knob} from the scenario, drop the key from the file, or let the file win "
        "with --config-wins",
    )


def taken(path: Path, scope: str, key: str, value: str, clash: KnobClash | None) -> KeyFate:
    """The fate of a key the scenario takes: as it is, or over the knob it clashed with."""
    if clash is None or clash.fate is None:
        return KeyFate(path, scope, key, value, "taken")
    return KeyFate(path, scope, key, value, clash.fate, clash.why)


def _shown(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def conflicts_error(conflicts: list[str]) -> ScenarioError:
    more = len(conflicts) - 1
    first = conflicts[0] + (f" (and {more} more)" if more else "")
    return ScenarioError(first, conflicts)
