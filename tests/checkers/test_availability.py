"""The availability queries on their own: the unavailable intervals, their overlap with the
fault windows and the windows' traffic against a plain reading of their definitions; then a
checked run's unavailability, stalls and messages exposed at its faults, and the verdicts of an
`unavailable` claim they make."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers.availability import (
    BUCKET_SECONDS,
    unavailable_intervals,
    window_traffic,
    with_fault_overlap,
)
from checkers.frames import small_frame
from checkers.run import check_run
from checkers.spark import _window_traffic
from tests.checkers.histories import event, recv, send, write

# (producer, invoke_time or None if the history lacks it, seconds to its outcome or None if it
# never came, outcome): times in hundredths, so that ties in completion happen and the order
# falls to msg_id; some before time 0.
a_send = st.tuples(
    st.sampled_from(["A", "B"]),
    st.one_of(st.none(), st.integers(-100, 6 * int(BUCKET_SECONDS * 100)).map(lambda t: t / 100)),
    st.one_of(st.none(), st.integers(0, 250).map(lambda t: t / 100)),
    st.sampled_from(["ok", "ok", "fail", "info"]),
)


def _intervals_by_hand(sends: list[tuple[str, str, float, float | None, str]]) -> list[tuple]:
    """Each producer's sends in (done, msg_id) order; every maximal run of sends that did not
    end ok is one interval."""
    out = []
    for producer in sorted({s[1] for s in sends}):
        # A send that neither began nor ended in the history orders first, as Spark's nulls.
        mine = [
            (done if done is not None else invoke, msg_id, invoke, done, outcome)
            for msg_id, p, invoke, done, outcome in sends
            if p == producer
        ]
        mine.sort(key=lambda one: (one[0] is not None, one[0] or 0.0, one[1]))
        run: list[tuple] = []
        for one in [*mine, None]:
            if one is not None and one[4] != "ok":
                run.append(one)
                continue
            if run:
                starts = [r[2] if r[2] is not None else r[0] for r in run]
                start = min((t for t in starts if t is not None), default=None)
                end = max((r[0] for r in run if r[0] is not None), default=None)
                fails = sum(r[4] == "fail" for r in run)
                unknown = sum(r[4] == "info" for r in run)
                out.append((producer, start, end, len(run), fails, unknown))
            run = []
    return sorted(out, key=_order)


@pytest.mark.spark
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(a_send, max_size=40))
def test_unavailable_intervals_across_time_buckets_are_those_of_the_definition(
    spark: Any, drawn: list[tuple[str, float | None, float | None, str]]
) -> None:
    """The acks are counted per bucket of time and the buckets' counts added in order: runs of
    refused or unknown sends spanning buckets, and ties in completion, still give each run once."""
    sends = [
        (f"{producer}:{i:03d}", producer, invoke, _done(invoke, wait), outcome)
        for i, (producer, invoke, wait, outcome) in enumerate(drawn)
    ]
    summary = small_frame(
        spark,
        sends,
        "msg_id string, producer string, invoke_time double, done_time double, outcome string",
    )
    found = [_rounded(tuple(r)) for r in unavailable_intervals(summary).collect()]
    assert sorted(found, key=_order) == [_rounded(i) for i in _intervals_by_hand(sends)]


def _done(invoke: float | None, wait: float | None) -> float | None:
    """A send's completion: `wait` after its invoke (after time 0 when the invoke is missing)."""
    return None if wait is None else (invoke or 0.0) + wait


def _rounded(interval: tuple) -> tuple:
    return tuple(round(v, 6) if isinstance(v, float) else v for v in interval)


def _order(interval: tuple) -> tuple:
    """Intervals sorted with a missing time first."""
    return tuple((v is not None, v if v is not None else 0) for v in interval)


a_window = st.tuples(st.integers(0, 20), st.integers(0, 6)).map(
    lambda w: (w[0] / 2, w[0] / 2 + w[1] / 2)
)
a_time = st.one_of(st.none(), st.integers(0, 30).map(lambda t: t / 2))


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(st.tuples(a_time, a_time), max_size=8),
    st.lists(a_window, max_size=4),
)
def test_fault_overlap_is_that_of_the_definition(
    spark: Any, spans: list[tuple[float | None, float | None]], windows: list[tuple[float, float]]
) -> None:
    """Each interval's seconds inside the windows, and whether it meets one, however many
    windows (none too), in any order, overlapping or repeated; identical intervals stay two."""
    intervals = small_frame(
        spark,
        [
            (i, start, end)
            for i, (start, end) in enumerate(spans)
            if start is not None and end is not None
        ],
        "n int, start double, end double",
    )
    found = {
        r["n"]: (round(r["in_faults"], 6), r["touches_fault"])
        for r in with_fault_overlap(intervals, windows).collect()
    }
    by_hand = {
        i: (
            round(sum(max(0.0, min(end, b) - max(start, a)) for a, b in windows), 6),
            any(start <= b and end >= a for a, b in windows),
        )
        for i, (start, end) in enumerate(spans)
        if start is not None and end is not None
    }
    assert found == by_hand


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(st.tuples(st.sampled_from(["ok", "fail"]), a_time, a_time, a_time), max_size=10),
    st.lists(a_time.filter(lambda t: t is not None), max_size=6),
    st.lists(a_window, max_size=4, unique=True),  # a run's steps make distinct windows
)
def test_window_traffic_is_that_of_the_definition(
    spark: Any,
    sends: list[tuple[str, float | None, float | None, float | None]],
    delivered: list[float],
    windows: list[tuple[float, float]],
) -> None:
    """Per window in time order, windows without traffic at 0: what each window's sends,
    acks and deliveries were, and what it exposed (first exposed at the earliest window)."""
    summary = small_frame(
        spark,
        sends,
        "outcome string, invoke_time double, ack_time double, first_delivery double",
    )
    receives = small_frame(spark, [(t,) for t in delivered], "time double")
    rows = window_traffic(summary, receives, windows).collect() if windows else []
    found = _window_traffic(rows, windows)
    by_hand = []
    ordered = sorted(windows)
    for n, (a, b) in enumerate(ordered):
        previous = ordered[n - 1][0] if n else float("-inf")

        def inside(t: float | None, a: float = a, b: float = b) -> bool:
            return t is not None and a <= t <= b

        exposed = [
            ack
            for outcome, _, ack, first in sends
            if outcome == "ok" and ack is not None and ack < a and (first is None or first >= a)
        ]
        by_hand.append(
            {
                "start": a,
                "end": b,
                "acked": sum(1 for o, _, ack, _ in sends if o == "ok" and inside(ack)),
                "sends": sum(1 for _, invoke, _, _ in sends if inside(invoke)),
                "exposed": len(exposed),
                "first_exposed": sum(1 for ack in exposed if ack >= previous),
                "delivered": sum(1 for t in delivered if inside(t)),
            }
        )
    assert found == by_hand


@pytest.mark.spark
def test_unavailable_intervals_per_producer_and_inside_fault_windows(
    spark: Any, tmp_path: Path
) -> None:
    ev: list[dict[str, Any]] = []
    outcomes = {3: "fail", 4: "fail", 5: "info", 8: "fail"}  # runs 3-5 and 8, between acks
    for seq in range(1, 11):
        ev += send("A", seq, seq, outcomes.get(seq, "ok"))
    ev += send("B", 1, 1, "ok")
    ev.append(event("nemesis", "invoke", "start-partition", 2.5, value={"op": "isolate"}))
    ev.append(event("nemesis", "ok", "stop-partition", 4.5, value={"remaining_cuts": []}))
    ev += [recv("g", "A", seq, 100 + seq) for seq in (1, 2, 6, 7, 9, 10)] + [recv("g", "B", 1, 99)]
    write(tmp_path / "run" / "history", ev)
    verdict = check_run(tmp_path / "run", spark=spark)
    assert verdict["fault_windows"] == [{"start": 2.5, "end": 4.5, "seconds": 2.0}]
    a = verdict["unavailability"]["A"]
    # Seq 3-5: invoked at 3, last outcome at 5.001; seq 8: 8 to 8.001.
    assert a["intervals"] == 2 and a["seconds"] == pytest.approx(2.002, abs=1e-3)
    assert a["in_fault_seconds"] == pytest.approx(1.5, abs=1e-3)  # 3 to 4.5
    longest = a["longest"][0]
    assert (longest["start"], longest["sends"], longest["refused"], longest["unknown"]) == (
        3,
        3,
        2,
        1,
    )
    assert a["in_fault_sends"] == 3  # seq 8 came after the heal
    assert "B" not in verdict["unavailability"]
    # The span of the refused and unknown sends is that of the intervals: they agree.
    assert verdict["refused_window"] == {"first": 3.0, "last": 8.001, "seconds": 5.001}
    summary = (tmp_path / "run" / "summary.txt").read_text()
    assert "unavailable A: 2 intervals, 2.0 s (1.5 s inside fault windows)" in summary
    assert "sends refused or unknown between +2.0 s and +7.0 s" in summary


@pytest.mark.spark
def test_a_message_undelivered_through_two_faults_is_exposed_once_in_all(
    spark: Any, tmp_path: Path
) -> None:
    ev: list[dict[str, Any]] = []
    for seq in (1, 2):
        ev += send("A", seq, seq, "ok")
    for start, end in ((3.0, 4.0), (6.0, 7.0)):
        ev.append(event("nemesis", "invoke", "start-partition", start, value={"op": "isolate"}))
        ev.append(event("nemesis", "ok", "stop-partition", end, value={"remaining_cuts": []}))
    ev += [recv("g", "A", seq, 100 + seq) for seq in (1, 2)]  # both delivered after the faults
    write(tmp_path / "run" / "history", ev)
    verdict = check_run(tmp_path / "run", spark=spark)
    coverage = verdict["coverage"]
    assert [w["exposed"] for w in coverage["windows"]] == [2, 2]  # exposed at each fault
    assert coverage["exposed_at_faults"] == 2  # the same two messages: never more than acked
    summary = (tmp_path / "run" / "summary.txt").read_text()
    assert "2 acknowledged and undelivered as faults began" in summary


def restart(node: str, start: float, end: float) -> list[dict[str, Any]]:
    """A nemesis restart of `node`, its window from start to end."""
    value = {"nodes": [node]}
    return [
        event("nemesis", "invoke", "restart", start, value=value),
        event("nemesis", "ok", "restart", end, value=value),
    ]


def check_expecting(
    spark: Any, tmp_path: Path, ev: list[dict[str, Any]], expect: str, **manifest: Any
) -> dict[str, Any]:
    """The history written as a run expecting `expect`, checked."""
    write(tmp_path / "run" / "history", ev)
    (tmp_path / "run" / "manifest.json").write_text(json.dumps({"expect": expect, **manifest}))
    return check_run(tmp_path / "run", spark=spark)


@pytest.mark.spark
def test_sends_left_unknown_outside_every_fault_are_not_unavailability(
    spark: Any, tmp_path: Path
) -> None:
    """The first R5 run: a restart from 3 to 4 s changed nothing the clients saw; the
    publisher's in-flight sends at its deadline (9.5 s) were left unknown, and arrived. That is
    not the unavailability a claim promises: not reproduced, not a match."""
    ev: list[dict[str, Any]] = []
    for seq in range(1, 11):
        ev += send("A", seq, seq, "info" if seq >= 9 else "ok")
        ev.append(recv("g", "A", seq, seq + 0.05))
    ev += restart("rabbit3", 3.0, 4.0)
    verdict = check_expecting(spark, tmp_path, ev, "unavailable")
    assert verdict["unavailability"]["A"]["in_fault_sends"] == 0
    assert not verdict["matched"] and verdict["claim_verdict"] is None
    assert verdict["reason"].startswith("not reproduced: 2 sends refused or unknown, but none")
    # The same refusals inside the restart are what the claim speaks of.
    ev += restart("rabbit3", 8.5, 9.8)
    verdict = check_expecting(spark, tmp_path, ev, "unavailable")
    assert verdict["matched"] and verdict["unavailability"]["A"]["in_fault_sends"] == 2


@pytest.mark.spark
def test_a_blocked_queue_is_a_stall_and_makes_unavailable(spark: Any, tmp_path: Path) -> None:
    """R5: a mirror synchronising holds confirms and deliveries; nothing is refused. A send every
    0.1 s, acked at once and delivered 0.05 s later, except that 40-45 (sent 4.0-4.5 s) are
    acked only at 9.5 s and the producer waits for them: the last progress before is seq 39's
    delivery at 3.951 s. The restart (the fault) lasts from 3.0 to 8.0 s."""
    ev: list[dict[str, Any]] = []
    for seq in [*range(1, 46), *range(95, 101)]:
        t = seq / 10
        acked_at = 9.5 if 40 <= seq <= 45 else t + 0.001
        ev.append(event("A", "invoke", "send", t, producer="A", seq=seq, stream="x"))
        ev.append(event("A", "ok", "send", acked_at, producer="A", seq=seq, stream="x"))
        ev.append(recv("q1", "A", seq, acked_at + 0.05))
    ev += restart("rabbit2", 3.0, 8.0)
    verdict = check_expecting(spark, tmp_path, ev, "unavailable")
    q1 = verdict["stalls"]["q1"]
    assert q1["stalls"] == 1
    stall = q1["longest"][0]
    assert stall["start"] == pytest.approx(3.951, abs=1e-3)
    assert stall["end"] == pytest.approx(9.5, abs=1e-3)  # the held confirms come back
    assert stall["in_fault_seconds"] == pytest.approx(8.0 - 3.951, abs=1e-3)
    assert verdict["outcome"] == "unavailable" and verdict["matched"]
    assert "blocked 4.0 s" in verdict["reason"] and verdict["sends"]["fail"] == 0
    assert "stalled q1: 1 stalls, 5.5 s" in (tmp_path / "run" / "summary.txt").read_text()


@pytest.mark.spark
def test_a_stall_while_the_broker_synchronised_a_mirror_makes_unavailable(
    spark: Any, tmp_path: Path
) -> None:
    """R5 as it ran: the restart (3-4 s) ends when the container starts; the node boots, and
    the master's log says it synchronised the mirror from 6.0 to 8.2 s. Progress stops from
    5.95 to 8.3 s: blocked while synchronising, after the fault's window."""
    ev: list[dict[str, Any]] = []
    times = [t / 10 for t in range(10, 60)] + [8.3 + t / 10 for t in range(10)]
    for seq, t in enumerate(times, 1):
        ev += send("A", seq, t, "ok")
        ev.append(recv("q1", "A", seq, t + 0.05 if t < 8 else t))
    ev += restart("rabbit3", 3.0, 4.0)
    verdict = check_expecting(spark, tmp_path, ev, "unavailable")
    assert verdict["stalls"]["q1"]["longest"][0]["in_fault_seconds"] == 0
    assert not verdict["matched"]  # no broker log of a sync: nothing ties the stall to one
    sync = {"queue": "q1", "master": "rabbit1", "messages": 42592, "mirrors": ["rabbit3"]}
    syncs = {"syncs": [sync | {"start": 6.0, "end": 8.2, "seconds": 2.2}]}
    verdict = check_expecting(spark, tmp_path, ev, "unavailable", mirrored_queues=syncs)
    stall = verdict["stalls"]["q1"]["longest"][0]
    assert stall["in_sync_seconds"] == pytest.approx(2.2, abs=1e-3)
    assert verdict["matched"] and "while the broker synchronised a mirror" in verdict["reason"]
    summary = (tmp_path / "run" / "summary.txt").read_text()
    assert "2.2 s while a mirror synchronised" in summary
    assert "broker log: rabbit1 synchronised q1 to rabbit3: 42592 messages" in summary


@pytest.mark.spark
def test_no_stall_under_steady_progress(spark: Any, tmp_path: Path) -> None:
    ev: list[dict[str, Any]] = []
    for seq in range(1, 51):
        ev += send("A", seq, seq / 10, "ok")
        ev.append(recv("q1", "A", seq, seq / 10 + 0.05))
    ev += restart("rabbit2", 1.0, 3.0)
    verdict = check_expecting(spark, tmp_path, ev, "unavailable")
    assert verdict["stalls"] == {}
    assert verdict["outcome"] == "safe" and not verdict["matched"]
