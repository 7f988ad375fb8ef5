"""Kafka's membership ops: the plans (pure), and reassign, remove-broker and add-broker
dispatched by the nemesis on fakes of the network and of the cluster, which moves replicas
the moment it is asked (or never, for the bound)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable
from typing import Any

import pytest

from contract.topology import NodeHandle, Topology
from nemesis.containers import NemesisError
from nemesis.network import NetworkState
from systems.kafka.admin import reassign_command
from systems.kafka.membership import (
    Membership,
    MembershipError,
    Placement,
    moved_off,
    moved_onto,
    reassignment_json,
    shifted,
    still_moving,
)
from systems.kafka.nemesis import NODE_FAULT_OPS, KafkaNemesis
from systems.kafka.scenario import KafkaStep
from systems.kafka.targets import Metadata, PartitionState

T = "jepsen"


def test_a_shift_moves_each_partition_one_broker_along_the_ring() -> None:
    current: Placement = {(T, 0): (1, 2, 3), (T, 1): (4, 1, 2)}
    assert shifted(current, [1, 2, 3, 4]) == {(T, 0): (2, 3, 4), (T, 1): (1, 2, 3)}
    # As many brokers as replicas: only the order (the preferred leader) changes.
    assert shifted({(T, 0): (1, 2, 3)}, [1, 2, 3]) == {(T, 0): (2, 3, 1)}
    with pytest.raises(MembershipError, match="3 replicas and the cluster 2 brokers"):
        shifted({(T, 0): (1, 2, 3)}, [1, 2])


def test_a_decommission_spreads_the_gone_brokers_replicas_and_keeps_the_others_order() -> None:
    current: Placement = {
        (T, 0): (2, 1, 3),
        (T, 1): (1, 3, 4),
        (T, 2): (3, 4, 5),
        (T, 3): (2, 4, 5),
    }
    plan = moved_off(current, 2, [1, 2, 3, 4, 5])
    # p2 has no replica on 2: untouched. Loads before: 1:2, 3:3, 4:3, 5:2.
    assert plan == {(T, 0): (1, 3, 5), (T, 3): (4, 5, 1)}
    with pytest.raises(MembershipError, match="no broker but its replicas"):
        moved_off({(T, 0): (1, 2, 3)}, 1, [1, 2, 3])


def test_a_newcomer_takes_each_partitions_last_replica() -> None:
    assert moved_onto({(T, 0): (1, 2, 3), (T, 1): (4, 1, 2)}, 4) == {(T, 0): (1, 2, 4)}


def test_a_move_is_done_when_the_replicas_are_exactly_the_planned_ones_all_in_sync() -> None:
    plan: Placement = {(T, 0): (2, 3, 4), (T, 1): (1, 2, 3)}
    adding = {(T, 0): ((1, 2, 3, 4), (1, 2, 3)), (T, 1): ((1, 2, 3), (1, 2, 3))}
    assert still_moving(adding, plan) == [(T, 0)]
    caught_up = {(T, 0): ((2, 3, 4), (2, 3)), (T, 1): ((3, 2, 1), (1, 2, 3))}
    assert still_moving(caught_up, plan) == [(T, 0)]  # 4 not in the ISR yet
    done = {(T, 0): ((4, 3, 2), (2, 3, 4)), (T, 1): ((3, 2, 1), (1, 2, 3))}
    assert still_moving(done, plan) == []


def test_the_tools_command_writes_the_plan_and_executes_it_with_its_throttle() -> None:
    plan: Placement = {(T, 1): (2, 3, 4), (T, 0): (1, 2, 3)}
    assert reassignment_json(plan)["partitions"][0] == {
        "topic": T,
        "partition": 0,
        "replicas": [1, 2, 3],
    }
    command = reassign_command(plan, 1_000_000)
    words = shlex.split(command)
    assert json.loads(words[2]) == reassignment_json(plan)
    assert "--execute" in words and "--additional" in words
    assert words[words.index("--throttle") + 1] == "1000000"
    assert "--throttle" not in reassign_command(plan, None)


# ---- dispatch on fakes -----------------------------------------------------------------------

NAMES = {1: "kafka1", 2: "kafka2", 3: "kafka3", 4: "kafka4", 5: "kafka5"}


class FakeHistory:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []

    def write(self, type_: str, f: str, value: dict[str, Any], error: str = "") -> None:
        self.events.append((type_, f, value))

    def of(self, f: str, type_: str = "ok") -> dict[str, Any]:
        (value,) = [v for t, g, v in self.events if g == f and t == type_]
        return value


class FakeNet:
    """The common nemesis: logs as it does, stops a container by name, and heals nothing."""

    def __init__(self) -> None:
        self.history = FakeHistory()
        self.down: set[str] = set()
        self.paused: set[str] = set()
        self.state = NetworkState()
        self.topology = Topology((), "172.29.60.1")
        self.healed: list[Any] = []

    def logged(self, f: str, value: dict[str, Any], act: Any) -> None:
        self.history.write("invoke", f, value)
        try:
            extra = act()
        except Exception as e:
            self.history.write("fail", f, value, str(e))
            raise
        self.history.write("ok", f, {**value, **(extra or {})})

    def take_down(self, name: str) -> None:
        self.down.add(name)

    def start(self, names: list[str]) -> None:
        self.down -= set(names)

    def heal(self, nodes: Any = None) -> None:
        self.healed.append(nodes)

    def heal_all(self) -> None:
        self.start(sorted(self.down))


class FakeCluster:
    """Partitions on brokers 1-4 of 4 (5 a spare); a reassignment done at once unless `stuck`."""

    def __init__(self, kraft: bool = True, stuck: bool = False) -> None:
        self.kraft = kraft
        self.stuck = stuck
        self.placement: dict[int, tuple[int, ...]] = {0: (1, 2, 3), 1: (2, 3, 4)}
        self.leaders = {0: 1, 1: 2}
        self.registered = {1, 2, 3, 4}
        self.asked: list[tuple[str, Any]] = []

    def metadata(self, need_controller: bool = False, topic: str | None = None) -> Metadata:
        parts = tuple(
            PartitionState(T, p, self.leaders[p], r, r) for p, r in sorted(self.placement.items())
        )
        return Metadata({b: NAMES[b] for b in sorted(self.registered)}, 1, parts)

    def reassign(self, plan: Placement, throttle: int | None, via: str) -> str:
        self.asked.append(("reassign", (plan, throttle, via)))
        if not self.stuck:
            for (_, p), replicas in plan.items():
                self.placement[p] = replicas
                if self.leaders[p] not in replicas:
                    self.leaders[p] = replicas[0]
        return "Successfully started partition reassignments for jepsen-0\n"

    def clear_throttles(self, brokers: Iterable[int], topics: Iterable[str]) -> None:
        self.asked.append(("clear", (sorted(brokers), sorted(topics))))

    def unregister(self, broker: int, via: str) -> str:
        self.asked.append(("unregister", (broker, via)))
        self.registered.discard(broker)
        return ""

    def start_broker(self, name: str) -> Topology:
        self.asked.append(("start", name))
        self.registered.add(int(name.removeprefix("kafka")))
        return Topology((NodeHandle(name, "c", "172.29.60.25"),), "172.29.60.1")

    def registered_brokers(self) -> set[int]:
        return set(self.registered)


def nemesis_on(cluster: FakeCluster) -> tuple[KafkaNemesis, FakeNet, Membership]:
    net = FakeNet()
    membership = Membership(
        cluster,
        members={NAMES[b]: b for b in (1, 2, 3, 4)},
        spares={"kafka5": 5},
        topics=(T,),
        poll=0.01,
    )
    k = KafkaNemesis(net, cluster, T, 2, membership=membership)  # type: ignore[arg-type]
    return k, net, membership


def step(**fields: Any) -> KafkaStep:
    return KafkaStep.model_validate({"at": 1, **fields})


def test_reassign_moves_every_partition_says_where_and_leaves_its_throttle_to_the_heal() -> None:
    cluster = FakeCluster()
    k, net, m = nemesis_on(cluster)
    k.apply(step(op="reassign", throttle=1_000_000, within=5))
    ok = net.history.of("reassign")
    assert ok["moved"] == {
        f"{T}/0": {"from": ["kafka1", "kafka2", "kafka3"], "to": ["kafka2", "kafka3", "kafka4"]},
        f"{T}/1": {"from": ["kafka2", "kafka3", "kafka4"], "to": ["kafka3", "kafka4", "kafka1"]},
    }
    assert ok["completed"] and ok["ended_by"] == "completed" and ok["settled"] is False
    assert ok["nodes"] == ["kafka1", "kafka2", "kafka3", "kafka4"] and ok["throttle"] == 1_000_000
    (_, (plan, throttle, via)), *_ = cluster.asked
    assert throttle == 1_000_000 and via == "kafka1" and len(plan) == 2
    k.apply(step(op="heal"))
    assert ("clear", ([1, 2, 3, 4], [T])) in cluster.asked
    assert net.history.of("end-reassign")["out_of_sync"] == []
    k.apply(step(op="heal"))  # nothing left to clear: no second end-reassign
    assert [f for t, f, _ in net.history.events if t == "ok"].count("end-reassign") == 1


def test_a_reassign_of_the_leaders_partitions_moves_those_alone() -> None:
    cluster = FakeCluster()
    k, net, _ = nemesis_on(cluster)
    k.apply(step(op="reassign", target=["kafka2"], within=5))
    ok = net.history.of("reassign")
    assert list(ok["moved"]) == [f"{T}/1"] and ok["settled"] is True


def test_a_reassignment_past_its_bound_says_so_and_the_end_of_the_run_says_what_still_moves() -> (
    None
):
    cluster = FakeCluster(stuck=True)
    k, net, _ = nemesis_on(cluster)
    k.apply(step(op="reassign", within=0.05))
    ok = net.history.of("reassign")
    assert not ok["completed"] and ok["ended_by"] == "bound (0.05 s)"
    assert ok["still_moving"] == [f"{T}/0", f"{T}/1"] and ok["settled"] is False
    k.heal_all()
    assert "out_of_sync" in net.history.of("end-reassign")  # no throttle: nothing cleared
    assert not any(a == "clear" for a, _ in cluster.asked)


def test_remove_broker_moves_replicas_off_stops_unregisters_and_heal_all_restarts_it() -> None:
    cluster = FakeCluster(kraft=True)
    k, net, m = nemesis_on(cluster)
    k.apply(step(op="remove-broker", target=["kafka2"], label="gone", within=5))
    ok = net.history.of("remove-broker")
    assert ok["completed"] and ok["unregistered"] == "ok" and "kafka2" in net.down
    assert all(2 not in r for r in cluster.placement.values())
    assert ("unregister", (2, "kafka1")) in cluster.asked
    assert k.expected_brokers({1, 2, 3, 4}) == {1, 3, 4}  # kafka2 down, out of the cluster
    k.heal_all()
    assert "kafka2" not in net.down and k.expected_brokers({1, 2, 3, 4}) == {1, 2, 3, 4}
    assert "remove-broker" in NODE_FAULT_OPS


def test_remove_broker_in_zookeeper_mode_needs_no_unregistering() -> None:
    cluster = FakeCluster(kraft=False)
    k, net, _ = nemesis_on(cluster)
    k.apply(step(op="remove-broker", target=["kafka3"], within=5))
    assert net.history.of("remove-broker")["unregistered"].startswith("not needed (zk")
    assert not any(a == "unregister" for a, _ in cluster.asked)


def test_remove_broker_of_a_node_not_in_the_cluster_is_refused_when_it_runs() -> None:
    k, net, _ = nemesis_on(FakeCluster())
    with pytest.raises(NemesisError, match=r"remove-broker takes one broker of the cluster"):
        k.apply(step(op="remove-broker", target=["kafka5"]))


def test_add_broker_starts_the_first_spare_moves_onto_it_and_aims_later_faults_at_it() -> None:
    cluster = FakeCluster()
    k, net, m = nemesis_on(cluster)
    k.apply(step(op="add-broker", move_onto=True, throttle=2048, within=5))
    ok = net.history.of("add-broker")
    assert ok["nodes"] == ["kafka5"] and ok["registered"] and ok["completed"]
    assert ok["settled"] is False  # its throttle stays until a heal
    assert set(ok["moved"]) == {f"{T}/0", f"{T}/1"}
    assert all(5 in r for r in cluster.placement.values())
    assert net.topology.names == ("kafka5",)  # the nemesis can aim at it now
    assert k.expected_brokers({1, 2, 3, 4}) == {1, 2, 3, 4, 5} and m.spares == {}
    with pytest.raises(NemesisError, match=r"spares left: none"):
        k.apply(step(op="add-broker"))


def test_a_nemesis_without_membership_says_so() -> None:
    net = FakeNet()
    k = KafkaNemesis(net, FakeCluster(), T, 1)  # type: ignore[arg-type]
    with pytest.raises(NemesisError, match="cannot change the cluster's membership"):
        k.apply(step(op="reassign"))
    assert k.expected_brokers({1, 2, 3}) == {1, 2, 3}


def test_a_throttle_the_end_of_the_run_cannot_clear_is_a_fail_in_the_history_not_a_crash() -> None:
    cluster = FakeCluster()
    k, net, _ = nemesis_on(cluster)
    k.apply(step(op="reassign", throttle=4096, within=5))

    def refuse(brokers: Iterable[int], topics: Iterable[str]) -> None:
        raise RuntimeError("broker 4 not available")

    cluster.clear_throttles = refuse  # type: ignore[method-assign]
    k.heal_all()  # no raise: the recovery goes on
    fails = [v for t, f, v in net.history.events if t == "fail" and f == "end-reassign"]
    assert len(fails) == 1
    with pytest.raises(RuntimeError, match="broker 4"):
        k.apply(step(op="heal"))  # a heal step that cannot clear it fails, said
