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
from systems.registry import load_scenario, parse_scenario, with_config_files
from systems.scenario import ScenarioError, scenario_data
from tests.helpers import ROOT, harness, run_harness
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
    results = tmp_path / "results"
    result = harness(
        "run", str(scenario), "--results", str(results), "--mode", "kraft", "--kafka", "4.4"
    )
    assert result.returncode == 2
    assert not results.exists()  # refused before a run folder was made
    (line,) = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert (
        "num.replica.fetcher" in line and "Kafka 4.4.0" in line and "num.replica.fetchers" in line
    )
    assert "Traceback" not in result.stderr
    assert {c.id for c in docker_client.containers.list(all=True)} == before


# What `harness new` wrote before templates left the defaults out: every typed knob explicit.
OLD_TEMPLATE = """
id: orders
expect: safe
cluster:
  system: kafka
  modes: [kraft]
  min_insync_replicas: 2
  unclean_leader_election: false
workload:
  producers:
    - {id: P1, count: 20000, rate: 1000, acks: all, enable_idempotence: false, linger_ms: 5,
       compression: none, delivery_timeout_ms: 30000, request_timeout_ms: 10000}
  readers: [{id: reader}]
nemesis:
  - {at: 5, op: kill, target: leader, label: killed}
  - {at: 15, op: start, target: "@killed"}
"""


def fates_of(fates: list[Any]) -> dict[tuple[str, str], str]:
    return {(f.scope, f.key): f.fate for f in fates}


def test_a_files_keys_win_over_the_knobs_a_template_leaves_at_their_defaults(
    tmp_path: Path,
) -> None:
    """The walk-through of docs/own-configuration.md: the old template wrote every typed knob at
    its default; a team's min ISR 1, unclean election on and acks 1 must be what runs."""
    server = tmp_path / "server.properties"
    server.write_text(
        "node.id=7\nmin.insync.replicas=1\nunclean.leader.election.enable=true\nnum.io.threads=16\n"
    )
    producer = tmp_path / "p.properties"
    producer.write_text("linger.ms=20\nbuffer.memory=33554432\nacks=1\ncompression.type=lz4\n")
    scenario = tmp_path / "orders.yaml"
    scenario.write_text(OLD_TEMPLATE)
    spec = load_scenario(scenario)
    assert isinstance(spec, KafkaScenario)
    assert {"min_insync_replicas", "unclean_leader_election"} <= spec.cluster.model_fields_set
    merged, fates = with_config_files(spec, [str(server), f"producer={producer}"])
    assert isinstance(merged, KafkaScenario)
    assert merged.cluster.broker_config == {
        "min.insync.replicas": "1",
        "unclean.leader.election.enable": "true",
        "num.io.threads": "16",
    }
    assert "min_insync_replicas" not in merged.cluster.model_fields_set
    assert "unclean_leader_election" not in merged.cluster.model_fields_set
    # What the brokers and the topic are then given: the file's values.
    from systems.kafka.settings import broker_properties

    cfg = merged.cluster.config("kraft", "4.4")
    assert broker_properties(cfg, 1)["min.insync.replicas"] == "1"
    assert merged.cluster.topic_properties()["min.insync.replicas"] == "1"
    assert merged.cluster.topic_properties()["unclean.leader.election.enable"] == "true"
    p1 = merged.workload.producers[0]
    assert p1.config == {"linger.ms": "20", "acks": "1", "compression.type": "lz4"}
    assert not {"acks", "linger_ms", "compression"} & p1.model_fields_set
    fate = fates_of(fates)
    assert fate[("broker", "node.id")] == "left out"
    assert fate[("broker", "min.insync.replicas")] == "replaced"
    assert fate[("broker", "num.io.threads")] == "taken"
    assert fate[("producer P1", "buffer.memory")] == "left out"  # a Java client's key
    assert fate[("producer P1", "acks")] == "replaced"
    said = "\n".join(f.line() for f in fates)
    assert "the scenario's min_insync_replicas: 2 (its default)" in said
    assert "librdkafka" in said


def test_a_key_against_a_knob_the_scenario_chose_stops_the_run_unless_the_file_wins(
    tmp_path: Path,
) -> None:
    server = tmp_path / "server.properties"
    server.write_text("min.insync.replicas=1\nreplica.lag.time.max.ms=10000\n")
    producer = tmp_path / "p.properties"
    producer.write_text("acks=1\n")
    spec = load_scenario(ROOT / "scenarios" / "K1.yaml")  # min ISR 1, lag 10 s, acks 1: chosen
    data = scenario_data(spec)
    data["cluster"]["min_insync_replicas"] = 3
    data["workload"]["producers"][0]["acks"] = "0"
    chosen = parse_scenario(yaml.safe_dump(data))
    options = [str(server), f"producer={producer}"]
    with pytest.raises(ScenarioError) as refused:
        with_config_files(chosen, options)
    problems = refused.value.problems
    assert len(problems) == 2, problems
    assert "min_insync_replicas: 3" in problems[0] and "--config-wins" in problems[0]
    assert "producer P1" in problems[1] and "acks: 0" in problems[1]
    merged, fates = with_config_files(chosen, options, config_wins=True)
    assert isinstance(merged, KafkaScenario)
    assert merged.cluster.broker_config["min.insync.replicas"] == "1"
    assert merged.workload.producers[0].config["acks"] == "1"
    assert fates_of(fates)[("broker", "min.insync.replicas")] == "overrode"


def test_a_transactional_producers_timeout_from_a_file_is_the_one_it_runs_with(
    tmp_path: Path,
) -> None:
    producer = tmp_path / "p.properties"
    producer.write_text("transaction.timeout.ms=20000\n")
    spec = load_scenario(ROOT / "scenarios" / "T2.yaml")
    merged, fates = with_config_files(spec, [f"producer={producer}"])
    assert isinstance(merged, KafkaScenario)
    txn = [p.transaction for p in merged.workload.producers if p.transaction is not None]
    assert txn and all(t.timeout_ms == 20000 for t in txn)
    assert all("transaction.timeout.ms" not in p.config for p in merged.workload.producers)


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


def team_files(tmp_path: Path) -> list[str]:
    """The team of the own-configuration walk-through: min ISR 1, unclean election on, acks 1."""
    server = tmp_path / "server.properties"
    server.write_text(
        "listeners=PLAINTEXT://0.0.0.0:9092\nmin.insync.replicas=1\n"
        "unclean.leader.election.enable=true\n"
    )
    producer = tmp_path / "producer.properties"
    producer.write_text("acks=1\nlinger.ms=20\ncompression.type=lz4\n")
    return ["--config", str(server), "--config", str(producer)]


def test_a_knob_the_scenario_chose_against_a_file_stops_the_run_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One line per conflict, exit 2, no run folder: with no Docker engine to reach, nothing
    could have started either."""
    from harness.new import write_template

    scenario = write_template("orders", "kafka", tmp_path / "orders.yaml")
    text = scenario.read_text()
    text = text.replace("  # min_insync_replicas: 2 ", "  min_insync_replicas: 3 ")
    text = text.replace("      # acks: all ", "      acks: '0' ")
    scenario.write_text(text)
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent.sock")
    result = harness(
        "run", str(scenario), "--results", str(tmp_path / "results"), *team_files(tmp_path)
    )
    assert result.returncode == 2, result.stderr
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 2, result.stderr
    assert "min_insync_replicas: 3" in errors[0] and "--config-wins" in errors[0]
    assert "acks: 0" in errors[1]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.cluster
@pytest.mark.spark
@pytest.mark.e2e
def test_the_walk_through_template_and_a_teams_files_runs_the_files_values(
    docker_client: Any, tmp_path: Path
) -> None:
    """docs/own-configuration.md as a new user follows it: `harness new`, then a run with the
    team's files; the brokers, the topic and the producer run with the files' values, and the
    manifest and report say the files set them."""
    from harness.new import write_template

    kafka_image_or_missing(docker_client, "kraft", "4.4")
    scenario = write_template("orders", "kafka", tmp_path / "orders.yaml")
    result, run_dir = run_harness(
        str(scenario), tmp_path / "results", "--kafka", "4.4", *team_files(tmp_path)
    )
    manifest, verdict = manifest_and_verdict(run_dir)
    assert manifest["error"] is None, result.stderr[-3000:]
    settings = manifest["settings"]
    assert settings["broker"]["min.insync.replicas"] == "1"
    assert settings["broker"]["unclean.leader.election.enable"] == "true"
    assert settings["topic"]["min.insync.replicas"] == "1"
    assert settings["topic"]["unclean.leader.election.enable"] == "true"
    assert settings["producer P1"]["acks"] == "1"
    assert settings["producer P1"]["compression.type"] == "lz4"
    fates = {(f["scope"], f["key"]): f["fate"] for f in manifest["config_files"]}
    assert fates[("broker", "listeners")] == "left out"
    assert fates[("broker", "min.insync.replicas")] == "taken"
    assert fates[("producer P1", "acks")] == "taken"
    report = (run_dir / "report.html").read_text()
    assert 'id="config-files"' in report and "your file" in report
    # Whatever Kafka did with those settings, the run tested something: a leader was killed
    # while P1 still sent.
    assert verdict["outcome"] != "inconclusive", verdict["reason"]
