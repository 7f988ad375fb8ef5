"""The Kafka nemesis records every role a step's nodes held as its fault began, whatever the
step aimed at: on fakes of the network and of the cluster's metadata."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any
from unittest.mock import patch

import pytest

from nemesis.network import NetworkState
from systems.kafka import nemesis as kafka_nemesis
from systems.kafka.nemesis import NODE_FAULT_OPS, KafkaNemesis, answers_within
from systems.kafka.targets import Metadata, PartitionState, coordinator_partition

BROKERS = {1: "kafka1", 2: "kafka2", 3: "kafka3"}


class FakeHistory:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []

    def write(self, type_: str, f: str, value: dict[str, Any]) -> None:
        self.events.append((type_, f, value))

    def resolved(self) -> list[dict[str, Any]]:
        return [v for _, f, v in self.events if f == "resolve"]


class FakeNet:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.down: set[str] = set()
        self.history = FakeHistory()
        self.state = NetworkState()

    def __getattr__(self, name: str) -> Any:
        return lambda *args: self.calls.append((name, *args))


def internal_topic(topic: str, leader_of: dict[int, int], partitions: int = 50) -> Metadata:
    """An internal topic whose partition p is led by leader_of.get(p, 1)."""
    parts = tuple(
        PartitionState(topic, p, leader_of.get(p, 1), (1, 2, 3), (1, 2, 3))
        for p in range(partitions)
    )
    return Metadata(BROKERS, 1, parts)


class FakeControl:
    """A ZooKeeper-mode cluster: kafka1 the controller, kafka2 leading t/0."""

    def __init__(self, fail: Exception | None = None, stall: threading.Event | None = None):
        self.asked: list[tuple[bool, str | None]] = []
        self.fail = fail
        self.stall = stall
        self.internal: dict[str, Metadata] = {}

    def metadata(self, need_controller: bool = False, topic: str | None = None) -> Metadata:
        self.asked.append((need_controller, topic))
        if self.stall is not None:
            self.stall.wait(10)
        if self.fail is not None:
            raise self.fail
        if topic is not None:
            if topic not in self.internal:
                return Metadata(BROKERS, 1, ())  # not created yet: no partitions
            return self.internal[topic]
        return Metadata(
            BROKERS,
            1,
            (PartitionState("t", 0, 2, (2, 1, 3), (2, 1)),),
            ("zk1", "zk2", "zk3"),
        )

    def elect(self, election: str, partitions: list[int], via: str | None = None) -> dict[str, str]:
        return {"0": "ok"}


def step(**kw: Any) -> Any:
    fields: dict[str, Any] = {"target": None, "from_": None, "to": None, "partition": 0}
    fields |= {"both_ways": False, "label": "", "groups": [], "within": 5.0}
    return SimpleNamespace(**(fields | kw))


def test_a_follower_cut_from_the_others_is_recorded_as_the_controller_it_also_was() -> None:
    """The issue's run: the follower drawn was also the ZooKeeper-mode controller."""
    net, control = FakeNet(), FakeControl()
    n = KafkaNemesis(net, control, "t", 1)  # type: ignore[arg-type]
    n.apply(step(op="cut", from_="follower", to=["kafka2", "kafka3"]))
    assert net.calls == [("cut", ["kafka1"], ["kafka2", "kafka3"])]
    (resolved,) = net.history.resolved()
    assert resolved["roles"] == {"from": "follower"}
    assert resolved["held"] == {
        "kafka1": ["controller", "follower p0"],
        "kafka2": ["leader p0"],
        "kafka3": ["follower p0"],
    }
    assert "roles_unknown" not in resolved
    # One question for the step: its role resolved from the same answer as what was held.
    assert control.asked == [(True, None)]


def test_the_coordinators_of_every_followed_id_are_among_the_roles_held() -> None:
    net, control = FakeNet(), FakeControl()
    tx = coordinator_partition("tx-1", 50)
    control.internal["__transaction_state"] = internal_topic("__transaction_state", {tx: 3})
    keys = [("transaction-coordinator", "tx-1"), ("group-coordinator", "g1")]
    n = KafkaNemesis(net, control, "t", 1, coordinator_keys=keys)  # type: ignore[arg-type]
    n.apply(step(op="kill", target=["kafka3"]))
    (resolved,) = net.history.resolved()
    assert resolved["roles"] == {}  # aimed at a node by name, and recorded all the same
    assert resolved["held"] == {"kafka3": ["follower p0", "transaction-coordinator tx-1"]}
    assert resolved["roles_unknown"] == {
        "group-coordinator g1": "__consumer_offsets does not exist yet (no client has asked "
        "for a coordinator)"
    }
    assert net.calls == [("kill", ["kafka3"])]


def test_a_coordinator_role_resolves_from_the_steps_answer() -> None:
    net, control = FakeNet(), FakeControl()
    control.internal["__consumer_offsets"] = internal_topic(
        "__consumer_offsets", {coordinator_partition("g1", 50): 2}
    )
    n = KafkaNemesis(net, control, "t", 1, {"group-coordinator": "g1"})  # type: ignore[arg-type]
    n.apply(step(op="pause", target="group-coordinator"))
    assert net.calls == [("pause", ["kafka2"])]
    assert net.history.resolved()[0]["held"] == {"kafka2": ["group-coordinator g1", "leader p0"]}
    assert sorted(control.asked, key=str) == [(False, "__consumer_offsets"), (True, None)]


def test_the_non_transaction_coordinators_are_every_broker_but_the_coordinator() -> None:
    net, control = FakeNet(), FakeControl()
    tx = coordinator_partition("tx-1", 50)
    control.internal["__transaction_state"] = internal_topic("__transaction_state", {tx: 2})
    keys = {"transaction-coordinator": "tx-1"}
    n = KafkaNemesis(net, control, "t", 1, keys)  # type: ignore[arg-type]
    n.apply(step(op="isolate", target="non-transaction-coordinators"))
    assert net.calls == [("isolate", ["kafka1", "kafka3"])]


def test_a_step_whose_roles_could_not_be_learnt_says_so_and_faults_all_the_same() -> None:
    net, control = FakeNet(), FakeControl(fail=RuntimeError("broker transport failure"))
    n = KafkaNemesis(net, control, "t", 1)  # type: ignore[arg-type]
    n.apply(step(op="isolate", target=["kafka1"]))
    assert net.calls == [("isolate", ["kafka1"])]
    (resolved,) = net.history.resolved()
    assert resolved["held"] == {"kafka1": []}
    why = "RuntimeError: broker transport failure"
    assert resolved["roles_unknown"] == {"controller": why, "partitions": why}


def test_a_cluster_slow_to_answer_does_not_hold_the_fault_back() -> None:
    stall = threading.Event()
    net, control = FakeNet(), FakeControl(stall=stall)
    n = KafkaNemesis(net, control, "t", 1)  # type: ignore[arg-type]
    try:
        with patch.object(kafka_nemesis, "HELD_ROLES_WITHIN", 0.05):
            n.apply(step(op="kill", target=["kafka2"]))
    finally:
        stall.set()
    assert net.calls == [("kill", ["kafka2"])]
    unknown = net.history.resolved()[0]["roles_unknown"]
    assert unknown == {"controller": "no answer within 0.05 s", "partitions": unknown["controller"]}


def test_answers_within_keeps_those_given_in_time() -> None:
    def fails() -> int:
        raise ValueError("no")

    answers, failures = answers_within({"a": lambda: 1, "b": fails}, 1.0)
    assert answers == {"a": 1} and failures == {"b": "ValueError: no"}


def test_a_partition_records_the_roles_of_every_node_in_its_groups() -> None:
    net, control = FakeNet(), FakeControl()
    n = KafkaNemesis(net, control, "t", 1)  # type: ignore[arg-type]
    n.apply(step(op="partition", groups=[["kafka1"], ["kafka2", "kafka3"]]))
    assert net.calls == [("partition", [["kafka1"], ["kafka2", "kafka3"]])]
    assert set(net.history.resolved()[0]["held"]) == {"kafka1", "kafka2", "kafka3"}


def test_a_partitions_groups_take_roles_resolved_when_it_runs() -> None:
    """The case that asked for it: the controller cut from the rest, by its role."""
    net, control = FakeNet(), FakeControl()  # kafka1 the controller, kafka2 leading t/0
    n = KafkaNemesis(net, control, "t", 1)  # type: ignore[arg-type]
    n.apply(step(op="partition", groups=[["controller"], ["kafka2", "kafka3"]], label="split"))
    assert net.calls == [("partition", [["kafka1"], ["kafka2", "kafka3"]])]
    resolved = net.history.resolved()[0]
    assert resolved["roles"] == {"group 0: controller": "controller"}
    assert resolved["nodes"] == {"group 0: controller": ["kafka1"]}
    assert n.labels["split"] == ["kafka1", "kafka2", "kafka3"]


def test_a_role_that_resolves_into_another_group_is_refused() -> None:
    from nemesis.containers import NemesisError

    net, control = FakeNet(), FakeControl()
    n = KafkaNemesis(net, control, "t", 1)  # type: ignore[arg-type]
    with pytest.raises(NemesisError, match="kafka2 is in group 0"):
        n.apply(step(op="partition", groups=[["kafka2"], ["leader", "kafka3"]]))
    assert net.calls == []


def test_cut_from_quorum_records_the_quorum_it_cuts_the_target_from() -> None:
    net, control = FakeNet(), FakeControl()
    KafkaNemesis(net, control, "t", 1).apply(step(op="cut-from-quorum", target="follower"))  # type: ignore[arg-type]
    assert net.calls[0] == ("cut", ["kafka1"], ["zk1", "zk2", "zk3"])
    held = net.history.resolved()[0]["held"]
    assert held["kafka1"] == ["controller", "follower p0"] and held["zk1"] == []
    assert control.asked == [(True, None)]


def test_the_ops_that_fault_nodes_are_those_that_learn_their_roles() -> None:
    assert {"isolate", "partition", "cut", "cut-clients", "cut-from-quorum", "degrade"} <= (
        NODE_FAULT_OPS
    )
    assert {"kill", "stop", "pause", "restart", "power-loss", "rolling-restart"} <= NODE_FAULT_OPS
    assert not {"heal", "start", "resume", "elect", "leaders", "pause-client"} & NODE_FAULT_OPS


@pytest.mark.parametrize("op", ["start", "resume", "heal"])
def test_steps_that_fault_no_node_ask_nothing_of_their_roles(op: str) -> None:
    net, control = FakeNet(), FakeControl()
    KafkaNemesis(net, control, "t", 1).apply(step(op=op, target=["kafka1"]))  # type: ignore[arg-type]
    assert control.asked == [] and net.history.resolved() == []
    assert net.calls[0][0] == op


def test_every_restart_of_a_rolling_restart_records_what_its_node_held_then() -> None:
    net, control = FakeNet(), FakeControl()
    with patch("systems.kafka.nemesis.wait_until", return_value=True):
        KafkaNemesis(net, control, "t", 1).rolling_restart(["kafka1", "kafka2"], within=5)  # type: ignore[arg-type]
    held = [r["held"] for r in net.history.resolved()]
    assert held == [{"kafka1": ["controller", "follower p0"]}, {"kafka2": ["leader p0"]}]
    assert [c[0] for c in net.calls] == ["restart", "restart"]


def test_the_share_coordinator_is_the_one_of_the_steps_partition() -> None:
    """A share group's state is kept per topic partition: `partition` picks whose
    coordinator, and each step records the share-partitions its nodes coordinated."""
    from systems.kafka.targets import share_partition_key

    net, control = FakeNet(), FakeControl()
    keys = [share_partition_key("share", "AAAAAAAAAAAAAAAAAAAAAQ", p) for p in (0, 1)]
    leaders = {coordinator_partition(keys[0], 50): 2, coordinator_partition(keys[1], 50): 3}
    assert len(leaders) == 2  # two state partitions, on two brokers
    control.internal["__share_group_state"] = internal_topic("__share_group_state", leaders)
    followed = [("share-coordinator", k) for k in keys]
    n = KafkaNemesis(
        net,  # type: ignore[arg-type]
        control,
        "t",
        2,
        {"share-coordinator": keys[0]},
        coordinator_keys=followed,
    )
    n.apply(step(op="kill", target="share-coordinator", partition=1))
    n.apply(step(op="kill", target="share-coordinator"))
    assert net.calls == [("kill", ["kafka3"]), ("kill", ["kafka2"])]
    first = net.history.resolved()[0]
    assert f"share-coordinator {keys[1]}" in first["held"]["kafka3"]
    assert not any(keys[0] in role for role in first["held"]["kafka3"])
