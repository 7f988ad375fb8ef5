"""The exactly-once copy's anomalies planted at known records: the checker finds exactly those
(checkers.eos, through checkers.transactions and the whole check)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers.read import read_history
from checkers.spark import check_history
from checkers.transactions import check_transactions
from checkers.verdict import Counts, judge
from contract.history import FIELDS, PLANNED_ABORT

pytestmark = pytest.mark.spark
INPUT, OUTPUT = "t", "t-copy"
PARTITIONS = 3
SIZE = 4  # records per transaction of a transactional input producer
FEW_EXAMPLES = settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
READ_COMMITTED = {"isolation": "read_committed"}
ERRORS = {"ok": None, "fail": PLANNED_ABORT, "info": "_TIMED_OUT: commit"}


def _event(process: str, type_: str, f: str, t: float, **kw: Any) -> dict[str, Any]:
    e: dict[str, Any] = dict.fromkeys(FIELDS)
    e.update({"time": t, "process": process, "type": type_, "f": f, "system": "kafka"})
    e.update({"stream": INPUT} | kw)
    return e


@dataclass(frozen=True)
class Record:
    """An input record P's send placed, acknowledged (or committed with its transaction)."""

    seq: int
    partition: int
    offset: int

    @property
    def msg_id(self) -> str:
        return f"P:{self.seq}"


@dataclass(frozen=True)
class Copy:
    """Where a copier transaction wrote its copy of an input record in the output."""

    record: Record
    txn: str
    number: int  # the copier's transaction number
    outcome: str
    offset: int


@dataclass
class Log:
    """The next offset of each partition of a topic; a transaction's marker takes one offset
    in every partition it wrote."""

    next: dict[int, int] = field(default_factory=lambda: dict.fromkeys(range(PARTITIONS), 0))

    def append(self, partition: int) -> int:
        self.next[partition] += 1
        return self.next[partition] - 1

    def mark(self, partitions: set[int]) -> None:
        for p in partitions:
            self.next[p] += 1


def plain_input(rows: list[dict[str, Any]], sends: int) -> list[Record]:
    """P (idempotent, not transactional) sends records 1..sends, record s to partition
    s % PARTITIONS, every one acknowledged."""
    log, records = Log(), []
    for s in range(1, sends + 1):
        msg = {"producer": "P", "seq": s, "msg_id": f"P:{s}"}
        r = Record(s, s % PARTITIONS, log.append(s % PARTITIONS))
        rows.append(_event("P", "invoke", "send", s, **msg))
        rows.append(
            _event("P", "ok", "send", s + 0.1, **msg, partition=r.partition, offset=r.offset)
        )
        records.append(r)
    return records


def transactional_input(rows: list[dict[str, Any]], txns: int, aborted: set[int]) -> list[Record]:
    """P (transactional) runs transactions 1..txns of SIZE records, record i of one in
    partition i % PARTITIONS, each with its marker; those in `aborted` it aborts on purpose.
    The committed records, in seq order (the order a read_committed copier takes them)."""
    log, committed, seq = Log(), [], 0
    for n in range(1, txns + 1):
        tid, t = f"P:t{n}", float(n)
        rows.append(_event("P", "invoke", "txn", t, producer="P", value={"txn": tid}))
        records = []
        for i in range(SIZE):
            seq += 1
            records.append(Record(seq, i % PARTITIONS, log.append(i % PARTITIONS)))
            msg = {"producer": "P", "seq": seq, "msg_id": f"P:{seq}"}
            rows.append(_event("P", "invoke", "send", t, **msg, value={"txn": tid}))
        log.mark({r.partition for r in records})
        outcome = "fail" if n in aborted else "ok"
        value: dict[str, Any] = {"txn": tid, "seqs": [r.seq for r in records]}
        value |= {"planned": True} if n in aborted else {}
        error = ERRORS[outcome]
        rows.append(_event("P", outcome, "txn", t + 0.5, producer="P", error=error, value=value))
        for r in records:
            msg = {"producer": "P", "seq": r.seq, "msg_id": r.msg_id}
            at = {"partition": r.partition, "offset": r.offset}
            end = {"error": error, "value": {"txn": tid}}
            rows.append(_event("P", outcome, "send", t + 0.5, **msg, **at, **end))
        committed += records if outcome == "ok" else []
    return committed


class Copier:
    """A copier as workloads.kafka.copier writes its history: each transaction's invoke and
    outcome, then one `f: copy` per record copied, of the transaction's outcome; copies into
    the same partition of the output, each transaction's marker after its records."""

    def __init__(self, name: str, out: Log, t: float) -> None:
        self.name, self.out, self.t, self.number = name, out, t, 0
        value = {
            "client": "test",
            "transactional_id": name,
            "copy": {"group": "copy", "input": INPUT},
        }
        self.rows = [_event(name, "ok", "open", t, stream=None, producer=name, value=value)]
        self.copies: list[Copy] = []

    def copy(self, batch: list[Record], outcome: str) -> None:
        self.number += 1
        tid, t = f"{self.name}:t{self.number}", self.t + self.number
        begin = {"stream": None, "producer": self.name}
        self.rows.append(_event(self.name, "invoke", "txn", t, **begin, value={"txn": tid}))
        done = {"txn": tid, "copies": len(batch)} | ({"planned": True} if outcome == "fail" else {})
        self.rows.append(
            _event(self.name, outcome, "txn", t + 0.5, **begin, error=ERRORS[outcome], value=done)
        )
        for r in batch:
            c = Copy(r, tid, self.number, outcome, self.out.append(r.partition))
            self.copies.append(c)
            source = {"stream": INPUT, "partition": r.partition, "offset": r.offset}
            self.rows.append(
                _event(
                    self.name,
                    outcome,
                    "copy",
                    t + 0.5,
                    stream=OUTPUT,
                    producer="P",
                    seq=r.seq,
                    msg_id=r.msg_id,
                    partition=r.partition,
                    offset=c.offset,
                    error=ERRORS[outcome],
                    value={"txn": tid, "from": source},
                )
            )
        self.out.mark({r.partition for r in batch})


@dataclass
class Planted:
    copies: dict[str, int]  # f: copy events by outcome: committed, aborted, unknown
    copied_twice: set[str]
    never_copied: set[str]
    aborted_reads: list[Copy]  # the aborted copies R read
    unread: list[Copy]  # committed copies R never reached
    reads: list[Copy]  # every copy R read
    copies_of: list[Copy]  # every copy written


def copy_history(
    history: Path,
    sends: int = 0,
    batch: int = 3,
    aborted: frozenset[int] = frozenset(),
    unknown: frozenset[int] = frozenset(),
    twice: frozenset[int] = frozenset(),
    never: frozenset[int] = frozenset(),
    read_aborted: frozenset[int] = frozenset(),
    input_txns: int = 0,
    input_aborted: frozenset[int] = frozenset(),
    unread_from: int | None = None,
) -> Planted:
    """P writes the input: `sends` acknowledged records (or, with `input_txns`, that many
    transactions of SIZE records, those in `input_aborted` aborted). Copier C1 copies the
    committed input in seq order, less the seqs in `never`, `batch` records a transaction; its
    transactions numbered in `aborted` abort on purpose and those in `unknown` end info (and
    aborted in fact): either way it copies the same batch again in its next one. Copier C2 then
    copies the seqs in `twice` again, in one committed transaction (a second copy). Reader R
    (read_committed) reads every committed copy, in output order, less those of C1's
    transactions numbered `unread_from` and above (and C2's then: it stopped), plus the aborted
    copies of the seqs in `read_aborted`."""
    assert not twice & never
    rows: dict[str, list[dict[str, Any]]] = {"P": []}
    if input_txns:
        records = transactional_input(rows["P"], input_txns, set(input_aborted))
    else:
        records = plain_input(rows["P"], sends)
    out = Log()
    c1 = Copier("C1", out, 1000.0)
    pending = [r for r in records if r.seq not in never]
    while pending:
        chunk, n = pending[:batch], c1.number + 1
        outcome = "fail" if n in aborted else "info" if n in unknown else "ok"
        c1.copy(chunk, outcome)
        if outcome == "ok":
            pending = pending[batch:]
    c2 = Copier("C2", out, 2000.0)
    if twice:
        c2.copy([r for r in records if r.seq in twice], "ok")
    written = c1.copies + c2.copies

    def unread(c: Copy) -> bool:
        return unread_from is not None and (c.txn.startswith("C2") or c.number >= unread_from)

    reads = [
        c
        for c in written
        if (c.outcome == "ok" and not unread(c))
        or (c.outcome == "fail" and c.record.seq in read_aborted)
    ]
    reads.sort(key=lambda c: (c.record.partition, c.offset))
    rows["R"] = [_event("R", "ok", "open", 3000, group="R", stream=OUTPUT, value=READ_COMMITTED)]
    for i, c in enumerate(reads):
        msg = {"producer": "P", "seq": c.record.seq, "msg_id": c.record.msg_id}
        at = {"partition": c.record.partition, "offset": c.offset}
        rows["R"].append(
            _event("R", "ok", "receive", 3001 + i, group="R", stream=OUTPUT, **msg, **at)
        )
    rows |= {"C1": c1.rows, "C2": c2.rows}
    history.mkdir(parents=True)
    for name, lines in rows.items():
        (history / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    committed = [c for c in written if c.outcome == "ok"]
    times = {r.msg_id: sum(c.record == r for c in committed) for r in records}
    return Planted(
        copies={
            "committed": len(committed),
            "aborted": sum(c.outcome == "fail" for c in written),
            "unknown": sum(c.outcome == "info" for c in written),
        },
        copied_twice={m for m, n in times.items() if n >= 2},
        never_copied={m for m, n in times.items() if n == 0},
        aborted_reads=[c for c in reads if c.outcome == "fail"],
        unread=[c for c in committed if unread(c)],
        reads=reads,
        copies_of=written,
    )


def _ids(path: Path) -> set[str]:
    return set(path.read_text().split()) if path.exists() else set()


def test_a_clean_copy_is_clean(spark: Any, tmp_path: Path) -> None:
    """C1's transactions: t1 ok (records 1-3); t2 aborted, t3 ok (4-6); t4 unknown and t5
    aborted, neither read, t6 ok (7-9); t7..t10 ok (10-20). R reads each committed copy."""
    planted = copy_history(
        tmp_path / "history", 20, 3, aborted=frozenset({2, 5}), unknown=frozenset({4})
    )
    assert planted.copies == {"committed": 20, "aborted": 6, "unknown": 3}
    result = check_history(spark, tmp_path / "history", tmp_path / "ids")
    t = result.transactions
    assert t is not None
    assert (t["transactions"], t["committed"], t["aborted"], t["unknown"]) == (10, 7, 2, 1)
    assert t["planned_aborts"] == 2
    copy = t["copy"]
    assert copy["copies"] == {"committed": 20, "aborted": 6, "unknown": 3}
    assert (copy["copied_twice"], copy["never_copied"]) == (0, 0)
    assert copy["samples"] == {
        "copied_twice": [],
        "never_copied": [],
        "copied_unrecorded": [],
        "input_duplicates": [],
    }
    assert _ids(tmp_path / "ids" / "copied_twice.txt") == set()
    assert _ids(tmp_path / "ids" / "never_copied.txt") == set()
    assert t["groups"]["R"] == {
        "isolation": "read_committed",
        "aborted_reads": 0,
        "aborted_read_txns": 0,
        "torn": 0,
        "lost_txns": 0,
    }
    assert not (tmp_path / "ids" / "R" / "aborted_reads.txt").exists()
    r = result.groups["R"]
    assert (r["acked"], r["received"], r["lost"], r["duplicated"]) == (20, 20, 0, 0)
    assert (result.log["inconsistent_offsets"], result.log["duplicate_offsets"]) == (0, 0)
    counts = Counts.of(result.groups, result.sends, log=result.log, transactions=t)
    verdict = judge(counts, "safe")
    assert verdict.matched and verdict.outcome == "safe", verdict


def test_a_copy_its_killed_copier_never_recorded_is_read_not_never_copied(
    spark: Any, tmp_path: Path
) -> None:
    """C1's t3 committed and its copier was killed before it wrote its copies and the
    transaction's end: no copy in the histories names records 7-9, and R read them all the
    same (read_committed: committed). They are copied, unrecorded; 13-15, which nobody copied
    and R never read, are never copied."""
    planted = copy_history(tmp_path / "history", 15, 3, never=frozenset({13, 14, 15}))
    c1 = tmp_path / "history" / "C1.jsonl"
    rows = [json.loads(line) for line in c1.read_text().splitlines()]
    unrecorded = [
        r for r in rows if (r.get("value") or {}).get("txn") == "C1:t3" and r["type"] != "invoke"
    ]
    kept = [r for r in rows if r not in unrecorded]
    c1.write_text("".join(json.dumps(r) + "\n" for r in kept))
    result = check_history(spark, tmp_path / "history", tmp_path / "ids")
    assert result.transactions is not None
    copy = result.transactions["copy"]
    assert copy["copied_unrecorded"] == 3 and copy["never_copied"] == 3
    assert _ids(tmp_path / "ids" / "copied_unrecorded.txt") == {"P:7", "P:8", "P:9"}
    assert _ids(tmp_path / "ids" / "never_copied.txt") == planted.never_copied
    assert result.groups["R"]["lost"] == 3  # 13-15: the loss the copy account explains


@st.composite
def plants(draw: st.DrawFn) -> dict[str, Any]:
    sends = draw(st.integers(8, 24))
    seqs = st.integers(1, sends)
    never = draw(st.frozensets(seqs, max_size=sends // 3))
    return {
        "sends": sends,
        "batch": draw(st.integers(2, 5)),
        "aborted": draw(st.frozensets(st.integers(1, 10), max_size=4)),
        "unknown": draw(st.frozensets(st.integers(1, 10), max_size=2)),
        "never": never,
        "twice": draw(st.frozensets(seqs, max_size=sends // 3)) - never,
        "read_aborted": draw(st.frozensets(seqs, max_size=sends // 2)),
    }


def assert_found_exactly(t: dict[str, Any], planted: Planted, ids: Path) -> None:
    """The transactions section `t` names exactly what was planted: the copy's counts, the
    records copied twice and never copied, and the aborted copies R read."""
    copy = t["copy"]
    assert copy["copies"] == planted.copies
    assert copy["copied_twice"] == len(planted.copied_twice)
    assert copy["never_copied"] == len(planted.never_copied)
    assert _ids(ids / "copied_twice.txt") == planted.copied_twice
    assert _ids(ids / "never_copied.txt") == planted.never_copied
    # Each sample of a record copied twice names the committed transactions that copied it.
    for sample in copy["samples"]["copied_twice"]:
        assert sample["txns"] == sorted(
            c.txn
            for c in planted.copies_of
            if c.outcome == "ok" and c.record.msg_id == sample["msg_id"]
        )
    # Aborted reads are found by position: R read each of these aborted copies, and the same
    # record again where a later transaction committed it.
    r = t["groups"]["R"]
    assert r["aborted_reads"] == len(planted.aborted_reads)
    assert r["aborted_read_txns"] == len({c.txn for c in planted.aborted_reads})
    assert r["torn"] == 0
    assert _ids(ids / "R" / "aborted_reads.txt") == {c.record.msg_id for c in planted.aborted_reads}
    for sample in t["samples"]["aborted_reads"]:
        assert any(
            (sample["msg_id"], sample["txn"], sample["partition"], sample["offset"])
            == (c.record.msg_id, c.txn, c.record.partition, c.offset)
            for c in planted.aborted_reads
        )


# The property over random plants is nightly; the fixed plants below keep the fast tier exact.
@pytest.mark.nightly
@FEW_EXAMPLES
@given(plants())
def test_planted_copy_anomalies_are_found_exactly(
    spark: Any, tmp_path_factory: pytest.TempPathFactory, plant: dict[str, Any]
) -> None:
    tmp = tmp_path_factory.mktemp("eos")
    planted = copy_history(tmp / "history", **plant)
    assert planted.copied_twice == {f"P:{s}" for s in plant["twice"]}
    assert planted.never_copied == {f"P:{s}" for s in plant["never"]}
    events = read_history(spark, tmp / "history").events
    t = check_transactions(events, tmp / "ids")
    assert t is not None
    assert_found_exactly(t, planted, tmp / "ids")


@pytest.mark.parametrize(
    ("plant", "aborted_read", "outcome"),
    [
        pytest.param({"twice": frozenset({2, 5, 11})}, set(), "duplicates", id="copied-twice"),
        pytest.param(
            {
                "twice": frozenset({2, 11}),
                "never": frozenset({5, 9}),
                "read_aborted": frozenset({4, 6, 8}),  # 8's copy was never aborted
                "unknown": frozenset({5}),
            },
            {"P:4", "P:6"},
            "anomalies",
            id="all",
        ),
    ],
)
def test_the_verdict_names_the_copys_anomalies(
    spark: Any, tmp_path: Path, plant: dict[str, Any], aborted_read: set[str], outcome: str
) -> None:
    """C1 copies records 1..12, 3 a transaction, its second aborted. R reads the records
    copied twice twice (a duplicate offset of the output), the aborted copies it read and then
    their committed copies (the same), and never the records never copied (lost in R)."""
    planted = copy_history(tmp_path / "history", 12, 3, aborted=frozenset({2}), **plant)
    assert {c.record.msg_id for c in planted.aborted_reads} == aborted_read
    result = check_history(spark, tmp_path / "history", tmp_path / "ids")
    t = result.transactions
    assert t is not None
    assert_found_exactly(t, planted, tmp_path / "ids")
    g = result.groups["R"]
    assert g["lost"] == len(planted.never_copied)
    assert _ids(tmp_path / "ids" / "R" / "lost.txt") == planted.never_copied
    read_twice = planted.copied_twice | aborted_read
    assert g["duplicated"] == len(read_twice)
    assert _ids(tmp_path / "ids" / "R" / "duplicated.txt") == read_twice
    assert result.log["duplicate_offsets"] == len(read_twice)
    assert result.log["inconsistent_offsets"] == 0
    named = {s.split(": ", 1)[0] for s in result.log["samples"]["duplicate_offsets"]}
    assert named == set(sorted(read_twice)[:5])
    counts = Counts.of(result.groups, result.sends, log=result.log, transactions=t)
    assert counts.aborted_reads == len(planted.aborted_reads)
    verdict = judge(counts, "no-duplicates")
    # An aborted read is judged first, then a loss, then a duplicate: none is what
    # no-duplicates expects.
    assert not verdict.matched and verdict.outcome == outcome, verdict
    if verdict.outcome == "duplicates":
        assert (
            verdict.reason == f"refuted: {len(read_twice)} messages written at two offsets or more"
        )


def test_a_transactional_input_read_on_the_output_is_not_torn(spark: Any, tmp_path: Path) -> None:
    """Regression: P's transactions are copied to the output, where R reads them; R stopped
    before C1's last transaction, which holds the end of P's last one. R never read P's
    partitions of the input, so it read past none of their offsets: nothing is torn, though
    the output's offsets (other markers, aborted copies) pass the input's."""
    planted = copy_history(
        tmp_path / "history",
        batch=3,
        aborted=frozenset({2, 4, 6, 8}),
        input_txns=5,
        input_aborted=frozenset({2}),
        unread_from=10,
    )
    # The plant: R read part of P:t5 (seqs 17-20) and never reached the rest, whose input
    # offsets lie at or below what R read in the same partitions of the output: judged across
    # streams, P:t5 would be torn in R.
    read_ids = {c.record.msg_id for c in planted.reads}
    assert [c.record.msg_id for c in planted.unread] == ["P:20"]
    assert {"P:17", "P:18", "P:19"} <= read_ids
    highest = {
        p: max(c.offset for c in planted.reads if c.record.partition == p)
        for p in range(PARTITIONS)
    }
    assert all(c.record.offset <= highest[c.record.partition] for c in planted.unread)
    events = read_history(spark, tmp_path / "history").events
    t = check_transactions(events, tmp_path / "ids")
    assert t is not None
    assert t["groups"]["R"] == {
        "isolation": "read_committed",
        "aborted_reads": 0,
        "aborted_read_txns": 0,
        "torn": 0,
    }
    assert not (tmp_path / "ids" / "R" / "torn.txt").exists()
    # P: 4 committed, 1 aborted; C1: 6 committed (16 records, 3 a transaction), 4 aborted.
    assert (t["transactions"], t["committed"], t["aborted"]) == (15, 10, 5)
    assert t["copy"]["copies"] == {"committed": 16, "aborted": 12, "unknown": 0}
    assert (t["copy"]["copied_twice"], t["copy"]["never_copied"]) == (0, 0)


def reader_of(copies: list[Copy]) -> list[dict[str, Any]]:
    """Reader R (read_committed) of the output, reading each of `copies` in turn."""
    rows = [_event("R", "ok", "open", 3000, group="R", stream=OUTPUT, value=READ_COMMITTED)]
    for i, c in enumerate(copies):
        msg = {"producer": "P", "seq": c.record.seq, "msg_id": c.record.msg_id}
        at = {"partition": c.record.partition, "offset": c.offset}
        rows.append(_event("R", "ok", "receive", 3001 + i, group="R", stream=OUTPUT, **msg, **at))
    return rows


def written(history: Path, rows: dict[str, list[dict[str, Any]]]) -> Path:
    """The history folder with one file per process."""
    history.mkdir(parents=True)
    for name, lines in rows.items():
        (history / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return history


def test_an_unknown_copy_a_reader_saw_committed_counts_as_copied(
    spark: Any, tmp_path: Path
) -> None:
    """C1's t2 ends unknown (its commit's answer lost) but committed: R reads its copies, and
    its input offsets were committed with it, so nothing copies them again. They are copied,
    and t2 is an unknown transaction seen committed."""
    rows: dict[str, list[dict[str, Any]]] = {"P": []}
    records = plain_input(rows["P"], 6)
    c1 = Copier("C1", Log(), 1000.0)
    c1.copy(records[:3], "ok")
    c1.copy(records[3:], "info")
    rows["C1"] = c1.rows
    rows["R"] = reader_of(c1.copies)
    history = written(tmp_path / "history", rows)
    t = check_transactions(read_history(spark, history).events, tmp_path / "ids")
    assert t is not None
    assert t["copy"]["never_copied"] == 0 and t["copy"]["unknown_seen_committed"] == 1
    assert t["unknown_seen_committed"] == 1
    assert _ids(tmp_path / "ids" / "never_copied.txt") == set()


def test_a_record_the_input_holds_twice_is_the_inputs_duplicate_not_the_copys(
    spark: Any, tmp_path: Path
) -> None:
    """P's record 5 is in the input twice (its producer wrote it again after an epoch bump,
    as librdkafka's idempotent producer can): the copier copies each input record once, so
    the output holds 5 twice. That is the input's duplicate: no-duplicates holds for the
    copy, and says so. A record the copier copies twice still refutes it."""
    rows: dict[str, list[dict[str, Any]]] = {"P": []}
    records = plain_input(rows["P"], 6)
    again = Record(5, records[4].partition, 2)  # after the 2 records 2 and 5 of partition 2
    c1 = Copier("C1", Log(), 1000.0)
    c1.copy(records[:3], "ok")
    c1.copy([*records[3:], again], "ok")
    rows["C1"] = c1.rows
    rows["R"] = reader_of(c1.copies)
    history = written(tmp_path / "history", rows)
    result = check_history(spark, history, tmp_path / "ids")
    t = result.transactions
    assert t is not None and result.log["duplicate_offsets"] == 1
    assert (t["copy"]["input_duplicates"], t["copy"]["output_duplicates_from_input"]) == (1, 1)
    assert t["copy"]["copied_twice"] == 0
    assert _ids(tmp_path / "ids" / "input_duplicates.txt") == {"P:5"}
    counts = Counts.of(result.groups, result.sends, log=result.log, transactions=t)
    verdict = judge(counts, "no-duplicates")
    assert verdict.matched, verdict
    assert "1 records the input's producer wrote twice" in verdict.reason
    doubled = t | {"copy": t["copy"] | {"output_duplicates_from_input": 0}}
    refuted = judge(
        Counts.of(result.groups, result.sends, log=result.log, transactions=doubled),
        "no-duplicates",
    )
    assert not refuted.matched and refuted.outcome == "duplicates"
