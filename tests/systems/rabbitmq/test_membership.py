"""RabbitMQ's membership steps against a faked cluster: the exact rabbitmqctl and
rabbitmq-queues commands each issues, in order and on which node, per release where they
differ; what the history says is out; the refusals before anything changes; and the end of a
run putting every node and queue member back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from compose.cli import ComposeError
from contract.history import HistoryWriter
from contract.topology import NodeHandle, Topology
from nemesis.containers import Nemesis, NemesisError
from systems.rabbitmq.membership import Membership
from systems.rabbitmq.nemesis import StepTargets, apply_step
from systems.rabbitmq.run import recovery_members
from systems.rabbitmq.scenario import NemesisStep

NODES = ("rabbit1", "rabbit2", "rabbit3")


class FakeCluster:
    """Three nodes, each quorum queue with a member on each, as the CLI changes them: a
    forgotten node's members are removed by forget_cluster_node itself (as 3.10's and 4.x's
    CLI do). `refuse`: the commands that fail, as (tool, node, command)."""

    def __init__(self, release: str = "4.3.6", refuse: tuple[tuple[str, ...], ...] = ()) -> None:
        self._release = release
        self.refuse = set(refuse)
        self.calls: list[tuple[str, ...]] = []
        self.cluster = set(NODES)
        self.running = set(NODES)
        self.members = {"q": list(NODES), "q.dlq": list(NODES)}
        self.membership = Membership(self, list(NODES))

    def _call(self, tool: str, node: str, *args: str) -> None:
        self.calls.append((tool, node, *args))
        if (tool, node, args[0]) in self.refuse:
            raise ComposeError(f"{tool} {args[0]} on {node}: refused")

    def rabbitmqctl(self, node: str, *args: str, timeout: float = 60) -> str:
        self._call("rabbitmqctl", node, *args)
        command, target = args[0], (args[1].removeprefix("rabbit@") if len(args) > 1 else node)
        if command == "stop_app":
            self.running.discard(node)
        elif command == "forget_cluster_node":
            assert target not in self.running, "RabbitMQ refuses to forget a running node"
            self.cluster.discard(target)
            for members in self.members.values():
                members[:] = [m for m in members if m != target]
        elif command == "join_cluster":
            self.cluster.add(node)
        elif command == "start_app":
            self.running.add(node)
        return ""

    def rabbitmq_queues(self, node: str, *args: str, timeout: float = 60) -> str:
        self._call("rabbitmq-queues", node, *args)
        command, queue, target = args[0], args[1], args[2].removeprefix("rabbit@")
        members = self.members[queue]
        if command == "delete_member":
            members.remove(target)
        else:
            members.append(target)
        return ""

    def running_nodes(self, node: str) -> list[str]:
        if node not in self.running:
            raise ComposeError(f"rabbitmqctl cluster_status on {node}: not running")
        return [f"rabbit@{n}" for n in sorted(self.running & self.cluster)]

    def quorum_members(self) -> dict[str, list[str]]:
        return {q: list(m) for q, m in self.members.items()}

    def queue_leader(self, queue: str) -> tuple[str, list[str]]:
        return self.members[queue][0], list(self.members[queue])

    def release(self) -> str | None:
        return self._release


def nemesis(tmp_path: Path) -> Nemesis:
    topology = Topology(
        tuple(NodeHandle(n, n, f"10.0.0.{i}") for i, n in enumerate(NODES, 1)), "10.0.0.254"
    )
    history = HistoryWriter(tmp_path, "nemesis", "rabbitmq")
    return Nemesis(topology, "unused", history, client=cast(Any, object()))


def events(tmp_path: Path) -> list[tuple[str, str, dict[str, Any]]]:
    rows = [json.loads(line) for line in (tmp_path / "nemesis.jsonl").read_text().splitlines()]
    return [(r["type"], r["f"], r["value"]) for r in rows]


def run(net: Nemesis, cluster: FakeCluster, op: str, *target: str) -> None:
    step = NemesisStep.model_validate({"at": 1, "op": op, "target": list(target)})
    apply_step(net, cast(Any, cluster), step, StepTargets("q", nodes=list(NODES)))


def test_forget_and_add_the_queue_leader_on_khepri(tmp_path: Path) -> None:
    cluster, net = FakeCluster("4.3.6"), nemesis(tmp_path)
    run(net, cluster, "forget-node", "leader")
    assert cluster.calls == [
        ("rabbitmqctl", "rabbit1", "stop_app"),
        ("rabbitmqctl", "rabbit2", "forget_cluster_node", "rabbit@rabbit1"),
    ]
    assert cluster.members["q"] == ["rabbit2", "rabbit3"]  # the CLI removed its members
    cluster.calls.clear()
    run(net, cluster, "add-node")  # none named: every forgotten node
    assert cluster.calls == [
        ("rabbitmqctl", "rabbit1", "reset"),
        ("rabbitmqctl", "rabbit1", "join_cluster", "rabbit@rabbit2"),
        ("rabbitmqctl", "rabbit1", "start_app"),
    ]
    assert cluster.cluster == set(NODES) and cluster.membership.forgotten == set()
    said = events(tmp_path)
    assert said[0][:2] == ("info", "resolve")
    assert said[1] == ("invoke", "forget-node", {"nodes": ["rabbit1"], "via": "rabbit2"})
    assert said[2][2]["out"] == ["rabbit1", "q@rabbit1", "q.dlq@rabbit1"]
    # Back in the cluster, its queue members are not: that is grow-queue's.
    assert said[-1][:2] == ("ok", "add-node")
    assert said[-1][2]["out"] == ["q@rabbit1", "q.dlq@rabbit1"]


@pytest.mark.parametrize("release", ["3.10.8", "4.0.9"])
def test_on_mnesia_a_reset_the_forgotten_node_refuses_is_forced(
    tmp_path: Path, release: str
) -> None:
    cluster = FakeCluster(release, refuse=(("rabbitmqctl", "rabbit3", "reset"),))
    net = nemesis(tmp_path)
    run(net, cluster, "forget-node", "rabbit3")
    cluster.calls.clear()
    run(net, cluster, "add-node", "rabbit3")
    assert cluster.calls == [
        ("rabbitmqctl", "rabbit3", "reset"),
        ("rabbitmqctl", "rabbit3", "force_reset"),
        ("rabbitmqctl", "rabbit3", "join_cluster", "rabbit@rabbit1"),
        ("rabbitmqctl", "rabbit3", "start_app"),
    ]


def test_on_khepri_a_refused_reset_is_the_steps_error_never_forced(tmp_path: Path) -> None:
    cluster = FakeCluster("4.3.6", refuse=(("rabbitmqctl", "rabbit3", "reset"),))
    net = nemesis(tmp_path)
    run(net, cluster, "forget-node", "rabbit3")
    with pytest.raises(ComposeError, match="reset on rabbit3: refused"):
        run(net, cluster, "add-node", "rabbit3")
    assert ("rabbitmqctl", "rabbit3", "force_reset") not in cluster.calls
    assert events(tmp_path)[-1][:2] == ("fail", "add-node")
    assert cluster.membership.forgotten == {"rabbit3"}


def test_shrink_and_grow_the_leaders_member(tmp_path: Path) -> None:
    cluster, net = FakeCluster(), nemesis(tmp_path)
    run(net, cluster, "shrink-queue", "leader")
    assert cluster.calls == [
        ("rabbitmq-queues", "rabbit2", "delete_member", "q", "rabbit@rabbit1"),
        ("rabbitmq-queues", "rabbit2", "delete_member", "q.dlq", "rabbit@rabbit1"),
    ]
    cluster.calls.clear()
    run(net, cluster, "grow-queue", "rabbit1")
    assert cluster.calls == [
        ("rabbitmq-queues", "rabbit2", "add_member", "q", "rabbit@rabbit1"),
        ("rabbitmq-queues", "rabbit2", "add_member", "q.dlq", "rabbit@rabbit1"),
    ]
    shrink = [v for t, f, v in events(tmp_path) if (t, f) == ("invoke", "shrink-queue")]
    assert shrink == [{"nodes": ["rabbit1"], "queues": ["q", "q.dlq"], "via": "rabbit2"}]
    assert events(tmp_path)[-1][2]["out"] == []


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        (
            [("forget-node", ["rabbit1", "rabbit2"]), ("forget-node", ["rabbit3"])],
            "forget-node: it would leave no node in the cluster",
        ),
        ([("forget-node", ["rabbit1"]), ("forget-node", ["rabbit1"])], "already out"),
        ([("add-node", ["rabbit2"])], "add-node: rabbit2 is a member of the cluster"),
        ([("add-node", [])], "add-node: no node is out of the cluster"),
        (
            [("shrink-queue", ["rabbit1", "rabbit2"]), ("shrink-queue", ["rabbit3"])],
            "shrink-queue: q would be left no member (its members: rabbit3)",
        ),
        (
            [("forget-node", ["rabbit2"]), ("grow-queue", ["rabbit2"])],
            "grow-queue: rabbit2 is out of the cluster (add-node it first)",
        ),
    ],
)
def test_a_step_that_cannot_be_is_refused_in_one_line_before_it_changes_anything(
    tmp_path: Path, steps: list[tuple[str, list[str]]], message: str
) -> None:
    cluster, net = FakeCluster(), nemesis(tmp_path)
    for op, target in steps[:-1]:
        run(net, cluster, op, *target)
    before = len(cluster.calls)
    op, target = steps[-1]
    with pytest.raises(NemesisError) as e:
        run(net, cluster, op, *target)
    assert message in str(e.value) and "\n" not in str(e.value)
    assert cluster.calls[before:] == []


def test_heal_all_puts_every_node_and_member_back_and_says_what_it_could_not(
    tmp_path: Path,
) -> None:
    cluster, net = FakeCluster(), nemesis(tmp_path)
    net.system_heals.append(lambda: cluster.membership.restore(net))
    run(net, cluster, "shrink-queue", "rabbit3")
    run(net, cluster, "forget-node", "rabbit1")
    net.heal_all()
    assert cluster.cluster == set(NODES)
    assert {q: sorted(m) for q, m in cluster.members.items()} == {
        "q": list(NODES),
        "q.dlq": list(NODES),
    }
    assert cluster.membership.whole() and cluster.membership.out() == []
    healed = [f for t, f, _ in events(tmp_path) if t == "ok"][-2:]
    assert healed == ["add-node", "grow-queue"]
    calls = len(cluster.calls)
    net.heal_all()  # idempotent: nothing left to put back, nothing asked
    assert cluster.calls[calls:] == []

    # A node that cannot come back is said, and the recovery waits for the others alone.
    stuck = FakeCluster(refuse=(("rabbitmqctl", "rabbit2", "join_cluster"),))
    net2 = nemesis(tmp_path / "2")
    run(net2, stuck, "forget-node", "rabbit2")
    left = ["rabbit2", "q@rabbit2", "q.dlq@rabbit2"]
    assert stuck.membership.restore(net2) == left
    # No grow onto a node out of the cluster: the queues are whole among the members left.
    assert not any(c[2] == "add_member" for c in stuck.calls) and stuck.membership.whole()
    assert events(tmp_path / "2")[-2:][0][:2] == ("fail", "add-node")
    assert events(tmp_path / "2")[-1] == ("info", "membership", {"not_restored": left})
    assert recovery_members(NODES, stuck.membership.forgotten) == ("rabbit1", "rabbit3")


def test_a_forget_rabbitmq_refuses_starts_the_node_it_stopped_again(tmp_path: Path) -> None:
    # RabbitMQ 4.3 refuses to forget a node whose quorum queue members it cannot remove ("failed
    # to shrink some entities"): the node must not stay a member with its app stopped.
    refused = (("rabbitmqctl", "rabbit2", "forget_cluster_node"),)
    cluster, net = FakeCluster("4.3.6", refuse=refused), nemesis(tmp_path)
    with pytest.raises(ComposeError, match="refused"):
        run(net, cluster, "forget-node", "leader")
    assert cluster.calls[-1] == ("rabbitmqctl", "rabbit1", "start_app")
    assert cluster.running == set(NODES) and cluster.membership.forgotten == set()
    assert events(tmp_path)[-1][:2] == ("fail", "forget-node")
