"""The PySpark checker's counts on synthetic histories: known anomalies, and a reference
model."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers import read
from checkers import spark as checker
from checkers.engine import ONE_PARTITION_CONF
from checkers.ids import read_ids
from checkers.read import HistoryError
from checkers.run import check_run
from checkers.spark import check_history
from checkers.synthetic import synth
from checkers.verdict import METRICS
from tests.checkers.histories import recv, send, write

pytestmark = pytest.mark.spark


def test_known_anomalies(spark: Any, tmp_path: Path) -> None:
    ev: list[dict[str, Any]] = []
    for seq in range(1, 7):
        ev += send("A", seq, seq, "ok")
    ev += send("A", 7, 7, "info")  # unknown outcome, later received: recovered
    ev += send("A", 8, 8, "fail")  # definitely failed, never received
    ev += send("A", 9, 9, None)  # invoke, no completion: counts as info
    # q1: 1, 2, 4, 3 (reordered), 2 again (duplicate, its replay unflagged), 7 (recovered),
    #     5 and 6 lost, Z:1 never sent (unexpected)
    for i, seq in enumerate([1, 2, 4, 3, 2, 7]):
        ev.append(recv("q1", "A", seq, 100 + i))
    ev.append(recv("q1", "Z", 1, 200))
    # q2: everything acknowledged, in order
    for seq in range(1, 7):
        ev.append(recv("q2", "A", seq, 300 + seq))
    write(tmp_path / "history", ev)
    result = check_history(spark, tmp_path / "history", tmp_path / "ids", ["q1", "q2", "q3"])
    q1, q2, q3 = (result.groups[g] for g in ("q1", "q2", "q3"))
    assert q1 == {
        "acked": 6,
        "received": 6,
        "lost": 2,
        "unseen": 0,  # no offsets here (RabbitMQ): nothing to place a loss above or below
        "duplicated": 1,
        "unflagged": 1,
        "reordered": 1,
        "unexpected": 1,
        "recovered": 1,
        "dead_lettered": 0,
        "both": 0,
    }
    q1_ids = {m: read_ids(result.ids_dir, "q1", m) for m in METRICS}
    assert {
        m: q1_ids[m]
        for m in ("lost", "duplicated", "unflagged", "reordered", "unexpected", "recovered")
    } == {
        "lost": ["A:5", "A:6"],
        "duplicated": ["A:2"],
        "unflagged": ["A:2"],
        "reordered": ["A:3"],
        "unexpected": ["Z:1"],
        "recovered": ["A:7"],
    }
    assert q1_ids["acked"] == [f"A:{i}" for i in range(1, 7)]
    assert q1_ids["received"] == ["A:1", "A:2", "A:3", "A:4", "A:7", "Z:1"]
    assert q2 == {
        "acked": 6,
        "received": 6,
        "lost": 0,
        "unseen": 0,
        "duplicated": 0,
        "unflagged": 0,
        "reordered": 0,
        "unexpected": 0,
        "recovered": 0,
        "dead_lettered": 0,
        "both": 0,
    }
    # A group that received nothing still expects every acknowledged message.
    assert q3["lost"] == 6 and q3["received"] == 0
    assert result.sends == {"ok": 6, "fail": 1, "info": 2, "invoked": 9}
    # Sends 7 (info) and 8 (fail) and the bare invoke at 9 (no completion: unknown) form one
    # unavailable interval, from the first one's invoke at 7 to the last one's end at 9.
    assert result.refused_window == {"first": 7.0, "last": 9.0, "seconds": 2.0}
    assert result.unavailability["A"]["seconds"] == 2.0


def test_reorder_ties_break_by_file_order_and_partitions_are_separate(
    spark: Any, tmp_path: Path
) -> None:
    ev: list[dict[str, Any]] = []
    for seq in (1, 2):
        ev += send("A", seq, seq, "ok")
    # Same timestamp: file order decides; 2 before 1 in the file is a reorder.
    ev += [recv("g", "A", 2, 50.0), recv("g", "A", 1, 50.0)]
    # Kafka-style partitions: order is only promised within one (producer, partition).
    ev += send("K", 1, 1, "ok") + send("K", 2, 2, "ok")
    ev += [recv("g", "K", 2, 60.0, partition=0), recv("g", "K", 1, 61.0, partition=1)]
    write(tmp_path / "history", ev)
    result = check_history(spark, tmp_path / "history", tmp_path / "ids")
    assert read_ids(result.ids_dir, "g", "reordered") == ["A:1"]


def test_a_replay_without_the_redelivered_flag_is_counted(spark: Any, tmp_path: Path) -> None:
    """RabbitMQ marks a requeued delivery redelivered; a replay without the mark is counted, and
    the duplicates verdict says how the replays were marked."""
    ev: list[dict[str, Any]] = []
    for seq in (1, 2, 3):
        ev += send("A", seq, seq, "ok")
    ev += [recv("g", "A", s, 10.0 + s) for s in (1, 2, 3)]
    # 1 replayed with the flag, twice; 2 replayed once with it and once without; 3 not replayed.
    ev += [recv("g", "A", 1, 20.0, redelivered=True), recv("g", "A", 1, 21.0, redelivered=True)]
    ev += [recv("g", "A", 2, 22.0, redelivered=True), recv("g", "A", 2, 23.0)]
    write(tmp_path / "run" / "history", ev)
    verdict = check_run(tmp_path / "run", spark=spark, expect="duplicates")
    assert verdict["groups"]["g"]["duplicated"] == 2
    assert verdict["groups"]["g"]["unflagged"] == 1
    assert (tmp_path / "run" / "ids" / "g" / "unflagged.txt").read_text() == "A:2\n"
    assert verdict["matched"]
    assert "1 of them replayed without the redelivered flag" in verdict["reason"]


def test_no_history_is_bad_input(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "history").mkdir()
    with pytest.raises(HistoryError, match="no history files"):
        check_history(spark, tmp_path / "history", tmp_path / "ids")


def reference(events: list[dict[str, Any]], groups: list[str]) -> dict[str, dict[str, int]]:
    """A plain-Python statement of the checker's definitions, to compare Spark against."""
    rank = {"ok": 3, "fail": 2, "info": 1, "invoke": 0}
    outcome: dict[str, int] = {}
    for e in events:
        if e["f"] == "send":
            outcome[e["msg_id"]] = max(outcome.get(e["msg_id"], 0), rank[e["type"]])
    acked = {m for m, r in outcome.items() if r == 3}
    out = {}
    for g in groups:
        deliveries = [e for e in events if e["f"] == "receive" and e["group"] == g]
        counts: dict[str, int] = defaultdict(int)
        dead: dict[str, int] = defaultdict(int)
        for e in deliveries:
            counts[e["msg_id"]] += 1
            dead[e["msg_id"]] += bool((e.get("value") or {}).get("death"))
        highest: dict[tuple[Any, Any], int] = {}
        seen: set[str] = set()
        reordered = 0
        unflagged: set[str] = set()
        for e in deliveries:  # already in (time, file, line) order
            if e["msg_id"] in seen:
                if e["redelivered"] is False and not (e.get("value") or {}).get("death"):
                    unflagged.add(e["msg_id"])
                continue
            seen.add(e["msg_id"])
            key = (e["producer"], e["partition"])
            if key in highest and e["seq"] < highest[key]:
                reordered += 1
            highest[key] = max(highest.get(key, e["seq"]), e["seq"])
        out[g] = {
            "acked": len(acked),
            "received": len(counts),
            "lost": len(acked - counts.keys()),
            "unseen": 0,  # these histories carry no offsets
            "duplicated": sum(1 for n in counts.values() if n > 1),
            "unflagged": len(unflagged),
            "reordered": reordered,
            "unexpected": len(counts.keys() - outcome.keys()),
            "recovered": len({m for m in counts if m in outcome and outcome[m] < 3}),
            "dead_lettered": sum(1 for m in counts if dead[m]),
            "both": sum(1 for m, n in counts.items() if 0 < dead[m] < n),
        }
    return out


histories = st.tuples(
    st.lists(st.sampled_from(["ok", "fail", "info", None]), min_size=1, max_size=12),
    st.lists(
        st.tuples(st.sampled_from(["g1", "g2"]), st.integers(1, 14), st.booleans(), st.booleans()),
        max_size=30,
    ),
)


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(histories)
def test_spark_agrees_with_the_reference_model(spark: Any, tmp_path_factory: Any, h: Any) -> None:
    outcomes, deliveries = h
    events: list[dict[str, Any]] = []
    for seq, outcome in enumerate(outcomes, 1):
        events += send("P", seq, float(seq), outcome)
    # Distinct, increasing times: the reference reads deliveries in time order.
    for i, (group, seq, redelivered, dead) in enumerate(deliveries):
        death = {"value": {"death": "expired"}} if dead else {}
        events.append(recv(group, "P", seq, 1000.0 + i, redelivered=redelivered, **death))
    history = tmp_path_factory.mktemp("h") / "history"
    write(history, events)
    result = check_history(spark, history, history.parent / "ids", ["g1", "g2"])
    assert result.groups == reference(events, ["g1", "g2"])


def test_dead_lettered_messages_count_for_their_queue_and_one_out_of_both_is_flagged(
    spark: Any, tmp_path: Path
) -> None:
    """A queue q and its dead-letter queue q.dlq, read for q's group: A:1 out of q, A:2 and
    A:3 dead-lettered (expired), A:3 out of q as well (a double delivery planted), A:4 out of
    neither, A:5 refused by the broker (reject-publish)."""
    ev: list[dict[str, Any]] = []
    for seq in range(1, 5):
        ev += send("A", seq, seq, "ok")
    ev += send("A", 5, 5, "fail")
    dead = {"value": {"death": "expired"}, "stream": "q.dlq"}
    ev += [recv("q", "A", 1, 6), recv("q", "A", 3, 6.5)]
    ev += [recv("q", "A", 2, 7, **dead) | {"process": "c-dlq"}]
    ev += [recv("q", "A", 3, 8, **dead) | {"process": "c-dlq"}]
    write(tmp_path / "history", ev)
    result = check_history(spark, tmp_path / "history", tmp_path / "ids", ["q"])
    q = result.groups["q"]
    assert (q["acked"], q["received"], q["lost"]) == (4, 3, 1)
    assert (q["dead_lettered"], q["both"], q["duplicated"]) == (2, 1, 1)
    assert read_ids(result.ids_dir, "q", "dead_lettered") == ["A:2", "A:3"]
    assert read_ids(result.ids_dir, "q", "both") == ["A:3"]
    assert read_ids(result.ids_dir, "q", "lost") == ["A:4"]
    assert result.sends["fail"] == 1


def test_a_small_history_is_checked_without_adaptive_planning_and_the_session_kept(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A history read as one partition is checked with tuning.ONE_PARTITION_CONF, a large one
    with the session's own settings; either way the session has its own back after the check
    (a warm server's outlives it)."""
    history = tmp_path / "history"
    synth(history, 200)
    before = {k: spark.conf.get(k) for k in ONE_PARTITION_CONF}
    seen = []
    checked = checker._checked

    def watched(session: Any, *args: Any) -> Any:
        seen.append({k: session.conf.get(k) for k in ONE_PARTITION_CONF})
        return checked(session, *args)

    monkeypatch.setattr(checker, "_checked", watched)
    check_history(spark, history, tmp_path / "small-ids")
    monkeypatch.setattr(read, "SMALL_HISTORY_BYTES", -1)
    check_history(spark, history, tmp_path / "large-ids")
    assert seen == [ONE_PARTITION_CONF, before]
    assert {k: spark.conf.get(k) for k in ONE_PARTITION_CONF} == before
