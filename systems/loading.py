"""A scenario as a command will run it, in one call (`load_checked`): found by name or path,
read on the release asked for, a team's configuration files taken in, the run's options judged
against it and, when asked, the release's image built and the scenario's keys judged by it.

Every refusal is a ScenarioError (a KafkaReleaseError is one), so that a command says it in one
line; the checks run in the order a run makes them, the offline ones first, so that nothing is
built while the file or an option is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import docker
import docker.errors

from compose.releases import SPEC_PATTERN
from systems.config_files import KeyFate
from systems.kafka.cluster import choose_kafka_image, ensure_kafka_release, kafka_version_of_image
from systems.kafka.config import MODES
from systems.kafka.releases import check_spec
from systems.kafka.run import check_release_keys, run_mode
from systems.kafka.scenario import KafkaScenario
from systems.rabbitmq.scenario import RabbitMQScenario, line_refusal
from systems.registry import AnyScenario, find_scenario, load_scenario, on_release
from systems.registry import with_config_files as taking_files
from systems.scenario import ScenarioError

# What --kafka is to the command that loads the scenario:
#   "run"   the release its run starts (harness run): said wrong before the file is read, the
#           scenario read as on it, refused for a scenario of another system;
#   "line"  a line that runs in processes of their own will start (compare, hunt, chaos): the
#           file judged for it and returned as it stands, each run reading it on its line;
#   "keys"  the release a Kafka scenario's keys are judged by (validate): the scenario read as
#           on it, no concern of another system's, and no run option judged.
KafkaAs = Literal["run", "line", "keys"]


@dataclass(frozen=True)
class LoadedScenario:
    scenario: AnyScenario
    path: Path  # the file, as found
    config_fates: tuple[KeyFate, ...] = ()  # what became of each key of a team's files


def load_checked(
    name_or_path: str | Path,
    scenarios_dir: Path | None = None,
    *,
    kafka: str | None = None,
    rabbitmq: str | None = None,
    mode: str | None = None,
    config_files: Sequence[str] = (),
    config_wins: bool = False,
    kafka_as: KafkaAs = "run",
    build: bool = False,
    release_keys: bool = False,
    on_read: Callable[[LoadedScenario], None] | None = None,
) -> LoadedScenario:
    """The scenario `name_or_path` names (with `scenarios_dir`, an id or a file there as
    `harness run` takes it; without, the path as it is), on `rabbitmq`'s or `kafka`'s release,
    with `config_files` taken in ([KIND=]FILE, as --config), and `mode` and `kafka` judged as a
    run's options. `build`: a Kafka scenario's release image is built when none is present;
    `release_keys`: its broker and topic keys judged by that image's release. `on_read` is
    handed the scenario once it is read, before its options are judged: where a command says
    what it read, and may refuse it."""
    path = Path(name_or_path)
    if scenarios_dir is not None:
        path = find_scenario(str(name_or_path), scenarios_dir)
    read_on = kafka if kafka_as != "line" else None
    if read_on is not None:
        check_spec(read_on)
    _check_rabbitmq_form(rabbitmq)
    spec = _on_rabbitmq(load_scenario(path, rabbitmq, read_on), rabbitmq)
    spec, fates = taking_files(spec, list(config_files), config_wins)
    loaded = LoadedScenario(spec, path, tuple(fates))
    if on_read is not None:
        on_read(loaded)
    if kafka_as != "keys":
        _check_run_options(spec, mode, kafka)
    if build:
        _build_release(spec, kafka)
    if release_keys:
        _check_release_keys(spec, mode, kafka)
    return loaded


def _check_rabbitmq_form(version: str | None) -> None:
    if version is not None and not re.fullmatch(SPEC_PATTERN, version):
        raise ScenarioError(
            f"--rabbitmq takes a release line or release (4.0, 4.0.5), not {version!r}"
        )


def _on_rabbitmq(spec: AnyScenario, version: str | None) -> AnyScenario:
    """The scenario on another RabbitMQ release, refused in one line where that release lacks
    the scenario's queue type or keeps its metadata in another store than its claim's."""
    if version is None:
        return spec
    if not isinstance(spec, RabbitMQScenario):
        raise ScenarioError(f"--rabbitmq is for RabbitMQ scenarios; {spec.id} is not one")
    if refusal := line_refusal(spec.cluster, version):
        raise ScenarioError(refusal)
    return on_release(spec, version)


def _check_run_options(spec: AnyScenario, mode: str | None, kafka: str | None) -> None:
    """--mode and --kafka: known values, and only for a Kafka scenario."""
    if mode is not None and mode not in MODES:
        raise ScenarioError(f"--mode must be one of {', '.join(MODES)}, not {mode!r}")
    if mode is not None and not isinstance(spec, KafkaScenario):
        raise ScenarioError(f"--mode is for Kafka scenarios; {spec.id} is not one")
    if kafka is not None:
        check_spec(kafka)
    if kafka is not None and not isinstance(spec, KafkaScenario):
        raise ScenarioError(f"--kafka is for Kafka scenarios; {spec.id} is not one")


def _build_release(spec: AnyScenario, kafka: str | None) -> None:
    """The image of the release a Kafka scenario's run starts, built from Maven Central when
    none is present (a scenario that names its own image is run on that)."""
    if not isinstance(spec, KafkaScenario) or spec.cluster.image is not None:
        return
    try:
        ensure_kafka_release(spec.kafka_line(kafka), docker.from_env())
    except docker.errors.DockerException as e:
        raise ScenarioError(f"cannot use the Docker engine: {e}") from None


def _check_release_keys(spec: AnyScenario, mode: str | None, kafka: str | None) -> None:
    """A Kafka scenario's broker and topic keys against the release a run on `kafka` (default:
    the scenario's) starts, as its image says it is."""
    if not isinstance(spec, KafkaScenario):
        return
    line = spec.kafka_line(kafka)
    client = docker.from_env()
    image = choose_kafka_image(spec.cluster.image, run_mode(spec, mode, line), client, line)  # type: ignore[arg-type]
    check_release_keys(spec.cluster, image, kafka_version_of_image(client.images.get(image)))
