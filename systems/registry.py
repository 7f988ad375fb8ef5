"""The systems the harness can run, by the name a scenario's `cluster.system` gives, and the
loading of scenario files into each system's schema.

A new broker is one folder under systems/ and one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from systems.kafka.run import KafkaRun
from systems.kafka.scenario import KafkaScenario
from systems.kafka.scenario import config_problems as kafka_config_problems
from systems.kafka_mock.run import KafkaMockRun
from systems.kafka_mock.scenario import KafkaMockScenario
from systems.parsing import scenario_mapping, validated
from systems.problems import KeyProblem
from systems.rabbitmq.run import RabbitMQRun
from systems.rabbitmq.scenario import RabbitMQScenario
from systems.rabbitmq.scenario import config_problems as rabbitmq_config_problems
from systems.run import PhaseProgress, RunOptions, ScenarioRun
from systems.scenario import ScenarioError, read_user_file, scenario_data

if TYPE_CHECKING:
    from systems.config_files import KeyFate

AnyScenario = RabbitMQScenario | KafkaMockScenario | KafkaScenario


def _no_config(data: object) -> list[KeyProblem]:
    return []


@dataclass(frozen=True)
class System:
    name: str
    scenario: type[RabbitMQScenario] | type[KafkaScenario] | type[KafkaMockScenario]
    run: type[ScenarioRun]
    # Every key of the scenario's own configuration the system refuses, from the file's data.
    config_problems: Callable[[object], list[KeyProblem]] = _no_config


SYSTEMS: dict[str, System] = {
    s.name: s
    for s in (
        System("rabbitmq", RabbitMQScenario, RabbitMQRun, rabbitmq_config_problems),
        System("kafka", KafkaScenario, KafkaRun, kafka_config_problems),
        System("kafka-mock", KafkaMockScenario, KafkaMockRun),
    )
}
DEFAULT_SYSTEM = "rabbitmq"  # a scenario that names no system (the first scenarios)


def parse_scenario(text: str, source: str = "<scenario>", kafka: str | None = None) -> AnyScenario:
    """A scenario from its file's text, or a ScenarioError naming every problem of the file,
    each at its line and column: the schema's, and each configuration key its system refuses.
    `kafka`: a Kafka scenario is read as on that release (--kafka), over its cluster.release."""
    data = scenario_mapping(text, source)
    cluster = data.get("cluster")
    name = cluster.get("system", DEFAULT_SYSTEM) if isinstance(cluster, dict) else DEFAULT_SYSTEM
    # A name that is no system (or no string) is left for the default system's schema to name.
    system = SYSTEMS[name] if isinstance(name, str) and name in SYSTEMS else SYSTEMS[DEFAULT_SYSTEM]
    if kafka is not None and system.name == "kafka" and isinstance(cluster, dict):
        cluster["release"] = kafka
    return validated(text, data, source, system.scenario, system.config_problems)


def load_scenario(path: Path, rabbitmq: str | None = None, kafka: str | None = None) -> AnyScenario:
    """A scenario file; with `rabbitmq` (`kafka`), a RabbitMQ (Kafka) scenario is read as on
    that release, so that what the release takes (keys, policies) is judged for the release
    that will run."""
    text = read_user_file(path, str(path))
    if rabbitmq is not None:
        text = _on_release_text(text, rabbitmq)
    return parse_scenario(text, str(path), kafka)


def scenario_warnings(scenario: AnyScenario) -> list[str]:
    """What a scenario's check could not judge before its run, a line each."""
    if isinstance(scenario, KafkaScenario) and (line := scenario.release_warning()):
        return [line]
    return []


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


def scenario_files(paths: list[Path], scenarios_dir: Path | None = None) -> list[Path]:
    """The scenario files `paths` name: files as given, every *.yaml/*.yml under a folder, the
    matches of a glob pattern the shell left alone, and (with `scenarios_dir`) a scenario by
    its id as `harness run` takes it; a path that names none is kept, so that reading it says
    why."""
    found: list[Path] = []
    for path in paths:
        if scenarios_dir is not None and not path.exists() and not _is_pattern(path):
            try:
                path = find_scenario(str(path), scenarios_dir)
            except ScenarioError:
                pass  # reading it says why
        if path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml"))
        elif not path.exists() and _is_pattern(path):
            anchor = Path(path.anchor or ".")
            pattern = str(path.relative_to(anchor)) if path.is_absolute() else str(path)
            matches = sorted(anchor.glob(pattern))
            found += scenario_files(matches) if matches else [path]  # a folder matched: its files
        else:
            found.append(path)
    return list(dict.fromkeys(found))


def _is_pattern(path: Path) -> bool:
    return any(c in str(path) for c in "*?[")


def find_scenario(name: str, scenarios_dir: Path) -> Path:
    """A scenario by path or by id (scenarios/<id>.yaml, or the one <id>.yaml of a folder of
    them, as scenarios/rabbitmq-jepsen/RJ1.yaml); a file named relative to the scenarios
    folder (orders.yaml) is found there when it is not where the command runs."""
    as_path = Path(name)
    if as_path.exists():
        return as_path
    if as_path.suffix in (".yaml", ".yml"):
        in_folder = scenarios_dir / as_path
        return in_folder if not as_path.is_absolute() and in_folder.is_file() else as_path
    for candidate in (scenarios_dir / f"{name}.yaml", scenarios_dir / f"{name}.yml"):
        if candidate.exists():
            return candidate
    nested = sorted(scenarios_dir.glob(f"*/{name}.yaml"))
    if len(nested) == 1:
        return nested[0]
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


def with_config_files(
    scenario: AnyScenario, options: list[str], config_wins: bool = False
) -> tuple[AnyScenario, list[KeyFate]]:
    """The scenario with a team's own configuration files taken in (`harness run --config`),
    and what became of each of their keys; a key against a typed knob the scenario chose stops
    the run (every such conflict a line) unless `config_wins`."""
    if not options:
        return scenario, []
    from systems.config_files import read_config_file

    files = [read_config_file(o) for o in options]
    if isinstance(scenario, KafkaScenario):
        from systems.kafka.user_config import with_config_files as kafka_files

        return kafka_files(scenario, files, config_wins)
    if isinstance(scenario, RabbitMQScenario):
        from systems.rabbitmq.user_config import with_config_files as rabbitmq_files

        return rabbitmq_files(scenario, files, config_wins)
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
