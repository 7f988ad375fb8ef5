"""The KRaft controller quorum's ops: kafka-metadata-quorum's answers read (3.9's and 4.x's), and
add-controller and remove-controller dispatched by the nemesis on a fake of the cluster whose
quorum answers as Kafka's tool does: an observer lags until asked again, a leader resigns when
it is removed, a refusal comes with the tool's log lines and stack trace around it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contract.topology import NodeHandle, Topology
from nemesis.containers import NemesisError
from systems.kafka.nemesis import NODE_FAULT_OPS, KafkaNemesis
from systems.kafka.quorum import (
    Quorum,
    QuorumError,
    ToolRun,
    parse_replication,
    parse_status,
)
from systems.kafka.scenario import KafkaStep
from systems.kafka.targets import Metadata
from tests.systems.kafka.test_membership import FakeNet

T = "jepsen"
CONTROLLERS = {f"controller{i}": 100 + i for i in (1, 2, 3, 4)}
WARN = (
    "[2026-05-01 10:00:00,123] WARN These configurations '[log.dirs, process.roles]' were "
    "supplied but are not used yet. (org.apache.kafka.clients.admin.AdminClientConfig)"
)
STATUS_39 = """ClusterId:              MkU3OEVBNTcwNTJENDM2Qg
LeaderId:               102
LeaderEpoch:            7
HighWatermark:          1234
MaxFollowerLag:         0
MaxFollowerLagTimeMs:   0
CurrentVoters:          [{"id": 101, "directoryId": "ILZ5MPTeRWakmJu99uBJCA", "endpoints": \
["CONTROLLER://controller1:9093"]}, {"id": 102, "directoryId": null, "endpoints": \
["CONTROLLER://controller2:9093"]}]
CurrentObservers:       [{"id": 1, "directoryId": "3Db5QLSqSZieL3rJBUUegA"}]
"""


def test_the_status_is_read_from_39s_answer_and_4xs() -> None:
    status = parse_status(WARN + "\n" + STATUS_39)
    assert (status.leader_id, status.leader_epoch) == (102, 7)
    assert [(v.node_id, v.directory_id) for v in status.voters] == [
        (101, "ILZ5MPTeRWakmJu99uBJCA"),
        (102, None),  # 3.9 writes null for a voter without one
    ]
    assert status.observers[0].node_id == 1 and status.voter_ids == {101, 102}
    # 4.x leaves the key out; releases before KIP-853 listed bare ids.
    four = STATUS_39.replace('"directoryId": null, ', "")
    assert parse_status(four).voter(102) is not None
    assert parse_status(four).voter(102).directory_id is None  # type: ignore[union-attr]
    bare = "LeaderId: 1\nLeaderEpoch: 2\nCurrentVoters: [1, 2, 3]\nCurrentObservers: []\n"
    assert parse_status(bare).voter_ids == {1, 2, 3}
    with pytest.raises(QuorumError, match="describe --status said 'Timed out"):
        parse_status("Timed out waiting for a node assignment. Call: describeMetadataQuorum")


def test_the_replication_table_gives_each_replicas_role_and_lag() -> None:
    table = """NodeId  DirectoryId             LogEndOffset  Lag  LastFetchTimestamp  LastCaughtUpTimestamp  Status
102     b-DwmhtOheTqZzPoh52kfA  1234          0    1714557600000       1714557600000          Leader
101     ILZ5MPTeRWakmJu99uBJCA  1230          4    1714557599000       1714557599000          Follower
104     g42deArWBTRM5A1yuVpMCg  800           434  1714557599000       -1                     Observer
"""  # noqa: E501
    rows = parse_replication(WARN + "\n" + table)
    assert [(r.node_id, r.role, r.lag) for r in rows] == [
        (102, "Leader", 0),
        (101, "Follower", 4),
        (104, "Observer", 434),
    ]
    assert rows[2].directory_id == "g42deArWBTRM5A1yuVpMCg"
    with pytest.raises(QuorumError, match="describe --replication said"):
        parse_replication("Error while describing")


def test_the_tool_says_its_answer_or_kafkas_refusal_in_a_line() -> None:
    assert ToolRun(0, "Removed KRaft controller 101 with directory id X\n", WARN).said == (
        "Removed KRaft controller 101 with directory id X"
    )
    refused = ToolRun(
        1,
        "",
        f"{WARN}\norg.apache.kafka.common.errors.DuplicateVoterException: The voter id for "
        "ReplicaKey(id=104) is already part of the set of voters.\n"
        "java.util.concurrent.ExecutionException: ...\n\tat org.apache.kafka.Foo.bar(Foo.java:1)\n",
    )
    assert refused.said.startswith("org.apache.kafka.common.errors.DuplicateVoterException")
    assert ToolRun(137, "", "").said == "exit code 137"


# ---- the ops, on a fake quorum -------------------------------------------------------------


class FakeQuorumCluster:
    """Three dedicated controllers (101-103) formed as a dynamic quorum, controller4 a spare.
    Kafka's side: its voters by id with their directory ids, an observer for each controller
    started and not added (behind the leader until the describe after its start), and the
    leader (the lowest voter when the leader is removed). What the harness asked, in order, in
    `asked`."""

    def __init__(self, lag_refusals: int = 1, refusal: str | None = None) -> None:
        self.voters = ["controller1", "controller2", "controller3"]  # QuorumControl.voters
        self.kafka = {101: "dir-101", 102: "dir-102", 103: "dir-103"}
        self.observers: dict[int, tuple[str, int]] = {}
        self.leader, self.epoch = 101, 1
        self.lag_refusals = lag_refusals
        self.refusal = refusal
        self.unanswered = 0  # describes to fail first (an election under way)
        self.asked: list[tuple[Any, ...]] = []

    def _status(self) -> str:
        voters = [{"id": i, "directoryId": d} for i, d in sorted(self.kafka.items())]
        observers = [{"id": i, "directoryId": d} for i, (d, _) in sorted(self.observers.items())]
        return (
            f"ClusterId: X\nLeaderId: {self.leader}\nLeaderEpoch: {self.epoch}\n"
            f"CurrentVoters: {json.dumps(voters)}\nCurrentObservers: {json.dumps(observers)}\n"
        )

    def _replication(self) -> str:
        rows = ["NodeId DirectoryId LogEndOffset Lag LastFetchTimestamp LastCaughtUpTimestamp "]
        rows[0] += "Status"
        for i, d in sorted(self.kafka.items()):
            role = "Leader" if i == self.leader else "Follower"
            rows.append(f"{i} {d} 100 0 1 1 {role}")
        for i, (d, lag) in sorted(self.observers.items()):
            rows.append(f"{i} {d} {100 - lag} {lag} 1 -1 Observer")
            self.observers[i] = (d, 0)  # caught up by the next ask
        return "\n".join(rows) + "\n"

    def describe_quorum(self, via: str, bootstrap: list[str], replication: bool = False) -> ToolRun:
        self.asked.append(("describe", via, tuple(bootstrap)))
        if self.unanswered:
            self.unanswered -= 1
            return ToolRun(1, "", "org.apache.kafka.common.errors.TimeoutException: Timed out")
        return ToolRun(0, self._replication() if replication else self._status(), WARN)

    def add_controller(self, node: str, bootstrap: list[str]) -> ToolRun:
        self.asked.append(("add", node, tuple(bootstrap)))
        node_id = CONTROLLERS[node]
        if self.refusal:
            return ToolRun(1, "", f"{WARN}\n{self.refusal}\n\tat org.apache.kafka.X.y(X.java:9)")
        if self.lag_refusals:
            self.lag_refusals -= 1
            lagging = (
                "org.apache.kafka.common.errors.RequestTimedOutException: Aborted add voter "
                f"operation for ReplicaKey(id={node_id}) since it is lagging behind"
            )
            return ToolRun(1, "", f"{WARN}\n{lagging}\n")
        directory, _ = self.observers.pop(node_id)
        self.kafka[node_id] = directory
        return ToolRun(0, f"Added controller {node_id} with directory id {directory}\n", WARN)

    def remove_controller(
        self, via: str, bootstrap: list[str], node_id: int, directory_id: str
    ) -> ToolRun:
        self.asked.append(("remove", node_id, directory_id, via))
        if self.refusal:
            return ToolRun(1, "", self.refusal)
        assert self.kafka.get(node_id) == directory_id, "removed by another directory id"
        del self.kafka[node_id]
        if self.leader == node_id:  # it resigns once the removal commits
            self.leader, self.epoch = min(self.kafka), self.epoch + 1
        return ToolRun(
            0, f"Removed KRaft controller {node_id} with directory id {directory_id}", ""
        )

    def start_controller(self, name: str) -> Topology:
        self.asked.append(("start", name))
        # A spare formats a directory of its own; a removed controller keeps the one it had.
        node_id = CONTROLLERS[name]
        self.observers[node_id] = (f"dir-{node_id}", 500)
        return Topology((NodeHandle(name, "c", "172.29.60.44"),), "172.29.60.1")

    def stop_controller(self, name: str) -> Topology:
        self.asked.append(("stop", name))
        return Topology((), "172.29.60.1")

    def metadata(self, need_controller: bool = False, topic: str | None = None) -> Metadata:
        names = {i: n for n, i in CONTROLLERS.items()}
        brokers = {1: "kafka1", 2: "kafka2", 3: "kafka3", self.leader: names[self.leader]}
        return Metadata(brokers, self.leader, (), tuple(self.voters))


def nemesis_on(
    cluster: FakeQuorumCluster, pre_vote: bool = True, brokers_too: set[str] | None = None
) -> tuple[KafkaNemesis, FakeNet, Quorum]:
    net = FakeNet()
    q = Quorum(
        cluster,
        ids=dict(CONTROLLERS),
        spares=["controller4"],
        brokers_too=brokers_too or set(),
        pre_vote=pre_vote,
        poll=0,
        sleep=lambda _s: None,
    )
    k = KafkaNemesis(net, cluster, T, 1, quorum=q)  # type: ignore[arg-type]
    return k, net, q


def step(**fields: Any) -> KafkaStep:
    return KafkaStep.model_validate({"at": 1, **fields})


def test_add_controller_starts_the_spare_waits_for_it_to_catch_up_and_adds_it() -> None:
    cluster = FakeQuorumCluster(lag_refusals=1)
    k, net, q = nemesis_on(cluster)
    k.apply(step(op="add-controller", within=30))
    ok = net.history.of("add-controller")
    assert ok["nodes"] == ["controller4"] and ok["settled"] is True and ok["out"] == []
    assert ok["voters_before"] == ["controller1", "controller2", "controller3"]
    assert ok["voters_after"] == ["controller1", "controller2", "controller3", "controller4"]
    assert ok["directory_ids"]["controller4"] == "dir-104"
    assert ok["said"] == "Added controller 104 with directory id dir-104"
    assert ok["attempts"] == 2 and "lagging behind" in ok["refused"][0]  # asked again
    adds = [a for a in cluster.asked if a[0] == "add"]
    # Run inside the new controller (its own properties), bootstrapped on the voters.
    assert adds[0] == ("add", "controller4", ("controller1", "controller2", "controller3"))
    # Not asked before it caught up: the describe after its start showed it 500 behind.
    first_add = cluster.asked.index(adds[0])
    assert ("start", "controller4") in cluster.asked[:first_add]
    assert cluster.voters[-1] == "controller4" and q.spares == []
    assert net.topology.names == ("controller4",)  # the nemesis can aim at it now
    assert "add-controller" in NODE_FAULT_OPS and "remove-controller" in NODE_FAULT_OPS
    with pytest.raises(NemesisError, match="needs a spare controller .* none is left"):
        k.apply(step(op="add-controller"))


def test_a_refusal_that_lasts_fails_the_step_with_kafkas_words() -> None:
    invalid = "org.apache.kafka.common.errors.InvalidRequestException: Aborted add voter"
    k, net, _ = nemesis_on(FakeQuorumCluster(refusal=invalid))
    with pytest.raises(QuorumError, match="Kafka refused controller4: .*InvalidRequestException"):
        k.apply(step(op="add-controller"))
    fails = [v for t, f, v in net.history.events if t == "fail" and f == "add-controller"]
    assert len(fails) == 1


def test_a_controller_still_lagging_at_the_bound_fails_the_step() -> None:
    clock = iter(range(0, 1000, 10))
    cluster = FakeQuorumCluster(lag_refusals=99)
    k, _, q = nemesis_on(cluster)
    q.clock = lambda: float(next(clock))
    with pytest.raises(QuorumError, match="did not join the voters within 30 s .*lagging behind"):
        k.apply(step(op="add-controller", within=30))
    assert cluster.voters == ["controller1", "controller2", "controller3"]


def test_the_active_controller_is_removed_by_its_directory_id_then_stopped_on_4x() -> None:
    cluster = FakeQuorumCluster()
    k, net, q = nemesis_on(cluster, pre_vote=True)
    k.apply(step(op="remove-controller", target="controller", label="gone", within=30))
    ok = net.history.of("remove-controller")
    assert ok["nodes"] == ["controller1"] and ok["order"] == "removed, then stopped"
    assert ok["voters_before"] == ["controller1", "controller2", "controller3"]
    assert ok["voters_after"] == ["controller2", "controller3"]
    assert (ok["leader_before"], ok["leader_after"]) == ("controller1", "controller2")
    assert ok["said"].startswith("Removed KRaft controller 101") and ok["out"] == ["controller1"]
    remove = next(a for a in cluster.asked if a[0] == "remove")
    assert remove == ("remove", 101, "dir-101", "controller2")  # asked through another voter
    assert cluster.asked.index(remove) < cluster.asked.index(("stop", "controller1"))
    assert cluster.voters == ["controller2", "controller3"] and q.removed == {"controller1"}
    # The quorum targets follow: a later role or cut sees two voters.
    assert k.control.metadata().quorum == ("controller2", "controller3")
    # Put back: started with its data, caught up, added; nothing is out any more.
    k.apply(step(op="add-controller", target="@gone"))
    back = net.history.of("add-controller")
    assert back["nodes"] == ["controller1"] and back["out"] == []
    assert "controller1" in back["voters_after"] and q.spares == ["controller4"]


def test_before_pre_vote_the_controller_is_stopped_first_and_restarted_if_kafka_refuses() -> None:
    cluster = FakeQuorumCluster()
    k, net, _ = nemesis_on(cluster, pre_vote=False)
    k.apply(step(op="remove-controller", target=["controller3"]))
    assert net.history.of("remove-controller")["order"] == "stopped, then removed"
    stop = cluster.asked.index(("stop", "controller3"))
    assert stop < next(i for i, a in enumerate(cluster.asked) if a[0] == "remove")
    refused = FakeQuorumCluster(refusal="VoterNotFoundException: Cannot remove voter")
    k, _, q = nemesis_on(refused, pre_vote=False)
    with pytest.raises(QuorumError, match="Kafka refused controller3: VoterNotFound"):
        k.apply(step(op="remove-controller", target=["controller3"]))
    assert refused.asked[-1] == ("start", "controller3")  # still a voter: not left stopped
    assert refused.voters == ["controller1", "controller2", "controller3"] and not q.removed


def test_a_removal_kafka_would_refuse_or_one_that_stops_a_broker_is_refused_first() -> None:
    cluster = FakeQuorumCluster()
    cluster.voters = ["controller1"]
    k, _, _ = nemesis_on(cluster)
    with pytest.raises(NemesisError, match="controller1 is the last voter"):
        k.apply(step(op="remove-controller", target=["controller1"]))
    k, _, _ = nemesis_on(FakeQuorumCluster(), brokers_too={"controller2"})
    with pytest.raises(NemesisError, match="controller2 is a broker too"):
        k.apply(step(op="remove-controller", target=["controller2"]))
    with pytest.raises(NemesisError, match=r"takes one voter; its target is \['controller4'\]"):
        k.apply(step(op="remove-controller", target=["controller4"]))


def test_a_static_quorum_has_no_quorum_ops() -> None:
    k = KafkaNemesis(FakeNet(), FakeQuorumCluster(), T, 1)  # type: ignore[arg-type]
    with pytest.raises(NemesisError, match="controller quorum is static"):
        k.apply(step(op="add-controller"))


def test_the_quorum_is_asked_through_a_voter_no_fault_holds_and_again_while_it_elects() -> None:
    cluster = FakeQuorumCluster(lag_refusals=0)
    cluster.unanswered = 2
    k, net, _ = nemesis_on(cluster)
    net.paused.add("controller1")  # a tool in a frozen node would wait out its timeout
    net.down.add("controller2")
    k.apply(step(op="add-controller"))
    describes = [a for a in cluster.asked if a[0] == "describe"]
    assert {a[1] for a in describes} == {"controller3"}
    assert describes[0][2] == ("controller3",)  # bootstrapped on the voters that run
    assert net.history.of("add-controller")["voters_before"] == [
        "controller1",
        "controller2",
        "controller3",
    ]
