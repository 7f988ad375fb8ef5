"""Kafka's rolling upgrade and finalize-feature: the order (pure), the steps' validation, and
both ops dispatched by the nemesis on fakes of the network and of the cluster, whose nodes come
back in sync the moment they are recreated (or never, for the bound)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from contract.topology import NodeHandle, Topology
from nemesis.containers import NemesisError
from systems.kafka.cluster import replication_row
from systems.kafka.config import Node
from systems.kafka.nemesis import KafkaNemesis
from systems.kafka.scenario import KafkaStep, older
from systems.kafka.targets import Metadata, PartitionState
from systems.kafka.upgrade import upgrade_order
from tests.systems.kafka.test_membership import FakeNet

T = "jepsen"


def node(name: str, node_id: int, role: str, spare: bool = False) -> Node:
    return Node(name=name, node_id=node_id, role=role, address="", spare=spare)  # type: ignore[arg-type]


def test_dedicated_controllers_go_first_then_the_brokers_by_id_and_never_a_spare() -> None:
    nodes = [
        node("kafka2", 2, "broker"),
        node("kafka1", 1, "broker"),
        node("kafka4", 4, "broker", spare=True),
        node("controller1", 101, "controller"),
        node("zk1", 1, "zookeeper"),
    ]
    assert upgrade_order(nodes) == ["controller1", "kafka1", "kafka2"]
    assert upgrade_order(nodes, ["kafka2", "controller1"]) == ["controller1", "kafka2"]


def step(**fields: Any) -> KafkaStep:
    return KafkaStep.model_validate({"at": 1, **fields})


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"op": "upgrade"}, "upgrade needs a release"),
        ({"op": "kill", "target": "leader", "release": "4.4"}, "release is for upgrade"),
        ({"op": "finalize-feature", "feature": "metadata.version"}, "needs a feature and a level"),
        ({"op": "finalize-feature", "feature": "transaction.version", "level": "4.4"}, "a number"),
        ({"op": "finalize-feature", "feature": "all", "level": "4.4-IV2"}, "takes a release"),
        ({"op": "heal", "feature": "all", "level": "4.4"}, "are for finalize-feature"),
        ({"op": "upgrade", "release": 4.4}, "write the release quoted"),
        ({"op": "upgrade", "release": "3.6"}, "older than 3.7"),
    ],
)
def test_a_step_that_cannot_upgrade_or_finalize_is_refused_in_a_line(
    fields: dict[str, Any], said: str
) -> None:
    with pytest.raises(ValidationError, match=said):
        step(**fields)


def test_the_steps_that_can_are_taken() -> None:
    assert step(op="upgrade", release="4.4").release == "4.4"
    assert step(op="finalize-feature", feature="metadata.version", level="4.4-IV2").level
    assert step(op="finalize-feature", feature="transaction.version", level="2").level == "2"
    assert step(op="finalize-feature", feature="all", level="4.4").feature == "all"


def test_a_release_is_older_only_as_far_as_both_say() -> None:
    assert older("3.9", "4.1") and older("4.1.2", "4.4")
    assert not older("3.9", "3.9.2") and not older("4.4", "4.1")


def test_the_replication_row_of_a_node_is_read_by_its_header() -> None:
    described = (
        "NodeId  DirectoryId             LogEndOffset  Lag  LastFetchTimestamp  "
        "LastCaughtUpTimestamp  Status\n"
        "1       AAAAAAAAAAAAAAAAAAAAAA  3024          0    1764400000123       1764400000123"
        "          Leader\n"
        "2       BBBBBBBBBBBBBBBBBBBBBB  3020          4    1764399999000       1764399998000"
        "          Follower\n"
    )
    assert replication_row(described, 2) == {
        "NodeId": "2",
        "DirectoryId": "BBBBBBBBBBBBBBBBBBBBBB",
        "LogEndOffset": "3020",
        "Lag": "4",
        "LastFetchTimestamp": "1764399999000",
        "LastCaughtUpTimestamp": "1764399998000",
        "Status": "Follower",
    }
    assert replication_row(described, 7) is None
    assert replication_row("Error: no quorum", 1) is None


# ---- dispatch on fakes -----------------------------------------------------------------------


class UpgradeNet(FakeNet):
    """The membership tests' network, which also follows a node's recreated container."""

    def __init__(self) -> None:
        super().__init__()
        self.replaced_with: list[str] = []

    def replaced(self, name: str, topology: Topology) -> None:
        self.replaced_with.append(name)
        self.topology = topology


def oks_of(net: FakeNet, f: str) -> list[dict[str, Any]]:
    return [v for t, g, v in net.history.events if g == f and t == "ok"]


class FakeCluster:
    """Brokers kafka1-3 on 3.9.2 and a dedicated controller; a recreated broker is back in the
    ISR at once unless `stuck`; the controller catches up at once."""

    def __init__(self, stuck: bool = False) -> None:
        self.stuck = stuck
        self.releases = {"controller1": "3.9.2", "kafka1": "3.9.2", "kafka2": "3.9.2"}
        self.releases["kafka3"] = "3.9.2"
        self.isr: tuple[int, ...] = (1, 2, 3)
        self.asked: list[tuple[str, Any]] = []
        self.levels = {"metadata.version": "3.9-IV0"}

    @property
    def nodes(self) -> list[Node]:
        return [
            node("controller1", 101, "controller"),
            *(node(f"kafka{i}", i, "broker") for i in (1, 2, 3)),
        ]

    def release_of(self, name: str) -> str:
        return self.releases[name]

    def release_of_spec(self, spec: str) -> str:
        return {"4.4": "4.4.0", "4.1": "4.1.2"}[spec]

    def upgrade_node(self, name: str, spec: str, timeout: float = 180) -> Topology:
        self.asked.append(("upgrade", name))
        self.releases[name] = self.release_of_spec(spec)
        if self.stuck and name.startswith("kafka"):
            self.isr = tuple(b for b in self.isr if b != int(name.removeprefix("kafka")))
        return Topology((NodeHandle(name, f"new-{name}", "172.29.60.5"),), "172.29.60.1")

    def controller_caught_up(self, controller: str, since_ms: int, via: str) -> bool:
        self.asked.append(("caught-up", (controller, via)))
        return True

    def finalize(self, feature: str, level: str, via: str) -> str:
        self.asked.append(("finalize", (feature, level, via)))
        self.levels[feature] = f"{level}-IV2"
        return "metadata.version was upgraded to 27.\n"

    def feature_levels(self, via: str | None = None) -> dict[str, str]:
        return dict(self.levels)

    def metadata(self, need_controller: bool = False, topic: str | None = None) -> Metadata:
        part = PartitionState(T, 0, 1, (1, 2, 3), self.isr)
        return Metadata({1: "kafka1", 2: "kafka2", 3: "kafka3"}, 101, (part,))


def nemesis_on(cluster: FakeCluster) -> tuple[KafkaNemesis, UpgradeNet]:
    net = UpgradeNet()
    k = KafkaNemesis(net, cluster, T, 1, upgrades=cluster)  # type: ignore[arg-type]
    return k, net


def test_an_upgrade_moves_each_node_in_turn_and_says_from_what_to_what() -> None:
    cluster = FakeCluster()
    k, net = nemesis_on(cluster)
    k.apply(step(op="upgrade", release="4.4", within=5))
    assert [a for a in cluster.asked if a[0] == "upgrade"] == [
        ("upgrade", "controller1"),
        ("upgrade", "kafka1"),
        ("upgrade", "kafka2"),
        ("upgrade", "kafka3"),
    ]
    oks = oks_of(net, "upgrade")
    assert [o["nodes"] for o in oks] == [["controller1"], ["kafka1"], ["kafka2"], ["kafka3"]]
    assert all(o["from"] == "3.9.2" and o["to"] == "4.4.0" and o["in_sync"] for o in oks)
    assert net.replaced_with == ["controller1", "kafka1", "kafka2", "kafka3"]
    # The controller's catch-up is asked of a broker, never of itself.
    assert ("caught-up", ("controller1", "kafka1")) in cluster.asked
    # A node on the release already is left alone: a second upgrade does nothing.
    k.apply(step(op="upgrade", release="4.4", within=5))
    assert len(oks_of(net, "upgrade")) == 4


def test_a_node_that_never_comes_back_in_sync_ends_its_wait_at_the_bound() -> None:
    cluster = FakeCluster(stuck=True)
    k, net = nemesis_on(cluster)
    k.apply(step(op="upgrade", release="4.1", target=["kafka2"], within=0.05))
    (ok,) = oks_of(net, "upgrade")
    assert ok["in_sync"] is False and ok["ended_by"] == "bound (0.05 s)"
    assert ok["from"] == "3.9.2" and ok["to"] == "4.1.2"


def test_finalize_runs_kafkas_tool_in_a_broker_of_the_newest_release_and_reads_the_levels() -> None:
    cluster = FakeCluster()
    cluster.releases["kafka2"] = "4.4.0"
    k, net = nemesis_on(cluster)
    k.apply(step(op="finalize-feature", feature="metadata.version", level="4.4"))
    assert ("finalize", ("metadata.version", "4.4", "kafka2")) in cluster.asked
    (ok,) = oks_of(net, "finalize-feature")
    assert ok["levels"] == {"metadata.version": "4.4-IV2"} and ok["via"] == "kafka2"
    assert ok["tool"] == ["metadata.version was upgraded to 27."]


def test_a_nemesis_without_the_cluster_cannot_upgrade() -> None:
    net = UpgradeNet()
    k = KafkaNemesis(net, FakeCluster(), T, 1)  # type: ignore[arg-type]
    with pytest.raises(NemesisError, match="cannot upgrade"):
        k.apply(step(op="upgrade", release="4.4"))


def scenario(release: str | None, *steps: dict[str, Any]) -> Any:
    from systems.kafka.scenario import KafkaScenario

    cluster: dict[str, Any] = {"system": "kafka", "modes": ["kraft", "zk"]}
    if release:
        cluster["release"] = release
    return KafkaScenario.model_validate(
        {
            "id": "up",
            "description": "an upgrade",
            "expect": "safe",
            "cluster": cluster,
            "workload": {"producers": [{"id": "P1", "count": 10}], "readers": [{"id": "r"}]},
            "nemesis": [{"at": 1, **s} for s in steps],
        }
    )


def test_an_upgrade_scenario_starts_on_its_own_release_and_never_goes_back() -> None:
    up = scenario("3.9", {"op": "upgrade", "release": "4.1"}, {"op": "upgrade", "release": "4.4"})
    assert up.upgrade_releases() == ["4.1", "4.4"]
    assert up.line_refusal("3.9") is None and up.line_refusal("3.9.2") is None
    assert "its own release, not from 4.4" in (up.line_refusal("4.4") or "")
    back = scenario(None, {"op": "upgrade", "release": "4.1"})
    assert "older than 4.4" in (back.line_refusal("4.4") or "")
    assert back.line_refusal("3.9") is None


def test_an_upgrade_to_kafka_4_is_refused_in_zookeeper_mode() -> None:
    from systems.kafka.run import run_mode
    from systems.scenario import ScenarioError

    up = scenario("3.9", {"op": "upgrade", "release": "4.4"})
    assert run_mode(up, None, "3.9") == "kraft"
    with pytest.raises(ScenarioError, match="no ZooKeeper mode"):
        run_mode(up, "zk", "3.9")
    patch = scenario("3.9", {"op": "upgrade", "release": "3.9.2"})
    assert run_mode(patch, "zk", "3.9") == "zk"
