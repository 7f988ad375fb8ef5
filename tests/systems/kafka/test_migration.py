"""Kafka's ZooKeeper-to-KRaft migration without a broker: the cluster shape that declares its
controllers, each node's environment at each stage, the phases' order (in a scenario and on the
cluster as it runs), what tells a phase happened, and the migrate op dispatched by the nemesis on
fakes of the network and of a cluster that logs what Kafka 3.9 logs as each node moves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from contract.topology import NodeHandle, Topology
from nemesis.containers import NemesisError
from systems.kafka.admin import KafkaAdmin
from systems.kafka.cluster import (
    BrokerPorts,
    KafkaCluster,
    last_line_with,
    node_environment,
    render_compose,
    zookeeper_cluster_id,
)
from systems.kafka.config import KafkaClusterConfig, Node, NodeStage, nodes_of, quorum_nodes
from systems.kafka.migration import PHASES, order_refusal, phase_nodes, phase_refusal
from systems.kafka.nemesis import KafkaNemesis
from systems.kafka.scenario import KafkaScenario, KafkaStep
from systems.kafka.targets import Metadata, PartitionState
from tests.helpers import services_up_starts
from tests.systems.kafka.test_upgrade import UpgradeNet, oks_of

IMAGES = {"kafka": "brokerjepsen/kafka:3.9.2-debian", "zookeeper": "brokerjepsen/zookeeper:3.8.0"}
PORTS = {i: BrokerPorts(40000 + i, 40000 + i) for i in (1, 2, 3)}
ZK_ID = "MkU3OEVBNTcwNTJENDM2Qg"


def migrating(**settings: Any) -> KafkaClusterConfig:
    return KafkaClusterConfig(mode="zk", migration_controllers=3, **settings)


def node(cfg: KafkaClusterConfig, name: str) -> Node:
    return next(n for n in nodes_of(cfg, "172.29.60") if n.name == name)


# ---- the shape -------------------------------------------------------------------------------


def test_a_zk_cluster_declares_its_migration_controllers_apart_and_unstarted() -> None:
    cfg = migrating()
    controllers = [n for n in nodes_of(cfg, "172.29.60") if n.role == "controller"]
    assert [(n.name, n.node_id, n.address, n.spare) for n in controllers] == [
        ("controller1", 101, "172.29.60.41", True),
        ("controller2", 102, "172.29.60.42", True),
        ("controller3", 103, "172.29.60.43", True),
    ]
    # The quorum the cluster starts with is ZooKeeper's: no controller runs yet.
    assert quorum_nodes(cfg) == ("zk1", "zk2", "zk3")
    assert not any(n.role == "controller" for n in nodes_of(KafkaClusterConfig(mode="zk"), "x"))


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"mode": "kraft"}, "starts in ZooKeeper mode, not kraft"),
        ({"mode": "kraft-dedicated"}, "not kraft-dedicated"),
        ({"mode": "zk", "kafka_line": "3.8"}, "run on Kafka 3.9 .*not 3.8"),
    ],
)
def test_migration_controllers_outside_zookeeper_mode_on_3_9_are_refused_in_a_line(
    settings: dict[str, Any], said: str
) -> None:
    with pytest.raises(ValidationError, match=said):
        KafkaClusterConfig(migration_controllers=3, **settings)
    assert KafkaClusterConfig(mode="zk", kafka_line="3.9.2", migration_controllers=1)


def test_the_controllers_are_declared_in_a_profile_no_broker_waits_for(tmp_path: Path) -> None:
    data = render_compose(
        migrating(), "brokerjepsen-m", IMAGES, PORTS, "172.29.60", ZK_ID, kept_data=True
    )
    services = data["services"]
    assert all(services[f"controller{i}"]["profiles"] == ["spare"] for i in (1, 2, 3))
    assert set(services["kafka1"]["depends_on"]) == {"zk1", "zk2", "zk3"}
    # Every Kafka node's log directory outlives its container: a migration recreates them all.
    assert set(data["volumes"]) == {f"kafka{i}-data" for i in (1, 2, 3)} | {
        f"controller{i}-data" for i in (1, 2, 3)
    }
    assert services_up_starts(data, tmp_path) == ["kafka1", "kafka2", "kafka3", "zk1", "zk2", "zk3"]


# ---- each stage's environment ------------------------------------------------------------------


def test_a_controller_starts_in_migration_mode_formatted_with_the_id_it_is_given() -> None:
    cfg = migrating()
    env = node_environment(cfg, node(cfg, "controller2"), None, ZK_ID)
    assert env["CLUSTER_ID"] == ZK_ID
    assert env["KAFKA_PROCESS_ROLES"] == "controller" and env["KAFKA_NODE_ID"] == "102"
    assert env["KAFKA_ZOOKEEPER_METADATA_MIGRATION_ENABLE"] == "true"
    assert env["KAFKA_ZOOKEEPER_CONNECT"] == "zk1:2181,zk2:2181,zk3:2181"
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == (
        "101@controller1:9093,102@controller2:9093,103@controller3:9093"
    )
    assert env["KAFKA_LISTENERS"] == "CONTROLLER://0.0.0.0:9093"
    # It reaches the ZooKeeper-mode brokers over their own listener, mapped like theirs.
    assert env["KAFKA_INTER_BROKER_LISTENER_NAME"] == "INTERNAL"
    assert "INTERNAL:PLAINTEXT" in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"]
    assert "KAFKA_BROKER_ID" not in env


def test_a_dual_write_broker_stays_in_zookeeper_mode_with_the_migrations_settings() -> None:
    cfg = migrating(session_timeout_ms=7000)
    before = node_environment(cfg, node(cfg, "kafka2"), PORTS[2], ZK_ID)
    env = node_environment(cfg, node(cfg, "kafka2"), PORTS[2], ZK_ID, "migrating")
    assert "KAFKA_ZOOKEEPER_METADATA_MIGRATION_ENABLE" not in before
    assert "KAFKA_CONTROLLER_LISTENER_NAMES" not in before  # ZooKeeper mode refuses it
    assert env["KAFKA_BROKER_ID"] == before["KAFKA_BROKER_ID"] == "2"
    assert env["KAFKA_ZOOKEEPER_CONNECT"] == before["KAFKA_ZOOKEEPER_CONNECT"]
    assert env["KAFKA_ZOOKEEPER_METADATA_MIGRATION_ENABLE"] == "true"
    assert env["KAFKA_CONTROLLER_LISTENER_NAMES"] == "CONTROLLER"
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"].startswith("101@controller1:9093")
    assert env["KAFKA_INTER_BROKER_PROTOCOL_VERSION"] == "3.9"
    # It heartbeats to the KRaft controllers while its ZooKeeper session still counts.
    assert env["KAFKA_ZOOKEEPER_SESSION_TIMEOUT_MS"] == env["KAFKA_BROKER_SESSION_TIMEOUT_MS"]
    assert "KAFKA_PROCESS_ROLES" not in env and "KAFKA_NODE_ID" not in env
    # The scenario's own protocol version, when it set one, is what the brokers get.
    own = migrating(broker_config={"inter.broker.protocol.version": "3.8"})
    mine = node_environment(own, node(own, "kafka2"), PORTS[2], ZK_ID, "migrating")
    assert mine["KAFKA_INTER_BROKER_PROTOCOL_VERSION"] == "3.8"


@pytest.mark.parametrize("name", ["kafka1", "kafka3", "controller1", "controller3"])
def test_a_node_moved_to_kraft_runs_as_the_same_node_of_a_kraft_dedicated_cluster(
    name: str,
) -> None:
    cfg = migrating(min_insync_replicas=3, racks={1: "dc1"})
    dedicated = KafkaClusterConfig(mode="kraft-dedicated", min_insync_replicas=3, racks={1: "dc1"})
    ports = PORTS.get(node(cfg, name).node_id)
    moved = node_environment(cfg, node(cfg, name), ports, ZK_ID, "kraft")
    assert moved == node_environment(dedicated, node(dedicated, name), ports, ZK_ID)
    assert (
        not any(k.startswith("KAFKA_ZOOKEEPER") for k in moved) and "KAFKA_BROKER_ID" not in moved
    )


def test_the_rendering_follows_each_nodes_stage() -> None:
    stages: dict[str, NodeStage] = {"kafka1": "kraft", "kafka2": "migrating"}
    services = render_compose(
        migrating(), "m", IMAGES, PORTS, "172.29.60", ZK_ID, node_stages=stages
    )["services"]
    envs = {n: services[n]["environment"] for n in ("kafka1", "kafka2", "kafka3")}
    assert envs["kafka1"]["KAFKA_PROCESS_ROLES"] == "broker"
    assert envs["kafka2"]["KAFKA_ZOOKEEPER_METADATA_MIGRATION_ENABLE"] == "true"
    assert "KAFKA_CONTROLLER_QUORUM_VOTERS" not in envs["kafka3"]


# ---- what the cluster is now ------------------------------------------------------------------


def bare_cluster(cfg: KafkaClusterConfig) -> KafkaCluster:
    """A KafkaCluster's state without Docker: its configuration, network, and what it ran."""
    cluster = KafkaCluster.__new__(KafkaCluster)
    cluster.config, cluster.net_prefix = cfg, "172.29.60"
    cluster.node_stages, cluster.started_spares = {}, set()
    return cluster


def test_the_cluster_follows_the_mode_it_is_in_now_not_the_one_it_started_in() -> None:
    cluster = bare_cluster(migrating())
    admin = KafkaAdmin.__new__(KafkaAdmin)
    admin.cluster = cluster
    zookeepers, controllers = ("zk1", "zk2", "zk3"), ("controller1", "controller2", "controller3")
    assert (cluster.quorum, cluster.voters) == (zookeepers, [])
    assert not cluster.kraft_controller and not admin.kraft
    for c in controllers:
        cluster.started_spares.add(c)
        cluster.node_stages[c] = "migrating"
    assert cluster.quorum == zookeepers + controllers and cluster.voters == list(controllers)
    # The ZooKeeper-mode controller (a broker) leads until every broker runs the migration's
    # settings: then the KRaft controllers copy ZooKeeper's metadata and take over.
    cluster.node_stages |= {"kafka1": "migrating", "kafka2": "migrating"}
    assert not cluster.kraft_controller
    cluster.node_stages["kafka3"] = "migrating"
    assert cluster.kraft_controller and not admin.kraft
    cluster.node_stages |= dict.fromkeys(("kafka1", "kafka2", "kafka3"), "kraft")
    assert admin.kraft  # a KRaft broker's registration is KRaft's to remove
    assert cluster.quorum == zookeepers + controllers  # still written to until finalized
    cluster.node_stages |= dict.fromkeys(controllers, "kraft")
    assert cluster.quorum == controllers
    assert cluster.spares == []  # controllers are never add-broker's spares


def test_a_kraft_cluster_is_kraft_from_the_start() -> None:
    cluster = bare_cluster(KafkaClusterConfig(mode="kraft-dedicated"))
    assert cluster.kraft_controller and cluster.kraft_brokers
    assert tuple(cluster.voters) == cluster.quorum == ("controller1", "controller2", "controller3")


# ---- what says where a migration stands --------------------------------------------------------


def test_zookeepers_cluster_id_is_read_from_what_the_shell_printed() -> None:
    said = (
        "Connecting to zk1:2181,zk2:2181\n\nWATCHER::\n\nWatchedEvent state:SyncConnected "
        'type:None path:null\n{"version":"1","id":"' + ZK_ID + '"}\n'
    )
    assert zookeeper_cluster_id(said) == ZK_ID
    assert zookeeper_cluster_id("Node does not exist: /cluster/id") is None


def test_the_last_line_holding_a_signal_is_the_one_reported() -> None:
    log = (
        "[2026-01-01 10:00:00] INFO Still waiting for ZK brokers [1, 2] to register with KRaft.\n"
        "[2026-01-01 10:00:05] INFO Completed migration of metadata from ZooKeeper to KRaft. "
        + "x" * 500
        + "\n[2026-01-01 10:00:06] INFO Sending RPCs to broker before moving to dual-write mode\n"
    )
    found = last_line_with(log, "Completed migration of metadata from ZooKeeper to KRaft")
    assert found is not None and found.startswith("[2026-01-01 10:00:05]") and len(found) == 300
    assert last_line_with(log, "Completing the ZK migration") is None


def test_phases_run_in_kafkas_order_each_once() -> None:
    assert order_refusal(list(PHASES)) is None
    assert order_refusal(["controllers", "brokers"]) is None  # a schedule may stop early
    assert "first is controllers" in (order_refusal(["brokers"]) or "")
    assert "after brokers is kraft" in (order_refusal(["controllers", "brokers", "finalize"]) or "")
    assert "after brokers is kraft" in (order_refusal(["controllers", "brokers", "brokers"]) or "")
    assert "every phase has run" in (order_refusal([*PHASES, "finalize"]) or "")


def test_a_phase_the_cluster_is_not_ready_for_is_refused() -> None:
    cfg = migrating()
    nodes = nodes_of(cfg, "x")
    stages: dict[str, NodeStage | None] = {n.name: "zk" for n in nodes if n.role == "broker"}
    stages |= {n.name: None for n in nodes if n.role == "controller"}  # declared, not started
    assert phase_refusal("controllers", stages, nodes) is None
    assert "migration controllers run" in (phase_refusal("brokers", stages, nodes) or "")
    stages |= {n.name: "migrating" for n in nodes if n.role == "controller"}
    assert phase_refusal("brokers", stages, nodes) is None
    assert "every broker runs with the migration" in (phase_refusal("kraft", stages, nodes) or "")
    assert "every broker runs in KRaft" in (phase_refusal("finalize", stages, nodes) or "")
    plain = nodes_of(KafkaClusterConfig(mode="zk"), "x")
    assert "declares no migration controllers" in (phase_refusal("controllers", {}, plain) or "")
    assert [n.name for n in phase_nodes(nodes, "finalize")] == [
        "controller1",
        "controller2",
        "controller3",
    ]


# ---- the steps ----------------------------------------------------------------------------------


def step(**fields: Any) -> KafkaStep:
    return KafkaStep.model_validate({"at": 1, **fields})


def test_a_migrate_step_names_its_phase_and_only_migrate_does() -> None:
    assert step(op="migrate", phase="kraft").phase == "kraft"
    with pytest.raises(ValidationError, match="migrate needs a phase"):
        step(op="migrate")
    with pytest.raises(ValidationError, match="phase is for migrate, not kill"):
        step(op="kill", target="leader", phase="brokers")
    with pytest.raises(ValidationError, match="'controllers', 'brokers', 'kraft' or 'finalize'"):
        step(op="migrate", phase="zookeeper")


def scenario(cluster: dict[str, Any], *steps: dict[str, Any]) -> KafkaScenario:
    return KafkaScenario.model_validate(
        {
            "id": "mig",
            "description": "a migration",
            "expect": "safe",
            "cluster": {"system": "kafka", "modes": ["zk"], "migration_controllers": 3, **cluster},
            "workload": {"producers": [{"id": "P1", "count": 10}], "readers": [{"id": "r"}]},
            "nemesis": [{"at": i, **s} for i, s in enumerate(steps)],
        }
    )


def phase(name: str) -> dict[str, Any]:
    return {"op": "migrate", "phase": name}


def test_a_schedule_of_phases_with_faults_between_them_is_taken() -> None:
    s = scenario(
        {"release": "3.9"},
        phase("controllers"),
        phase("brokers"),
        {"op": "kill", "target": "leader", "label": "old"},
        {"op": "start", "target": "@old"},
        {"op": "isolate", "target": ["controller2"]},
        {"op": "heal"},
        phase("kraft"),
        phase("finalize"),
    )
    assert [st.phase for st in s.nemesis if st.op == "migrate"] == list(PHASES)
    assert s.line_refusal("3.9.2") is None
    assert "migrations run on Kafka 3.9" in (s.line_refusal("4.1") or "")


@pytest.mark.parametrize(
    ("cluster", "steps", "said"),
    [
        ({}, [phase("brokers")], r"nemesis.0: migrate brokers: the phase first is controllers"),
        (
            {},
            [phase("controllers"), phase("kraft")],
            r"nemesis.1: migrate kraft: the phase after controllers is brokers",
        ),
        (
            {},
            [{"op": "kill", "target": ["controller1"]}, phase("controllers")],
            "nemesis.0: controller1 is a migration controller no migrate controllers step",
        ),
        (
            {"migration_controllers": 0},
            [phase("controllers")],
            "nemesis.0: migrate needs cluster.migration_controllers",
        ),
        ({"modes": ["zk", "kraft"]}, [], "starts in ZooKeeper mode, not kraft"),
        ({"spare_brokers": 1}, [], "spare_brokers must be 0"),
        ({"release": "4.4"}, [], "migrations run on Kafka 3.9"),
    ],
)
def test_a_migration_the_harness_cannot_run_is_refused_in_a_line(
    cluster: dict[str, Any], steps: list[dict[str, Any]], said: str
) -> None:
    with pytest.raises(ValidationError, match=said):
        scenario(cluster, *steps)


# ---- dispatch on a fake cluster ----------------------------------------------------------------


class FakeMigratingCluster:
    """A zk cluster of three brokers and three migration controllers whose nodes log what Kafka
    3.9's do as they move: a stuck broker never gets back in the ISR."""

    def __init__(self, stuck: str = "") -> None:
        self.cfg = migrating()
        self.stuck = stuck
        self.stages: dict[str, NodeStage] = {}
        self.logs: dict[str, list[str]] = {}
        self.asked: list[tuple[str, Any]] = []
        self.cluster_id = "random-kraft-id"
        self.leader: str | None = None

    @property
    def nodes(self) -> list[Node]:
        return nodes_of(self.cfg, "172.29.60")

    def stage_of(self, name: str) -> NodeStage:
        if name in self.stages:
            return self.stages[name]
        return "migrating" if name.startswith("controller") else "zk"

    def started(self, name: str) -> bool:
        return name.startswith("kafka") or name in self.stages

    def zookeeper_cluster_id(self, via: str) -> str:
        self.asked.append(("zookeeper", via))
        return ZK_ID

    def adopt_cluster_id(self, cluster_id: str) -> None:
        self.cluster_id = cluster_id

    def _said(self, node: str, line: str) -> None:
        self.logs.setdefault(node, []).append(line)

    def migrate_node(self, name: str, stage: NodeStage, timeout: float = 180) -> Topology:
        self.asked.append(("migrate", (name, stage, self.cluster_id)))
        self.stages[name] = stage
        self.logs[name] = []  # a new container: a new log
        controllers = [f"controller{i}" for i in (1, 2, 3)]
        started = [c for c in controllers if c in self.stages]
        brokers = [self.stage_of(f"kafka{i}") for i in (1, 2, 3)]
        if name.startswith("controller") and stage == "migrating" and len(started) >= 2:
            self.leader = started[0]
            if len(started) == 3:
                self._said(self.leader, "Controller Quorum is ready for Zk to KRaft migration.")
        elif name.startswith("kafka"):
            line = {"migrating": "Successfully registered broker", "kraft": "Transition from "}
            self._said(name, line[stage] + ("STARTING to STARTED" if stage == "kraft" else ""))
            if stage == "migrating" and all(s == "migrating" for s in brokers):
                assert self.leader is not None
                self._said(self.leader, "Completed migration of metadata from ZooKeeper to KRaft.")
        elif stage == "kraft" and name == "controller3":
            self._said(
                "controller1",
                "Completing the ZK migration since this controller was "
                "configured with 'zookeeper.metadata.migration.enable' set to 'false'.",
            )
        return Topology((NodeHandle(name, f"new-{name}", "172.29.60.9"),), "172.29.60.1")

    def logged_line(self, nodes: list[str], text: str, since: float) -> str | None:
        for n in nodes:
            for line in self.logs.get(n, []):
                if text in line:
                    return line
        return None

    def active_controller(self, candidates: list[str]) -> str | None:
        return self.leader

    def controller_caught_up(self, controller: str, since_ms: int, via: str) -> bool:
        self.asked.append(("caught-up", (controller, via)))
        return True

    def metadata(self, need_controller: bool = False, topic: str | None = None) -> Metadata:
        isr = tuple(b for b in (1, 2, 3) if f"kafka{b}" != self.stuck)
        part = PartitionState("jepsen", 0, 1, (1, 2, 3), isr)
        return Metadata({1: "kafka1", 2: "kafka2", 3: "kafka3"}, 1, (part,))


def nemesis_on(cluster: FakeMigratingCluster) -> tuple[KafkaNemesis, UpgradeNet]:
    net = UpgradeNet()
    return KafkaNemesis(net, cluster, "jepsen", 1, migrations=cluster), net  # type: ignore[arg-type]


def test_each_phase_moves_its_nodes_one_event_each_and_says_what_the_controllers_logged() -> None:
    cluster = FakeMigratingCluster()
    k, net = nemesis_on(cluster)
    for name in PHASES:
        k.apply(step(op="migrate", phase=name, within=2))
    oks = oks_of(net, "migrate")
    assert [(o["phase"], o["nodes"]) for o in oks] == [
        *(("controllers", [f"controller{i}"]) for i in (1, 2, 3)),
        *(("brokers", [f"kafka{i}"]) for i in (1, 2, 3)),
        *(("kraft", [f"kafka{i}"]) for i in (1, 2, 3)),
        *(("finalize", [f"controller{i}"]) for i in (1, 2, 3)),
    ]
    # The controllers are formatted with ZooKeeper's cluster id, read through a broker.
    assert ("zookeeper", "kafka1") in cluster.asked
    assert ("migrate", ("controller1", "migrating", ZK_ID)) in cluster.asked
    controllers = oks[:3]
    assert all(o["cluster_id"] == ZK_ID for o in controllers)
    # A lone controller elects no leader: its ok waits for none; a majority's does.
    assert controllers[0]["in_sync"] is None and "minority" in controllers[0]["ended_by"]
    assert controllers[1]["in_sync"] and controllers[2]["in_sync"]
    assert controllers[2]["phase_signal"].startswith("Controller Quorum is ready")
    brokers, kraft, finalize = oks[3:6], oks[6:9], oks[9:]
    assert all(o["in_sync"] and o["signal"] for o in brokers + kraft)
    assert all(o["stage"] == "kraft" for o in kraft + finalize)
    assert brokers[2]["phase_signal"].startswith("Completed migration of metadata")
    assert "phase_signal" not in brokers[0] and "phase_signal" not in kraft[2]
    assert finalize[2]["phase_signal"].startswith("Completing the ZK migration")
    assert ("caught-up", ("controller2", "kafka1")) in cluster.asked
    assert all(o["ended_by"] == "in sync" for o in oks[1:])
    assert net.replaced_with[:3] == ["controller1", "controller2", "controller3"]
    # Every phase has run: a node already where a phase leaves it is left as it is.
    k.apply(step(op="migrate", phase="finalize", within=2))
    assert len(oks_of(net, "migrate")) == 12


def test_a_broker_that_never_gets_back_in_sync_ends_its_wait_at_the_bound() -> None:
    cluster = FakeMigratingCluster(stuck="kafka2")
    k, net = nemesis_on(cluster)
    k.apply(step(op="migrate", phase="controllers", within=2))
    k.apply(step(op="migrate", phase="brokers", within=0.05))
    kafka2 = oks_of(net, "migrate")[4]
    assert kafka2["nodes"] == ["kafka2"]
    assert kafka2["in_sync"] is False and kafka2["ended_by"] == "bound (0.05 s)"


def test_a_phase_out_of_turn_or_without_the_cluster_is_a_nemesis_error() -> None:
    k, _ = nemesis_on(FakeMigratingCluster())
    with pytest.raises(NemesisError, match="migrate kraft needs a cluster where every broker"):
        k.apply(step(op="migrate", phase="kraft"))
    bare = KafkaNemesis(UpgradeNet(), FakeMigratingCluster(), "jepsen", 1)  # type: ignore[arg-type]
    with pytest.raises(NemesisError, match="cannot migrate"):
        bare.apply(step(op="migrate", phase="controllers"))


def test_m1_migrates_phase_by_phase_with_a_fault_in_each_dual_write_stretch() -> None:
    from systems.registry import load_scenario
    from tests.helpers import ROOT

    m1 = load_scenario(ROOT / "scenarios/M1.yaml")
    assert isinstance(m1, KafkaScenario) and m1.claim == "M1"
    assert m1.cluster.modes == ["zk"] and m1.cluster.migration_controllers == 3
    ops = [st.phase or st.op for st in m1.nemesis]
    assert ops[:2] == ["controllers", "brokers"] and ops[-1] == "finalize"
    # A fault while the brokers run ZooKeeper mode under the KRaft controller, and one once every
    # broker runs KRaft with ZooKeeper still written.
    hybrid, dual = ops[2 : ops.index("kraft")], ops[ops.index("kraft") + 1 : -1]
    assert "kill" in hybrid and "isolate" in dual
    assert "| M1 |" in (ROOT / "docs/claims.md").read_text()
