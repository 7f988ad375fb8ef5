"""`harness validate` as a user expects: every problem on its own line at its file, line and
column, a misspelt key or op answered with the name it meant, and the spellings the README uses
(numbers, counts, a lone node name) taken as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from systems.kafka.scenario import KafkaScenario
from systems.problems import close_names
from systems.rabbitmq.scenario import RabbitMQScenario
from systems.registry import parse_scenario, scenario_files
from systems.scenario import ScenarioError
from tests.helpers import ROOT, harness

KAFKA = """\
id: mine
expect: safe
cluster:
  system: kafka
  modes: [kraft]
  min_insync_replicas: 2
workload:
  producers:
    - id: P1
      count: 2000
  readers:
    - id: C1
nemesis:
  - {at: 10, op: kill, target: [kafka2]}
  - {at: 20, op: start, target: [kafka2]}
"""

RABBIT = (ROOT / "scenarios" / "R3.yaml").read_text()


def _problems(text: str) -> list[str]:
    with pytest.raises(ScenarioError) as e:
        parse_scenario(text, "s.yaml")
    return e.value.problems


def test_the_base_scenarios_here_are_valid() -> None:
    assert isinstance(parse_scenario(KAFKA, "s.yaml"), KafkaScenario)
    assert isinstance(parse_scenario(RABBIT, "R3.yaml"), RabbitMQScenario)


def test_every_problem_is_a_line_at_its_line_and_column_in_file_order() -> None:
    text = (
        KAFKA.replace(
            "  min_insync_replicas: 2", "  min.insync.replicas: 2\n  replicaton_factor: 3"
        )
        .replace("op: kill", "op: kil")
        .replace("expect: safe", "expect: no-loss")
    )
    assert _problems(text) == [
        "s.yaml:2:1: expect: expect 'no-loss' is not one of loss, safe, unavailable, duplicates, "
        "no-duplicates, reordered",
        "s.yaml:6:3: cluster.min.insync.replicas: Extra inputs are not permitted "
        "(did you mean min_insync_replicas?)",
        "s.yaml:7:3: cluster.replicaton_factor: Extra inputs are not permitted "
        "(did you mean replication_factor?)",
        f"s.yaml:15:14: nemesis.0.op: {_op_line('kil')} (did you mean kill?)",
    ]
    with pytest.raises(ScenarioError) as e:
        parse_scenario(text, "s.yaml")
    # Every other command names the first problem in one line and counts the rest.
    assert str(e.value).startswith("s.yaml: expect: expect 'no-loss'")
    assert str(e.value).endswith("(and 3 more)")


def _op_line(name: str) -> str:
    from faults.registry import check_op

    with pytest.raises(ValueError) as e:
        check_op("kafka", name)
    return str(e.value)


def test_a_broker_property_with_no_field_of_its_own_is_pointed_at_broker_config() -> None:
    (line,) = _problems(KAFKA.replace("  modes: [kraft]", "  modes: [kraft]\n  log.flush.ms: 5"))
    assert line.startswith("s.yaml:6:3: cluster.log.flush.ms: Extra inputs are not permitted")
    assert "broker_config" in line


def test_a_validators_own_place_is_located_too() -> None:
    (line,) = _problems(
        KAFKA.replace("target: [kafka2]}\n  - {at: 20", "target: kafak2}\n  - {at: 20")
    )
    assert line.startswith("s.yaml:14:5: nemesis.0: no node 'kafak2' in mode kraft")
    assert "(did you mean kafka2?)" in line


def test_a_yaml_error_gives_the_parsers_reason_line_and_column() -> None:
    (line,) = _problems("id: x\n  expect: [\n")
    assert line == "s.yaml:2:9: not valid YAML: mapping values are not allowed here"


@pytest.mark.parametrize(
    ("written", "read"),
    [("acks: 1", "1"), ("acks: 0", "0"), ("acks: '1'", "1"), ("acks: all", "all")],
)
def test_acks_is_read_as_a_number_or_a_word(written: str, read: str) -> None:
    text = KAFKA.replace("      count: 2000", f"      count: 2000\n      {written}")
    scenario = parse_scenario(text, "s.yaml")
    assert isinstance(scenario, KafkaScenario)
    assert scenario.workload.producers[0].acks == read


@pytest.mark.parametrize(("written", "read"), [("20k", 20_000), ("1M", 1_000_000), ("7", 7)])
def test_counts_take_the_readmes_forms(written: str, read: int) -> None:
    kafka = parse_scenario(KAFKA.replace("count: 2000", f"count: {written}"), "s.yaml")
    assert isinstance(kafka, KafkaScenario) and kafka.workload.producers[0].count == read
    rabbit = parse_scenario(RABBIT.replace("count: 60000", f"count: {written}", 1), "R3.yaml")
    assert isinstance(rabbit, RabbitMQScenario) and rabbit.workload.publishers[0].count == read


def test_a_count_that_is_no_count_says_so() -> None:
    (line,) = _problems(KAFKA.replace("count: 2000", "count: lots"))
    assert "workload.producers.0.count" in line and "is not a count such as 3, 60k" in line


def test_a_lone_node_name_is_a_target() -> None:
    text = KAFKA.replace("target: [kafka2]", "target: kafka2")
    scenario = parse_scenario(text, "s.yaml")
    assert isinstance(scenario, KafkaScenario)
    assert [s.target for s in scenario.nemesis] == [["kafka2"], ["kafka2"]]
    # A role stays a role.
    led = parse_scenario(KAFKA.replace("target: [kafka2]", "target: leader"), "s.yaml")
    assert isinstance(led, KafkaScenario) and led.nemesis[0].target == "leader"


def test_a_lone_rabbitmq_node_is_a_node_list() -> None:
    base = parse_scenario(RABBIT, "R3.yaml")
    assert isinstance(base, RabbitMQScenario)
    steps = [s for s in base.nemesis if len(s.nodes) == 1]
    assert steps, "R3 has a step naming one node"
    name = steps[0].nodes[0]
    text = RABBIT.replace(f"nodes: [{name}]", f"nodes: {name}", 1)
    assert text != RABBIT
    again = parse_scenario(text, "R3.yaml")
    assert isinstance(again, RabbitMQScenario) and again.nemesis == base.nemesis


def test_close_names_prefer_the_same_word_in_another_spelling() -> None:
    names = ["min_insync_replicas", "replication_factor", "brokers"]
    assert close_names("Min-Insync-Replicas", names) == ["min_insync_replicas"]
    assert close_names("brokrs", names) == ["brokers"]
    assert close_names("zzz", names) == []


def test_folders_and_patterns_name_the_scenario_files_in_them(tmp_path: Path) -> None:
    (tmp_path / "deep").mkdir()
    for name in ("a.yaml", "b.yml", "deep/c.yaml", "notes.txt"):
        (tmp_path / name).write_text("x")
    assert scenario_files([tmp_path]) == [
        tmp_path / "a.yaml",
        tmp_path / "b.yml",
        tmp_path / "deep" / "c.yaml",
    ]
    assert scenario_files([tmp_path / "*.yaml"]) == [tmp_path / "a.yaml"]
    # A pattern that matches a folder names the scenario files in it.
    assert scenario_files([tmp_path / "d*"]) == [tmp_path / "deep" / "c.yaml"]
    # A pattern or path that matches nothing is kept, so reading it says why.
    assert scenario_files([tmp_path / "none*.yaml"]) == [tmp_path / "none*.yaml"]


def test_validate_prints_every_problem_of_every_file_and_exits_2(tmp_path: Path) -> None:
    (tmp_path / "good.yaml").write_text(KAFKA)
    (tmp_path / "bad.yaml").write_text(
        KAFKA.replace("op: kill", "op: kil").replace("count: 2000", "count: lots")
    )
    result = harness("validate", str(tmp_path))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("error: ")]
    assert [e.split(": ")[1] for e in errors] == [
        f"{tmp_path / 'bad.yaml'}:10:7",
        f"{tmp_path / 'bad.yaml'}:14:14",
    ]
    assert f"{tmp_path / 'good.yaml'}: ok" in result.stdout


def test_yaml_no_scenario_can_hold_is_one_line() -> None:
    (line,) = _problems("id: " + "9" * 5000 + "\n")
    assert line == "s.yaml: not a scenario YAML can hold (ValueError)"


@pytest.mark.unit
def test_a_key_found_outside_the_schema_is_located_at_itself() -> None:
    from systems.problems import KeyProblem, located_problems

    (found,) = located_problems(KAFKA, [KeyProblem(("workload", "producers", "0"), "count", "x")])
    assert (found.where, found.line, found.column) == ("workload.producers.0", 10, 7)


@pytest.mark.unit
def test_a_role_in_a_partition_s_groups_is_a_role_not_a_misspelt_node() -> None:
    """A partition's groups take roles, resolved when the step runs; one the workload cannot
    have (no transactional producer to coordinate) is said as such."""
    step = "nemesis:\n  - {at: 1, op: partition, groups: [[controller], [kafka1, kafka2]]}\n"
    parse_scenario(KAFKA + step, "mine.yaml")
    step = "nemesis:\n  - {at: 1, op: partition, groups: [[transaction-coordinator], [kafka1]]}\n"
    with pytest.raises(ScenarioError) as e:
        parse_scenario(KAFKA + step, "mine.yaml")
    assert "transaction-coordinator needs a transactional producer" in str(e.value)
    assert "did you mean" not in str(e.value)
