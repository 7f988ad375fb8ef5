"""A team's own Kafka configuration on a real cluster: the claims' outcomes reproduced with the
typed knobs taken out and the same properties given as the team gives them (a server.properties
and a producer.properties through --config, and broker_config in the scenario)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from systems.kafka.scenario import KafkaScenario
from systems.registry import load_scenario, with_config_files
from systems.scenario import ScenarioError
from tests.helpers import ROOT, run_harness
from tests.systems.kafka.test_real_cluster import kafka_image_or_missing


def without_knobs(scenario_id: str, tmp_path: Path, *knobs: str) -> tuple[Path, dict[str, Any]]:
    """The shipped scenario with its typed knobs `knobs` removed (cluster or producers)."""
    spec = yaml.safe_load((ROOT / "scenarios" / f"{scenario_id}.yaml").read_text())
    for knob in knobs:
        spec["cluster"].pop(knob, None)
        for producer in spec["workload"]["producers"]:
            producer.pop(knob, None)
    spec["id"] = f"{scenario_id}-passthrough"
    path = tmp_path / f"{spec['id']}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path, spec


def manifest_and_verdict(run_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    return (
        json.loads((run_dir / "manifest.json").read_text()),
        json.loads((run_dir / "verdict.json").read_text()),
    )


@pytest.mark.cluster
@pytest.mark.spark
@pytest.mark.e2e
def test_K1s_loss_from_a_teams_own_properties_files(docker_client: Any, tmp_path: Path) -> None:
    kafka_image_or_missing(docker_client, "kraft", "3.9")
    scenario, _ = without_knobs(
        "K1", tmp_path, "min_insync_replicas", "replica_lag_time_max_ms", "acks"
    )
    server = tmp_path / "server.properties"
    server.write_text(
        "# a team's file: the wiring lines are the harness's and are left out\n"
        "listeners=PLAINTEXT://0.0.0.0:9092\nlog.dirs=/data/kafka\n"
        "min.insync.replicas=1\nreplica.lag.time.max.ms=10000\nnum.replica.fetchers=2\n"
    )
    producer = tmp_path / "producer.properties"
    producer.write_text(
        "acks=1\nkey.serializer=org.apache.kafka.common.serialization.StringSerializer\n"
    )
    result, run_dir = run_harness(
        str(scenario), tmp_path / "results", "--mode", "kraft",
        "--config", str(server), "--config", f"producer={producer}",
    )  # fmt: skip
    assert "config: " in result.stderr and "listeners left out" in result.stderr
    assert "key.serializer left out" in result.stderr
    manifest, verdict = manifest_and_verdict(run_dir)
    assert manifest["error"] is None, result.stderr[-3000:]
    broker, chosen = manifest["settings"]["broker"], manifest["settings_from_scenario"]["broker"]
    assert broker["min.insync.replicas"] == "1" and broker["num.replica.fetchers"] == "2"
    assert {"min.insync.replicas", "num.replica.fetchers"} <= set(chosen)
    assert manifest["settings"]["producer P1"]["acks"] == "1"
    assert "listeners" not in broker
    # The claim: what the killed leader acknowledged alone is gone (a loss claim: Kafka may
    # keep it in a run, and then the verdict must say "not reproduced").
    lost = verdict["groups"]["final"]["lost"]
    assert verdict["claim_verdict"] == ("reproduced" if lost else "not reproduced")
    report = (run_dir / "report.html").read_text()
    assert 'id="settings"' in report and "num.replica.fetchers" in report


@pytest.mark.cluster
@pytest.mark.spark
@pytest.mark.e2e
def test_K4s_safety_from_broker_config_alone(docker_client: Any, tmp_path: Path) -> None:
    kafka_image_or_missing(docker_client, "kraft-dedicated", "4.4")
    scenario, spec = without_knobs("K4", tmp_path, "min_insync_replicas")
    spec["cluster"]["broker_config"] = {"min.insync.replicas": 2, "num.replica.fetchers": 2}
    scenario.write_text(yaml.safe_dump(spec))
    result, run_dir = run_harness(
        str(scenario), tmp_path / "results", "--mode", "kraft-dedicated", "--kafka", "4.4"
    )
    manifest, verdict = manifest_and_verdict(run_dir)
    assert manifest["error"] is None, result.stderr[-3000:]
    assert manifest["settings"]["topic"]["min.insync.replicas"] == "2"
    assert verdict["errors"]["send"].get("NOT_ENOUGH_REPLICAS", 0) > 0, verdict["errors"]
    assert verdict["groups"]["final"]["lost"] == 0 and verdict["claim_verdict"] == "reproduced"
    assert result.returncode == 0


@pytest.mark.cluster
def test_a_mistyped_key_is_one_line_and_nothing_starts(docker_client: Any, tmp_path: Path) -> None:
    kafka_image_or_missing(docker_client, "kraft", "4.4")
    scenario, spec = without_knobs("K4", tmp_path)
    spec["cluster"]["broker_config"] = {"num.replica.fetcher": 4}
    scenario.write_text(yaml.safe_dump(spec))
    before = {c.id for c in docker_client.containers.list(all=True)}
    result, _ = run_harness(
        str(scenario), tmp_path / "results", "--mode", "kraft", "--kafka", "4.4"
    )
    assert result.returncode == 2
    (line,) = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert (
        "num.replica.fetcher" in line and "Kafka 4.4.0" in line and "num.replica.fetchers" in line
    )
    assert "Traceback" not in result.stderr
    assert {c.id for c in docker_client.containers.list(all=True)} == before


def test_files_are_taken_in_and_what_the_harness_or_a_knob_owns_is_left_out_with_its_reason(
    tmp_path: Path,
) -> None:
    server = tmp_path / "server.properties"
    server.write_text("node.id=7\nmin.insync.replicas=1\nnum.io.threads=16\n")
    producer = tmp_path / "p.properties"
    producer.write_text("linger.ms=50\nbuffer.memory=33554432\nbatch.size=65536\nacks=0\n")
    spec = load_scenario(ROOT / "scenarios" / "K4.yaml")
    merged, notes = with_config_files(spec, [str(server), f"producer={producer}"])
    assert isinstance(merged, KafkaScenario)
    assert merged.cluster.broker_config == {"num.io.threads": "16"}
    assert merged.workload.producers[0].config == {"linger.ms": "50", "batch.size": "65536"}
    said = "\n".join(notes)
    assert "node.id left out: the harness sets it" in said
    assert "min.insync.replicas left out: the scenario sets min_insync_replicas" in said
    assert "buffer.memory left out" in said and "librdkafka" in said  # a Java client's key
    assert "acks left out: producer P1 sets acks" in said


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("settings.txt", "say what the file configures"),
        ("broker=/nonexistent/server.properties", "cannot read"),
    ],
)
def test_a_config_file_that_cannot_be_used_is_one_line(option: str, message: str) -> None:
    spec = load_scenario(ROOT / "scenarios" / "K4.yaml")
    with pytest.raises(ScenarioError, match=message):
        with_config_files(spec, [option])


def test_a_rabbitmq_conf_on_a_kafka_scenario_is_refused(tmp_path: Path) -> None:
    conf = tmp_path / "rabbitmq.conf"
    conf.write_text("vm_memory_high_watermark.relative = 0.6\n")
    with pytest.raises(ScenarioError, match="is Kafka's"):
        with_config_files(load_scenario(ROOT / "scenarios" / "K4.yaml"), [str(conf)])


@pytest.mark.cluster
@pytest.mark.spark
@pytest.mark.e2e
def test_the_scenario_a_new_user_wrote_runs_and_its_report_lists_its_settings(
    docker_client: Any, tmp_path: Path
) -> None:
    """The production values of the issue that asked for passthrough (num.replica.fetchers,
    unclean.leader.election.enable, a producer's linger and compression), refused before it:
    a short fault-free run on KRaft, every setting in the manifest and the report."""
    from tests.systems.kafka.test_settings import USERS

    kafka_image_or_missing(docker_client, "kraft", "4.4")
    spec = yaml.safe_load(USERS)
    spec["timeouts"] = {"cluster_up": 300, "workload": 20, "recovery": 120}
    scenario = tmp_path / "mine.yaml"
    scenario.write_text(yaml.safe_dump(spec))
    result, run_dir = run_harness(str(scenario), tmp_path / "results", "--kafka", "4.4")
    manifest, verdict = manifest_and_verdict(run_dir)
    assert manifest["error"] is None, result.stderr[-3000:]
    settings = manifest["settings"]
    assert settings["broker"]["num.replica.fetchers"] == "4"
    assert settings["topic"]["retention.ms"] == "600000"
    producer = settings["producer P1"]
    assert (producer["linger.ms"], producer["compression.type"], producer["batch.size"]) == (
        "20", "lz4", "65536",
    )  # fmt: skip
    assert settings["reader reader"]["fetch.min.bytes"] == "1"
    assert verdict["outcome"] == "safe" and result.returncode == 0, verdict["reason"]
    report = (run_dir / "report.html").read_text()
    for key in ("num.replica.fetchers", "retention.ms", "compression.type", "fetch.min.bytes"):
        assert f"<b>{key}</b>" in report, key


def test_a_config_option_is_handed_on_with_its_file_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from systems.config_files import absolute_config_option

    monkeypatch.chdir(tmp_path)
    assert absolute_config_option("server.properties") == f"broker={tmp_path}/server.properties"
    assert absolute_config_option("producer=p.properties") == f"producer={tmp_path}/p.properties"


def test_an_official_image_of_a_release_not_here_leaves_its_keys_to_the_brokers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from systems.kafka.configdefs import has_definitions
    from systems.kafka.run import check_release_keys

    assert has_definitions("3.7.1", "brokerjepsen/kafka:3.7.1-debian")  # ours: read from it
    assert has_definitions("3.9", "confluentinc/cp-kafka:7.9.0")  # its line's committed release
    assert not has_definitions("3.8.0", "apache/kafka:3.8.0")
    spec = load_scenario(ROOT / "scenarios" / "K4.yaml")
    assert isinstance(spec, KafkaScenario)
    cluster = spec.cluster.model_copy(update={"broker_config": {"num.replica.fetcher": 2}})
    check_release_keys(cluster, "apache/kafka:3.8.0", "3.8.0")  # said, not refused
    assert "left to the brokers" in caplog.text
    with pytest.raises(ScenarioError, match="num.replica.fetchers"):
        check_release_keys(cluster, "brokerjepsen/kafka:4.4.0-debian", "4.4.0")
