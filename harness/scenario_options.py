"""The run options that change a scenario (--mode, --kafka, --rabbitmq), judged against it.

Apart from the command line so that it needs the scenarios' and the engine's modules only in
the commands that start runs: `harness check` on a warm server is a few seconds, and importing
them was a third of a second of it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import docker
import docker.errors

from compose.releases import SPEC_PATTERN
from systems.kafka.cluster import (
    choose_kafka_image,
    ensure_kafka_release,
    kafka_version_of_image,
)
from systems.kafka.config import MODES
from systems.kafka.releases import check_spec
from systems.kafka.run import check_release_keys as check_keys_of_release
from systems.kafka.run import run_mode
from systems.kafka.scenario import KafkaScenario
from systems.rabbitmq.scenario import RabbitMQScenario, queue_type_refusal
from systems.registry import load_scenario, on_release
from systems.scenario import ScenarioError


def check_kafka_options(spec: Any, mode: str | None, kafka: str | None, build: bool = True) -> None:
    """--mode and --kafka: known values, and only for a Kafka scenario; with `build`, the
    release's image is built from Maven Central when none is present."""
    if mode is not None and mode not in MODES:
        raise ScenarioError(f"--mode must be one of {', '.join(MODES)}, not {mode!r}")
    if mode is not None and not isinstance(spec, KafkaScenario):
        raise ScenarioError(f"--mode is for Kafka scenarios; {spec.id} is not one")
    if kafka is not None:
        check_spec(kafka)
    if kafka is not None and not isinstance(spec, KafkaScenario):
        raise ScenarioError(f"--kafka is for Kafka scenarios; {spec.id} is not one")
    if build and isinstance(spec, KafkaScenario) and spec.cluster.image is None:
        try:
            ensure_kafka_release(spec.kafka_line(kafka), docker.from_env())
        except docker.errors.DockerException as e:
            raise ScenarioError(f"cannot use the Docker engine: {e}") from None


def check_release_keys(spec: Any, mode: str | None, line: str | None = None) -> None:
    """A Kafka scenario's broker and topic keys against the release a run on `line` (default:
    the scenario's) starts, as its image says it is."""
    if not isinstance(spec, KafkaScenario):
        return
    line = spec.kafka_line(line)
    client = docker.from_env()
    image = choose_kafka_image(spec.cluster.image, run_mode(spec, mode, line), client, line)  # type: ignore[arg-type]
    check_keys_of_release(spec.cluster, image, kafka_version_of_image(client.images.get(image)))


def rabbitmq_option(version: str | None) -> str | None:
    """--rabbitmq as given, once it has a release's form (one line otherwise)."""
    if version is not None and not re.fullmatch(SPEC_PATTERN, version):
        raise ScenarioError(
            f"--rabbitmq takes a release line or release (4.0, 4.0.5), not {version!r}"
        )
    return version


def on_rabbitmq(spec: Any, version: str | None) -> Any:
    """The scenario on another RabbitMQ release (--rabbitmq), refused in one line where that
    release lacks the scenario's queue type."""
    if version is None:
        return spec
    if not isinstance(spec, RabbitMQScenario):
        raise ScenarioError(f"--rabbitmq is for RabbitMQ scenarios; {spec.id} is not one")
    if not re.fullmatch(SPEC_PATTERN, version):
        raise ScenarioError(
            f"--rabbitmq takes a release line or release (4.0, 4.0.5), not {version!r}"
        )
    if refusal := queue_type_refusal(spec.cluster.queue_type, version):
        raise ScenarioError(refusal)
    return on_release(spec, version)


def judge_on_lines(
    path: Path,
    option: str,
    lines: list[str | None],
    mode: str | None,
    configs: list[str] | None = None,
    config_wins: bool = False,
) -> None:
    """Before a series of runs of one scenario on several release lines (`option`: --kafka or
    --rabbitmq; None: the scenario's own line): every line known, its image built and the
    scenario's keys, a team's files taken in, judged by its release, so that no run starts when
    one line would refuse."""
    from systems.registry import with_config_files

    for line in lines:
        if option == "--rabbitmq" and line is not None:
            on_line = on_rabbitmq(load_scenario(path, rabbitmq_option(line)), line)
            with_config_files(on_line, configs or [], config_wins)
            continue
        spec, _ = with_config_files(load_scenario(path), configs or [], config_wins)
        check_kafka_options(spec, mode, line, build=line is not None)
        if line is not None:
            check_release_keys(spec, mode, line)


def scenario_row(path: Path, root: Path) -> tuple[str, str, str, str, str]:
    """A row of `harness list`: the name to run it by, its claim, where it runs, what it
    expects, its description (an invalid file's first problem)."""
    name = path.relative_to(root).with_suffix("").as_posix()
    try:
        s = load_scenario(path)
    except ScenarioError as e:
        return name, "", "", "invalid", e.problems[0]
    if isinstance(s, KafkaScenario):
        return name, s.claim or "-", "kafka " + ",".join(s.cluster.modes), s.expect, s.description
    return name, s.claim or "-", s.cluster.system, s.expect, s.description


def where_it_runs(scenario: Any) -> str:
    """ ", mode M" for a Kafka scenario (its first mode), else nothing."""
    return f", mode {scenario.cluster.modes[0]}" if isinstance(scenario, KafkaScenario) else ""


def scenarios_in_order(root: Path) -> list[Path]:
    """The scenario files under `root`, each folder's files before its subfolders', and in a
    folder by name with their numbers compared as numbers: K1, K2, ..., K10, not K1, K10, K2."""

    def key(path: Path) -> tuple[tuple[str, ...], tuple[str | int, ...]]:
        parts = re.split(r"(\d+)", path.stem)
        return path.relative_to(root).parent.parts, tuple(
            int(part) if part.isdigit() else part for part in parts
        )

    return sorted(root.rglob("*.yaml"), key=key)
