"""Real-Kafka layer without a Kafka broker: compose rendering for the three modes, image choice,
scenario files for every K-claim row, role-aimed nemesis steps, verdicts on client errors."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest.mock import patch

import pytest
import yaml

from compose.cli import compose_command
from contract.manifest import Manifest
from nemesis.clients import ClientGroups
from nemesis.containers import NemesisError
from nemesis.network import NetworkState
from systems.kafka.cluster import (
    BrokerPorts,
    KafkaUnavailable,
    broker_ports,
    choose_kafka_image,
    render_compose,
)
from systems.kafka.config import KafkaClusterConfig, mode_refusal, nodes_of, quorum_nodes
from systems.kafka.nemesis import KafkaNemesis
from systems.kafka.scenario import KafkaScenario
from systems.kafka.targets import Metadata, PartitionState
from systems.registry import load_scenario, parse_scenario
from systems.scenario import ScenarioError
from tests.helpers import ROOT

IMAGES = {"kafka": "apache/kafka:3.9.1", "zookeeper": "brokerjepsen/zookeeper:3.8.0-debian"}


def rendered(mode: str, brokers: int = 3, **settings: Any) -> dict[str, Any]:
    cfg = KafkaClusterConfig(mode=mode, brokers=brokers, **settings)  # type: ignore[arg-type]
    ports = {i: BrokerPorts(40000 + i, 40000 + i) for i in range(1, brokers + 1)}
    return render_compose(
        cfg, "brokerjepsen-t", IMAGES, ports, "172.29.60", "AAAAAAAAAAAAAAAAAAAAAA"
    )


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


@pytest.mark.parametrize("mode", ["zk", "kraft", "kraft-dedicated"])
def test_rendered_files_are_valid_compose(mode: str, tmp_path: Path) -> None:
    path = tmp_path / "docker-compose.yml"
    path.write_text(yaml.safe_dump(rendered(mode, brokers=4)))
    result = subprocess.run(
        [*compose_command(), "-f", str(path), "config", "--quiet"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


class FakeImage:
    def __init__(self, tag: str, version: str | None = None) -> None:
        self.tags = [tag]
        labels = {"org.brokerjepsen.kafka-version": version} if version else {}
        self.attrs = {"Config": {"Labels": labels}}


class FakeDocker:
    def __init__(self, *images: FakeImage) -> None:
        self._images = images
        self.images = SimpleNamespace(list=lambda: list(self._images), get=self._get)

    def _get(self, name: str) -> FakeImage:
        import docker.errors

        for i in self._images:
            if name in i.tags:
                return i
        raise docker.errors.ImageNotFound(name)


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


# ---- scenarios -------------------------------------------------------------------------------

KAFKA_SCENARIOS = sorted(p for p in (ROOT / "scenarios").glob("K*.yaml"))


def test_every_kafka_claim_row_has_a_scenario() -> None:
    claims = {load_scenario(p).claim for p in KAFKA_SCENARIOS}
    rows = {f"K{i}" for i in range(1, 27)} - {"K17", "K18"}  # K17/K18: power loss, not here
    assert rows <= claims, sorted(rows - claims)


@pytest.mark.parametrize("path", KAFKA_SCENARIOS, ids=lambda p: p.stem)
def test_kafka_scenarios_are_valid_for_each_of_their_modes(path: Path) -> None:
    s = load_scenario(path)
    assert isinstance(s, KafkaScenario) and s.claim and re.fullmatch(r"K\d+", s.claim)
    assert s.id == path.stem
    if s.expect == "loss":  # built to lose: a fault aimed at the leader (power-loss: all replicas)
        assert any(
            step.op == "power-loss"
            or step.target == "leader"
            or step.from_ == "leader"
            or step.to == "leader"
            or step.op == "cut"
            and "leader" in (step.from_, step.to)
            or step.op == "rolling-restart"
            for step in s.nemesis
        ), s.id


BASE = """
id: x
expect: safe
cluster: {system: kafka, modes: [zk, kraft]}
workload: {producers: [{id: P, count: 1}], readers: [{id: r}]}
"""


@pytest.mark.parametrize(
    ("nemesis", "message"),
    [
        (
            "[{at: 1, op: kill, target: leaderr}]",
            "no node 'leaderr' in mode zk (did you mean leader?)",
        ),
        ("[{at: 1, op: kill}]", "kill needs a target"),
        ("[{at: 1, op: cut, from: leader}]", "cut needs from and to"),
        ("[{at: 1, op: degrade, from: leader, to: followers}]", "degrade needs loss_pct"),
        ("[{at: 1, op: start, target: '@old'}]", "@old names no earlier step's label"),
        ("[{at: 1, op: isolate, target: [zk1]}]", "no node 'zk1' in mode kraft"),
        ("[{at: 1, op: cut-from-quorum, target: leader}]", "cut-from-quorum needs a quorum apart"),
        (
            "[{at: 1, op: pause-client, client: P9}]",
            "pause-client: no client 'P9' (clients are P, r)",
        ),
        ("[{at: 1, op: pause-client}]", "pause-client needs a client (a producer's, reader's"),
        ("[{at: 1, op: pause-client, client: P, target: leader}]", "names a client, not nodes"),
        ("[{at: 1, op: kill, target: leader, client: P}]", "client is for pause-client, resume"),
        (
            "[{at: 1, op: kill-client, client: P}, {at: 2, op: restart-client, client: P}]",
            "restart-client restarts a copier; P is none",
        ),
        ("[{at: 1, op: resume-client, client: P}]", "resume-client P follows no pause-client"),
    ],
)
def test_bad_kafka_steps_are_one_line(nemesis: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=re.escape(message)):
        parse_scenario(BASE + f"nemesis: {nemesis}\n", "x.yaml")


def test_the_consumer_group_protocol_is_a_group_readers_and_needs_kafka_4() -> None:
    group = BASE.replace(
        "readers: [{id: r}]", "readers: [{id: r, mode: group, group_protocol: consumer}]"
    )
    spec = parse_scenario(group, "x.yaml")
    assert isinstance(spec, KafkaScenario)
    assert spec.line_refusal("4.1") is None and spec.line_refusal("4.4.0") is None
    assert "KIP-848" in (spec.line_refusal("3.9") or "")
    assert parse_scenario(BASE, "x.yaml").line_refusal("3.9") is None  # type: ignore[union-attr]
    assign = BASE.replace("readers: [{id: r}]", "readers: [{id: r, group_protocol: consumer}]")
    with pytest.raises(ScenarioError, match="group_protocol is for readers in mode group"):
        parse_scenario(assign, "x.yaml")


def test_bad_cluster_settings_are_one_line() -> None:
    bad = BASE.replace("modes: [zk, kraft]}", "modes: [zk], replica_assignment: [[1, 2]]}")
    with pytest.raises(ScenarioError, match="replication_factor distinct brokers"):
        parse_scenario(bad, "x.yaml")


# ---- the nemesis aims at roles when the fault starts ----------------------------------------


class FakeNet:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.down: set[str] = set()
        self.history = None
        self.state = NetworkState()

    def __getattr__(self, name: str) -> Any:
        return lambda *args: self.calls.append((name, *args))

    def logged(self, f: str, value: dict[str, Any], act: Any) -> None:
        self.calls.append((f, value, act()))


class FakeControl:
    def __init__(self, leaders: list[int]) -> None:
        self.leaders = leaders  # the leader of partition 0 at each successive metadata call
        self.elections: list[dict[str, str]] = []
        self.asked_via: list[str | None] = []

    def metadata(self, need_controller: bool = False) -> Metadata:
        leader = self.leaders.pop(0) if len(self.leaders) > 1 else self.leaders[0]
        isr = (leader, 1 + leader % 3)
        return Metadata(
            {1: "kafka1", 2: "kafka2", 3: "kafka3"},
            2,
            (PartitionState("t", 0, leader, (1, 2, 3), isr),),
            ("zk1", "zk2", "zk3"),
        )

    def elect(self, election: str, partitions: list[int], via: str | None = None) -> dict[str, str]:
        self.asked_via.append(via)
        return self.elections.pop(0) if self.elections else {"0": "ok"}


def step(**kw: Any) -> Any:
    fields = {"target": None, "from_": None, "to": None, "both_ways": False, "partition": 0}
    fields |= {"label": "", "groups": [], "within": 5.0, "election": "preferred"}
    return SimpleNamespace(**(fields | kw))


def test_roles_are_resolved_when_each_fault_starts_and_labels_remember() -> None:
    net, control = FakeNet(), FakeControl(leaders=[1, 2, 2, 2])
    n = KafkaNemesis(net, control, "t", 1)  # type: ignore[arg-type]
    n.apply(step(op="kill", target="leader", label="old-leader"))
    n.apply(step(op="cut", from_="followers", to="leader", both_ways=True))  # leader moved to 2
    n.apply(step(op="cut-from-quorum", target="follower"))
    n.apply(step(op="start", target="@old-leader"))
    assert net.calls == [
        ("kill", ["kafka1"]),
        ("cut", ["kafka1", "kafka3"], ["kafka2"]),
        ("cut", ["kafka2"], ["kafka1", "kafka3"]),
        ("cut", ["kafka1"], ["zk1", "zk2", "zk3"]),
        ("cut", ["zk1", "zk2", "zk3"], ["kafka1"]),
        ("start", ["kafka1"]),
    ]


def test_election_retries_until_it_takes() -> None:
    net, control = FakeNet(), FakeControl(leaders=[1])
    control.elections = [{"0": "ELIGIBLE_LEADERS_NOT_AVAILABLE"}, {"0": "ok"}]
    KafkaNemesis(net, control, "t", 1).apply(step(op="elect", election="unclean"))  # type: ignore[arg-type]
    assert net.calls[-1][0] == "elect" and net.calls[-1][2] == {"results": {"0": "ok"}}


def test_an_election_is_asked_through_a_broker_no_fault_touches() -> None:
    """K13's KRaft run: requests landing on the isolated leader timed out for 60 s."""
    net, control = FakeNet(), FakeControl(leaders=[1])
    # K13: followers cut from the leader (kafka1), then the leader isolated from every node.
    followers_cut = {("kafka2", "kafka1"), ("kafka1", "kafka2"), ("kafka3", "kafka1")}
    isolated = {(n, "kafka1") for n in ("kafka2", "kafka3", "zk1", "zk2", "zk3")}
    net.state = NetworkState().with_cuts(followers_cut | isolated | {("kafka1", "kafka3")})
    net.down = {"kafka3"}
    KafkaNemesis(net, control, "t", 1).apply(step(op="elect", election="unclean"))  # type: ignore[arg-type]
    assert control.asked_via == ["kafka2"]  # the least touched of the running brokers
    net.down = {"kafka1", "kafka2", "kafka3"}
    KafkaNemesis(net, control, "t", 1).apply(step(op="elect", election="unclean"))  # type: ignore[arg-type]
    assert control.asked_via[-1] is None  # none running: the client decides


@pytest.mark.parametrize(
    ("text", "outcome"),
    [
        ("Successfully completed leader election (UNCLEAN) for partitions jepsen-0", "ok"),
        ("Valid replica already elected for partitions jepsen-0", "ELECTION_NOT_NEEDED"),
        (
            "Error completing leader election (UNCLEAN) for partition: jepsen-0: "
            "org.apache.kafka.common.errors.EligibleLeadersNotAvailableException: none alive",
            "org.apache.kafka.common.errors.EligibleLeadersNotAvailableException: none alive",
        ),
        ("", "no answer"),
    ],
)
def test_the_election_tools_answers(text: str, outcome: str) -> None:
    from systems.kafka.admin import election_tool_outcome

    assert election_tool_outcome(text).endswith(outcome.rsplit(".", 1)[-1])


def test_leader_placement_snapshot() -> None:
    net, control = FakeNet(), FakeControl(leaders=[2])
    n = KafkaNemesis(net, control, "t", 1)  # type: ignore[arg-type]
    n.apply(step(op="leaders", label="after", expect_balanced=True))
    f, value, snap = net.calls[-1]
    assert (f, value["label"], value["expect_balanced"]) == ("leaders", "after", True)
    assert snap["leaders"] == {"0": "kafka2"} and snap["preferred"] == {"0": "kafka1"}
    assert snap["balanced"] is False and snap["per_broker"]["kafka2"] == 1


def test_a_client_is_paused_by_its_step_and_resumed_by_every_heal() -> None:
    sent: list[tuple[int, signal.Signals]] = []
    groups = ClientGroups(
        lambda: {"P1": 4242, "P2": 4343}, lambda g, s: sent.append((g, signal.Signals(s)))
    )
    net = FakeNet()
    n = KafkaNemesis(net, FakeControl(leaders=[1]), "t", 1, clients=groups)  # type: ignore[arg-type]
    n.apply(step(op="pause-client", client="P1"))
    assert net.calls == [("pause-client", {"clients": ["P1"]}, {"groups": {"P1": 4242}})]
    assert sent == [(4242, signal.SIGSTOP)]
    n.heal_all()  # the final heal, an interrupted run's: the client runs again, then the cluster
    assert sent[-1] == (4242, signal.SIGCONT)
    assert net.calls[1:] == [
        ("resume-client", {"clients": ["P1"]}, {"groups": {"P1": 4242}}),
        ("heal_all",),
    ]
    n.heal_all()  # nothing paused: nothing to resume
    assert net.calls[-1] == ("heal_all",) and len(sent) == 2
    n.apply(step(op="pause-client", client="P2"))
    n.apply(step(op="resume-client", client="P2"))
    assert sent[-2:] == [(4343, signal.SIGSTOP), (4343, signal.SIGCONT)] and not groups.paused


def test_the_cluster_is_healed_even_when_a_client_cannot_be_resumed() -> None:
    def refuse(group: int, signum: int) -> None:
        if signum == signal.SIGCONT:
            raise PermissionError(group)

    net = FakeNet()
    groups = ClientGroups(lambda: {"P1": 4242}, refuse)
    n = KafkaNemesis(net, FakeControl(leaders=[1]), "t", 1, clients=groups)  # type: ignore[arg-type]
    n.apply(step(op="pause-client", client="P1"))
    with pytest.raises(NemesisError, match="could not resume P1"):
        n.heal_all()
    assert net.calls[-1] == ("heal_all",)
    assert groups.paused == {"P1": 4242}  # kept, for `harness heal` or the next heal to try


def test_the_clients_a_nemesis_may_pause_are_those_still_running() -> None:
    from systems.kafka.clients_run import KafkaClientsRun

    run = object.__new__(KafkaClientsRun)
    run.clients = {  # type: ignore[dict-item]
        "P1": SimpleNamespace(pid=4242, poll=lambda: None),
        "P2": SimpleNamespace(pid=4343, poll=lambda: 0),  # ended
        "C1": SimpleNamespace(pid=4444, poll=lambda: -9),  # killed, then restarted as C1.2
        "C1.2": SimpleNamespace(pid=4545, poll=lambda: None),
    }
    run.instances, run.client_of = {"C1": "C1.2"}, {"C1.2": "C1"}
    # A restarted client answers to its own name, with its current instance's group.
    assert run.running_clients() == {"P1": 4242, "C1": 4545}
    assert run.current("C1") == "C1.2" and run.current("P1") == "P1"


def test_a_nemesis_without_the_runs_clients_refuses_a_client_step() -> None:
    n = KafkaNemesis(FakeNet(), FakeControl(leaders=[1]), "t", 1)  # type: ignore[arg-type]
    with pytest.raises(NemesisError, match="cannot reach the workload's clients"):
        n.apply(step(op="pause-client", client="P1"))


# ---- verdicts on what clients must see ------------------------------------------------------


def test_nodes_of_give_fixed_distinct_addresses() -> None:
    nodes = nodes_of(KafkaClusterConfig(mode="kraft-dedicated", brokers=4), "10.1.2")
    assert [n.name for n in nodes][:3] == ["controller1", "controller2", "controller3"]
    assert len({n.address for n in nodes}) == len(nodes) == 7


# ---- compose and clients: what the first real runs found ---------------------------------


def test_an_up_that_printed_an_error_is_a_failure_even_with_exit_0() -> None:
    from compose.cli import _silent_failure

    network_error = (
        " Network p_cluster  Creating\n Network p_cluster  Error\n"
        "failed to create network p_cluster: Error response from daemon: Pool overlaps\n"
    )
    assert "Pool overlaps" in (_silent_failure(network_error) or "")
    assert "no such file" in (_silent_failure("open /x/docker-compose.yml: no such file") or "")
    fine = " Network p_cluster  Created\n Container p-kafka1-1  Started\n"
    assert _silent_failure(fine) is None


def test_compose_never_runs_through_the_wrapper_that_loses_exit_codes(tmp_path: Path) -> None:
    from compose.cli import _is_python_wrapper, compose_command

    wrapper = tmp_path / "docker-compose"
    wrapper.write_text("#!/usr/bin/python3\nfrom compose import docker_compose\n")
    assert _is_python_wrapper(wrapper)
    assert not any(_is_python_wrapper(Path(part)) for part in compose_command() if "/" in part)


class FakeReaderConsumer:
    """Answers list_topics with no partitions `empty` times, then with one partition."""

    def __init__(self, empty: int) -> None:
        self.empty = empty

    def list_topics(self, topic: str, timeout: float) -> Any:
        partitions = {} if self.empty > 0 else {0: object()}
        self.empty -= 1
        tm = SimpleNamespace(error=None, partitions=partitions)
        return SimpleNamespace(topics={topic: tm})


def test_reader_waits_for_the_topic_and_never_calls_nothing_caught_up() -> None:
    import time

    from workloads.kafka.base import TopicNotFound, partitions_of
    from workloads.kafka.clients import _caught_up

    assert partitions_of(FakeReaderConsumer(2), "t", time.time() + 10) == [0]  # type: ignore[arg-type]
    with pytest.raises(TopicNotFound):
        partitions_of(FakeReaderConsumer(100), "t", time.time() + 1)  # type: ignore[arg-type]
    assert _caught_up(None, "t", {}) is False  # type: ignore[arg-type]


@pytest.mark.parametrize("assignment", [None, [[2, 3, 4]], [[1, 2, 3], [2, 3, 1]]])
def test_the_topic_request_passes_the_clients_own_checks(assignment: Any) -> None:
    from confluent_kafka.admin import AdminClient

    from systems.kafka.admin import new_topic

    # No broker answers port 1: only the client's validation of the request runs.
    admin = AdminClient({"bootstrap.servers": "127.0.0.1:1", "log_level": 0})
    topic = new_topic("t", 1, 3, assignment, {"min.insync.replicas": "2"})
    futures = admin.create_topics([topic], request_timeout=1)  # raises ValueError if malformed
    assert set(futures) == {"t"}


def test_an_election_request_is_sent_not_refused_by_the_client() -> None:
    """The first real K13 run: elect_leaders(..., request_timeout=10) raised SystemError in
    confluent-kafka's binding. The request must reach the wire; with no broker it times out."""
    import concurrent.futures

    from confluent_kafka.admin import AdminClient

    from systems.kafka.admin import KafkaAdmin

    admin = KafkaAdmin.__new__(KafkaAdmin)
    admin.topic = "t"
    admin.admin = AdminClient({"bootstrap.servers": "127.0.0.1:1", "log_level": 0})
    with pytest.raises((concurrent.futures.TimeoutError, TimeoutError)):
        admin.elect("unclean", [0], wait=1)


def test_election_outcomes_as_the_client_reports_them() -> None:
    """K2's first real run: per-partition results are KafkaError objects, which have no args."""
    from confluent_kafka import KafkaError, KafkaException

    from systems.kafka.admin import election_outcome

    assert election_outcome(None) == "ok"
    assert election_outcome(KafkaError(KafkaError.ELECTION_NOT_NEEDED)) == "ELECTION_NOT_NEEDED"
    wrapped = KafkaException(KafkaError(KafkaError.ELIGIBLE_LEADERS_NOT_AVAILABLE))
    assert election_outcome(wrapped) == "ELIGIBLE_LEADERS_NOT_AVAILABLE"


class RestartingControl(FakeControl):
    """Metadata as a cluster shows it during a rolling restart: the restarted broker missing
    while it starts, then registered but out of the ISR while it catches up, then back."""

    def __init__(self, answers: list[tuple[dict[int, str], tuple[int, ...]]]) -> None:
        super().__init__(leaders=[1])
        self.answers = answers

    def metadata(self, need_controller: bool = False) -> Metadata:
        brokers, isr = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return Metadata(brokers, 1, (PartitionState("t", 0, 1, (1, 2, 3), isr),), ())


def test_a_rolling_restart_waits_until_the_broker_is_registered_and_in_sync() -> None:
    """K19's first real runs: a restarted broker absent from the metadata counted as "in every
    ISR", so all three restarts followed each other with no wait at all."""
    every = {1: "kafka1", 2: "kafka2", 3: "kafka3"}
    without_2 = {1: "kafka1", 3: "kafka3"}
    control = RestartingControl(
        [
            (every, (1, 2, 3)),  # broker ids, taken before the first restart
            (without_2, (1, 3)),  # kafka2 starting
            (every, (1, 3)),  # registered, catching up
            (every, (1, 2, 3)),  # back in the ISR
        ]
    )
    net, checks = FakeNet(), []
    polled = lambda check, within, interval: checks.extend([check(), check(), check()])  # noqa: E731
    with patch("systems.kafka.nemesis.wait_until", side_effect=polled):
        KafkaNemesis(net, control, "t", 1).rolling_restart(["kafka2"], within=5)  # type: ignore[arg-type]
    assert net.calls == [("restart", ["kafka2"])] and checks == [False, False, True]


def test_a_rolling_restart_of_an_unknown_broker_is_refused() -> None:
    control = RestartingControl([({1: "kafka1"}, (1,))])
    with pytest.raises(NemesisError, match="kafka9 is not a registered broker"):
        KafkaNemesis(FakeNet(), control, "t", 1).rolling_restart(["kafka9"], 5)  # type: ignore[arg-type]


# ---- the final read ----------------------------------------------------------------------------


def test_the_final_reads_group_is_reserved() -> None:
    bad = BASE.replace("readers: [{id: r}]", "readers: [{id: final}]")
    with pytest.raises(ScenarioError, match="reader id 'final' is the final read's own"):
        parse_scenario(bad, "x.yaml")
    assert parse_scenario(bad.replace("}]}", "}], final_read: false}"), "x.yaml")


def recorded_drain(final_exit: int) -> tuple[Any, list[Any]]:
    """A Kafka run's drain with its client processes recorded instead of started."""
    from systems.kafka.clients_run import KafkaClientsRun

    class Recorded(KafkaClientsRun):
        bootstrap_servers = "b:9092"  # type: ignore[assignment]

    log: list[Any] = []
    run = object.__new__(Recorded)
    workload = SimpleNamespace(
        readers=[SimpleNamespace(id="r")], copiers=[], drain_timeout=5.0, final_read=True
    )
    run.scenario = SimpleNamespace(workload=workload, cluster=SimpleNamespace(topic="t"))
    run.manifest = Manifest()
    run.clients = {"r": SimpleNamespace(send_signal=lambda s: log.append("signal"))}  # type: ignore[dict-item]
    run.instances, run.client_of = {}, {}
    exits = {"r": 0, "final": final_exit}
    run._spawn = lambda role, name, cfg: log.append((role, name, cfg))  # type: ignore[method-assign]
    run._wait_client = lambda name, deadline: log.append(name) or exits[name]  # type: ignore[method-assign]
    return run, log


@pytest.mark.parametrize(("final_exit", "complete"), [(0, True), (3, False)])
def test_the_final_read_starts_after_the_live_readers_drained(
    final_exit: int, complete: bool
) -> None:
    run, log = recorded_drain(final_exit)
    run._drain()
    assert log[:2] == ["signal", "r"]  # the live reader drained first
    role, name, cfg = log[2]
    assert (role, name, cfg["group"], cfg["final"], cfg["topic"]) == (
        "reader",
        "final",
        "final",
        True,
        "t",
    )
    assert log[3] == "final" and run.manifest.drain_complete is complete
    assert run.manifest.consumer_exit_codes == {"r": 0, "final": final_exit}


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
    cluster = SimpleNamespace(nodes=nodes, quorum=("controller1", "controller2", "controller3"))

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


def test_a_copier_restarted_is_a_new_process_with_the_same_transactional_id() -> None:
    """restart-client: C1 killed, a new instance C1.2 started with C1's transactional id and
    group; the run's clients then answer to C1 with C1.2's group."""
    from systems.kafka.clients_run import KafkaClientsRun

    spawned: list[tuple[str, str, dict[str, Any]]] = []

    class Recorded(KafkaClientsRun):
        bootstrap_servers = "b:9092"  # type: ignore[assignment]

        def _spawn(self, role: str, process: str, config: dict[str, Any]) -> None:
            spawned.append((role, process, config))
            self.clients[process] = SimpleNamespace(pid=7000 + len(spawned), poll=lambda: None)  # type: ignore[assignment]

    run = object.__new__(Recorded)
    spec = parse_scenario((ROOT / "scenarios" / "T7.yaml").read_text(), "T7.yaml")
    assert isinstance(spec, KafkaScenario)
    run.scenario = spec
    run.read_deadline = 1234.0
    run.instances, run.client_of = {}, {}
    run.clients = {"C1": SimpleNamespace(pid=4444, poll=lambda: -9)}  # type: ignore[dict-item]
    assert run.restart_client("C1") == 7001
    ((role, process, config),) = spawned
    assert (role, process) == ("copier", "C1.2")
    assert config["process"] == "C1.2" and config["transactional_id"] == "C1"
    assert config["deadline"] == 1234.0
    assert run.running_clients() == {"C1": 7001}
    with pytest.raises(NemesisError, match="C1 still runs"):
        run.restart_client("C1")
    with pytest.raises(NemesisError, match="restarts a copier; P1 is none"):
        run.restart_client("P1")
