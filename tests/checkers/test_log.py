"""Offset-level anomalies of a Kafka history's observed log, planted with known counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers.spark import LOG_SAMPLES, check_history
from contract.history import FIELDS

pytestmark = pytest.mark.spark
TOPIC = "t"
# Each example is a whole Spark check: a few are enough to vary the plants.
FEW_EXAMPLES = settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _event(process: str, type_: str, f: str, t: float, **kw: Any) -> str:
    e: dict[str, Any] = dict.fromkeys(FIELDS)
    e.update(time=t, process=process, type=type_, f=f, system="kafka", stream=TOPIC, **kw)
    return json.dumps(e)


def kafka_history(history: Path, messages: int, truncated: set[int], retried: set[int]) -> None:
    """Producer P writes seq 1..messages to partition 0, seq n at offset n - 1; a retried seq is
    written again at the end of the log. Reader R reads the log back, except that a truncated
    offset holds another message when read (X:n, never acknowledged there)."""
    history.mkdir(parents=True)
    sends, receives, log = [], [], []
    for seq in range(1, messages + 1):
        msg = {"producer": "P", "seq": seq, "msg_id": f"P:{seq}"}
        sends.append(_event("P", "invoke", "send", seq, **msg))
        sends.append(_event("P", "ok", "send", seq + 0.5, partition=0, offset=seq - 1, **msg))
        log.append((seq - 1, msg))
    for n, seq in enumerate(sorted(retried)):
        log.append((messages + n, {"producer": "P", "seq": seq, "msg_id": f"P:{seq}"}))
    for offset, msg in log:
        if offset + 1 in truncated:
            msg = {"producer": "X", "seq": offset + 1, "msg_id": f"X:{offset + 1}"}
        receives.append(
            _event(
                "R", "ok", "receive", 1000 + offset, group="R", partition=0, offset=offset, **msg
            )
        )
    (history / "P.jsonl").write_text("\n".join(sends) + "\n")
    (history / "R.jsonl").write_text("\n".join(receives) + "\n")


def test_a_clean_log_has_no_offset_anomalies(spark: Any, tmp_path: Path) -> None:
    kafka_history(tmp_path / "history", 20, set(), set())
    result = check_history(spark, tmp_path / "history", tmp_path / "ids")
    assert result.log["inconsistent_offsets"] == 0 and result.log["duplicate_offsets"] == 0
    assert result.groups["R"]["lost"] == 0


def test_samples_name_the_position_and_the_messages(spark: Any, tmp_path: Path) -> None:
    kafka_history(tmp_path / "history", 6, {3}, {5})
    result = check_history(spark, tmp_path / "history", tmp_path / "ids")
    assert result.log["samples"] == {
        "inconsistent_offsets": ["t/0@2: P:3, X:3"],
        "duplicate_offsets": ["P:5: t/0@4, t/0@6"],
    }


plants = st.integers(4, 30).flatmap(
    lambda n: st.tuples(
        st.just(n),
        st.sets(st.integers(1, n), max_size=n // 2),
        st.sets(st.integers(1, n), max_size=n // 2),
    )
)


@FEW_EXAMPLES
@given(plants)
def test_planted_truncations_and_retries_are_counted(
    spark: Any, tmp_path_factory: pytest.TempPathFactory, plant: Any
) -> None:
    messages, truncated, retried = plant
    run = tmp_path_factory.mktemp("log")
    kafka_history(run / "history", messages, truncated, retried)
    result = check_history(spark, run / "history", run / "ids")
    # A retried copy read back at the end of the log is not truncated: only offsets 0..n-1 are.
    assert result.log["inconsistent_offsets"] == len(truncated)
    # A retry whose first copy was overwritten in the reader's view is still at two positions:
    # its acknowledged offset and its retried one.
    assert result.log["duplicate_offsets"] == len(retried)
    assert result.groups["R"]["lost"] == len(truncated - retried)


def test_one_message_in_two_streams_is_no_duplicate_one_stream_at_two_offsets_is(
    spark: Any, tmp_path: Path
) -> None:
    """A RabbitMQ fanout puts a copy of each message in each stream, at each stream's own offset:
    a duplicate is a message at two offsets of one log."""
    history = tmp_path / "history"
    history.mkdir()
    msg = {"producer": "P", "seq": 1, "msg_id": "P:1"}
    sends = [_event("P", "invoke", "send", 1, **msg), _event("P", "ok", "send", 2, **msg)]
    reads = []
    for group, stream, offset in (("s1", "s1", 0), ("s2", "s2", 7), ("s2", "s2", 9)):
        e = json.loads(
            _event("R", "ok", "receive", 3, group=group, partition=0, offset=offset, **msg)
        )
        reads.append(json.dumps(e | {"stream": stream}))
    (history / "P.jsonl").write_text("\n".join(sends) + "\n")
    (history / "R.jsonl").write_text("\n".join(reads) + "\n")
    result = check_history(spark, history, tmp_path / "ids", ["s1", "s2"])
    assert result.log["duplicate_offsets"] == 1
    assert result.log["samples"]["duplicate_offsets"] == ["P:1: s2/0@7, s2/0@9"]


def test_messages_of_a_history_without_streams_count_and_show_at_their_positions(
    spark: Any, tmp_path: Path
) -> None:
    """Events that name no stream group under none: each msg_id read at another offset than it
    was written at is a duplicate, counted and shown as any other (the positions of the few
    shown are found again, and must not lose the ones without a stream)."""
    history = tmp_path / "history"
    history.mkdir()
    sends, reads = [], []
    for seq in range(1, 6):
        msg = {"producer": "P", "seq": seq, "msg_id": f"P:{seq}"}
        sent = _event("P", "ok", "send", seq, partition=0, offset=seq, **msg)
        read = _event(
            "R", "ok", "receive", 10 + seq, group="R", partition=0, offset=seq + 100, **msg
        )
        sends.append(json.dumps(json.loads(sent) | {"stream": None}))
        reads.append(json.dumps(json.loads(read) | {"stream": None}))
    (history / "P.jsonl").write_text("\n".join(sends) + "\n")
    (history / "R.jsonl").write_text("\n".join(reads) + "\n")
    result = check_history(spark, history, tmp_path / "ids")
    assert result.log["duplicate_offsets"] == 5
    assert result.log["samples"]["duplicate_offsets"][0] == "P:1: 0@1, 0@101"


def test_one_offset_in_two_partitions_is_two_positions_one_read_twice_is_one(
    spark: Any, tmp_path: Path
) -> None:
    """A position is (partition, offset): the same offset in another partition of one topic is
    another position; the same position read again (a redelivery) is not."""
    history = tmp_path / "history"
    history.mkdir()
    sends, reads = [], []
    for seq in (1, 2):
        msg = {"producer": "P", "seq": seq, "msg_id": f"P:{seq}"}
        sends.append(_event("P", "invoke", "send", seq, **msg))
        sends.append(_event("P", "ok", "send", seq + 0.5, partition=0, offset=seq + 2, **msg))
    moved = {"producer": "P", "seq": 1, "msg_id": "P:1"}
    reads.append(_event("R", "ok", "receive", 10, group="R", partition=1, offset=3, **moved))
    again = {"producer": "P", "seq": 2, "msg_id": "P:2"}
    for t in (11, 12):
        reads.append(_event("R", "ok", "receive", t, group="R", partition=0, offset=4, **again))
    (history / "P.jsonl").write_text("\n".join(sends) + "\n")
    (history / "R.jsonl").write_text("\n".join(reads) + "\n")
    result = check_history(spark, history, tmp_path / "ids")
    assert result.log["duplicate_offsets"] == 1
    assert result.log["samples"]["duplicate_offsets"] == ["P:1: t/0@3, t/1@3"]


def test_a_rabbitmq_history_has_zero_offset_anomalies(spark: Any, tmp_path: Path) -> None:
    from checkers.synthetic import synth

    synth(tmp_path / "history", 200)
    result = check_history(spark, tmp_path / "history", tmp_path / "ids", ["g1", "g2"])
    assert result.log["inconsistent_offsets"] == 0 and result.log["duplicate_offsets"] == 0


def reader_history(
    history: Path, n: int, skipped: set[int], rewinds: set[int], swaps: set[int], tail: int
) -> None:
    """P writes seq 1..n to partition 0, seq s at offset s - 1, except that each swap s puts s
    and s + 1 at each other's offset. R reads offsets 0..n-1-tail in order, leaving out the
    skipped offsets and reading each rewind offset twice in a row."""
    history.mkdir(parents=True)
    at = {s: s - 1 for s in range(1, n + 1)}
    for s in swaps:
        at[s], at[s + 1] = at[s + 1], at[s]
    seq_at = {offset: s for s, offset in at.items()}
    sends, reads = [], []
    for s in range(1, n + 1):
        msg = {"producer": "P", "seq": s, "msg_id": f"P:{s}"}
        sends.append(_event("P", "invoke", "send", s, **msg))
        sends.append(_event("P", "ok", "send", s + 0.5, partition=0, offset=at[s], **msg))
    t = 1000.0
    for offset in range(n - tail):
        if offset in skipped:
            continue
        s = seq_at[offset]
        msg = {"producer": "P", "seq": s, "msg_id": f"P:{s}"}
        for _ in range(2 if offset in rewinds else 1):
            t += 1
            reads.append(
                _event("R", "ok", "receive", t, group="R", partition=0, offset=offset, **msg)
            )
    (history / "P.jsonl").write_text("\n".join(sends) + "\n")
    (history / "R.jsonl").write_text("\n".join(reads) + "\n")


readers_plan = st.integers(12, 40).flatmap(
    lambda n: st.tuples(
        st.just(n),
        st.integers(0, 3),  # tail
        st.sets(st.sampled_from(range(1, n - 5, 2)), max_size=4),  # skipped (odd: never adjacent)
        st.sets(st.sampled_from(range(0, n - 4, 2)), max_size=4),  # rewinds (even)
        st.sets(st.sampled_from(range(1, n - 1, 4)), max_size=3),  # swaps (pairs never overlap)
    )
)


@FEW_EXAMPLES
@given(readers_plan)
def test_planted_reader_and_producer_anomalies_are_counted(
    spark: Any, tmp_path_factory: pytest.TempPathFactory, plan: Any
) -> None:
    n, tail, skipped, rewinds, swaps = plan
    run = tmp_path_factory.mktemp("readers")
    reader_history(run / "history", n, skipped, rewinds, swaps, tail)
    result = check_history(spark, run / "history", run / "ids")
    assert result.readers == {"R": {"poll_skips": len(skipped), "nonmonotonic_polls": len(rewinds)}}
    assert result.producers == {"P": {"nonmonotonic_sends": len(swaps)}}
    group = result.groups["R"]
    # The tail was never reached (unseen); the skipped offsets are holes below what R read.
    assert (group["lost"], group["unseen"]) == (len(skipped) + tail, tail)
    assert group["duplicated"] == len(rewinds)


def test_counts_are_of_every_anomaly_and_samples_the_first_few_in_order(
    spark: Any, tmp_path: Path
) -> None:
    """More anomalies than are shown: each count is of all of them, the samples the first
    LOG_SAMPLES, inconsistent offsets by position and duplicates by msg_id."""
    planted = set(range(1, LOG_SAMPLES + 4))
    kafka_history(tmp_path / "history", 12, planted, planted)
    result = check_history(spark, tmp_path / "history", tmp_path / "ids")
    assert result.log["inconsistent_offsets"] == result.log["duplicate_offsets"] == len(planted)
    shown = range(1, LOG_SAMPLES + 1)
    assert result.log["samples"] == {
        "inconsistent_offsets": [f"t/0@{k - 1}: P:{k}, X:{k}" for k in shown],
        # positions as text, sorted as text
        "duplicate_offsets": [
            f"P:{k}: {', '.join(sorted([f't/0@{k - 1}', f't/0@{11 + k}']))}" for k in shown
        ],
    }
