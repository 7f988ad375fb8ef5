"""Transactional anomalies planted at known records: the checker finds exactly those."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers.read import read_history
from checkers.spark import check_history
from checkers.transactions import check_transactions
from checkers.verdict import Counts, judge
from contract.history import END_TXN, FIELDS, INIT_TXN, PLANNED_ABORT

pytestmark = pytest.mark.spark
TOPIC = "t"
PARTITIONS = 3
SIZE = 4  # records per transaction
FEW_EXAMPLES = settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _event(process: str, type_: str, f: str, t: float, **kw: Any) -> dict[str, Any]:
    e: dict[str, Any] = dict.fromkeys(FIELDS)
    e.update(time=t, process=process, type=type_, f=f, system="kafka", stream=TOPIC)
    e.update(kw)
    return e


def txn_history(
    history: Path,
    txns: int,
    aborted: set[int],
    unknown: set[int] = frozenset(),  # type: ignore[assignment]
    read_aborted: set[int] = frozenset(),  # type: ignore[assignment]
    torn: set[int] = frozenset(),  # type: ignore[assignment]
    unseen: set[int] = frozenset(),  # type: ignore[assignment]
) -> dict[str, Any]:
    """Producer P runs transactions 1..txns of SIZE records, record i of a transaction in
    partition i % PARTITIONS; each transaction's marker takes an offset in every partition it
    wrote. Aborted ones are aborted on purpose; unknown ones end info (and committed: readers
    see them, but for those in `unseen`, which aborted). Reader C (read_committed) reads every
    committed record, plus the records of the aborted transactions in `read_aborted`, less the
    first record of each transaction in `torn`; reader U (read_uncommitted) reads everything.
    Returns what was planted."""
    history.mkdir(parents=True)
    said = {"client": "a test", "transactional_id": "P"}
    p: list[dict[str, Any]] = [_event("P", "ok", "open", 0, stream=None, producer="P", value=said)]
    c: list[dict[str, Any]] = [
        _event("C", "ok", "open", 0, group="C", value={"isolation": "read_committed"})
    ]
    u: list[dict[str, Any]] = [
        _event("U", "ok", "open", 0, group="U", value={"isolation": "read_uncommitted"})
    ]
    next_offset = dict.fromkeys(range(PARTITIONS), 0)
    seq, t = 0, 1.0
    planted: dict[str, Any] = {"aborted_reads": set(), "torn": set()}
    for n in range(1, txns + 1):
        tid = f"P:t{n}"
        p.append(_event("P", "invoke", "txn", t, producer="P", value={"txn": tid}))
        records = []
        for i in range(SIZE):
            seq += 1
            partition = i % PARTITIONS
            offset = next_offset[partition]
            next_offset[partition] += 1
            records.append((seq, partition, offset, i))
            msg = {"producer": "P", "seq": seq, "msg_id": f"P:{seq}"}
            p.append(_event("P", "invoke", "send", t, **msg, value={"txn": tid}))
        for partition in {r[1] for r in records}:  # the marker
            next_offset[partition] += 1
        outcome = "fail" if n in aborted else "info" if n in unknown else "ok"
        if outcome != "fail":  # its commit asked at +0.3 s, its end at +0.5 s
            asked = {"txn": tid, "commit": True}
            p.append(
                _event("P", "info", "end-txn", t + 0.3, stream=None, producer="P", value=asked)
            )
        error = PLANNED_ABORT if n in aborted else "_TIMED_OUT: commit" if n in unknown else None
        value = {"txn": tid, "seqs": [r[0] for r in records]} | (
            {"planned": True} if n in aborted else {}
        )
        p.append(_event("P", outcome, "txn", t + 0.5, producer="P", error=error, value=value))
        for s, partition, offset, i in records:
            msg = {"producer": "P", "seq": s, "msg_id": f"P:{s}"}
            p.append(
                _event(
                    "P",
                    outcome,
                    "send",
                    t + 0.5,
                    **msg,
                    partition=partition,
                    offset=offset,
                    error=error,
                    value={"txn": tid},
                )
            )
            read = {**msg, "partition": partition, "offset": offset}
            u.append(_event("U", "ok", "receive", t + 1, group="U", **read))
            if (n in aborted and n not in read_aborted) or n in unseen:
                continue
            if n in torn and i == 0:
                continue
            c.append(_event("C", "ok", "receive", t + 1, group="C", **read))
            if n in aborted:
                planted["aborted_reads"].add(f"P:{s}")
        if n in torn:
            planted["torn"].add(tid)
        t += 1.0
    # C reads one committed transaction more at the end, so it read past every planted hole.
    for name, rows in (("P", p), ("C", c), ("U", u)):
        (history / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return planted


def _ids(path: Path) -> set[str]:
    return set(path.read_text().split()) if path.exists() else set()


def test_a_clean_transactional_history_is_clean(spark: Any, tmp_path: Path) -> None:
    txn_history(tmp_path / "history", 12, aborted={3, 7}, unknown={5})
    result = check_history(spark, tmp_path / "history", tmp_path / "ids")
    t = result.transactions
    assert t is not None
    assert (t["transactions"], t["committed"], t["aborted"], t["unknown"]) == (12, 9, 2, 1)
    assert t["planned_aborts"] == 2 and t["unknown_seen_committed"] == 1
    assert t["groups"]["C"] == {
        "isolation": "read_committed",
        "aborted_reads": 0,
        "aborted_read_txns": 0,
        "torn": 0,
        "lost_txns": 0,
    }
    # U read the aborted records: read_uncommitted promises nothing about them.
    assert t["groups"]["U"]["aborted_reads"] == 0
    assert result.groups["C"]["lost"] == 0
    # A planned abort is neither acknowledged nor refused.
    assert result.sends["aborted"] == 2 * SIZE and result.sends["fail"] == 0
    assert result.sends["info"] == SIZE
    counts = Counts.of(result.groups, result.sends, transactions=t)
    assert judge(counts, "safe").matched


def test_a_history_without_transactions_has_no_section(spark: Any, tmp_path: Path) -> None:
    history = tmp_path / "history"
    history.mkdir()
    rows = [
        _event("P", "invoke", "send", 1, producer="P", seq=1, msg_id="P:1"),
        _event("P", "ok", "send", 2, producer="P", seq=1, msg_id="P:1", partition=0, offset=0),
        _event(
            "R",
            "ok",
            "receive",
            3,
            group="R",
            producer="P",
            seq=1,
            msg_id="P:1",
            partition=0,
            offset=0,
        ),
    ]
    (history / "P.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    (history / "R.jsonl").write_text(json.dumps(rows[2]) + "\n")
    assert check_history(spark, history, tmp_path / "ids").transactions is None


plants = st.integers(6, 16).flatmap(
    lambda n: st.sets(st.integers(1, n - 1), max_size=n // 2).flatmap(
        lambda aborted: st.tuples(
            st.just(n),
            st.just(aborted),
            st.sets(st.sampled_from(sorted(aborted) or [0]), max_size=len(aborted)).map(
                lambda s: s - {0}
            ),
            st.sets(st.integers(1, n - 1), max_size=n // 3).map(lambda s: s - aborted),
        )
    )
)


@FEW_EXAMPLES
@given(plants)
def test_planted_aborted_reads_and_torn_transactions_are_found_exactly(
    spark: Any, tmp_path_factory: pytest.TempPathFactory, plant: Any
) -> None:
    txns, aborted, read_aborted, torn = plant
    tmp = tmp_path_factory.mktemp("txn")
    planted = txn_history(tmp / "history", txns, aborted, read_aborted=read_aborted, torn=torn)
    events = read_history(spark, tmp / "history").events
    t = check_transactions(events, tmp / "ids", windows=[(2.2, 3.1)])
    assert t is not None
    assert t["open_in_faults"] == 2  # transaction 2 (+2 to +2.5) and 3 (+3 to +3.5)
    c = t["groups"]["C"]
    assert c["aborted_reads"] == len(planted["aborted_reads"])
    assert c["aborted_read_txns"] == len(read_aborted)
    assert c["torn"] == len(planted["torn"])
    assert _ids(tmp / "ids" / "C" / "aborted_reads.txt") == planted["aborted_reads"]
    assert _ids(tmp / "ids" / "C" / "torn.txt") == planted["torn"]
    assert t["groups"]["U"]["aborted_reads"] == 0 and t["groups"]["U"]["torn"] == 0


def test_commits_in_flight_are_counted_in_faults_and_across_coordinator_moves(
    spark: Any, tmp_path: Path
) -> None:
    # Transaction n begins at +n s, asks its commit at +n.3 and ends at +n.5; 3 is aborted.
    txn_history(tmp_path / "history", 6, aborted={3})
    events = read_history(spark, tmp_path / "history").events
    # (role, id, the last answer naming the old coordinator, the first naming the new one)
    moves = [
        ("transaction-coordinator", "P", 4.35, 4.45),  # wholly inside 4's commit
        ("transaction-coordinator", "P", 2.25, 2.4),  # perhaps before 2's commit was asked
        ("transaction-coordinator", "P", 5.2, 5.25),  # 5 open, its commit not yet asked
        ("transaction-coordinator", "Q", 6.35, 6.4),  # another id's coordinator
        ("group-coordinator", "P", 2.35, 2.4),  # a group named like the id: not P's coordinator
    ]
    t = check_transactions(events, tmp_path / "ids", [(2.2, 3.4), (5.45, 9.0)], moves)
    assert t is not None
    # 2's commit (+2.3 to +2.5) and 3's open span meet the first window; 3 asked no commit.
    assert (t["open_in_faults"], t["commits_in_faults"]) == (4, 3)  # commits: 2, 5, 6
    assert t["commits_across_coordinator_moves"] == 1
    none = check_transactions(events, tmp_path / "ids2")
    assert none is not None
    assert (none["commits_in_faults"], none["commits_across_coordinator_moves"]) == (0, 0)


def test_a_transaction_that_never_ended_is_in_flight_no_longer_than_its_client(
    spark: Any, tmp_path: Path
) -> None:
    txn_history(tmp_path / "history", 2, aborted=set())
    # P begins t3 and asks its commit, and its history stops there (killed): nothing of it
    # is in flight in a fault that begins after P's last event.
    tail = [
        _event("P", "invoke", "txn", 3.0, producer="P", value={"txn": "P:t3"}),
        _event("P", "info", END_TXN, 3.3, stream=None, producer="P", value={"txn": "P:t3"}),
    ]
    with (tmp_path / "history" / "P.jsonl").open("a") as f:
        f.write("".join(json.dumps(r) + "\n" for r in tail))
    events = read_history(spark, tmp_path / "history").events
    later = check_transactions(events, tmp_path / "ids", [(5.0, 9.0)])
    assert later is not None
    assert (later["open_in_faults"], later["commits_in_faults"]) == (0, 0)
    during = check_transactions(events, tmp_path / "ids2", [(3.2, 3.25)])
    assert during is not None
    assert (during["open_in_faults"], during["commits_in_faults"]) == (1, 0)


def test_the_verdict_names_what_read_committed_broke(spark: Any, tmp_path: Path) -> None:
    planted = txn_history(tmp_path / "history", 8, {2, 5}, read_aborted={5}, torn={3, 6})
    result = check_history(spark, tmp_path / "history", tmp_path / "ids")
    assert result.transactions is not None
    # Each torn transaction's missing record is a committed record lost below what C read.
    assert result.groups["C"]["lost"] == 2 and result.groups["C"]["unseen"] == 0
    # Which transactions those lost records belong to: the first record of 3 and of 6.
    t = result.transactions
    assert t["groups"]["C"]["lost_txns"] == 2 and t["groups"]["U"]["lost_txns"] == 0
    assert [(r["txn"], r["records"], r["lost"], r["lost_ids"]) for r in t["samples"]["lost"]] == [
        ("P:t3", SIZE, 1, [f"P:{2 * SIZE + 1}"]),
        ("P:t6", SIZE, 1, [f"P:{5 * SIZE + 1}"]),
    ]
    assert _ids(tmp_path / "ids" / "C" / "lost_txns.txt") == {"P:t3", "P:t6"}
    counts = Counts.of(result.groups, result.sends, transactions=result.transactions)
    assert (counts.aborted_reads, counts.torn) == (len(planted["aborted_reads"]), 2)
    verdict = judge(counts, "loss")
    assert not verdict.matched and verdict.outcome == "anomalies"
    assert verdict.reason == (
        f"read_committed broken: {SIZE} records of aborted transactions read (aborted read), "
        "2 committed transactions seen in part (torn)"
    )


def test_a_read_committed_readers_skips_are_judged_against_the_log_it_may_see(
    spark: Any, tmp_path: Path
) -> None:
    """C passes over the aborted transactions' records, which the log less aborted records
    leaves out (no skip there), and over one committed record (a skip); U, reading
    uncommitted, reads every record."""
    txn_history(tmp_path / "history", 8, aborted={3, 6}, torn={5})
    result = check_history(spark, tmp_path / "history", tmp_path / "ids")
    assert result.readers == {
        "C": {"poll_skips": 1, "nonmonotonic_polls": 0},
        "U": {"poll_skips": 0, "nonmonotonic_polls": 0},
    }


def test_a_torn_transaction_is_one_read_past_not_one_never_reached(
    spark: Any, tmp_path: Path
) -> None:
    """C stops before the last transaction's second record: the rest of it is unread, not torn."""
    txn_history(tmp_path / "history", 4, aborted=set())
    c_file = tmp_path / "history" / "C.jsonl"
    rows = c_file.read_text().splitlines()
    c_file.write_text("\n".join(rows[:-3]) + "\n")  # the last transaction's records 2..4
    result = check_history(spark, tmp_path / "history", tmp_path / "ids")
    assert result.transactions is not None
    assert result.transactions["groups"]["C"]["torn"] == 0
    assert result.groups["C"]["unseen"] == 3


def test_an_unknown_transaction_seen_in_part_is_torn_and_refutes_safe(
    spark: Any, tmp_path: Path
) -> None:
    """P never learnt whether t3 committed; C read its records in partitions 1 and 2 and its
    last one in partition 0, past its first: had it committed, C saw it torn; had it aborted, C
    read aborted records. Its records were never acknowledged, so none is lost."""
    txn_history(tmp_path / "history", 6, aborted=set(), unknown={3}, torn={3})
    result = check_history(spark, tmp_path / "history", tmp_path / "ids")
    t = result.transactions
    assert t is not None
    assert (t["unknown"], t["unknown_seen_committed"]) == (1, 1)
    assert result.groups["C"]["lost"] == 0
    assert t["groups"]["C"]["torn"] == 1 and t["groups"]["C"]["aborted_reads"] == 0
    (sample,) = t["samples"]["torn"]
    assert (sample["txn"], sample["outcome"], sample["evidence"]) == (
        "P:t3",
        "info",
        "seen committed by C",
    )
    assert (sample["read"], sample["missed"], sample["missed_ids"]) == (
        SIZE - 1,
        1,
        [f"P:{2 * SIZE + 1}"],
    )
    assert _ids(tmp_path / "ids" / "C" / "torn.txt") == {"P:t3"}
    assert result.readers["C"]["poll_skips"] == 1  # past a record it should have read
    counts = Counts.of(result.groups, result.sends, transactions=t)
    assert counts.torn == 1
    for expect in ("safe", "loss", None):
        verdict = judge(counts, expect)
        assert not verdict.matched and verdict.outcome == "anomalies", expect
    assert judge(counts, "safe").reason == (
        "read_committed broken: 1 committed transactions seen in part (torn)"
    )


def test_an_acknowledged_torn_transaction_says_its_commit_was_acknowledged(
    spark: Any, tmp_path: Path
) -> None:
    txn_history(tmp_path / "history", 4, aborted=set(), torn={2})
    events = read_history(spark, tmp_path / "history").events
    t = check_transactions(events, tmp_path / "ids")
    assert t is not None
    assert [(r["txn"], r["outcome"], r["evidence"]) for r in t["samples"]["torn"]] == [
        ("P:t2", "ok", "commit acknowledged")
    ]


def test_an_unknown_transaction_one_group_saw_and_another_read_past_refutes_safe(
    spark: Any, tmp_path: Path
) -> None:
    """C read all of t3, whose outcome P never learnt; D, reading committed too, read past all
    of it and received none: had it committed, D lost it, though no record of it was
    acknowledged; had it aborted, C read aborted records."""
    txn_history(tmp_path / "history", 5, aborted=set(), unknown={3})
    t3 = {f"P:{s}" for s in range(2 * SIZE + 1, 3 * SIZE + 1)}
    d = []
    for line in (tmp_path / "history" / "C.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["msg_id"] not in t3:
            d.append(json.dumps(row | {"process": "D", "group": "D"}) + "\n")
    (tmp_path / "history" / "D.jsonl").write_text("".join(d))
    result = check_history(spark, tmp_path / "history", tmp_path / "ids")
    t = result.transactions
    assert t is not None
    assert (t["unknown_seen_committed"], t["unknown_missed"]) == (1, 1)
    assert t["groups"]["D"]["torn"] == 0 and result.groups["D"]["lost"] == 0
    (sample,) = t["samples"]["unknown_missed"]
    evidence = (sample["group"], sample["txn"], sample["outcome"], sample["evidence"])
    assert evidence == ("D", "P:t3", "info", "seen committed by C")
    assert (sample["read"], sample["missed"], set(sample["missed_ids"])) == (0, SIZE, t3)
    assert _ids(tmp_path / "ids" / "D" / "unknown_missed.txt") == {"P:t3"}
    # D passed over a transaction judged committed in each partition: real skips.
    assert result.readers["D"]["poll_skips"] == PARTITIONS
    assert result.readers["C"]["poll_skips"] == 0
    counts = Counts.of(result.groups, result.sends, transactions=t)
    for expect in ("safe", "loss", None):
        verdict = judge(counts, expect)
        assert not verdict.matched and verdict.outcome == "anomalies", expect
    assert judge(counts, "safe").reason == (
        "read_committed broken: 1 transactions of unknown outcome seen by one group and read "
        "past unseen by another"
    )


def test_an_unknown_transaction_no_read_committed_reader_saw_is_judged_aborted(
    spark: Any, tmp_path: Path
) -> None:
    """P never learnt whether t4 committed, and C read past all of it without any of its
    records (U, reading uncommitted, read them): it aborted. C's passing over it is neither a
    torn transaction, nor a skip, nor a loss."""
    txn_history(tmp_path / "history", 7, aborted={2}, unknown={4}, unseen={4})
    result = check_history(spark, tmp_path / "history", tmp_path / "ids")
    t = result.transactions
    assert t is not None
    assert (t["unknown"], t["unknown_seen_committed"]) == (1, 0)
    assert t["groups"]["C"] == {
        "isolation": "read_committed",
        "aborted_reads": 0,
        "aborted_read_txns": 0,
        "torn": 0,
        "lost_txns": 0,
    }
    assert result.readers["C"] == {"poll_skips": 0, "nonmonotonic_polls": 0}
    assert result.groups["C"]["lost"] == 0
    assert judge(Counts.of(result.groups, result.sends, transactions=t), "safe").matched


# ---- zombie fencing --------------------------------------------------------------------------

SHARED = "shared"  # the transactional id every process of a fencing history shares


def fencing_history(
    history: Path,
    plans: dict[str, list[tuple[Any, ...]]],
    seen: set[str] = frozenset(),  # type: ignore[assignment]
) -> None:
    """Processes sharing one transactional id, each a plan of steps in time order:
    ("init", invoked, returned): an instance's init_transactions (its init-txn marks; a process
    whose plan has none marks no inits, as a client before the marks did);
    ("txn", n, asked, outcome): its transaction n, one record, begun 0.2 s before its commit is
    asked (its end-txn mark) and ended 0.1 s after with `outcome`.
    Reader C (read_committed) receives the records of the committed transactions and of those
    whose ids are in `seen`."""
    history.mkdir(parents=True)
    reads = [_event("C", "ok", "open", 0, group="C", value={"isolation": "read_committed"})]
    offset = 0
    for process, plan in plans.items():
        said = {"client": "a test", "transactional_id": SHARED}
        rows = [_event(process, "ok", "open", 0, stream=None, producer=process, value=said)]
        seq = 0
        mine = {"stream": None, "producer": process}
        for step in plan:
            if step[0] == "init":
                _, invoked, returned = step
                mark = {"transactional_id": SHARED}
                rows.append(_event(process, "invoke", INIT_TXN, invoked, **mine, value=mark))
                rows.append(_event(process, "ok", INIT_TXN, returned, **mine, value=mark))
                continue
            _, n, asked, outcome = step
            tid, seq = f"{process}:t{n}", seq + 1
            msg = {"producer": process, "seq": seq, "msg_id": f"{process}:{seq}"}
            at = {"partition": 0, "offset": offset}
            rows += [
                _event(process, "invoke", "txn", asked - 0.2, producer=process, value={"txn": tid}),
                _event(process, "invoke", "send", asked - 0.2, **msg, value={"txn": tid}),
                _event(process, "info", END_TXN, asked, **mine, value={"txn": tid, "commit": True}),
                _event(
                    process,
                    outcome,
                    "txn",
                    asked + 0.1,
                    producer=process,
                    value={"txn": tid, "seqs": [seq]},
                ),
                _event(process, outcome, "send", asked + 0.1, **msg, **at, value={"txn": tid}),
            ]
            if outcome == "ok" or tid in seen:
                reads.append(_event("C", "ok", "receive", asked + 0.2, group="C", **msg, **at))
            offset += 2  # the record and its transaction's marker
        (history / f"{process}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    reads.sort(key=lambda r: r["time"])
    (history / "C.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reads))


def test_planted_zombie_commits_are_found_exactly(spark: Any, tmp_path: Path) -> None:
    fencing_history(
        tmp_path / "history",
        {
            # A commits twice, then B's init (asked at +2.5, after A's returned) fences it:
            # A's next four commits are a fenced instance's: t3 acknowledged and t5, of unknown
            # outcome, read by C took effect (zombies); t4 refused and t6 unseen did not. A's
            # new instance (+6.5) is the newest: its t7 is no zombie, and B's t2 is one.
            "A": [
                ("init", 0.2, 0.5),
                ("txn", 1, 1.0, "ok"),
                ("txn", 2, 2.0, "ok"),
                ("txn", 3, 3.5, "ok"),
                ("txn", 4, 4.0, "fail"),
                ("txn", 5, 4.5, "info"),
                ("txn", 6, 5.0, "info"),
                ("init", 6.0, 6.5),
                ("txn", 7, 7.0, "ok"),
            ],
            "B": [("init", 2.5, 3.0), ("txn", 1, 3.2, "ok"), ("txn", 2, 7.5, "ok")],
        },
        seen={"A:t5"},
    )
    result = check_history(spark, tmp_path / "history", tmp_path / "ids")
    t = result.transactions
    assert t is not None
    assert (t["fenced_commits"], t["zombie_commits"]) == (5, 3)
    assert [
        (z["txn"], z["outcome"], z["seen"], z["fenced_by"]) for z in t["samples"]["zombie_commits"]
    ] == [("A:t3", "ok", True, "B"), ("A:t5", "info", True, "B"), ("B:t2", "ok", True, "A")]
    first = t["samples"]["zombie_commits"][0]
    assert (first["transactional_id"], first["asked"], first["fenced_at"]) == (SHARED, 3.5, 3.0)
    assert (tmp_path / "ids" / "zombie_commits.txt").read_text().split() == [
        "A:t3",
        "A:t5",
        "B:t2",
    ]
    counts = Counts.of(result.groups, result.sends, transactions=t)
    assert counts.zombie_commits == 3
    for expect in ("safe", "loss", None):
        verdict = judge(counts, expect)
        assert not verdict.matched and verdict.outcome == "anomalies"
    assert judge(counts, "safe").reason == (
        "fencing broken: 3 commits of fenced instances took effect (zombie commit)"
    )


def test_commits_no_newer_instance_had_surely_fenced_are_no_zombies(
    spark: Any, tmp_path: Path
) -> None:
    fencing_history(
        tmp_path / "history",
        {
            "A": [
                ("init", 0.2, 0.5),
                ("txn", 1, 1.0, "ok"),  # asked before B's init
                ("init", 3.0, 3.5),  # A again, after B's init
                ("txn", 2, 4.0, "ok"),
                ("init", 4.8, 5.0),  # overlaps B's second init: which came last is not known
                ("txn", 3, 6.0, "ok"),
            ],
            "B": [
                ("init", 2.0, 2.5),
                ("txn", 1, 2.7, "ok"),
                ("init", 4.5, 5.2),
                ("txn", 2, 6.2, "ok"),
            ],
            # A process that marks no inits (a client before the marks) is not judged.
            "Q": [("txn", 1, 7.0, "ok")],
        },
    )
    result = check_history(spark, tmp_path / "history", tmp_path / "ids")
    t = result.transactions
    assert t is not None and t["committed"] == 6
    assert (t["fenced_commits"], t["zombie_commits"], t["samples"]["zombie_commits"]) == (0, 0, [])
    assert t["fenced_open"] == 0  # no transaction was open across a surely newer init
    assert (tmp_path / "ids" / "zombie_commits.txt").read_text() == ""
    assert judge(Counts.of(result.groups, result.sends, transactions=t), "safe").matched


def test_a_transaction_open_across_a_newer_instances_init_is_a_fenced_zombie(
    spark: Any, tmp_path: Path
) -> None:
    # Each transaction begins 0.2 s before its commit is asked and ends 0.1 s after it.
    fencing_history(
        tmp_path / "history",
        {
            "A": [
                ("init", 0.2, 0.5),
                ("txn", 1, 1.0, "ok"),  # +0.8 to +1.1: over before B's init
                ("txn", 2, 3.1, "fail"),  # +2.9 to +3.2: open when B's init returned (+3.0)
                ("txn", 3, 3.6, "info"),  # begun after it: a fenced instance's, not open across
            ],
            "B": [("init", 2.5, 3.0), ("txn", 1, 4.0, "ok")],
        },
    )
    events = read_history(spark, tmp_path / "history").events
    t = check_transactions(events, tmp_path / "ids")
    assert t is not None
    assert (t["fenced_open"], t["fenced_while_paused"]) == (1, 0)
    # A asked two commits after B's init returned; neither took effect.
    assert (t["fenced_commits"], t["zombie_commits"]) == (2, 0)
    # A paused from +2.0 to +3.5 had t2 open when B's init returned: the zombie; a pause of
    # B's, or one of A's that had ended by then, makes none.
    for pauses, zombies in (
        ([("A", 2.0, 3.5)], 1),
        ([("B", 2.0, 3.5)], 0),
        ([("A", 1.5, 2.95)], 0),
    ):
        paused = check_transactions(events, tmp_path / "ids", pauses=pauses)
        assert paused is not None and paused["fenced_while_paused"] == zombies, pauses
