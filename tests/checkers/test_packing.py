"""The packed message table is the struct one: same rows for any history whose orders fit, and
packing refused for those whose do not."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers.frames import small_frame
from checkers.lines import ROW_SCHEMA
from checkers.messages import message_table
from checkers.packing import TICKS_PER_SECOND, HistoryFacts, facts_by_names, facts_of, packing
from checkers.read import HistoryError
from contract.history import PLANNED_ABORT

START = 1_700_000_000.0


def history_facts(events: Any) -> HistoryFacts:
    """The facts of the history, in one job, as a check gathers them."""
    return facts_of(facts_by_names(events).collect())


def facts(**changed: Any) -> HistoryFacts:
    fields: dict[str, Any] = {
        "groups": ("g1",),
        "producers": ("P1",),
        "nodes": ("unknown",),
        "streams": ("x",),
        "files": ("P.jsonl", "c.jsonl"),
        "times": (START, START + 3600.0),
        "last_line": 2_000_000,
        "partitions": (0, 5),
        "offsets": (-1, 1_000_000),
    }
    return HistoryFacts(**{**fields, **changed})


def test_an_hour_of_a_run_packs_and_says_its_widths() -> None:
    packed = packing(facts())
    assert packed is not None
    assert packed.first_time == START
    assert (packed.line_bits, packed.file_bits) == (21, 2)
    assert (packed.partition_bits, packed.offset_bits, packed.lowest_offset) == (3, 20, -1)


@pytest.mark.parametrize(
    "changed",
    [
        {"times": (0.0, 10.0)},  # times of a test, not of a clock: not multiples of 2^-22
        {"times": (START, 2.0**31)},  # past 2038 the spacing doubles
        {"times": None},  # an empty history
        {"partitions": (-1, 3)},
        {"times": (START, START + 2**20)},  # 12 days of ticks leave too few bits for lines
        {"offsets": (0, 2**62)},
    ],
)
def test_orders_that_do_not_fit_are_not_packed(changed: dict[str, Any]) -> None:
    assert packing(facts(**changed)) is None


# An event: times a few ticks apart (ties and neighbouring doubles), every field's odd values.
an_event = st.tuples(
    st.sampled_from(["send", "send", "receive", "receive"]),
    st.sampled_from(["invoke", "ok", "ok", "fail", "info"]),
    st.integers(0, 6),  # ticks after START
    st.sampled_from(["a.jsonl", "b.jsonl", "c.jsonl"]),
    st.sampled_from(["m1", "m2", "m3", None]),
    st.sampled_from(["g1", "g2", None]),
    st.sampled_from(["s1", "s2", None]),
    st.sampled_from(["P1", "P2", None]),
    st.sampled_from([None, 0, 1, 3]),  # partition
    st.sampled_from([None, -1, 0, 5, 2**40]),  # offset (-1: acks=0)
    st.sampled_from([None, "rabbit1", "rabbit2"]),
    st.sampled_from([None, True, False]),  # redelivered
    st.sampled_from([None, '{"death": [1]}', '{"other": 1}']),
    st.booleans(),  # a planned abort
)


def _rows(drawn: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    lines: dict[str, int] = {}
    rows = []
    for f, kind, ticks, file, msg_id, group, stream, producer, *rest in drawn:
        partition, offset, node, redelivered, value, aborted = rest
        lines[file] = lines.get(file, 0) + 1
        time = START + ticks / TICKS_PER_SECOND
        type_ = "ok" if f == "receive" and kind == "invoke" else kind
        if f == "receive" and group is None:
            stream = stream or "s1"  # a receive of no group and no stream is refused (below)
        error = PLANNED_ABORT if aborted and type_ == "fail" else None
        seq = lines[file] % 3
        rows.append(
            (time, "p", type_, f, stream, group, producer, seq, msg_id, partition, offset, node)
            + (error, value, redelivered, file, lines[file])
        )
    return rows


@pytest.mark.spark
@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(an_event, min_size=1, max_size=30))
def test_the_packed_table_is_the_struct_table(spark: Any, drawn: list[tuple[Any, ...]]) -> None:
    events = small_frame(spark, _rows(drawn), ROW_SCHEMA)
    found = history_facts(events)
    packed = packing(found)
    assert packed is not None
    groups = [*found.groups, "expected, never read"]
    structs = message_table(events, groups).frame
    numbers = message_table(events, groups, packed).frame.select(*structs.columns)
    assert numbers.schema.simpleString() == structs.schema.simpleString()
    assert sorted(map(repr, numbers.collect())) == sorted(map(repr, structs.collect()))


def _event(time: float, f: str, group: str | None, stream: str | None) -> tuple[Any, ...]:
    return (time, "p", "ok", f, stream, group, "P1", 1, "m1", 0, 0, None, None, None, None)


@pytest.mark.spark
def test_a_time_that_is_not_a_number_is_not_packed(spark: Any) -> None:
    rows = [
        (*_event(START, "send", None, "x"), "a.jsonl", 1),
        (*_event(float("nan"), "receive", "g1", "x"), "b.jsonl", 1),
    ]
    found = history_facts(small_frame(spark, rows, ROW_SCHEMA))
    assert found.times is None and packing(found) is None


@pytest.mark.spark
def test_an_ok_receive_of_no_group_and_no_stream_is_one_line(spark: Any) -> None:
    rows = [(*_event(START, "receive", None, None), "c-g1.jsonl", 7)]
    with pytest.raises(HistoryError, match="c-g1.jsonl: an ok receive names neither"):
        history_facts(small_frame(spark, rows, ROW_SCHEMA))
