"""The Kafka nemesis's steps on fakes of the network and of the cluster's metadata: roles
resolved as each fault starts, elections, leader placement, clients paused and resumed, and
rolling restarts."""

from __future__ import annotations

import signal
from types import SimpleNamespace
from typing import Any
from unittest.mock import patch

import pytest

from nemesis.clients import ClientGroups
from nemesis.containers import NemesisError
from nemesis.network import NetworkState
from systems.kafka.nemesis import KafkaNemesis
from systems.kafka.targets import Metadata, PartitionState


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


def test_a_nemesis_without_the_runs_clients_refuses_a_client_step() -> None:
    n = KafkaNemesis(FakeNet(), FakeControl(leaders=[1]), "t", 1)  # type: ignore[arg-type]
    with pytest.raises(NemesisError, match="cannot reach the workload's clients"):
        n.apply(step(op="pause-client", client="P1"))


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
