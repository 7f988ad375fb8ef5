"""What every scenario may say whatever its system: here, a chaos base's `chaos:` block."""

from __future__ import annotations

import pytest

from systems.registry import parse_scenario
from systems.scenario import ScenarioError, scenario_data
from tests.helpers import ROOT

EOS = (ROOT / "scenarios" / "chaos" / "kafka-txn-eos.yaml").read_text()


def test_a_bases_warmup_is_read_and_written_back_as_the_file_said_it() -> None:
    scenario = parse_scenario(EOS, "eos.yaml")
    assert scenario.chaos is not None and scenario.chaos.warmup == 25
    assert scenario_data(scenario)["chaos"] == {"warmup": 25.0}
    without = parse_scenario(EOS.replace("chaos: {warmup: 25}\n", ""), "eos.yaml")
    assert without.chaos is None and "chaos" not in scenario_data(without)


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ("chaos: {warmup: -1}", "chaos.warmup: Input should be greater than or equal to 0"),
        (
            "chaos: {warmup: 25, start: 3}",
            "chaos.start: Extra inputs are not permitted (keys here: warmup, faults, traffic, "
            "upgrade_path)",
        ),
        (
            "chaos: {}",
            "chaos: an empty chaos block: give warmup (seconds before the first fault), faults "
            "(the families its schedules draw), traffic or upgrade_path",
        ),
        (
            "chaos: {faults: []}",
            "chaos.faults: List should have at least 1 item after validation, not 0",
        ),
    ],
)
def test_a_chaos_block_it_cannot_use_is_one_line_naming_the_field(block: str, message: str) -> None:
    with pytest.raises(ScenarioError) as e:
        parse_scenario(EOS.replace("chaos: {warmup: 25}", block), "eos.yaml")
    assert str(e.value) == f"eos.yaml: {message}"


# ---- a base's upgrade path ----------------------------------------------------------------------

KAFKA_UPGRADE = (ROOT / "scenarios" / "chaos" / "kafka-upgrade.yaml").read_text()
RABBITMQ_UPGRADE = (ROOT / "scenarios" / "chaos" / "rabbitmq-upgrade.yaml").read_text()


def test_a_bases_upgrade_path_and_traffic_are_read_as_written() -> None:
    scenario = parse_scenario(KAFKA_UPGRADE, "upgrade.yaml")
    assert scenario.chaos is not None and scenario.chaos.traffic == 180
    assert scenario.chaos.upgrade_path == [
        {"op": "upgrade", "release": "4.4", "within": 90},
        {"op": "finalize-feature", "feature": "metadata.version", "level": "4.4"},
    ]
    assert scenario.nemesis == []  # the path is the generator's, not a schedule


@pytest.mark.parametrize(
    ("text", "old", "new", "message"),
    [
        (
            KAFKA_UPGRADE,
            '- {op: upgrade, release: "4.4", within: 90}',
            "- {op: kill, target: leader}",
            "chaos: upgrade_path.0: op 'kill': the path holds upgrade and finalize-feature steps",
        ),
        (
            KAFKA_UPGRADE,
            '- {op: upgrade, release: "4.4", within: 90}',
            '- {at: 3, op: upgrade, release: "4.4"}',
            "chaos: upgrade_path.0: no at: the generator draws when it runs",
        ),
        (
            KAFKA_UPGRADE,
            'release: "4.4", within: 90}',
            'release: "3.8", within: 90}',
            "chaos.upgrade_path: cluster.release: chaos-kafka-upgrade upgrades to Kafka 3.8, older "
            "than 3.9, its start",
        ),
        (
            KAFKA_UPGRADE,
            "feature: metadata.version, level:",
            "feature: transaction.version, level:",
            "chaos.upgrade_path.1: finalize-feature: transaction.version's level is a number, "
            "not '4.4'",
        ),
        (
            RABBITMQ_UPGRADE,
            '{op: upgrade, release: "4.0.5", within: 120}',
            '{op: upgrade, release: "4.3.6", within: 120}',
            "chaos.upgrade_path.0: RabbitMQ's rolling upgrades do not skip a series: 4.0.5 to "
            "4.3.6 skips 4.1, 4.2 (unsupported_path: true runs it, to see what the node does)",
        ),
    ],
)
def test_an_upgrade_path_the_schema_would_refuse_as_a_schedule_is_one_line(
    text: str, old: str, new: str, message: str
) -> None:
    assert old in text
    with pytest.raises(ScenarioError) as e:
        parse_scenario(text.replace(old, new), "base.yaml")
    assert str(e.value) == f"base.yaml: {message}"
