"""Coverage: what the faults hit, the situations reached, and when a run is vacuous."""

from __future__ import annotations

import json
from typing import Any

from checkers.coverage import ClusterFacts, coverage_of, with_coverage
from checkers.summary import coverage_lines
from checkers.verdict import Judgement

KAFKA = ClusterFacts(replication_factor=3, min_insync_replicas=2, brokers=3)


def ev(t: float, type_: str, f: str, **value: Any) -> dict[str, Any]:
    return {"time": t, "type": type_, "f": f, "value": json.dumps(value)}


def state(t: float, partition: int, leader: str | None, isr: list[str]) -> dict[str, Any]:
    return {"time": t, "partition": partition, "value": json.dumps({"leader": leader, "isr": isr})}


def traffic(acked: int = 0, exposed: int = 0, sends: int = 0) -> list[dict[str, Any]]:
    return [
        {"start": 10, "end": 20, "acked": acked, "sends": sends, "exposed": exposed, "delivered": 0}
    ]


WATCH = [
    state(0, 0, "kafka1", ["kafka1", "kafka2", "kafka3"]),
    state(12, 0, "kafka1", ["kafka1", "kafka2"]),
    state(16, 0, "kafka2", ["kafka2"]),
]


def test_a_kill_of_the_leader_named_by_role_held_the_role_and_hit_the_leader() -> None:
    nemesis = [
        ev(
            9.9,
            "info",
            "resolve",
            op="kill",
            partition=0,
            roles={"target": "leader"},
            nodes={"target": ["kafka1"]},
        ),
        ev(10, "invoke", "kill", nodes=["kafka1"]),
        ev(10.2, "ok", "kill", nodes=["kafka1"]),
        ev(20, "invoke", "start", nodes=["kafka1"]),
        ev(21, "ok", "start", nodes=["kafka1"]),
    ]
    c = coverage_of(nemesis, WATCH, traffic(acked=5), KAFKA, [], "safe", 0.0)
    (step,) = c["steps"]
    assert step["held_role"] is True and step["leaders_hit"] == ["0"]
    assert step["hit_leaders"] == {"0": "kafka1"}  # what the report shows beside the id
    assert step["step"] == "1. kill kafka1 at +10.0 s"
    assert c["situations"]["leader-faulted"] == 1
    assert "leader-faulted-isr-shrunk" not in c["situations"]
    # the watch: the ISR at min ISR, then below it, and the leader moved
    assert c["situations"]["isr-at-min-isr"] == 1
    assert c["situations"]["isr-below-min-isr"] == 1
    assert c["situations"]["leader-changed"] == 1
    assert not c["vacuous"]


def test_a_role_resolved_from_stale_metadata_did_not_hold_it() -> None:
    nemesis = [
        ev(
            12.9,
            "info",
            "resolve",
            op="isolate",
            partition=0,
            roles={"target": "leader"},
            nodes={"target": ["kafka3"]},
        ),
        ev(13, "invoke", "start-partition", op="isolate", nodes=["kafka3"]),
    ]
    c = coverage_of(nemesis, WATCH, traffic(acked=1), KAFKA, [], "safe", 0.0)
    assert c["steps"][0]["held_role"] is False
    assert c["steps"][0]["leaders_hit"] == []
    assert c["situations"] == {
        "isr-at-min-isr": 1,
        "isr-below-min-isr": 1,
        "leader-changed": 1,
        "network-partitioned": 1,
    }


def test_a_leader_faulted_while_its_isr_had_shrunk() -> None:
    nemesis = [ev(13, "invoke", "pause", nodes=["kafka1"])]
    c = coverage_of(nemesis, WATCH, traffic(acked=1), KAFKA, [], "safe", 0.0)
    assert c["situations"]["leader-faulted-isr-shrunk"] == 1


def test_a_bridge_does_not_count_as_cut() -> None:
    nemesis = [
        ev(
            5,
            "invoke",
            "start-partition",
            op="partition",
            groups=[["kafka1", "kafka2"], ["kafka1", "kafka3"]],
        ),
    ]
    c = coverage_of(nemesis, WATCH, traffic(acked=1), KAFKA, [], "safe", 0.0)
    assert c["steps"][0]["nodes"] == ["kafka2", "kafka3"]
    assert c["steps"][0]["leaders_hit"] == []


def test_majority_down_and_a_power_loss_that_dropped_writes() -> None:
    nemesis = [
        ev(5, "invoke", "kill", nodes=["rabbit1"]),
        ev(6, "invoke", "stop", nodes=["rabbit2"]),
        ev(7, "ok", "start", nodes=["rabbit1", "rabbit2"]),
        ev(8, "invoke", "power-loss", nodes=["rabbit3"]),
        ev(9, "ok", "power-loss", nodes=["rabbit3"], dropped={"rabbit3": {"bytes": 4096}}),
    ]
    c = coverage_of(nemesis, [], traffic(acked=1), ClusterFacts(brokers=3), [], "safe", 0.0)
    assert c["situations"]["majority-down"] == 1
    assert c["situations"]["power-lost-unsynced-dropped"] == 1
    assert c["situations"]["node-faulted"] == 3


def test_faults_that_carried_no_traffic_make_a_pass_inconclusive() -> None:
    nemesis = [ev(10, "invoke", "pause", nodes=["kafka2"])]
    c = coverage_of(nemesis, WATCH, traffic(), KAFKA, [], "safe", 0.0)
    assert c["vacuous"] and "no message was acknowledged" in c["why_vacuous"][0]
    safe = Judgement("safe", True, "no acknowledged message lost (10 acknowledged)")
    j = with_coverage(safe, c)
    assert (j.outcome, j.matched) == ("inconclusive", False)
    assert j.reason.startswith("vacuous: ") and "it would have been" in j.reason
    # messages acknowledged before the fault and still waiting are traffic it could lose
    assert not coverage_of(nemesis, WATCH, traffic(exposed=3), KAFKA, [], "safe", 0.0)["vacuous"]


def test_a_loss_found_is_never_vacuous() -> None:
    c = coverage_of(
        [ev(10, "invoke", "pause", nodes=["kafka2"])], [], traffic(), KAFKA, [], "safe", 0.0
    )
    lost = Judgement("loss", False, "refuted: 3 acknowledged messages lost")
    assert with_coverage(lost, c) == lost
    reproduced = Judgement("loss", True, "reproduced")
    assert with_coverage(reproduced, c) == reproduced


def test_unavailability_needs_sends_inside_the_faults_not_acks() -> None:
    nemesis = [ev(10, "invoke", "pause", nodes=["kafka2"])]
    assert not coverage_of(nemesis, [], traffic(sends=4), KAFKA, [], "unavailable", 0.0)["vacuous"]
    assert coverage_of(nemesis, [], traffic(), KAFKA, [], "unavailable", 0.0)["vacuous"]


def test_a_required_situation_never_reached_is_vacuous() -> None:
    nemesis = [ev(10, "invoke", "pause", nodes=["kafka2"])]
    c = coverage_of(nemesis, WATCH, traffic(acked=9), KAFKA, ["leader-faulted"], "safe", 0.0)
    assert c["missing"] == ["leader-faulted"]
    assert c["why_vacuous"] == ["the faults never brought about leader-faulted"]


def test_a_run_without_faults_is_not_vacuous_by_its_traffic() -> None:
    c = coverage_of([], [], [], KAFKA, [], "safe", 0.0)
    assert c["steps"] == [] and not c["vacuous"]


def test_elections_and_heals_are_not_fault_steps_but_keep_the_numbering() -> None:
    nemesis = [
        ev(5, "invoke", "elect", election="preferred"),
        ev(6, "invoke", "start-partition", op="cut-clients", nodes=["kafka1"]),
        ev(7, "invoke", "stop-partition", op="heal", nodes="all"),
    ]
    c = coverage_of(nemesis, WATCH, traffic(acked=1), KAFKA, [], "safe", 0.0)
    assert [s["step"] for s in c["steps"]] == ["2. start-partition cut-clients kafka1 at +6.0 s"]
    assert c["situations"]["clients-cut"] == 1


def test_a_transactional_run_is_judged_by_the_transactions_open_in_its_faults() -> None:
    """Records are acknowledged only at their commit: a fault that stalls every commit carried
    no acknowledgement, yet it met open transactions, which is what the claim is about."""
    nemesis = [
        ev(10, "info", "resolve", op="isolate", roles={"target": "transaction-coordinator"}),
        ev(10, "invoke", "start-partition", op="isolate", nodes=["kafka2"]),
    ]
    required = ["coordinator-faulted", "transaction-open-in-fault"]
    section = {"open_in_faults": 4, "commits_in_faults": 2, "commits_across_coordinator_moves": 0}
    required += ["commit-in-flight-in-fault"]
    c = coverage_of(nemesis, WATCH, traffic(), KAFKA, required, "safe", 0.0, section)
    assert not c["vacuous"], c["why_vacuous"]
    assert c["situations"]["coordinator-faulted"] == 1
    assert c["situations"]["transaction-open-in-fault"] == 4
    assert c["situations"]["commit-in-flight-in-fault"] == 2
    assert "coordinator-moved-in-commit" not in c["situations"]
    moved = coverage_of(
        nemesis, WATCH, traffic(), KAFKA, ["coordinator-moved-in-commit"], "safe", 0.0, section
    )
    assert moved["why_vacuous"] == ["the faults never brought about coordinator-moved-in-commit"]
    none_open = coverage_of(
        nemesis, WATCH, traffic(acked=9), KAFKA, [], "safe", 0.0, {"open_in_faults": 0}
    )
    assert none_open["why_vacuous"] == ["no transaction was open while a fault was in effect"]


def test_a_paused_client_is_a_fault_step_and_a_fenced_commit_a_situation() -> None:
    """T3-zombie: a producer paused (no node touched), and a newer instance of its
    transactional id fenced it before it asked a commit."""
    nemesis = [
        ev(20, "invoke", "pause-client", clients=["P1"]),
        ev(40, "invoke", "resume-client", clients=["P1"]),
    ]
    required = ["client-paused", "fenced-commit-asked"]
    section = {"open_in_faults": 300, "fenced_commits": 1, "zombie_commits": 0}
    c = coverage_of(nemesis, WATCH, traffic(), KAFKA, required, "safe", 0.0, section)
    assert not c["vacuous"], c["why_vacuous"]
    assert [(s["step"], s["nodes"]) for s in c["steps"]] == [("1. pause-client P1 at +20.0 s", [])]
    assert c["situations"]["client-paused"] == 1 and c["situations"]["fenced-commit-asked"] == 1
    assert "node-faulted" not in c["situations"]
    never = coverage_of(
        nemesis, WATCH, traffic(), KAFKA, required, "safe", 0.0, section | {"fenced_commits": 0}
    )
    assert never["why_vacuous"] == ["the faults never brought about fenced-commit-asked"]


def test_a_step_that_began_more_than_a_second_late_is_flagged() -> None:
    nemesis = [
        ev(10.3, "invoke", "kill", nodes=["kafka1"], scheduled=10.0, lag=0.3),
        ev(10.5, "ok", "kill", nodes=["kafka1"]),
        ev(22.5, "invoke", "start", nodes=["kafka1"], scheduled=15.0, lag=7.5),
        ev(23.0, "ok", "start", nodes=["kafka1"]),
    ]
    c = coverage_of(nemesis, WATCH, traffic(acked=5), KAFKA, [], "safe", 0.0)
    assert [s["lag"] for s in c["steps"]] == [0.3]  # the kill: its row says how late it began
    assert c["late_steps"] == [{"step": "2. start kafka1 at +22.5 s", "lag": 7.5}]
    lines = coverage_lines(c)
    assert "late: 2. start kafka1 at +22.5 s began 7.5 s after its scheduled time" in lines


def test_steps_are_numbered_as_attribution_numbers_them_snapshots_left_out() -> None:
    from checkers.attribution import describe

    nemesis = [
        ev(5, "invoke", "leaders", label="before", scheduled=5.0, lag=3.0),  # a snapshot
        ev(10.2, "invoke", "kill", nodes=["kafka1"], scheduled=10.0, lag=0.2),
        ev(22.5, "invoke", "elect", election="preferred", scheduled=15.0, lag=7.5),
    ]
    c = coverage_of(nemesis, WATCH, traffic(acked=5), KAFKA, [], "safe", 0.0)
    assert [s["step"] for s in c["steps"]] == ["1. kill kafka1 at +10.2 s"]
    # The schedule's keys are not what the step did: its label leaves them out.
    assert c["late_steps"] == [{"step": "2. elect election=preferred at +22.5 s", "lag": 7.5}]
    assert describe({"election": "preferred", "scheduled": 15.0, "lag": 7.5}) == (
        " election=preferred"
    )


def test_a_run_that_never_knew_its_leaders_does_not_say_none_was_hit() -> None:
    """RabbitMQ has no partition watch: a queue's leader is known only where a step aimed at
    it, so drawn halves hit a leader or not unseen, and the line says so."""
    five = ClusterFacts(brokers=5)
    halves = [
        ev(9.9, "info", "resolve", op="start-partition", roles={"groups": "random-halves"}),
        ev(10, "invoke", "start-partition", groups=[["rabbit1", "rabbit2"], ["rabbit3"]]),
        ev(20, "invoke", "stop-partition"),
    ]
    c = coverage_of(halves, [], traffic(acked=5), five, [], "safe", 0.0)
    assert [s["leader_known"] for s in c["steps"]] == [False]
    assert "leaders not recorded (no step aimed at one)" in coverage_lines(c)[0]
    at_leader = [
        ev(29.9, "info", "resolve", op="kill", queue="q", roles={"target": "leader"}),
        ev(30, "invoke", "kill", nodes=["rabbit2"]),
    ]
    c = coverage_of(halves + at_leader, [], traffic(acked=5), five, [], "safe", 0.0)
    assert [s["leader_known"] for s in c["steps"]] == [False, True]
    assert c["situations"]["leader-faulted"] == 1
    assert "1 hit a leader, 1 where no leader was recorded" in coverage_lines(c)[0]


# ---- every role a step's nodes held, not only the one it aimed at ----------------------------

FOLLOWER_LEADS_NOTHING = [state(0, 0, "kafka2", ["kafka1", "kafka2", "kafka3"])]


def cut_follower(held: Any = None, **more: Any) -> list[dict[str, Any]]:
    """A ZooKeeper-mode run's step: one follower (kafka1) cut from the other brokers; `held`,
    what the nemesis recorded of the nodes' roles as it began."""
    resolved: dict[str, Any] = {
        "op": "cut",
        "partition": 0,
        "roles": {"from": "follower"},
        "nodes": {"from": ["kafka1"], "to": ["kafka2", "kafka3"]},
    }
    if held is not None:
        resolved["held"] = held
    return [
        ev(9.9, "info", "resolve", **resolved, **more),
        ev(10, "invoke", "start-partition", op="cut", **{"from": ["kafka1"]}, to=["kafka2"]),
    ]


def test_a_cut_follower_that_was_also_the_controller_faulted_the_controller() -> None:
    held = {
        "kafka1": ["controller", "follower p0"],
        "kafka2": ["leader p0"],
        "kafka3": ["follower p0"],  # resolved, yet this direction of the cut leaves it be
    }
    required = ["controller-faulted"]
    c = coverage_of(
        cut_follower(held), FOLLOWER_LEADS_NOTHING, traffic(9), KAFKA, required, "safe", 0
    )
    (step,) = c["steps"]
    assert step["held"] == {"kafka1": ["controller", "follower p0"], "kafka2": ["leader p0"]}
    assert step["roles"] == {"from": "follower"} and step["held_role"] is True
    assert step["roles_unknown"] == {}
    assert c["situations"]["controller-faulted"] == 1
    assert "coordinator-faulted" not in c["situations"]
    assert not c["missing"] and not c["vacuous"]
    # The leaders hit are the partition watch's, as before: the cut's far side led p0.
    assert step["leaders_hit"] == ["0"] and c["situations"]["leader-faulted"] == 1
    assert coverage_lines(c)[0].startswith("coverage: 1 fault steps, 1 hit a leader;")


def test_a_step_with_no_held_roles_recorded_counts_only_what_it_aimed_at() -> None:
    for held in (None, {"kafka1": ["follower p0"]}):
        c = coverage_of(
            cut_follower(held),
            FOLLOWER_LEADS_NOTHING,
            traffic(9),
            KAFKA,
            ["controller-faulted"],
            "safe",
            0,
        )
        assert "controller-faulted" not in c["situations"]
        assert c["missing"] == ["controller-faulted"] and c["vacuous"]
    assert c["steps"][0]["held"] == {"kafka1": ["follower p0"]}
    older = coverage_of(cut_follower(), FOLLOWER_LEADS_NOTHING, traffic(9), KAFKA, [], "safe", 0)
    assert older["steps"][0]["held"] is None  # not recorded, not "held nothing"


def test_roles_the_nemesis_could_not_learn_are_reported_and_count_nothing() -> None:
    unknown = {"controller": "no answer within 2 s", "partitions": "no answer within 2 s"}
    nemesis = cut_follower({"kafka1": [], "kafka2": []}, roles_unknown=unknown)
    c = coverage_of(nemesis, FOLLOWER_LEADS_NOTHING, traffic(9), KAFKA, [], "safe", 0)
    (step,) = c["steps"]
    assert step["held"] == {"kafka1": [], "kafka2": []}
    assert step["roles_unknown"] == unknown
    assert "controller-faulted" not in c["situations"]
    garbled = coverage_of(
        cut_follower({"kafka1": "controller"}, roles_unknown=["controller"]),
        FOLLOWER_LEADS_NOTHING,
        traffic(9),
        KAFKA,
        [],
        "safe",
        0,
    )
    assert garbled["steps"][0]["held"] == {} and garbled["steps"][0]["roles_unknown"] == {}
    assert "controller-faulted" not in garbled["situations"]


def test_a_coordinator_held_by_a_faulted_node_faulted_the_coordinator() -> None:
    nemesis = [
        ev(9.9, "info", "resolve", op="kill", held={"kafka3": ["group-coordinator g1"]}),
        ev(10, "invoke", "kill", nodes=["kafka3"]),
    ]
    c = coverage_of(nemesis, FOLLOWER_LEADS_NOTHING, traffic(9), KAFKA, [], "safe", 0)
    assert c["situations"]["coordinator-faulted"] == 1
    assert "controller-faulted" not in c["situations"]


def test_clients_cut_from_the_controller_leave_it_controlling() -> None:
    held = {"kafka1": ["controller", "transaction-coordinator tx-1"]}
    nemesis = [
        ev(9.9, "info", "resolve", op="cut-clients", held=held),
        ev(10, "invoke", "start-partition", op="cut-clients", nodes=["kafka1"]),
    ]
    c = coverage_of(nemesis, FOLLOWER_LEADS_NOTHING, traffic(9), KAFKA, [], "safe", 0)
    assert "controller-faulted" not in c["situations"]
    assert c["situations"]["coordinator-faulted"] == 1  # its clients cannot reach it


def test_a_partitions_bridge_holds_its_roles_unfaulted() -> None:
    """A node in every group keeps all its links: the controller as the bridge is not cut."""
    groups = [["kafka1", "kafka2"], ["kafka1", "kafka3"]]
    nemesis = [
        ev(9.9, "info", "resolve", op="partition", held={"kafka1": ["controller"], "kafka2": []}),
        ev(10, "invoke", "start-partition", op="partition", groups=groups),
    ]
    c = coverage_of(nemesis, FOLLOWER_LEADS_NOTHING, traffic(9), KAFKA, [], "safe", 0)
    assert c["steps"][0]["held"] == {"kafka2": []}
    assert "controller-faulted" not in c["situations"]


def test_a_delay_on_the_clients_path_faults_the_leader_not_the_controller() -> None:
    """delay-leader on 4.4 (kraft): the leader kafka2 was a controller too, but the proxy delays
    only the clients' requests; the brokers' own traffic, the controller's, is untouched."""
    resolved = {
        "op": "delay",
        "partition": 0,
        "roles": {"target": "leader"},
        "nodes": {"target": ["kafka2"]},
        "held": {"kafka2": ["controller", "leader p0"]},
    }
    nemesis = [
        ev(9.9, "info", "resolve", **resolved),
        ev(10, "invoke", "start-delay", op="delay", nodes=["kafka2"], delay_ms=6000),
    ]
    c = coverage_of(nemesis, FOLLOWER_LEADS_NOTHING, traffic(9), KAFKA, [], "safe", 0)
    assert c["situations"]["leader-faulted"] == 1 and c["situations"]["clients-delayed"] == 1
    assert "controller-faulted" not in c["situations"]


def test_a_killed_copier_is_a_client_ended_and_its_restart_ends_the_fault() -> None:
    """T7: a copier killed -9 and restarted 4 s later with the same transactional id."""
    nemesis = [
        ev(30, "invoke", "kill-client", clients=["C1"]),
        ev(34, "invoke", "restart-client", clients=["C1"]),
    ]
    section = {"open_in_faults": 3}
    c = coverage_of(
        nemesis, WATCH, traffic(), KAFKA, ["client-ended"], "no-duplicates", 0.0, section
    )
    assert not c["vacuous"], c["why_vacuous"]
    assert [s["step"] for s in c["steps"]] == ["1. kill-client C1 at +30.0 s"]
    assert c["situations"]["client-ended"] == 1 and "client-paused" not in c["situations"]


def test_held_data_the_proxy_could_not_deliver_is_said() -> None:
    nemesis = [
        {"time": 10.0, "type": "invoke", "f": "start-hold",
         "value": {"op": "hold", "nodes": ["k1"]}},
        {"time": 20.0, "type": "ok", "f": "release-clients",
         "value": {"nodes": ["k1"], "remaining_toxics": {}, "undelivered_chunks": 2}},
    ]  # fmt: skip
    c = coverage_of(nemesis, [], [], ClusterFacts(), [], "safe", 0.0)
    assert c["proxy_undelivered"] == 2
    quiet = coverage_of(nemesis[:1], [], [], ClusterFacts(), [], "safe", 0.0)
    assert "proxy_undelivered" not in quiet


def test_a_full_disk_under_the_leader_faulted_it_and_its_disk_until_mended() -> None:
    nemesis = [
        ev(10, "invoke", "disk-full", nodes=["kafka1"]),
        ev(10.2, "ok", "disk-full", nodes=["kafka1"]),
        ev(30, "invoke", "disk-ok", nodes=["kafka1"]),
        ev(30.2, "ok", "disk-ok", nodes=["kafka1"], remaining=[]),
    ]
    c = coverage_of(nemesis, WATCH, traffic(acked=5), KAFKA, ["disk-faulted"], "safe", 0.0)
    (step,) = c["steps"]  # the mend is no fault step
    assert step["step"] == "1. disk-full kafka1 at +10.0 s" and step["leaders_hit"] == ["0"]
    assert c["situations"]["disk-faulted"] == 1 and c["situations"]["leader-faulted"] == 1
    assert "node-faulted" not in c["situations"] and c["missing"] == []


def test_a_corruption_of_the_leaders_data_counts_as_corrupted_and_its_node_faulted() -> None:
    changed = {"kafka1": [{"file": "jepsen-0/0.log", "offset": 9, "old": "00", "new": "01"}]}
    nemesis = [
        ev(10, "invoke", "corrupt", nodes=["kafka1"], path="*.log", seed=3, **{"while": "stopped"}),
        ev(12, "ok", "corrupt", nodes=["kafka1"], changed=changed),
        ev(20, "invoke", "torn-write", nodes=["kafka2"], path="*.log", keep=0.5),
        ev(20.2, "ok", "torn-write", nodes=["kafka2"], path="*.log", keep=0.5),
    ]
    wanted = ["data-corrupted", "disk-faulted"]
    c = coverage_of(nemesis, WATCH, traffic(acked=5), KAFKA, wanted, "safe", 0.0)
    corrupt, torn = c["steps"]
    assert corrupt["step"].startswith("1. corrupt kafka1") and corrupt["leaders_hit"] == ["0"]
    assert c["situations"]["data-corrupted"] == 1 and c["situations"]["node-faulted"] == 1
    assert c["situations"]["disk-faulted"] == 1 and torn["step"].startswith("2. torn-write")


def test_a_decommissioned_leader_changed_the_membership_and_moved_replicas() -> None:
    nemesis = [
        ev(10, "invoke", "remove-broker", nodes=["kafka1"]),
        ev(14, "ok", "remove-broker", nodes=["kafka1"], completed=True),
        ev(20, "invoke", "add-broker", nodes=["kafka4"], move_onto=False),
        ev(25, "ok", "add-broker", nodes=["kafka4"], move_onto=False, settled=True),
    ]
    situations = ["reassigned", "membership-changed"]
    c = coverage_of(nemesis, WATCH, traffic(acked=5), KAFKA, situations, "safe", 0.0)
    assert c["situations"]["membership-changed"] == 2
    # The add-broker moved nothing (no move_onto): only the decommission reassigned.
    assert c["situations"]["reassigned"] == 1 and c["situations"]["leader-faulted"] == 1
    assert c["missing"] == []


def test_a_removed_active_controller_changed_the_quorum_and_faulted_the_controller() -> None:
    nemesis = [
        ev(9.9, "info", "resolve", op="remove-controller", roles={"target": "controller"}),
        ev(10, "invoke", "remove-controller", nodes=["controller1"]),
        ev(14, "ok", "remove-controller", nodes=["controller1"], out=["controller1"]),
        ev(30, "invoke", "add-controller", nodes=["controller4"]),
        ev(40, "ok", "add-controller", nodes=["controller4"], settled=True, out=["controller1"]),
    ]
    wanted = ["quorum-changed", "controller-faulted"]
    c = coverage_of(nemesis, WATCH, traffic(acked=5), KAFKA, wanted, "safe", 0.0)
    removed, added = c["steps"]
    assert removed["step"].startswith("1. remove-controller controller1")
    assert added["step"].startswith("2. add-controller controller4")
    assert c["situations"]["quorum-changed"] == 2 and c["situations"]["controller-faulted"] == 1
    # A voter joining is no broker's membership, and moves no replica.
    assert "reassigned" not in c["situations"] and "membership-changed" not in c["situations"]
    assert c["missing"] == []


def test_a_forgotten_queue_leader_changed_the_membership_and_faulted_the_leader() -> None:
    nemesis = [
        ev(9.9, "info", "resolve", op="forget-node", queue="q", roles={"target": "leader"}),
        ev(10, "invoke", "forget-node", nodes=["rabbit1"], via="rabbit2"),
        ev(12, "ok", "forget-node", nodes=["rabbit1"], out=["rabbit1", "q@rabbit1"]),
        ev(30, "invoke", "add-node", nodes=["rabbit1"], via="rabbit2"),
        ev(40, "ok", "add-node", nodes=["rabbit1"], out=["q@rabbit1"]),
    ]
    wanted = ["membership-changed", "leader-faulted"]
    c = coverage_of(nemesis, [], traffic(acked=5), ClusterFacts(), wanted, "safe", 0.0)
    (step,) = c["steps"]  # adding it back is no fault step
    assert step["step"].startswith("1. forget-node rabbit1") and step["queue_leader_hit"]
    assert c["situations"]["membership-changed"] == 1 and c["missing"] == []
    assert "node-faulted" not in c["situations"]


def test_a_skewed_leader_clock_faulted_the_leader_and_counts_as_a_clock_skew() -> None:
    nemesis = [
        ev(10, "invoke", "clock", nodes=["kafka1"], offset=3600),
        ev(10.2, "ok", "clock", nodes=["kafka1"], offset=3600),
        ev(30, "invoke", "clock-ok", nodes=["kafka1"]),
        ev(30.2, "ok", "clock-ok", nodes=["kafka1"], remaining=[]),
    ]
    c = coverage_of(nemesis, WATCH, traffic(acked=5), KAFKA, ["clock-skewed"], "safe", 0.0)
    (step,) = c["steps"]  # setting the clock back is no fault step
    assert step["step"].startswith("1. clock kafka1 at +10.0 s"), step
    assert c["situations"]["clock-skewed"] == 1 and c["situations"]["leader-faulted"] == 1
    assert "disk-faulted" not in c["situations"] and c["missing"] == []


def test_each_op_the_nemesis_carried_out_is_counted_by_its_name() -> None:
    """Per op, heals too, as a scenario names it: a cut is `isolate`, not the history's
    start-partition; a step that failed (its tool refused) is not counted."""
    nemesis = [
        ev(5, "invoke", "start-partition", op="isolate", nodes=["rabbit1"]),
        ev(5.1, "ok", "start-partition", op="isolate", nodes=["rabbit1"]),
        ev(8, "invoke", "clock", nodes=["rabbit2"], offset=-300),
        ev(8.1, "ok", "clock", nodes=["rabbit2"], offset=-300),
        ev(9, "invoke", "stop-partition", op="heal", nodes="all"),
        ev(9.1, "ok", "stop-partition", op="heal", nodes="all"),
        ev(10, "invoke", "forget-node", nodes=["rabbit1"]),
        ev(10.5, "fail", "forget-node", nodes=["rabbit1"], error="refused"),
        ev(12, "invoke", "torn-write", nodes=["rabbit3"], path="*", keep=0.5),
        ev(12.1, "ok", "torn-write", nodes=["rabbit3"], path="*", keep=0.5),
        ev(20, "invoke", "power-loss", nodes=["rabbit3"]),
        ev(24, "ok", "power-loss", nodes=["rabbit3"], dropped={}),
        ev(24, "invoke", "disk-ok", nodes=["rabbit3"]),
        ev(24.1, "ok", "disk-ok", nodes=["rabbit3"], remaining=[]),
        ev(25, "invoke", "clock-ok", nodes=["rabbit2"]),
        ev(25.1, "ok", "clock-ok", nodes=["rabbit2"], remaining=[]),
        ev(26, "invoke", "remove-broker", nodes=["kafka1"]),
        ev(30, "ok", "remove-broker", nodes=["kafka1"], completed=True),
    ]
    c = coverage_of(nemesis, [], traffic(acked=5), ClusterFacts(), [], "safe", 0.0)
    assert c["ops"] == {
        "clock": 1,
        "clock-ok": 1,
        "disk-ok": 1,
        "heal": 1,
        "isolate": 1,
        "power-loss": 1,
        "remove-broker": 1,
        "torn-write": 1,
    }
    assert "ops applied: clock 1, clock-ok 1, disk-ok 1, heal 1" in coverage_lines(c)[1]
