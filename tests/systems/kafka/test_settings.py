"""The user's own Kafka configuration: passthrough keys for brokers, topic and clients, their
meeting with the typed knobs, the harness's own keys, and what reaches the cluster."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from checkers.coverage import ClusterFacts
from systems.kafka.cluster import BrokerPorts, render_compose
from systems.kafka.scenario import KafkaScenario
from systems.kafka.settings import (
    broker_properties,
    env_key,
    env_name,
    env_value,
    release_refusals,
)
from systems.registry import parse_scenario
from systems.scenario import ScenarioError

# The scenario: a team's production values, refused before passthrough existed.
USERS = """
id: mine
expect: safe
cluster:
  system: kafka
  modes: [kraft]
  broker_config: {num.replica.fetchers: 4, unclean.leader.election.enable: false}
  topic_config: {retention.ms: 600000, compression.type: producer}
workload:
  producers:
  - {id: P1, count: 1000, rate: 100, linger_ms: 20, compression: lz4, config: {batch.size: 65536}}
  readers:
  - {id: reader, config: {fetch.min.bytes: 1}}
"""


def scenario(text: str = USERS, **cluster: Any) -> KafkaScenario:
    data = yaml.safe_load(text)
    data["cluster"].update(cluster)
    spec = parse_scenario(yaml.safe_dump(data), "mine.yaml")
    assert isinstance(spec, KafkaScenario)
    return spec


def refusal(**cluster: Any) -> str:
    with pytest.raises(ScenarioError) as e:
        scenario(**cluster)
    return str(e.value)


def test_a_teams_own_settings_load_and_reach_every_node_and_the_topic() -> None:
    spec = scenario()
    cfg = spec.cluster.config("kraft", "4.4")
    props = broker_properties(cfg, 1)
    assert props["num.replica.fetchers"] == "4"
    assert props["unclean.leader.election.enable"] == "false"
    assert spec.cluster.topic_properties()["retention.ms"] == "600000"
    ports = {i: BrokerPorts(40000 + i, 40000 + i) for i in (1, 2, 3)}
    images = {"kafka": "brokerjepsen/kafka:4.4.0-debian"}
    services = render_compose(cfg, "p", images, ports, "172.29.60", "A" * 22)["services"]
    for node in ("kafka1", "kafka2", "kafka3"):
        assert services[node]["environment"]["KAFKA_NUM_REPLICA_FETCHERS"] == "4"


def test_min_isr_set_only_through_passthrough_is_the_brokers_the_topics_and_the_coverages() -> None:
    spec = scenario(broker_config={"min.insync.replicas": 3})
    props = broker_properties(spec.cluster.config("kraft"), 1)
    assert props["min.insync.replicas"] == "3"
    assert props["transaction.state.log.min.isr"] == "3"  # derived from what was chosen
    facts = ClusterFacts.of(
        {"cluster": {"system": "kafka", "broker_config": {"min.insync.replicas": 3}}}
    )
    assert facts.min_insync_replicas == 3
    topic_only = {
        "system": "kafka",
        "min_insync_replicas": 2,
        "topic_config": {"min.insync.replicas": "1"},
    }
    assert ClusterFacts.of({"cluster": topic_only}).min_insync_replicas == 1


def test_a_per_node_override_reaches_that_node_alone() -> None:
    spec = scenario(broker_overrides={2: {"num.io.threads": 4}})
    cfg = spec.cluster.config("kraft")
    assert broker_properties(cfg, 2)["num.io.threads"] == "4"
    assert "num.io.threads" not in broker_properties(cfg, 1)
    assert "no Kafka node 9" in refusal(broker_overrides={9: {"num.io.threads": 4}})


def test_a_passthrough_session_timeout_sets_the_heartbeat_it_implies() -> None:
    cfg = scenario(broker_config={"broker.session.timeout.ms": 18000}).cluster.config("kraft")
    props = broker_properties(cfg, 1)
    assert (
        props["broker.session.timeout.ms"] == "18000"
        and props["broker.heartbeat.interval.ms"] == "3000"
    )


def test_a_typed_knob_set_and_its_passthrough_key_are_one_source_too_many() -> None:
    line = refusal(min_insync_replicas=2, broker_config={"min.insync.replicas": 3})
    assert '"min.insync.replicas" is set by min_insync_replicas too' in line
    line = refusal(
        unclean_leader_election=True,
        broker_config={},
        topic_config={"unclean.leader.election.enable": False},
    )
    assert 'topic_config: "unclean.leader.election.enable" is set by' in line


def test_keys_that_wire_the_cluster_are_the_harness_s() -> None:
    for key in ("listeners", "node.id", "log.dirs", "controller.quorum.voters"):
        line = refusal(broker_config={key: "x"})
        assert f'broker_config: "{key}" is set by the harness' in line, line


def test_client_keys_are_checked_by_librdkafka_itself_and_meet_the_typed_knobs() -> None:
    bad_key = USERS.replace("batch.size: 65536", "batch.sise: 65536")
    with pytest.raises(ScenarioError, match=r"batch\.sise.*librdkafka"):
        scenario(bad_key)
    bad_value = USERS.replace("batch.size: 65536", "batch.size: lots")
    with pytest.raises(ScenarioError, match="librdkafka"):
        scenario(bad_value)
    conflict = USERS.replace("config: {batch.size: 65536}", "config: {linger.ms: 50}")
    with pytest.raises(ScenarioError, match='"linger.ms" is set by linger_ms too'):
        scenario(conflict)
    owned = USERS.replace("config: {fetch.min.bytes: 1}", "config: {group.id: theirs}")
    with pytest.raises(ScenarioError, match='"group.id" is set by the harness'):
        scenario(owned)


def test_the_release_itself_judges_broker_and_topic_keys() -> None:
    (line,) = release_refusals("4.4.0", {"num.replica.fetcher": 4}, {}, {})
    assert "num.replica.fetcher" in line and "4.4.0" in line
    assert "num.replica.fetchers" in line  # did you mean
    assert release_refusals("4.4.0", {"num.replica.fetchers": 4}, {}, {"retention.ms": 1}) == []
    (line,) = release_refusals("3.9.2", {}, {}, {"min.insync.replicas": "two"})
    assert "topic_config" in line and "3.9.2" in line
    (line,) = release_refusals("4.4.0", {}, {2: {"log.message.format.version": "3.0"}}, {})
    assert "broker_overrides.2" in line


def test_every_key_the_release_refuses_is_a_line_of_its_own() -> None:
    lines = release_refusals(
        "4.4.0", {"num.replica.fetcher": 4, "num.io.threads": "many"}, {}, {"retension.ms": 1}
    )
    assert [line.split(":")[0] for line in lines] == ["broker_config"] * 2 + ["topic_config"]


def test_the_scenario_s_release_judges_its_keys_and_run_s_kafka_overrides_it() -> None:
    """log.message.format.version left Kafka in 4.0: 3.9 (the default) takes it, 4.4 not."""
    old_key = {"log.message.format.version": "3.0"}
    scenario(broker_config=old_key)
    assert "not a Kafka 4.4.0 broker setting" in refusal(release="4.4", broker_config=old_key)
    data = yaml.safe_load(USERS)
    data["cluster"]["broker_config"] = old_key
    text = yaml.safe_dump(data)
    with pytest.raises(ScenarioError, match="4.4.0"):
        parse_scenario(text, "mine.yaml", kafka="4.4")
    assert isinstance(parse_scenario(text, "mine.yaml", kafka="3.9"), KafkaScenario)


@pytest.mark.parametrize(
    "key", ["num.replica.fetchers", "log.cleaner.io.max.bytes.per.second", "a_b-c.d"]
)
def test_a_property_travels_through_the_images_environment_unchanged(key: str) -> None:
    assert env_key(env_name(key)) == key


def test_a_key_the_environment_cannot_carry_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot be passed"):
        env_name("odd_.key")


def test_a_broker_key_for_a_topic_knob_the_scenario_left_unset_is_the_topics_too() -> None:
    """A topic-level value overrides the brokers': the topic must not keep the knob's default
    when the user chose the broker key (the coverage reads the same value)."""
    spec = scenario(
        broker_config={
            "min.insync.replicas": 1,
            "unclean.leader.election.enable": True,
            "log.flush.interval.messages": 1,
        }
    )
    topic = spec.cluster.topic_properties()
    assert topic["min.insync.replicas"] == "1"
    assert topic["unclean.leader.election.enable"] == "true"
    assert topic["flush.messages"] == "1"
    # The topic's own key wins over the brokers'.
    spec = scenario(
        broker_config={"min.insync.replicas": 1}, topic_config={"min.insync.replicas": 3}
    )
    assert spec.cluster.topic_properties()["min.insync.replicas"] == "3"


def test_a_scenario_with_passthrough_keys_reads_back_as_the_manifest_records_it() -> None:
    """A shrink and a replay parse the manifest's scenario again: the typed knobs the file left
    unset must stay unset, or a passthrough key would meet its knob's default."""
    from systems.scenario import scenario_data, to_yaml

    spec = scenario(broker_config={"min.insync.replicas": 1})
    again = parse_scenario(to_yaml(scenario_data(spec)), "manifest")
    assert isinstance(again, KafkaScenario)
    assert again.cluster.topic_properties()["min.insync.replicas"] == "1"


def test_client_keys_that_would_hide_acknowledgements_or_break_the_reader_are_refused() -> None:
    hides = USERS.replace(
        "config: {batch.size: 65536}", "config: {delivery.report.only.error: true}"
    )
    with pytest.raises(ScenarioError, match="delivery.report.only.error"):
        scenario(hides)
    consumer_protocol = USERS.replace(
        "- {id: reader, config: {fetch.min.bytes: 1}}",
        "- {id: reader, mode: group, group_protocol: consumer, config: {session.timeout.ms: 9000}}",
    )
    with pytest.raises(ScenarioError, match="session.timeout.ms"):
        scenario(consumer_protocol)


def test_dollars_and_backslashes_reach_the_broker_unchanged() -> None:
    assert env_value("RULE:^CN=(.*?),OU=.*$/$1/,DEFAULT") == "RULE:^CN=(.*?),OU=.*$$/$$1/,DEFAULT"
    assert env_value("a\\b") == "a\\\\b"


def test_every_key_a_typed_knob_also_sets_is_a_problem_of_its_own() -> None:
    with pytest.raises(ScenarioError) as e:
        scenario(
            min_insync_replicas=2,
            unclean_leader_election=False,
            broker_config={"min.insync.replicas": 3, "unclean.leader.election.enable": True},
            topic_config={"min.insync.replicas": 3},
        )
    said = e.value.problems
    assert len(said) == 3 and all("is set by" in p for p in said), said


def test_a_scenario_runs_the_release_it_names_unless_kafka_says_another() -> None:
    assert scenario().kafka_line() == "3.9"
    named = scenario(release="4.4")
    assert named.kafka_line() == "4.4" and named.kafka_line("4.1") == "4.1"
    assert "older than 3.7" in refusal(release="3.6")
    assert "quoted" in refusal(release=4.4)
    assert "no zk mode" in refusal(release="4.4", modes=["zk"])
