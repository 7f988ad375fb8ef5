"""A scenario as a command will run it, in one call: the shipped scenarios found by name and
by path, put on another release, given a team's files, and every refusal said as a run says
it, in a run's order (offline: nothing here builds an image or asks the Docker engine)."""

from __future__ import annotations

from pathlib import Path

import pytest

from systems.kafka.releases import KafkaReleaseError
from systems.kafka.scenario import KafkaScenario
from systems.loading import LoadedScenario, load_checked
from systems.rabbitmq.scenario import RabbitMQScenario
from systems.scenario import ScenarioError
from tests.helpers import ROOT

SCENARIOS = ROOT / "scenarios"


@pytest.mark.parametrize(
    ("name", "found", "scenario_id"),
    [
        ("K4", "K4.yaml", "K4"),
        ("K4.yaml", "K4.yaml", "K4"),
        ("RJ1", "rabbitmq-jepsen/RJ1.yaml", "RJ1"),  # the one RJ1.yaml of a folder
        ("chaos/kafka-safe", "chaos/kafka-safe.yaml", "chaos-kafka-safe"),
    ],
)
def test_a_name_is_found_in_the_scenarios_folder(name: str, found: str, scenario_id: str) -> None:
    loaded = load_checked(name, SCENARIOS)
    assert loaded.path == SCENARIOS / found
    assert loaded.scenario.id == scenario_id
    assert loaded.config_fates == ()


def test_a_path_is_read_as_it_is(tmp_path: Path) -> None:
    own = tmp_path / "mine.yaml"
    own.write_text((SCENARIOS / "R9.yaml").read_text())
    assert load_checked(str(own), SCENARIOS).path == own  # a file, wherever it is
    loaded = load_checked(own)  # no folder to look in: the path alone
    assert loaded.path == own and isinstance(loaded.scenario, RabbitMQScenario)


def test_a_missing_scenario_is_one_line_naming_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"no scenario 'nosuch' \(known: K1, K10, ") as e:
        load_checked("nosuch", SCENARIOS)
    assert len(e.value.problems) == 1
    with pytest.raises(ScenarioError, match="cannot read"):
        load_checked(tmp_path / "nosuch.yaml")


def test_a_rabbitmq_scenario_is_put_on_another_release_and_judged_there() -> None:
    moved = load_checked("R10", SCENARIOS, rabbitmq="4.3").scenario
    assert isinstance(moved, RabbitMQScenario) and moved.cluster.version == "4.3"
    with pytest.raises(ScenarioError, match="RabbitMQ 4.0 has no mirrored queues"):
        load_checked("R1", SCENARIOS, rabbitmq="4.0")


@pytest.mark.parametrize(
    ("name", "version", "said"),
    [
        ("R10", "four", "--rabbitmq takes a release line or release (4.0, 4.0.5), not 'four'"),
        ("K4", "4.0", "--rabbitmq is for RabbitMQ scenarios; K4 is not one"),
    ],
)
def test_a_rabbitmq_release_that_cannot_be_had_is_refused(
    name: str, version: str, said: str
) -> None:
    with pytest.raises(ScenarioError) as e:
        load_checked(name, SCENARIOS, rabbitmq=version)
    assert str(e.value) == said


def test_a_kafka_scenario_is_read_on_the_line_kafka_names() -> None:
    on_line = load_checked("K1", SCENARIOS, kafka="4.4").scenario
    assert isinstance(on_line, KafkaScenario) and on_line.cluster.release == "4.4"
    # For runs in processes of their own the file is judged for the line, and kept as it is.
    as_filed = load_checked("K1", SCENARIOS, kafka="4.4", kafka_as="line").scenario
    assert isinstance(as_filed, KafkaScenario) and as_filed.cluster.release is None


def test_a_line_a_kafka_scenario_cannot_run_on_is_refused_when_it_is_read_on_it() -> None:
    with pytest.raises(ScenarioError, match="consumer group protocol \\(KIP-848\\): Kafka 4.0 on"):
        load_checked("K25-consumer-protocol", SCENARIOS, kafka="3.9")
    # Judged as a line, what the release lacks is the run's own check (it needs the engine).
    load_checked("K25-consumer-protocol", SCENARIOS, kafka="3.9", kafka_as="line")


def test_kafka_is_refused_for_another_system_unless_it_only_judges_keys() -> None:
    with pytest.raises(ScenarioError, match="--kafka is for Kafka scenarios; R9 is not one"):
        load_checked("R9", SCENARIOS, kafka="4.4")
    assert load_checked("R9", SCENARIOS, kafka="4.4", kafka_as="keys").scenario.id == "R9"


@pytest.mark.parametrize("kafka_as", ["run", "line", "keys"])
def test_a_kafka_release_the_harness_cannot_run_is_refused(kafka_as: str) -> None:
    with pytest.raises(KafkaReleaseError, match="Kafka 3.1 is older than 3.7"):
        load_checked("K4", SCENARIOS, kafka="3.1", kafka_as=kafka_as)  # type: ignore[arg-type]


def test_a_run_says_a_wrong_kafka_before_it_reads_the_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("id: broken\ncluster: {system: kafka}\n")
    with pytest.raises(KafkaReleaseError):
        load_checked(broken, kafka="four")
    with pytest.raises(ScenarioError, match="broken.yaml") as e:
        load_checked(broken, kafka="four", kafka_as="line")
    assert not isinstance(e.value, KafkaReleaseError)


def test_a_teams_kafka_file_is_taken_in_and_each_keys_fate_kept(tmp_path: Path) -> None:
    server = tmp_path / "server.properties"
    server.write_text("num.replica.fetchers=2\nlisteners=PLAINTEXT://0.0.0.0:9092\n")
    loaded = load_checked("K4", SCENARIOS, config_files=[str(server)])
    assert isinstance(loaded.scenario, KafkaScenario)
    assert loaded.scenario.cluster.broker_config["num.replica.fetchers"] == "2"
    fates = {f.key: f.fate for f in loaded.config_fates}
    assert fates == {"num.replica.fetchers": "taken", "listeners": "left out"}


def test_a_teams_rabbitmq_conf_is_taken_in_on_the_release_asked(tmp_path: Path) -> None:
    conf = tmp_path / "rabbitmq.conf"
    conf.write_text("consumer_timeout = 900000\n")
    loaded = load_checked("R10", SCENARIOS, rabbitmq="4.3", config_files=[str(conf)])
    assert isinstance(loaded.scenario, RabbitMQScenario)
    assert loaded.scenario.cluster.version == "4.3"
    assert loaded.scenario.cluster.rabbitmq_conf["consumer_timeout"] == "900000"
    assert [f.fate for f in loaded.config_fates] == ["taken"]


def test_a_key_its_release_does_not_know_is_refused(tmp_path: Path) -> None:
    server = tmp_path / "server.properties"
    server.write_text("num.replica.fetcher=2\n")
    with pytest.raises(ScenarioError, match="did you mean num.replica.fetchers"):
        load_checked("K4", SCENARIOS, config_files=[str(server)])


def test_a_key_against_a_knob_the_scenario_chose_is_refused_unless_the_file_wins(
    tmp_path: Path,
) -> None:
    conf = tmp_path / "rabbitmq.conf"
    conf.write_text("cluster_partition_handling = autoheal\n")
    with pytest.raises(ScenarioError, match="--config-wins"):
        load_checked("R9-kill", SCENARIOS, config_files=[str(conf)])
    won = load_checked("R9-kill", SCENARIOS, config_files=[str(conf)], config_wins=True)
    assert [f.fate for f in won.config_fates] == ["overrode"]


@pytest.mark.parametrize(
    ("name", "mode", "said"),
    [
        ("K4", "bogus", "--mode must be one of zk, kraft, kraft-dedicated, not 'bogus'"),
        ("R9", "kraft", "--mode is for Kafka scenarios; R9 is not one"),
    ],
)
def test_a_mode_that_does_not_fit_is_refused(name: str, mode: str, said: str) -> None:
    with pytest.raises(ScenarioError) as e:
        load_checked(name, SCENARIOS, mode=mode)
    assert str(e.value) == said


def test_the_command_hears_of_the_scenario_before_its_options_are_judged(tmp_path: Path) -> None:
    heard: list[LoadedScenario] = []
    with pytest.raises(ScenarioError, match="--mode is for Kafka scenarios"):
        load_checked("R9", SCENARIOS, mode="kraft", on_read=heard.append)
    assert [h.scenario.id for h in heard] == ["R9"]
    # A team's file is judged before the options: its conflict is what a run says first.
    conf = tmp_path / "rabbitmq.conf"
    conf.write_text("cluster_partition_handling = autoheal\n")
    with pytest.raises(ScenarioError, match="--config-wins"):
        load_checked("R9-kill", SCENARIOS, mode="kraft", config_files=[str(conf)])


def test_a_refusal_stops_the_scenario_where_the_command_hears_of_it() -> None:
    def refuse(loaded: LoadedScenario) -> None:
        raise ScenarioError(f"{loaded.scenario.id}: not run")

    with pytest.raises(ScenarioError, match="K4: not run"):
        load_checked("K4", SCENARIOS, mode="bogus", on_read=refuse)
