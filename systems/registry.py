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
from systems.problems import validation_problems, yaml_problem
from systems.rabbitmq.run import RabbitMQRun
from systems.rabbitmq.scenario import RabbitMQScenario
from systems.run import PhaseProgress, RunOptions, ScenarioRun
from systems.scenario import ScenarioError, read_user_file, scenario_data

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
        raise ScenarioError(yaml_problem(e).located(source)) from None
    except (ValueError, RecursionError) as e:  # an integer of thousands of digits, deep nesting
        raise ScenarioError(
            f"{source}: not a scenario YAML can hold ({type(e).__name__})"
        ) from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: expected a mapping of scenario fields")
    cluster = data.get("cluster")
    name = cluster.get("system", DEFAULT_SYSTEM) if isinstance(cluster, dict) else DEFAULT_SYSTEM
    # A name that is no system (or no string) is left for the default system's schema to name.
    system = SYSTEMS[name] if isinstance(name, str) and name in SYSTEMS else SYSTEMS[DEFAULT_SYSTEM]
    try:
        return system.scenario.model_validate(data)
    except ValidationError as e:
        raise _scenario_error(e, system.scenario, text, source) from None


def _scenario_error(
    error: ValidationError, model: type[AnyScenario], text: str, source: str
) -> ScenarioError:
    """One line naming the first problem and counting the rest; each problem located in the
    file for `harness validate`."""
    problems = validation_problems(error, model, text)
    more = len(problems) - 1
    first = problems[0].summary(source) + (f" (and {more} more)" if more else "")
    return ScenarioError(first, [p.located(source) for p in problems])


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


def scenario_files(paths: list[Path]) -> list[Path]:
    """The scenario files `paths` name: files as given, every *.yaml/*.yml under a folder, and
    the matches of a glob pattern the shell left alone; a path that names none is kept, so
    that reading it says why."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml"))
        elif not path.exists() and any(c in str(path) for c in "*?["):
            anchor = Path(path.anchor or ".")
            pattern = str(path.relative_to(anchor)) if path.is_absolute() else str(path)
            matches = sorted(anchor.glob(pattern))
            found += scenario_files(matches) if matches else [path]  # a folder matched: its files
        else:
            found.append(path)
    return list(dict.fromkeys(found))


def find_scenario(name: str, scenarios_dir: Path) -> Path:
    """A scenario by path or by id (scenarios/<id>.yaml, or the one <id>.yaml of a folder of
    them, as scenarios/rabbitmq-jepsen/RJ1.yaml)."""
    as_path = Path(name)
    if as_path.suffix in (".yaml", ".yml") or as_path.exists():
        return as_path
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
