"""Fault windows from nemesis events: when at least one fault was in effect."""

from __future__ import annotations

from typing import Any

from checkers.windows import fault_windows, overlap


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
