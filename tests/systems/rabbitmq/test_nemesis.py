"""A RabbitMQ step's queue roles (leader, followers) and @labels, resolved as the step runs."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from nemesis.containers import Nemesis, NemesisError
from systems.client_path import ClientPath
from systems.rabbitmq.nemesis import StepTargets, apply_step
from systems.rabbitmq.scenario import NemesisStep


class Leaders:
    """list_queues' answers, one per call: the leader moves between steps."""

    def __init__(self, *leaders: str) -> None:
        self.leaders = list(leaders)
        self.asked = 0

    def queue_leader(self, queue: str) -> tuple[str, list[str]]:
        assert queue == "q"
        self.asked += 1
        return self.leaders.pop(0), ["rabbit1", "rabbit2", "rabbit3"]


class History:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def write(self, type_: str, f: str, **fields: Any) -> None:
        self.events.append({"type": type_, "f": f, **fields})


def step(**fields: Any) -> NemesisStep:
    return NemesisStep.model_validate({"at": 1, **fields})


def test_roles_resolve_when_the_step_runs_and_labels_keep_what_they_named() -> None:
    net, control, targets = (
        SimpleNamespace(history=History()),
        Leaders("rabbit1", "rabbit2"),
        StepTargets("q"),
    )
    kill = targets.resolve(net, control, step(op="kill", nodes=["leader"], label="old"))  # type: ignore[arg-type]
    assert kill.nodes == ["rabbit1"]
    cut = targets.resolve(net, control, step(op="cut", **{"from": ["leader"], "to": ["followers"]}))  # type: ignore[arg-type]
    assert (cut.from_, cut.to) == (["rabbit2"], ["rabbit1", "rabbit3"])  # one answer per step
    start = targets.resolve(net, control, step(op="start", nodes=["@old"]))  # type: ignore[arg-type]
    assert start.nodes == ["rabbit1"] and control.asked == 2
    plain = step(op="kill", nodes=["rabbit3"])
    assert targets.resolve(net, control, plain) is plain  # type: ignore[arg-type]
    (first, second, third) = net.history.events
    # As Kafka's resolve events, which coverage reads: roles and nodes by target, from and to.
    assert first["value"] == {
        "op": "kill",
        "queue": "q",
        "roles": {"target": "leader"},
        "nodes": {"target": ["rabbit1"]},
    }
    assert second["value"]["roles"] == {"from": "leader", "to": "followers"}
    assert third["value"]["roles"] == {"target": "@old"}


def test_a_leader_nobody_can_name_stops_the_step_with_one_line() -> None:
    class Silent:
        def queue_leader(self, queue: str) -> tuple[str, list[str]]:
            raise RuntimeError("no node answered list_queues")

    with pytest.raises(NemesisError, match="cannot find the leader of q: no node answered"):
        StepTargets("q").resolve(
            SimpleNamespace(history=None), Silent(), step(op="kill", nodes=["leader"])
        )  # type: ignore[arg-type]


def test_drawn_targets_are_drawn_anew_each_step_and_again_from_the_same_seed() -> None:
    def draws(seed: int) -> tuple[list[list[str]], list[dict[str, Any]]]:
        net = SimpleNamespace(history=History())
        nodes = ["rabbit1", "rabbit2", "rabbit3"]
        targets = StepTargets("q", nodes=nodes, seed=seed)
        picked = []
        for _ in range(12):
            kill = targets.resolve(net, Leaders(), step(op="kill", nodes=["random-node"]))  # type: ignore[arg-type]
            split = targets.resolve(net, Leaders(), step(op="partition", shape="random-halves"))  # type: ignore[arg-type]
            assert split.shape is None and sorted(n for g in split.groups for n in g) == nodes
            assert len(split.groups[0]) == 1, "3 nodes: 1 against 2"
            picked += [kill.nodes, split.groups[0]]
        return picked, net.history.events

    picked, events = draws(7)
    assert draws(7)[0] == picked, "a replay with the seed draws the same"
    assert draws(8)[0] != picked
    assert len({tuple(p) for p in picked[0::2]}) > 1, "a new node each step"
    assert events[0]["value"]["roles"] == {"target": "random-node"}
    assert events[0]["value"]["nodes"] == {"target": picked[0]}
    assert events[1]["value"]["roles"] == {"groups": "random-halves"}
    assert events[1]["value"]["groups"][0] == picked[1]


def test_a_fixed_split_and_a_label_of_a_drawn_one() -> None:
    targets = StepTargets("q", nodes=["rabbit1", "rabbit2", "rabbit3"])
    net = SimpleNamespace(history=None)
    halves = targets.resolve(net, Leaders(), step(op="partition", shape="halves", label="cut"))  # type: ignore[arg-type]
    assert halves.groups == [["rabbit1"], ["rabbit2", "rabbit3"]]
    heal = targets.resolve(net, Leaders(), step(op="heal", nodes=["@cut"]))  # type: ignore[arg-type]
    assert heal.nodes == ["rabbit1"]


class Proxy:
    """A Toxiproxy that records the toxics it is given, one proxy per node."""

    def __init__(self) -> None:
        self.proxies = {n: f"127.0.0.1:{9000 + i}" for i, n in enumerate(("rabbit1", "rabbit2"))}
        self.asked: list[tuple[Any, ...]] = []

    def add(self, node: str, toxic: Any) -> None:
        self.asked.append(("add", node, toxic.name, toxic.type))

    def remove(self, node: str, name: str) -> None:
        self.asked.append(("remove", node, name))

    def reset_connections(self, node: str) -> None:
        self.asked.append(("reset", node))

    def undelivered(self) -> int:
        return 0


def test_the_clients_path_ops_go_to_the_runs_proxy_and_need_one() -> None:
    net = Nemesis.__new__(Nemesis)  # only its history and client_path are asked
    net.history = None
    net.client_path = None
    with pytest.raises(NemesisError, match="no proxy on the clients' path"):
        apply_step(net, Leaders(), step(op="delay", nodes=["rabbit1"], delay_ms=500))
    proxy = Proxy()
    net.client_path = ClientPath(proxy, net.logged)  # type: ignore[arg-type]
    apply_step(net, Leaders(), step(op="delay", nodes=["rabbit1"], delay_ms=500))
    apply_step(net, Leaders(), step(op="hold", nodes=["rabbit2"], both_ways=True))
    apply_step(net, Leaders(), step(op="reset-clients", nodes=["rabbit1"]))
    assert proxy.asked == [
        ("add", "rabbit1", "delay-up", "latency"),
        ("add", "rabbit2", "hold-up", "latency"),
        ("add", "rabbit2", "hold-down", "latency"),
        ("reset", "rabbit1"),
    ]


def test_a_clients_path_op_is_refused_beside_a_load_balancer() -> None:
    from systems.registry import parse_scenario

    text = """
id: lb-delay
expect: safe
cluster:
  {system: rabbitmq, queue_type: quorum, partition_handling: pause_minority, load_balancer: true}
workload:
  exchange: x
  queues: [q]
  publishers: [{id: A, count: 10}]
  consumers: [{queue: q}]
nemesis: [{at: 1, op: delay, target: [rabbit1], delay_ms: 100}]
"""
    with pytest.raises(Exception, match="HAProxy alone"):
        parse_scenario(text)


def test_a_label_of_named_nodes_is_what_a_later_steps_label_names() -> None:
    net, control, targets = SimpleNamespace(history=History()), Leaders(), StepTargets("q")
    full = step(op="kill", nodes=["rabbit3"], label="full")
    assert targets.resolve(net, control, full) is full  # type: ignore[arg-type]
    start = targets.resolve(net, control, step(op="start", nodes=["@full"]))  # type: ignore[arg-type]
    assert start.nodes == ["rabbit3"] and control.asked == 0


def test_a_label_whose_step_was_not_applied_is_a_nemesis_error() -> None:
    net, control, targets = SimpleNamespace(history=History()), Leaders(), StepTargets("q")
    with pytest.raises(NemesisError, match="@gone names no node"):
        targets.resolve(net, control, step(op="start", nodes=["@gone"]))  # type: ignore[arg-type]
