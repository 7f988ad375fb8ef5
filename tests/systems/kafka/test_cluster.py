"""The Kafka cluster without a Kafka broker: compose rendering for the three modes, image
choice, the KRaft cluster id, a node that exits as the cluster forms, the active controller, and
the brokers' ports and listeners. Kafka's scenarios, nemesis steps, admin client and run's
clients have test files of their own."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest.mock import patch

import pytest
import yaml

from compose.cli import compose_command
from systems.kafka.cluster import (
    ENTRYPOINT,
    IMAGE_ENTRYPOINT,
    BrokerPorts,
    KafkaCluster,
    KafkaUnavailable,
    _check_formats_dynamic_quorums,
    broker_ports,
    choose_kafka_image,
    metadata_quorum_arguments,
    render_compose,
)
from systems.kafka.config import KafkaClusterConfig, mode_refusal, quorum_nodes
from tests.helpers import services_up_starts
from tests.systems.kafka.docker_fakes import FakeDocker, FakeImage

IMAGES = {"kafka": "apache/kafka:3.9.1", "zookeeper": "brokerjepsen/zookeeper:3.8.0-debian"}


def rendered(
    mode: str, brokers: int = 3, directory_ids: dict[str, str] | None = None, **settings: Any
) -> dict[str, Any]:
    cfg = KafkaClusterConfig(mode=mode, brokers=brokers, **settings)  # type: ignore[arg-type]
    ports = {i: BrokerPorts(40000 + i, 40000 + i) for i in range(1, brokers + 1)}
    return render_compose(
        cfg,
        "brokerjepsen-t",
        IMAGES,
        ports,
        "172.29.60",
        "AAAAAAAAAAAAAAAAAAAAAA",
        directory_ids=directory_ids,
    )


# A dynamic quorum's first voters' directory ids, as KafkaCluster draws them (either mode's).
DIRECTORY_IDS = {
    **{f"controller{i}": f"ILZ5MPTeRWakmJu99uBJC{i}" for i in (1, 2, 3)},
    **{f"kafka{i}": f"b-DwmhtOheTqZzPoh52kf{i}" for i in (1, 2, 3)},
}


def test_zookeeper_mode_has_an_ensemble_and_no_kraft_settings() -> None:
    services = rendered("zk")["services"]
    assert sorted(services) == ["kafka1", "kafka2", "kafka3", "zk1", "zk2", "zk3"]
    env = services["kafka2"]["environment"]
    assert env["KAFKA_BROKER_ID"] == "2"
    assert env["KAFKA_ZOOKEEPER_CONNECT"] == "zk1:2181,zk2:2181,zk3:2181"
    assert "KAFKA_PROCESS_ROLES" not in env and "CLUSTER_ID" not in env
    assert env["KAFKA_ADVERTISED_LISTENERS"] == "INTERNAL://kafka2:9092,EXTERNAL://127.0.0.1:40002"
    assert services["kafka2"]["ports"] == ["127.0.0.1:40002:19092"]
    assert services["zk3"]["environment"]["ZOOKEEPER_SERVER_ID"] == "3"
    assert set(services["kafka1"]["depends_on"]) == {"zk1", "zk2", "zk3"}


def test_kraft_combined_voters_are_the_first_three_brokers() -> None:
    services = rendered("kraft", brokers=4)["services"]
    assert sorted(services) == ["kafka1", "kafka2", "kafka3", "kafka4"]
    env1, env4 = services["kafka1"]["environment"], services["kafka4"]["environment"]
    assert env1["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env4["KAFKA_PROCESS_ROLES"] == "broker"  # a fourth broker is not a voter
    voters = "1@kafka1:9093,2@kafka2:9093,3@kafka3:9093"
    assert (
        env1["KAFKA_CONTROLLER_QUORUM_VOTERS"] == env4["KAFKA_CONTROLLER_QUORUM_VOTERS"] == voters
    )
    assert "CONTROLLER://0.0.0.0:9093" in env1["KAFKA_LISTENERS"]
    assert "CONTROLLER" not in env4["KAFKA_LISTENERS"]
    assert quorum_nodes(KafkaClusterConfig(mode="kraft")) == ("kafka1", "kafka2", "kafka3")


def test_kraft_dedicated_controllers_are_apart_from_the_data_path() -> None:
    services = rendered("kraft-dedicated")["services"]
    controller = services["controller2"]["environment"]
    assert controller["KAFKA_PROCESS_ROLES"] == "controller"
    assert controller["KAFKA_NODE_ID"] == "102"
    assert "ports" not in services["controller2"]  # clients never reach the quorum
    assert "ADVERTISED" not in " ".join(controller)
    broker = services["kafka1"]["environment"]
    assert broker["KAFKA_PROCESS_ROLES"] == "broker"
    assert broker["KAFKA_CONTROLLER_QUORUM_VOTERS"].startswith("101@controller1:9093")
    assert quorum_nodes(KafkaClusterConfig(mode="kraft-dedicated")) == (
        "controller1",
        "controller2",
        "controller3",
    )


@pytest.mark.parametrize("mode", ["zk", "kraft", "kraft-dedicated"])
def test_every_setting_a_scenario_depends_on_is_explicit(mode: str) -> None:
    services = rendered(
        mode,
        min_insync_replicas=3,
        unclean_leader_election=True,
        replica_lag_time_max_ms=4000,
        session_timeout_ms=7000,
        flush_messages=1,
        racks={1: "dc1"},
    )["services"]
    env = services["kafka1"]["environment"]
    assert env["KAFKA_MIN_INSYNC_REPLICAS"] == "3"
    assert env["KAFKA_UNCLEAN_LEADER_ELECTION_ENABLE"] == "true"
    assert env["KAFKA_REPLICA_LAG_TIME_MAX_MS"] == "4000"
    assert env["KAFKA_LOG_FLUSH_INTERVAL_MESSAGES"] == "1"
    assert env["KAFKA_BROKER_RACK"] == "dc1"
    assert env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == "3"
    assert env["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] == "3"
    assert env["KAFKA_AUTO_LEADER_REBALANCE_ENABLE"] == "false"
    session = (
        "KAFKA_ZOOKEEPER_SESSION_TIMEOUT_MS" if mode == "zk" else "KAFKA_BROKER_SESSION_TIMEOUT_MS"
    )
    assert env[session] == "7000"
    addresses = [s["networks"]["cluster"]["ipv4_address"] for s in services.values()]
    assert len(set(addresses)) == len(addresses)


@pytest.mark.parametrize("mode", ["zk", "kraft", "kraft-dedicated", "dynamic"])
def test_rendered_files_are_valid_compose(mode: str, tmp_path: Path) -> None:
    path = tmp_path / "docker-compose.yml"
    dynamic = {"controller_quorum": "dynamic", "spare_controllers": 2}
    data = (
        rendered("kraft-dedicated", brokers=4, directory_ids=DIRECTORY_IDS, **dynamic)
        if mode == "dynamic"
        else rendered(mode, brokers=4)
    )
    path.write_text(yaml.safe_dump(data))
    result = subprocess.run(
        [*compose_command(), "-f", str(path), "config", "--quiet"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_image_choice_prefers_local_builds_and_respects_zookeepers_removal() -> None:
    client = FakeDocker(
        FakeImage("apache/kafka:3.9.1"),
        FakeImage("brokerjepsen/kafka:4.1.0-debian", "4.1.0"),
        FakeImage("brokerjepsen/kafka:3.9.1-debian", "3.9.1"),
        FakeImage("confluentinc/cp-kafka:7.9.1"),
    )
    assert choose_kafka_image(None, "kraft", client) == "brokerjepsen/kafka:4.1.0-debian"  # type: ignore[arg-type]
    assert choose_kafka_image(None, "zk", client) == "brokerjepsen/kafka:3.9.1-debian"  # type: ignore[arg-type]
    only_4 = FakeDocker(FakeImage("brokerjepsen/kafka:4.1.0-debian", "4.1.0"))
    with pytest.raises(KafkaUnavailable, match="no Kafka image that runs mode zk: run make setup"):
        choose_kafka_image(None, "zk", only_4)  # type: ignore[arg-type]
    official = FakeDocker(FakeImage("confluentinc/cp-kafka:7.9.1"))
    assert choose_kafka_image(None, "zk", official) == "confluentinc/cp-kafka:7.9.1"  # type: ignore[arg-type]
    with pytest.raises(KafkaUnavailable, match="Maven Central"):
        choose_kafka_image(None, "kraft", FakeDocker())  # type: ignore[arg-type]


def test_image_choice_by_release_line() -> None:
    client = FakeDocker(
        FakeImage("brokerjepsen/kafka:4.1.2-debian", "4.1.2"),
        FakeImage("brokerjepsen/kafka:3.9.2-debian", "3.9.2"),
        FakeImage("apache/kafka:3.9.1"),
    )
    assert choose_kafka_image(None, "kraft", client, "3.9") == "brokerjepsen/kafka:3.9.2-debian"  # type: ignore[arg-type]
    assert choose_kafka_image(None, "kraft", client, "4.1") == "brokerjepsen/kafka:4.1.2-debian"  # type: ignore[arg-type]
    with pytest.raises(KafkaUnavailable, match="no Kafka 4.1 image that runs mode zk"):
        choose_kafka_image(None, "zk", client, "4.1")  # type: ignore[arg-type]
    assert mode_refusal("4.1", "zk") is not None and mode_refusal("3.9", "zk") is None
    assert mode_refusal("4.1", "kraft-dedicated") is None


def test_a_kraft_cluster_id_never_starts_with_a_dash() -> None:
    """A K5 run: `kafka-storage format -t -zmg…` took the id for an option; every broker exited."""
    from systems.kafka.cluster import _kraft_cluster_id

    dash_first = b"\xf8" + bytes(15)  # base64url of 0b111110... starts with "-"
    with patch("systems.kafka.cluster.secrets.token_bytes", side_effect=[dash_first, bytes(16)]):
        assert _kraft_cluster_id() == "A" * 22


def test_a_node_that_exits_while_the_cluster_forms_is_named_with_its_last_line() -> None:
    from systems.kafka.cluster import KafkaCluster

    running = SimpleNamespace(status="running")
    exited = SimpleNamespace(
        status="exited",
        logs=lambda tail: (
            b"usage: kafka-storage format\nkafka-storage: error: expected one argument\n"
        ),
        attrs={"State": {"ExitCode": 1}},
    )
    cluster = object.__new__(KafkaCluster)
    cluster.containers = lambda: {"kafka1": exited, "kafka2": running}  # type: ignore[method-assign]
    assert cluster._exited() == {"kafka1": "kafka-storage: error: expected one argument"}


def test_the_active_controller_is_the_leader_of_the_newest_epoch_a_voter_persisted() -> None:
    from types import SimpleNamespace

    from systems.kafka.cluster import KafkaCluster

    nodes = [SimpleNamespace(name=f"controller{i}", node_id=100 + i) for i in (1, 2, 3)]
    cluster = SimpleNamespace(nodes=nodes, voters=("controller1", "controller2", "controller3"))

    def leader(*states: tuple[int, int]) -> str | None:
        persisted = [{"leaderId": lid, "leaderEpoch": epoch} for lid, epoch in states]
        return KafkaCluster._leader_of(cluster, persisted)  # type: ignore[arg-type]

    # An isolated old leader still names itself, of the older epoch.
    assert leader((102, 1), (103, 2), (103, 2)) == "controller3"
    # A lone voter raising its epoch in vain (no pre-vote on 3.x) names no leader: ignored.
    assert leader((-1, 9), (103, 6), (103, 6)) == "controller3"
    # A majority past the newest known leader's epoch with none: an election under way.
    assert leader((-1, 7), (-1, 7), (102, 6)) is None
    # A field null or gone is no leader.
    assert KafkaCluster._leader_of(cluster, [{"leaderId": None}, {}]) is None  # type: ignore[arg-type]


def test_a_proxied_broker_advertises_the_proxy_to_clients_and_its_own_listener_to_the_harness() -> (
    None
):
    cfg = KafkaClusterConfig(mode="kraft")
    ports = {i: BrokerPorts(40000 + i, 41000 + i, 42000 + i) for i in (1, 2, 3)}
    services = render_compose(cfg, "p", IMAGES, ports, "172.29.60", "A" * 22)["services"]
    env = services["kafka2"]["environment"]
    assert env["KAFKA_ADVERTISED_LISTENERS"] == (
        "INTERNAL://kafka2:9092,EXTERNAL://127.0.0.1:41002,HARNESS://127.0.0.1:42002"
    )
    assert "HARNESS://0.0.0.0:19093" in env["KAFKA_LISTENERS"]
    assert env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].endswith(",HARNESS:PLAINTEXT")
    assert env["KAFKA_INTER_BROKER_LISTENER_NAME"] == "INTERNAL"
    assert services["kafka2"]["ports"] == ["127.0.0.1:40002:19092", "127.0.0.1:42002:19093"]


def test_broker_ports_are_distinct_and_one_per_broker_unless_proxied() -> None:
    plain = broker_ports([1, 2, 3], proxied=False)
    assert all(p.published == p.advertised and p.harness is None for p in plain.values())
    proxied = broker_ports([1, 2, 3], proxied=True)
    every = [x for p in proxied.values() for x in (p.published, p.advertised, p.harness)]
    assert len(set(every)) == 9 and all(p.proxied for p in proxied.values())


def test_a_spare_broker_is_rendered_in_a_profile_that_up_leaves_unstarted(tmp_path: Path) -> None:
    cfg = KafkaClusterConfig(mode="kraft", brokers=3, spare_brokers=1)
    ports = {i: BrokerPorts(40000 + i, 40000 + i) for i in range(1, 5)}
    data = render_compose(cfg, "brokerjepsen-t", IMAGES, ports, "172.29.60", "A" * 22)
    spare = data["services"]["kafka4"]
    assert spare["profiles"] == ["spare"]
    assert all("profiles" not in data["services"][f"kafka{i}"] for i in (1, 2, 3))
    env = spare["environment"]
    # A broker only, of the quorum the cluster formed with: never one of its voters.
    assert env["KAFKA_PROCESS_ROLES"] == "broker" and env["KAFKA_NODE_ID"] == "4"
    assert "4@" not in env["KAFKA_CONTROLLER_QUORUM_VOTERS"]
    assert spare["networks"]["cluster"]["ipv4_address"] == "172.29.60.24"
    assert quorum_nodes(cfg) == ("kafka1", "kafka2", "kafka3")
    assert services_up_starts(data, tmp_path) == ["kafka1", "kafka2", "kafka3"]  # up starts these


def test_a_dynamic_quorums_first_voters_are_formatted_with_their_directory_ids() -> None:
    services = rendered(
        "kraft-dedicated",
        directory_ids=DIRECTORY_IDS,
        controller_quorum="dynamic",
        spare_controllers=1,
    )["services"]
    voters = "controller1:9093,controller2:9093,controller3:9093"
    controller, broker = services["controller2"]["environment"], services["kafka1"]["environment"]
    for env in (controller, broker):
        assert env["KAFKA_CONTROLLER_QUORUM_BOOTSTRAP_SERVERS"] == voters
        assert "KAFKA_CONTROLLER_QUORUM_VOTERS" not in env  # kraft.version 1: no static voters
    assert controller["BROKERJEPSEN_INITIAL_CONTROLLERS"] == (
        "101@controller1:9093:ILZ5MPTeRWakmJu99uBJC1,102@controller2:9093:ILZ5MPTeRWakmJu99uBJC2,"
        "103@controller3:9093:ILZ5MPTeRWakmJu99uBJC3"
    )
    # What add-controller reads as the voter's endpoint: routable, not the listener's 0.0.0.0.
    assert controller["KAFKA_ADVERTISED_LISTENERS"] == "CONTROLLER://controller2:9093"
    assert broker["BROKERJEPSEN_NO_INITIAL_CONTROLLERS"] == "1"
    assert "BROKERJEPSEN_INITIAL_CONTROLLERS" not in broker
    assert "CONTROLLER" not in broker["KAFKA_ADVERTISED_LISTENERS"]
    spare = services["controller4"]
    assert spare["profiles"] == ["spare"] and "ports" not in spare
    assert spare["networks"]["cluster"]["ipv4_address"] == "172.29.60.44"
    env = spare["environment"]
    assert env["KAFKA_NODE_ID"] == "104" and env["KAFKA_PROCESS_ROLES"] == "controller"
    assert env["BROKERJEPSEN_NO_INITIAL_CONTROLLERS"] == "1"  # joins later, as an observer
    assert env["KAFKA_ADVERTISED_LISTENERS"] == "CONTROLLER://controller4:9093"
    # A spare is started later, by name: no broker waits for it.
    assert set(services["kafka1"]["depends_on"]) == {"controller1", "controller2", "controller3"}
    # Every Kafka node runs the entrypoint that formats a dynamic quorum, whatever its image's.
    for service in services.values():
        assert f"{ENTRYPOINT}:{IMAGE_ENTRYPOINT}:ro" in service["volumes"]
    static = rendered("kraft-dedicated")["services"]
    assert not any("volumes" in svc for svc in static.values())
    # A migration's nodes too: a ZooKeeper-mode cluster id may begin with "-", which only the
    # repository's entrypoint passes as no option.
    migrating = rendered("zk", migration_controllers=3)["services"]
    assert all(
        f"{ENTRYPOINT}:{IMAGE_ENTRYPOINT}:ro" in svc["volumes"]
        for name, svc in migrating.items()
        if not name.startswith("zk")
    )
    assert not any(k.startswith("BROKERJEPSEN") for k in static["kafka1"]["environment"])


def test_a_combined_dynamic_quorum_advertises_each_voters_controller_listener_too() -> None:
    dynamic = {"controller_quorum": "dynamic", "spare_controllers": 1}
    services = rendered("kraft", brokers=4, directory_ids=DIRECTORY_IDS, **dynamic)["services"]
    voter, broker = services["kafka2"]["environment"], services["kafka4"]["environment"]
    assert voter["KAFKA_ADVERTISED_LISTENERS"] == (
        "INTERNAL://kafka2:9092,EXTERNAL://127.0.0.1:40002,CONTROLLER://kafka2:9093"
    )
    assert voter["BROKERJEPSEN_INITIAL_CONTROLLERS"].startswith("1@kafka1:9093:b-Dwmht")
    assert broker["BROKERJEPSEN_NO_INITIAL_CONTROLLERS"] == "1"
    # The spare is a dedicated controller, named as with dedicated controllers.
    assert services["controller4"]["environment"]["KAFKA_PROCESS_ROLES"] == "controller"
    assert quorum_nodes(KafkaClusterConfig(mode="kraft", spare_controllers=1)) == (
        "kafka1",
        "kafka2",
        "kafka3",
    )
    with pytest.raises(ValueError, match="no directory id for the voters kafka1, kafka2, kafka3"):
        rendered("kraft", controller_quorum="dynamic")


def test_the_quorum_tool_is_bootstrapped_on_the_controllers_listeners() -> None:
    assert metadata_quorum_arguments(["controller2", "controller3"], "describe --status") == (
        "--bootstrap-controller controller2:9093,controller3:9093 describe --status"
    )
    with pytest.raises(Exception, match="needs a controller to bootstrap on"):
        metadata_quorum_arguments([], "describe --status")


def test_a_dynamic_quorum_needs_an_image_with_the_harnesss_entrypoint() -> None:
    ours = FakeImage("brokerjepsen/kafka:4.4.0-debian", "4.4.0")
    official = FakeImage("apache/kafka:4.1.0")
    docker = FakeDocker(ours, official)
    _check_formats_dynamic_quorums("brokerjepsen/kafka:4.4.0-debian", docker)  # type: ignore[arg-type]
    with pytest.raises(KafkaUnavailable, match="apache/kafka:4.1.0 is not one"):
        _check_formats_dynamic_quorums("apache/kafka:4.1.0", docker)  # type: ignore[arg-type]


def test_the_quorum_the_cluster_names_is_its_voters_now() -> None:
    cluster = object.__new__(KafkaCluster)
    # A KRaft cluster's (a zk cluster's quorum is its ensemble, and a migration's controllers).
    cluster.config = KafkaClusterConfig(mode="kraft-dedicated", controller_quorum="dynamic")
    cluster.voters = ["controller1", "controller2", "controller3"]
    cluster.voters.remove("controller1")  # as remove-controller leaves it
    cluster.voters.append("controller4")
    assert cluster.quorum == ("controller2", "controller3", "controller4")


@pytest.mark.parametrize(
    ("settings", "spares", "voters"),
    [
        # A dynamic quorum's spare controller is add-controller's to start: a spare, no voter.
        (
            {"mode": "kraft-dedicated", "controller_quorum": "dynamic", "spare_controllers": 1},
            ["controller4"],
            ["controller1", "controller2", "controller3"],
        ),
        ({"mode": "kraft", "spare_brokers": 1}, ["kafka4"], ["kafka1", "kafka2", "kafka3"]),
        # A zk cluster's controllers are its migration's: never a spare, no voter until started.
        ({"mode": "zk", "migration_controllers": 3}, [], []),
    ],
)
def test_spare_controllers_of_a_dynamic_quorum_and_of_a_migration_are_apart(
    settings: dict[str, Any], spares: list[str], voters: list[str]
) -> None:
    cluster = object.__new__(KafkaCluster)
    cluster.config = KafkaClusterConfig(**settings)
    cluster.net_prefix, cluster.started_spares, cluster.node_stages = "172.29.60", set(), {}
    assert (cluster.spares, cluster.voters) == (spares, voters)
    cluster.started_spares |= {"controller4", "controller1"}  # add-controller's; migrate's
    started = {"kraft-dedicated": voters, "kraft": voters, "zk": ["controller1"]}
    assert cluster.voters == started[settings["mode"]]


def test_a_logged_line_is_looked_for_in_the_whole_log_or_since_a_time() -> None:
    """docker-py takes a positive `since` only: 0 means the whole log, asked without one."""
    from systems.kafka.cluster import KafkaCluster

    asked: list[dict[str, Any]] = []

    def logs(**window: Any) -> bytes:
        asked.append(window)
        return b"[2026-11-29 18:14:53] INFO Controller Quorum is ready for Zk to KRaft migration\n"

    cluster = object.__new__(KafkaCluster)
    controller = SimpleNamespace(logs=logs)
    cluster.containers = lambda: {"controller1": controller}  # type: ignore[method-assign]
    assert cluster.logged_line(["controller1", "gone"], "is ready for Zk", 0)
    assert cluster.logged_line(["controller1"], "is ready for Zk", 1795977293.5)
    assert not cluster.logged_line(["controller1"], "Completed migration", 0)
    assert asked == [{}, {"since": 1795977292}, {}]
