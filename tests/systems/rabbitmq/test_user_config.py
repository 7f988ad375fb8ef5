"""A team's rabbitmq.conf through --config, and a scenario moved to another release."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from systems.rabbitmq.scenario import Policy, RabbitMQScenario
from systems.registry import load_scenario, on_release, parse_scenario, with_config_files
from systems.scenario import ScenarioError, scenario_data
from tests.helpers import ROOT


def test_a_rabbitmq_conf_is_taken_in_but_for_what_the_harness_or_a_knob_sets(
    tmp_path: Path,
) -> None:
    conf = tmp_path / "rabbitmq.conf"
    conf.write_text(
        "# production\n"
        "listeners.tcp.default = 5672\n"
        "cluster_partition_handling = autoheal\n"
        "vm_memory_high_watermark.relative = 0.6  # of the host's memory\n"
        "consumer_timeout = 900000\n"
    )
    spec = load_scenario(ROOT / "scenarios/R9-kill.yaml")  # partition_handling: pause_minority
    with pytest.raises(ScenarioError) as refused:
        with_config_files(spec, [str(conf)])
    (line,) = refused.value.problems
    assert "cluster_partition_handling" in line and "partition_handling: pause_minority" in line
    assert "--config-wins" in line
    merged, fates = with_config_files(spec, [str(conf)], config_wins=True)
    assert isinstance(merged, RabbitMQScenario)
    assert merged.cluster.rabbitmq_conf == {
        "cluster_partition_handling": "autoheal",
        "vm_memory_high_watermark.relative": "0.6",
        "consumer_timeout": "900000",
    }
    assert merged.cluster.partition_handling is None
    fate = {f.key: f.fate for f in fates}
    assert fate["listeners.tcp.default"] == "left out"
    assert fate["cluster_partition_handling"] == "overrode"
    assert fate["consumer_timeout"] == "taken"
    said = "\n".join(f.line() for f in fates)
    assert "listeners.tcp.default=5672 (rabbitmq_conf) left out: the harness sets it" in said


def test_a_conf_key_over_a_knob_at_its_default_is_taken_without_a_word(tmp_path: Path) -> None:
    conf = tmp_path / "rabbitmq.conf"
    conf.write_text("net_ticktime = 60\n")
    spec = load_scenario(ROOT / "scenarios/R9-kill.yaml")
    data = scenario_data(spec)
    data["cluster"]["net_ticktime"] = 5  # the default, as a template writes it
    with_default = parse_scenario(yaml.safe_dump(data))
    merged, fates = with_config_files(with_default, [str(conf)])
    assert isinstance(merged, RabbitMQScenario)
    assert merged.cluster.rabbitmq_conf["net_ticktime"] == "60"
    assert "net_ticktime" not in merged.cluster.model_fields_set
    assert [f.fate for f in fates] == ["replaced"]


def test_a_mistyped_key_in_the_file_is_refused_by_the_release_in_one_line(tmp_path: Path) -> None:
    conf = tmp_path / "rabbitmq.conf"
    conf.write_text("vm_memory_high_watermark.relativ = 0.6\n")
    with pytest.raises(ScenarioError, match="vm_memory_high_watermark.relativ"):
        with_config_files(load_scenario(ROOT / "scenarios/R9-kill.yaml"), [str(conf)])


def test_kafka_files_on_a_rabbitmq_scenario_and_bad_lines_are_refused(tmp_path: Path) -> None:
    server = tmp_path / "server.properties"
    server.write_text("num.io.threads=8\n")
    spec = load_scenario(ROOT / "scenarios/R9-kill.yaml")
    with pytest.raises(ScenarioError, match="RabbitMQ's"):
        with_config_files(spec, [str(server)])
    conf = tmp_path / "broken.conf"
    conf.write_text("just words\n")
    with pytest.raises(ScenarioError, match="line 1 is not `key = value`"):
        with_config_files(spec, [str(conf)])


def test_a_scenario_moved_to_another_release_is_validated_again_as_a_whole() -> None:
    spec = load_scenario(ROOT / "scenarios/R9-kill.yaml")
    assert isinstance(spec, RabbitMQScenario)
    assert on_release(spec, "4.3").cluster.version == "4.3"
    policy = {"name": "p", "pattern": ".*", "definition": {"max-length": 10}}
    with_policy = spec.model_copy(
        update={
            "cluster": spec.cluster.model_copy(
                update={"policies": [Policy(**policy, apply_to="quorum_queues")]}
            )
        }
    )
    assert on_release(with_policy, "4.3").cluster.policies[0].apply_to == "quorum_queues"
    with pytest.raises(ScenarioError, match="quorum_queues"):
        on_release(with_policy, "3.10")  # 3.x policies apply to queues, exchanges or all


def test_a_scenario_without_a_version_is_judged_by_the_release_it_is_asked_to_run_on(
    tmp_path: Path,
) -> None:
    import yaml

    spec = yaml.safe_load((ROOT / "scenarios/R9-kill.yaml").read_text())
    del spec["cluster"]["version"]  # 3.10 by default, which has no quorum_queues policies
    spec["cluster"]["policies"] = [
        {
            "name": "p",
            "pattern": ".*",
            "definition": {"max-length": 10},
            "apply_to": "quorum_queues",
        }
    ]
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(ScenarioError, match="quorum_queues"):
        load_scenario(path)
    on_43 = load_scenario(path, "4.3")
    assert isinstance(on_43, RabbitMQScenario) and on_43.cluster.version == "4.3"
