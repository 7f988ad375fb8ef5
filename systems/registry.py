"""The systems the harness can run, by the name a scenario's `cluster.system` gives, and the
loading of scenario files into each system's schema.

A new broker is one folder under systems/ and one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import ValidationError

from systems.kafka.run import KafkaRun
from systems.kafka.scenario import KafkaScenario
from systems.kafka_mock.run import KafkaMockRun
from systems.kafka_mock.scenario import KafkaMockScenario
from systems.rabbitmq.run import RabbitMQRun
from systems.rabbitmq.scenario import RabbitMQScenario
from systems.run import PhaseProgress, RunOptions, ScenarioRun
from systems.scenario import ScenarioError, first_error, read_user_file, scenario_data

AnyScenario = RabbitMQScenario | KafkaMockScenario | KafkaScenario


@dataclass(frozen=True)
class System:
    name: str
    scenario: type[RabbitMQScenario] | type[KafkaScenario] | type[KafkaMockScenario]
    run: type[ScenarioRun]


SYSTEMS: dict[str, System] = {
    s.name: s
    for s in (
        System("rabbitmq", RabbitMQScenario, RabbitMQRun),
        System("kafka", KafkaScenario, KafkaRun),
        System("kafka-mock", KafkaMockScenario, KafkaMockRun),
    )
}
DEFAULT_SYSTEM = "rabbitmq"  # a scenario that names no system (the first scenarios)


def parse_scenario(text: str, source: str = "<scenario>") -> AnyScenario:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ScenarioError(f"{source}:{where} not valid YAML") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: expected a mapping of scenario fields")
    cluster = data.get("cluster")
    name = cluster.get("system", DEFAULT_SYSTEM) if isinstance(cluster, dict) else DEFAULT_SYSTEM
    # A name that is no system (or no string) is left for the default system's schema to name.
    system = SYSTEMS[name] if isinstance(name, str) and name in SYSTEMS else SYSTEMS[DEFAULT_SYSTEM]
    try:
        return system.scenario.model_validate(data)
    except ValidationError as e:
        raise ScenarioError(f"{source}: {first_error(e)}") from None


def load_scenario(path: Path, rabbitmq: str | None = None) -> AnyScenario:
    """A scenario file; with `rabbitmq`, a RabbitMQ scenario is read as on that release, so
    that what the release takes (keys, policies) is judged for the release that will run."""
    text = read_user_file(path, str(path))
    if rabbitmq is not None:
        text = _on_release_text(text, rabbitmq)
    return parse_scenario(text, str(path))


def _on_release_text(text: str, version: str) -> str:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return text  # parse_scenario says what is wrong with it
    cluster = data.get("cluster") if isinstance(data, dict) else None
    if not isinstance(cluster, dict) or cluster.get("system", DEFAULT_SYSTEM) != "rabbitmq":
        return text
    cluster["version"] = version
    return yaml.safe_dump(data, sort_keys=False)


def find_scenario(name: str, scenarios_dir: Path) -> Path:
    """A scenario by path or by id (scenarios/<id>.yaml)."""
    as_path = Path(name)
    if as_path.suffix in (".yaml", ".yml") or as_path.exists():
        return as_path
    for candidate in (scenarios_dir / f"{name}.yaml", scenarios_dir / f"{name}.yml"):
        if candidate.exists():
            return candidate
    known = ", ".join(sorted(p.stem for p in scenarios_dir.glob("*.yaml")))
    raise ScenarioError(f"no scenario {name!r} (known: {known})")


def make_run(
    scenario: AnyScenario,
    scenario_file: Path | None,
    opts: RunOptions,
    progress: Callable[[Path], PhaseProgress] | None = None,
) -> ScenarioRun:
    """The run for the scenario's system."""
    return SYSTEMS[scenario.cluster.system].run(scenario, scenario_file, opts, progress)


def with_config_files(scenario: AnyScenario, options: list[str]) -> tuple[AnyScenario, list[str]]:
    """The scenario with a team's own configuration files taken in (`harness run --config`),
    and a line for each key left out and why."""
    if not options:
        return scenario, []
    from systems.config_files import read_config_file

    files = [read_config_file(o) for o in options]
    if isinstance(scenario, KafkaScenario):
        from systems.kafka.user_config import with_config_files as kafka_files

        return kafka_files(scenario, files)
    if isinstance(scenario, RabbitMQScenario):
        from systems.rabbitmq.user_config import with_config_files as rabbitmq_files

        return rabbitmq_files(scenario, files)
    raise ScenarioError(
        f"--config: {scenario.id} is a {scenario.cluster.system} scenario, which takes no "
        "configuration files yet"
    )


def on_release(scenario: RabbitMQScenario, version: str) -> RabbitMQScenario:
    """The scenario on another RabbitMQ release, validated again as a whole: what its policies,
    queue arguments and keys may be depends on the release."""
    data = scenario_data(scenario)
    data["cluster"]["version"] = version
    moved = parse_scenario(yaml.safe_dump(data, sort_keys=False), f"{scenario.id} on {version}")
    assert isinstance(moved, RabbitMQScenario)
    return moved
