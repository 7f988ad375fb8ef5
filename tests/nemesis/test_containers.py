"""The nemesis's own logic, apart from any engine: what it does when Docker refuses a fault."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import docker.errors
import pytest
from docker.models.containers import Container

from contract.history import HistoryWriter
from contract.topology import NodeHandle, Topology
from nemesis.containers import FREEZE_ATTEMPTS, Nemesis, NemesisError, freeze

RUNC_REFUSAL = "OCI runtime pause failed: unable to freeze: unknown"


class Freezer:
    """A container whose pause fails the first `refusals` times, as runc's does on cgroup v1."""

    def __init__(self, refusals: int, explanation: str = RUNC_REFUSAL) -> None:
        self.refusals = refusals
        self.explanation = explanation
        self.calls = 0

    def pause(self) -> None:
        self.calls += 1
        if self.calls <= self.refusals:
            raise docker.errors.APIError("500 Server Error", explanation=self.explanation)


def as_container(fake: Any) -> Container:
    return cast(Container, fake)


def test_a_pause_refused_by_the_freezer_is_tried_again_and_counted() -> None:
    node = Freezer(refusals=1)
    assert freeze(as_container(node), "rabbit2") == 2
    assert node.calls == 2


def test_a_pause_the_freezer_keeps_refusing_is_one_line_after_bounded_attempts() -> None:
    node = Freezer(refusals=99)
    with pytest.raises(NemesisError, match="cannot pause rabbit2: .*unable to freeze"):
        freeze(as_container(node), "rabbit2")
    assert node.calls == FREEZE_ATTEMPTS


def test_other_refusals_are_not_retried() -> None:
    node = Freezer(refusals=1, explanation="Container abc is not running")
    with pytest.raises(NemesisError, match="is not running"):
        freeze(as_container(node), "rabbit2")
    assert node.calls == 1


class Engine:
    """Just enough of a Docker client for the nemesis to find each node's container."""

    def __init__(self, nodes: dict[str, Freezer]) -> None:
        self.containers = self
        self.nodes = nodes

    def get(self, container: str) -> Freezer:
        return self.nodes[container]


def test_the_pause_ok_records_which_nodes_needed_more_than_one_freeze(tmp_path: Path) -> None:
    nodes = {"rabbit1": Freezer(refusals=0), "rabbit2": Freezer(refusals=2)}
    topology = Topology(
        tuple(NodeHandle(n, n, f"10.0.0.{i}") for i, n in enumerate(nodes, 1)), "10.0.0.254"
    )
    history = HistoryWriter(tmp_path, "nemesis", "rabbitmq")
    nemesis = Nemesis(topology, "unused", history, client=cast(Any, Engine(nodes)))
    nemesis.pause(["rabbit1", "rabbit2"])
    assert nemesis.paused == {"rabbit1", "rabbit2"}
    ok = json.loads((tmp_path / "nemesis.jsonl").read_text().splitlines()[-1])
    assert (ok["type"], ok["f"]) == ("ok", "pause")
    assert ok["value"] == {"nodes": ["rabbit1", "rabbit2"], "freeze_attempts": {"rabbit2": 3}}


class Namespaces:
    """A Docker client that records which container each helper joined."""

    def __init__(self) -> None:
        self.containers = self
        self.joined: list[str] = []

    def run(self, image: str, **kwargs: Any) -> None:
        self.joined.append(kwargs["network_mode"])


def test_a_replaced_container_gets_the_nodes_rules_and_a_dead_one_counts_as_down() -> None:
    def topology(generation: int) -> Topology:
        nodes = ("rabbit1", "rabbit2")
        handles = (NodeHandle(n, f"{n}-{generation}", f"10.0.0.{i}") for i, n in enumerate(nodes))
        return Topology(tuple(handles), "10.0.0.254")

    engine = Namespaces()
    nemesis = Nemesis(topology(0), "tools", client=cast(Any, engine))
    nemesis.cut(["rabbit1"], ["rabbit2"])  # rabbit2 drops what rabbit1 sends: its rules
    nemesis.replaced("rabbit2", topology(1), running=False)
    assert nemesis.down == {"rabbit2"} and engine.joined == ["container:rabbit2-0"]
    nemesis.replaced("rabbit2", topology(2))
    assert not nemesis.down and engine.joined[-1] == "container:rabbit2-2"
    nemesis.replaced("rabbit1", topology(3))  # no rules of its own: nothing to put back
    assert engine.joined[-1] == "container:rabbit2-2"
    assert nemesis.topology.node("rabbit1").container == "rabbit1-3"
