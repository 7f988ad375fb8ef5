"""The availability queries on their own: the unavailable intervals, their overlap with the
fault windows and the windows' traffic against a plain reading of their definitions."""

from __future__ import annotations

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
from checkers.spark import _window_traffic

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
        mine.sort(key=lambda send: (send[0] is not None, send[0] or 0.0, send[1]))
        run: list[tuple] = []
        for send in [*mine, None]:
            if send is not None and send[4] != "ok":
                run.append(send)
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
