"""Fault windows from nemesis events: when at least one fault was in effect."""

from __future__ import annotations

from typing import Any

from checkers.windows import PathSpell, client_path_spells, fault_windows, overlap


def nem(t: float, type_: str, f: str, value: Any = None) -> dict[str, Any]:
    return {"time": t, "type": type_, "f": f, "value": value}


def test_a_partition_lasts_until_a_heal_leaves_no_cut() -> None:
    events = [
        nem(10, "invoke", "start-partition", {"op": "isolate", "nodes": ["k1"]}),
        nem(10.2, "ok", "start-partition", {"op": "isolate", "nodes": ["k1"]}),
        nem(12, "invoke", "start-partition", '{"op": "isolate", "nodes": ["k2"]}'),  # text too
        # A heal of k1 only leaves k2's cut: the window goes on.
        nem(15, "ok", "stop-partition", {"nodes": ["k1"], "remaining_cuts": [["k2", "k3"]]}),
        nem(20, "invoke", "stop-partition", {"nodes": "all"}),
        nem(20.5, "ok", "stop-partition", {"nodes": "all", "remaining_cuts": []}),
        nem(25, "invoke", "elect", {"election": "preferred"}),  # not a fault
        nem(25.1, "ok", "elect", {}),
    ]
    assert fault_windows(events, run_end=40) == [(10, 20.5)]


def test_process_faults_last_until_the_node_is_back_and_the_last_one_until_the_end() -> None:
    events = [
        nem(5, "invoke", "kill", {"nodes": ["k1", "k2"]}),
        nem(5.1, "ok", "kill", {"nodes": ["k1", "k2"]}),
        nem(8, "invoke", "start", {"nodes": ["k1"]}),
        nem(9, "ok", "start", {"nodes": ["k1"]}),  # k2 still down
        nem(11, "ok", "start", {"nodes": ["k2"]}),
        nem(20, "invoke", "restart", {"nodes": ["k3"]}),
        nem(24, "ok", "restart", {"nodes": ["k3"]}),
        nem(30, "invoke", "pause", {"nodes": ["k2"]}),
    ]
    assert fault_windows(events, run_end=35) == [(5, 11), (20, 24), (30, 35)]


def test_no_nemesis_no_window_and_overlap_in_seconds() -> None:
    assert fault_windows([], run_end=10) == []
    windows = [(10.0, 20.0), (30.0, 40.0)]
    assert overlap(15, 35, windows) == 10.0
    assert overlap(0, 5, windows) == 0.0


def test_a_paused_client_is_a_fault_until_it_is_resumed() -> None:
    events = [
        nem(20, "invoke", "pause-client", {"clients": ["P1"]}),
        nem(20.01, "ok", "pause-client", {"clients": ["P1"], "groups": {"P1": 4242}}),
        # A node's resume is not the client's: the client is still stopped.
        nem(25, "ok", "resume", {"nodes": ["P1"]}),
        nem(40, "invoke", "resume-client", {"clients": ["P1"]}),
        nem(40.01, "ok", "resume-client", {"clients": ["P1"], "groups": {"P1": 4242}}),
        nem(50, "invoke", "pause-client", '{"clients": ["P2"]}'),  # never resumed in the history
    ]
    assert fault_windows(events, run_end=60) == [(20, 40.01), (50, 60)]


def test_client_pauses_run_from_the_pause_to_its_resumes_ok() -> None:
    from checkers.windows import client_pauses

    nemesis = [
        {"time": 20.0, "type": "invoke", "f": "pause-client", "value": {"clients": ["P1"]}},
        {"time": 20.1, "type": "ok", "f": "pause-client", "value": {"clients": ["P1"]}},
        {"time": 30.0, "type": "invoke", "f": "pause-client", "value": {"clients": ["C1"]}},
        {"time": 40.0, "type": "invoke", "f": "resume-client", "value": {"clients": ["P1"]}},
        {"time": 40.2, "type": "ok", "f": "resume-client", "value": {"clients": ["P1"]}},
    ]
    assert client_pauses(nemesis, 90.0) == [("P1", 20.0, 40.2), ("C1", 30.0, 90.0)]


def test_a_proxy_fault_lasts_until_the_release_leaves_its_node_no_toxic() -> None:
    events = [
        nem(10, "invoke", "start-hold", {"op": "hold", "nodes": ["k1"]}),
        nem(12, "invoke", "start-delay", {"op": "delay", "nodes": ["k2"]}),
        # Releasing k1 leaves k2's delay: the window goes on.
        nem(15, "ok", "release-clients", {"nodes": ["k1"], "remaining_toxics": {"k2": ["d"]}}),
        nem(20, "ok", "release-clients", {"nodes": "all", "remaining_toxics": {}}),
        nem(20.1, "ok", "stop-partition", {"nodes": "all", "remaining_cuts": []}),
    ]
    assert fault_windows(events, run_end=40) == [(10, 20)]


def test_each_nodes_proxy_spell_runs_from_its_fault_to_its_release_with_its_roles() -> None:
    held = {"k1": ["leader p0", "transaction-coordinator P"], "k2": ["follower p0"]}
    events = [
        nem(9.9, "info", "resolve", {"held": held}),
        nem(10, "invoke", "start-hold", {"op": "hold", "nodes": ["k1", "k2"]}),
        nem(10.1, "ok", "start-hold", {"op": "hold", "nodes": ["k1", "k2"]}),
        nem(15, "invoke", "release-clients", {"nodes": ["k1"], "toxics": {"k1": ["hold-up"]}}),
        nem(15.2, "ok", "release-clients", {"nodes": ["k1"], "toxics": {"k1": ["hold-up"]}}),
        nem(18, "info", "resolve", {"held": {"k3": ["leader p0"]}}),
        nem(18.1, "invoke", "start-delay", {"op": "delay", "nodes": ["k3"]}),
        nem(25, "ok", "heal", {}),  # heals everything left: k2's hold and k3's delay
        nem(30, "invoke", "start-blackhole", {"op": "blackhole", "nodes": ["k1"]}),
    ]
    assert client_path_spells(events, run_end=40) == [
        PathSpell("hold", "k1", 10, 15.2, ("leader p0", "transaction-coordinator P")),
        PathSpell("hold", "k2", 10, 25, ("follower p0",)),
        PathSpell("delay", "k3", 18.1, 25, ("leader p0",)),
        PathSpell("blackhole", "k1", 30, 40, ()),
    ]


def test_a_disk_fault_lasts_until_a_disk_ok_mends_the_last_failing_disk() -> None:
    events = [
        nem(10, "invoke", "disk-error", {"nodes": ["r1"], "on": "write"}),
        nem(10.2, "ok", "disk-error", {"nodes": ["r1"], "on": "write"}),
        nem(12, "invoke", "disk-full", {"nodes": ["r2"]}),
        nem(15, "ok", "disk-ok", {"nodes": ["r1"], "remaining": ["r2"]}),  # r2 still full
        nem(20, "ok", "disk-ok", {"nodes": "all", "remaining": []}),
        nem(30, "invoke", "disk-full", {"nodes": ["r3"]}),
        nem(31, "ok", "stop-partition", {"nodes": "all", "remaining_cuts": []}),  # not a mend
        nem(35, "ok", "disk-ok", {"nodes": ["r3"]}),  # read without `remaining`: r3 mended
    ]
    assert fault_windows(events, run_end=60) == [(10, 20), (30, 35)]


def test_a_reassignment_lasts_to_its_ok_when_settled_else_until_its_throttle_is_cleared() -> None:
    nodes = {"nodes": ["k1", "k2", "k3", "k4"]}
    events = [
        nem(10, "invoke", "reassign", nodes),
        nem(14, "ok", "reassign", {**nodes, "settled": True}),
        nem(20, "invoke", "reassign", {**nodes, "throttle": 1024}),
        nem(30, "ok", "reassign", {**nodes, "throttle": 1024, "settled": False}),
        nem(40, "ok", "stop-partition", {"nodes": "all", "remaining_cuts": []}),
        nem(40.5, "invoke", "end-reassign", {"nodes": "all"}),
        nem(41, "ok", "end-reassign", {"nodes": "all", "out_of_sync": []}),
        nem(50, "invoke", "remove-broker", {"nodes": ["k2"]}),
        nem(60, "ok", "start", {"nodes": ["k2"]}),
    ]
    assert fault_windows(events, run_end=90) == [(10, 14), (20, 41), (50, 60)]


def test_a_membership_fault_lasts_until_what_it_took_out_is_back() -> None:
    events = [
        nem(10, "invoke", "forget-node", {"nodes": ["r1"], "via": "r2"}),
        nem(11, "ok", "forget-node", {"nodes": ["r1"], "out": ["r1", "q@r1"]}),
        nem(20, "ok", "add-node", {"nodes": ["r1"], "out": ["q@r1"]}),  # its member still out
        nem(25, "ok", "grow-queue", {"nodes": "all", "out": []}),
        nem(30, "invoke", "shrink-queue", {"nodes": ["r2"], "queues": ["q"]}),
        nem(31, "ok", "stop-partition", {"nodes": "all", "remaining_cuts": []}),  # not a grow
        nem(35, "ok", "grow-queue", {"nodes": ["r3"], "queues": ["q"]}),  # another node's
        nem(40, "ok", "grow-queue", {"nodes": ["r2"], "queues": ["q"]}),  # read without `out`
    ]
    assert fault_windows(events, run_end=60) == [(10, 25), (30, 40)]


def test_a_removed_controller_is_out_until_an_add_controller_puts_it_back() -> None:
    events = [
        nem(10, "invoke", "remove-controller", {"nodes": ["controller1"]}),
        nem(14, "ok", "remove-controller", {"nodes": ["controller1"], "out": ["controller1"]}),
        nem(20, "ok", "stop-partition", {"nodes": "all", "remaining_cuts": []}),  # no add
        # A spare joins while controller1 is still out: both windows overlap into one.
        nem(30, "invoke", "add-controller", {"nodes": ["controller4"]}),
        nem(40, "ok", "add-controller", {"nodes": ["controller4"], "settled": True, "out": []}),
        nem(50, "invoke", "add-controller", {"nodes": ["controller5"]}),
        nem(55, "ok", "add-controller", {"nodes": ["controller5"], "settled": True, "out": []}),
    ]
    # The first add-controller's ok says nothing is out any more: controller1 put back.
    assert fault_windows(events, run_end=90) == [(10, 40), (50, 55)]
    spare_only = {"nodes": ["controller4"], "settled": True, "out": ["controller1"]}
    still_out = [*events[:4], nem(40, "ok", "add-controller", spare_only)]
    assert fault_windows(still_out, run_end=90) == [(10, 90)]


def test_a_clock_skew_lasts_until_a_clock_ok_sets_the_last_clock_true() -> None:
    events = [
        nem(10, "invoke", "clock", {"nodes": ["r1"], "offset": 3600}),
        nem(10.1, "ok", "clock", {"nodes": ["r1"], "offset": 3600}),
        nem(12, "invoke", "clock", {"nodes": ["r2"], "offset": -60}),
        nem(15, "ok", "clock-ok", {"nodes": ["r1"], "remaining": ["r2"]}),  # r2 still off
        nem(16, "ok", "disk-ok", {"nodes": "all", "remaining": []}),  # a disk's mend: not r2's
        nem(20, "ok", "clock-ok", {"nodes": "all", "remaining": []}),
        nem(30, "invoke", "clock", {"nodes": ["r3"], "offset": 5}),
        nem(31, "ok", "stop-partition", {"nodes": "all", "remaining_cuts": []}),  # not a clock's
        nem(35, "ok", "clock-ok", {"nodes": ["r3"]}),  # read without `remaining`: r3 true again
        nem(40, "invoke", "clock", {"nodes": ["r1"], "offset": 1}),
    ]
    assert fault_windows(events, run_end=60) == [(10, 20), (30, 35), (40, 60)]
