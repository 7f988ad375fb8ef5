"""A RabbitMQ step's queue roles (leader, followers) and @labels, resolved as the step runs."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from nemesis.containers import NemesisError
from systems.rabbitmq.nemesis import QueueTargets
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
        QueueTargets("q"),
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
        QueueTargets("q").resolve(
            SimpleNamespace(history=None), Silent(), step(op="kill", nodes=["leader"])
        )  # type: ignore[arg-type]
