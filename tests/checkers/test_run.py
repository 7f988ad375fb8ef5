"""The PySpark checker on synthetic histories: known anomalies, and a reference model."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
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
from checkers.synthetic import GROUPS, synth
from checkers.verdict import METRICS
from contract.history import FIELDS, HistoryWriter
from tests.helpers import ROOT

pytestmark = pytest.mark.spark


def event(process: str, type_: str, f: str, t: float, **kw: Any) -> dict[str, Any]:
    e: dict[str, Any] = dict.fromkeys(FIELDS)
    e.update(time=t, process=process, type=type_, f=f, system="rabbitmq", **kw)
    if e["producer"] is not None and e["seq"] is not None:
        e["msg_id"] = f"{e['producer']}:{e['seq']}"
    return e


def send(producer: str, seq: int, t: float, outcome: str | None) -> list[dict[str, Any]]:
    events = [event(producer, "invoke", "send", t, producer=producer, seq=seq, stream="x")]
    if outcome:
        events.append(
            event(producer, outcome, "send", t + 0.001, producer=producer, seq=seq, stream="x")
        )
    return events


def recv(
    group: str, producer: str, seq: int, t: float, redelivered: bool = False, **kw: Any
) -> dict[str, Any]:
    return event(
        f"c-{group}",
        "ok",
        "receive",
        t,
        producer=producer,
        seq=seq,
        group=group,
        redelivered=redelivered,
        **{"stream": group, **kw},
    )


def write(history: Path, events: list[dict[str, Any]]) -> None:
    history.mkdir(parents=True, exist_ok=True)
    by_process: dict[str, list[str]] = defaultdict(list)
    for e in events:
        by_process[e["process"]].append(json.dumps(e))
    for process, lines in by_process.items():
        (history / f"{process}.jsonl").write_text("\n".join(lines) + "\n")


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


def test_truncated_last_line_is_skipped_and_counted(spark: Any, tmp_path: Path) -> None:
    history = tmp_path / "run" / "history"
    with HistoryWriter(history, "A", "rabbitmq") as w:
        w.write("invoke", "send", producer="A", seq=1, stream="x")
        w.write("ok", "send", producer="A", seq=1, stream="x")
    with HistoryWriter(history, "c", "rabbitmq") as w:
        w.write("ok", "receive", producer="A", seq=1, group="g", stream="g")
    with open(history / "A.jsonl", "a") as fh:
        fh.write('{"time": 3.0, "process": "A", "ty')  # a crash mid-write
    verdict = check_run(tmp_path / "run", spark=spark)
    assert verdict["truncated_lines"] == ["A.jsonl:3"]
    assert verdict["groups"]["g"]["lost"] == 0
    assert verdict["matched"] is True
    assert (tmp_path / "run" / "ids" / "g" / "lost.txt").read_text() == ""
    assert "truncated last lines skipped: 1" in (tmp_path / "run" / "summary.txt").read_text()


def test_malformed_middle_line_names_file_and_line(spark: Any, tmp_path: Path) -> None:
    history = tmp_path / "history"
    history.mkdir()
    good = json.dumps(event("A", "invoke", "send", 1.0, producer="A", seq=1))
    (history / "A.jsonl").write_text(good + "\n{not json\n" + good + "\n")
    with pytest.raises(HistoryError, match=r"A\.jsonl:2: malformed history line"):
        check_history(spark, history, tmp_path / "ids")
    (history / "A.jsonl").write_text(good + "\n" + good.replace('"invoke"', '"maybe"') + "\n")
    with pytest.raises(HistoryError, match=r"A\.jsonl:2: .*type 'maybe'"):
        check_history(spark, history, tmp_path / "ids")


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


def test_cli_check_exit_codes(spark: Any, tmp_path: Path) -> None:
    run = tmp_path / "run"
    ev = send("A", 1, 1, "ok") + send("A", 2, 2, "ok") + [recv("g", "A", 1, 5)]
    write(run / "history", ev)
    cmd = [sys.executable, "-m", "harness.cli", "check", str(run)]
    lost = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert lost.returncode == 1, lost.stderr
    assert "lost 1" in lost.stdout
    verdict = json.loads((run / "verdict.json").read_text())
    assert verdict["groups"]["g"]["lost"] == 1
    assert (run / "ids" / "g" / "lost.txt").read_text() == "A:2\n"
    assert (run / "ids" / "g" / "acked.txt").read_text() == "A:1\nA:2\n"
    assert (run / "ids" / "g" / "received.txt").read_text() == "A:1\n"
    loss = subprocess.run(
        cmd + ["--expect", "loss"], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert loss.returncode == 0 and "reproduced" in loss.stdout
    missing = subprocess.run(
        cmd[:-1] + [str(tmp_path / "nope")], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert missing.returncode == 2 and "Traceback" not in missing.stderr


def test_the_check_is_bounded_by_its_timeout(spark: Any, tmp_path: Path) -> None:
    run = tmp_path / "run"
    synth(run / "history", 20000)
    with pytest.raises(HistoryError, match="did not finish in 0 s"):
        check_run(run, spark=spark, timeout=0.01)


def test_the_history_is_checked_from_parquet_while_that_is_fresh(
    spark: Any, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    write(run / "history", send("A", 1, 1, "ok") + send("A", 2, 2, "ok") + [recv("g", "A", 1, 5)])
    verdict = check_run(run, spark=spark)
    assert verdict["checker"]["history"] == "parquet" and verdict["groups"]["g"]["lost"] == 1
    assert (run / "history.parquet" / "_SUCCESS").exists()
    reader = run / "history" / "c-g.jsonl"
    # Other content, the same size: the Parquet copy is what is read.
    reader.write_text(reader.read_text().replace('"A:1"', '"A:9"'))
    assert check_run(run, spark=spark)["groups"]["g"]["unexpected"] == 0
    # A history that changed size is read again from its JSONL, and copied again.
    with open(reader, "a") as fh:
        fh.write(json.dumps(recv("g", "A", 2, 6)) + "\n")
    again = check_run(run, spark=spark)["groups"]["g"]
    assert (again["unexpected"], again["lost"], again["received"]) == (1, 1, 2)


def test_losses_are_tied_to_the_fault_step_and_the_acking_node(spark: Any, tmp_path: Path) -> None:
    ev: list[dict[str, Any]] = []
    for seq in range(1, 11):
        ev += send("A", seq, seq, None)
        node = "rabbit1" if seq % 2 else "rabbit2"
        ev.append(event("A", "ok", "send", seq + 0.5, producer="A", seq=seq, stream="x", node=node))
    # Step 1 starts as seq 3 is acknowledged (at or before: it is in effect), step 2 at 7.5.
    ev.append(
        event(
            "nemesis",
            "invoke",
            "start-partition",
            3.5,
            value={"op": "isolate", "nodes": ["rabbit2"]},
        )
    )
    ev.append(event("nemesis", "ok", "start-partition", 3.6, value={"op": "isolate"}))
    ev.append(
        event("nemesis", "invoke", "leaders", 5.0, value={"label": "snapshot"})
    )  # not a fault
    ev.append(event("nemesis", "invoke", "stop-partition", 7.5, value={"op": "heal"}))
    ev += [recv("g", "A", seq, 100 + seq) for seq in (1, 2, 4, 6, 9)]
    write(tmp_path / "run" / "history", ev)
    verdict = check_run(tmp_path / "run", spark=spark)
    lost = verdict["attribution"]["lost"]["g"]
    assert lost["by_step"] == {
        "1. start-partition isolate rabbit2 at +2.5 s": 2,  # seq 3 and 5
        "2. stop-partition heal at +6.5 s": 3,  # seq 7, 8 and 10
    }
    assert lost["by_node"] == {"rabbit1": 3, "rabbit2": 2}
    summary = (tmp_path / "run" / "summary.txt").read_text()
    assert "lost in g by fault step: 1. start-partition isolate rabbit2 at +2.5 s: 2" in summary


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


def test_no_stall_under_steady_progress(spark: Any, tmp_path: Path) -> None:
    ev: list[dict[str, Any]] = []
    for seq in range(1, 51):
        ev += send("A", seq, seq / 10, "ok")
        ev.append(recv("q1", "A", seq, seq / 10 + 0.05))
    ev += restart("rabbit2", 1.0, 3.0)
    verdict = check_expecting(spark, tmp_path, ev, "unavailable")
    assert verdict["stalls"] == {}
    assert verdict["outcome"] == "safe" and not verdict["matched"]


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


def test_a_local_check_prints_no_line_of_spark_s_own(tmp_path: Path) -> None:
    """The JVM's launcher notes (an incubator module, the shell's log level) go to its log."""
    import os

    run = tmp_path / "run"
    write(run / "history", send("A", 1, 1, "ok") + [recv("g", "A", 1, 2)])
    cache = tmp_path / "cache"
    checked = subprocess.run(
        [sys.executable, "-m", "harness.cli", "check", str(run), "--master", "local[1]"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "BJ_CACHE_DIR": str(cache)},
    )
    assert checked.returncode == 0, checked.stderr
    said = checked.stderr.strip().splitlines()
    # Ours: the check's time, and (a history without a manifest) the report it cannot build.
    assert said[0].startswith("checked on Spark master local[1] in "), said
    assert all(line.startswith(("checked on ", "no report: ")) for line in said), said
    assert "incubator" in (cache / "checker-jvm.log").read_text()


def test_the_answers_do_not_depend_on_the_shuffle_partitions(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small history is read as one partition and never shuffled; a large one, or a Spark
    that is not ours (SPARK_REMOTE, a cluster), shuffles into its own number of partitions:
    every count, and every ids file in its order, are those of the same history in one task."""
    run = tmp_path / "run"
    synth(run / "history", 2000)
    (run / "manifest.json").write_text(json.dumps({"groups": list(GROUPS)}) + "\n")
    answers = []
    # Not coalesced back into a partition or two: each of the 7 gets rows of its own.
    settings = ("spark.sql.shuffle.partitions", "spark.sql.adaptive.coalescePartitions.enabled")
    before = {k: spark.conf.get(k) for k in settings}
    for partitions, one_task in ((2, True), (7, False)):
        monkeypatch.setattr(read, "SMALL_HISTORY_BYTES", 1 << 40 if one_task else -1)
        spark.conf.set(settings[0], str(partitions))
        spark.conf.set(settings[1], "false")
        shutil.rmtree(run / "ids", ignore_errors=True)
        try:
            verdict = check_run(run, spark=spark)
        finally:
            for k, v in before.items():
                spark.conf.set(k, v)
        ids = {p.relative_to(run): p.read_text() for p in sorted((run / "ids").rglob("*.txt"))}
        answers.append(
            (
                # As JSON: the order of every answer's keys is part of it.
                json.dumps({k: verdict[k] for k in ANSWERS}),
                ids,
            )
        )
    assert answers[0][1] and answers[0] == answers[1]


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


ANSWERS = ("groups", "log", "readers", "producers", "attribution", "unavailability", "stalls")


def test_a_small_history_is_read_as_one_partition(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No grouping of a small history's events shuffles; a large one's does."""
    history = tmp_path / "history"
    synth(history, 200)

    def plan() -> str:
        events = read.read_history(spark, history).events
        return str(events.groupBy("process").count()._jdf.queryExecution().executedPlan())

    assert "Exchange" not in plan()
    monkeypatch.setattr(read, "SMALL_HISTORY_BYTES", read.history_bytes(history) - 1)
    assert "Exchange" in plan()
