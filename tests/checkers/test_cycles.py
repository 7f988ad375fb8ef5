"""Dependency cycles planted at known offsets: the checker finds exactly those (checkers.cycles)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers.cycles import check_cycles, dependency_edges
from checkers.read import read_history
from contract.history import FIELDS

pytestmark = pytest.mark.spark
TOPIC = "t"
PARTITIONS = 3
FEW_EXAMPLES = settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

Location = tuple[str, int, int]  # stream, partition, offset
# One record of a partition's log: a send of the transaction named, or (transaction, location)
# for a copy by that copier transaction of the record read at location.
Entry = str | tuple[str, Location]


def _event(process: str, type_: str, f: str, **kw: Any) -> dict[str, Any]:
    e: dict[str, Any] = dict.fromkeys(FIELDS)
    e.update(time=1.0, process=process, type=type_, f=f, system="kafka", **kw)
    return e


def write_history(
    history: Path, logs: dict[tuple[str, int], list[Entry]], outcomes: dict[str, str] | None = None
) -> None:
    """The history of partitions written as `logs` say, record i of a log at offset i; each
    transaction "P:tN" (process P) ends as `outcomes` say (default ok), and so do its records'
    sends and copies."""
    outcomes = outcomes or {}
    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    seqs: dict[str, int] = defaultdict(int)
    ids: dict[Location, str] = {}
    txns = dict.fromkeys(e if isinstance(e, str) else e[0] for log in logs.values() for e in log)
    for tid in txns:
        p = tid.split(":")[0]
        rows[p].append(_event(p, "invoke", "txn", producer=p, value={"txn": tid}))
        rows[p].append(_event(p, outcomes.get(tid, "ok"), "txn", producer=p, value={"txn": tid}))
    for (stream, partition), log in logs.items():
        for offset, entry in enumerate(log):
            if isinstance(entry, str):
                p, outcome = entry.split(":")[0], outcomes.get(entry, "ok")
                seqs[p] += 1
                ids[(stream, partition, offset)] = f"{p}:{seqs[p]}"
                msg = {"producer": p, "seq": seqs[p], "msg_id": f"{p}:{seqs[p]}"}
                at = {"stream": stream, "value": {"txn": entry}}
                rows[p].append(_event(p, "invoke", "send", **msg, **at))
                place = {"partition": partition, "offset": offset}
                rows[p].append(_event(p, outcome, "send", **msg, **at, **place))
    for (stream, partition), log in logs.items():
        for offset, entry in enumerate(log):
            if isinstance(entry, tuple):
                tid, (s, pt, o) = entry
                c = tid.split(":")[0]
                read = ids.get((s, pt, o), "X:0")
                msg = {
                    "producer": read.split(":")[0],
                    "seq": int(read.split(":")[1]),
                    "msg_id": read,
                }
                source = {"stream": s, "partition": pt, "offset": o}
                rows[c].append(
                    _event(
                        c,
                        outcomes.get(tid, "ok"),
                        "copy",
                        **msg,
                        stream=stream,
                        partition=partition,
                        offset=offset,
                        value={"txn": tid, "from": source},
                    )
                )
    history.mkdir(parents=True)
    for process, events in rows.items():
        (history / f"{process}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))


def clean_logs(txns: int) -> dict[tuple[str, int], list[Entry]]:
    """Producer P's transactions 1..txns one after another, each a record in every partition."""
    return {(TOPIC, p): [f"P:t{n}" for n in range(1, txns + 1)] for p in range(PARTITIONS)}


def _check(
    spark: Any,
    tmp: Path,
    logs: dict[tuple[str, int], list[Entry]],
    outcomes: dict[str, str] | None = None,
) -> dict[str, Any]:
    write_history(tmp / "history", logs, outcomes)
    result = check_cycles(read_history(spark, tmp / "history").events, tmp / "ids")
    assert result is not None
    return result


def _cycles(tmp: Path) -> list[tuple[str, ...]]:
    """cycles.txt's cycles, each its class and its transactions in name order."""
    lines = (tmp / "ids" / "cycles.txt").read_text().splitlines()
    return sorted((kind, *sorted(txns)) for kind, *txns in map(str.split, lines))


def test_sequential_transactions_have_no_cycle(spark: Any, tmp_path: Path) -> None:
    result = _check(spark, tmp_path, clean_logs(6))
    assert result == {
        "G0": 0,
        "G1c": 0,
        "transactions": 6,
        "edges": {"ww": 5 * PARTITIONS, "wr": 0},
        "samples": [],
    }
    assert _cycles(tmp_path) == []


def test_a_history_without_transactions_has_no_section(spark: Any, tmp_path: Path) -> None:
    history = tmp_path / "history"
    history.mkdir()
    send = _event("P", "ok", "send", stream=TOPIC, producer="P", seq=1, msg_id="P:1", offset=0)
    (history / "P.jsonl").write_text(json.dumps(send | {"partition": 0}) + "\n")
    assert check_cycles(read_history(spark, history).events, tmp_path / "ids") is None


def test_opposite_write_orders_in_two_partitions_are_a_g0(spark: Any, tmp_path: Path) -> None:
    """A before B in partition 0, B before A in partition 1."""
    logs: dict[tuple[str, int], list[Entry]] = {
        (TOPIC, 0): ["A:t1", "B:t1"],
        (TOPIC, 1): ["B:t1", "A:t1"],
    }
    result = _check(spark, tmp_path, logs)
    assert (result["G0"], result["G1c"], result["edges"]) == (1, 0, {"ww": 2, "wr": 0})
    assert _cycles(tmp_path) == [("G0", "A:t1", "B:t1")]
    [cycle] = result["samples"]
    assert cycle["kind"] == "G0" and cycle["transactions"] == ["A:t1", "B:t1"]
    ordered = [
        (e["src"], e["dst"], e["kind"], e["partition"], e["offset"], e["to_offset"])
        for e in cycle["edges"]
    ]
    assert ordered == [("A:t1", "B:t1", "ww", 0, 0, 1), ("B:t1", "A:t1", "ww", 1, 0, 1)]
    assert (cycle["edges"][0]["msg_id"], cycle["edges"][0]["to_msg_id"]) == ("A:1", "B:1")


def test_a_copier_ordered_both_before_and_after_its_source_is_a_g1c(
    spark: Any, tmp_path: Path
) -> None:
    """P:t1 writes r in the input; C:t1 copies r (wr P:t1 -> C:t1) and writes the output's
    partition 0 before P:t1 does (ww C:t1 -> P:t1). P:t2 and C:t2 around them are clean."""
    logs: dict[tuple[str, int], list[Entry]] = {
        ("in", 0): ["P:t1", "P:t2"],
        ("out", 0): [("C:t1", ("in", 0, 0)), "P:t1", ("C:t2", ("in", 0, 1))],
    }
    result = _check(spark, tmp_path, logs)
    assert (result["G0"], result["G1c"], result["edges"]) == (0, 1, {"ww": 3, "wr": 2})
    assert _cycles(tmp_path) == [("G1c", "C:t1", "P:t1")]
    [cycle] = result["samples"]
    kinds = {(e["src"], e["dst"]): e["kind"] for e in cycle["edges"]}
    assert kinds == {("P:t1", "C:t1"): "wr", ("C:t1", "P:t1"): "ww"}
    wr = next(e for e in cycle["edges"] if e["kind"] == "wr")
    assert (wr["stream"], wr["partition"], wr["offset"], wr["msg_id"]) == ("in", 0, 0, "P:1")
    assert (wr["to_stream"], wr["to_partition"], wr["to_offset"]) == ("out", 0, 0)


def test_a_transaction_not_committed_orders_nothing(spark: Any, tmp_path: Path) -> None:
    """Committed, X (aborted) and Y (of unknown outcome) would join A and B's cycle
    (A -> X -> B -> Y -> A), and the copiers' copies of their records would order X -> C:t1 and
    Y -> C:t2; not committed, they order nothing, and between A and B they hide nothing of
    A and B's G0 (A's and B's writes are consecutive among the committed ones)."""
    logs: dict[tuple[str, int], list[Entry]] = {
        (TOPIC, 0): ["A:t1", "X:t1", "B:t1", "Y:t1"],
        (TOPIC, 1): ["Y:t1", "X:t1", "B:t1", "A:t1"],
        ("out", 0): [("C:t1", (TOPIC, 0, 1)), "X:t1"],
        ("out", 1): [("C:t2", (TOPIC, 0, 3)), "Y:t1"],
    }
    result = _check(spark, tmp_path, logs, outcomes={"X:t1": "fail", "Y:t1": "info"})
    assert (result["G0"], result["G1c"], result["edges"]) == (1, 0, {"ww": 2, "wr": 0})
    assert result["transactions"] == 2
    assert _cycles(tmp_path) == [("G0", "A:t1", "B:t1")]
    edges = dependency_edges(read_history(spark, tmp_path / "history").events).collect()
    assert sorted((e["src"], e["dst"], e["partition"]) for e in edges) == [
        ("A:t1", "B:t1", 0),
        ("B:t1", "A:t1", 1),
    ]


# k G0 pairs, each in a gap of its own between P's clean transactions (gap g: after P:tg),
# writing two partitions (p, q) in opposite orders.
g0_plants = st.integers(2, 8).flatmap(
    lambda n: st.tuples(
        st.just(n),
        st.lists(
            st.tuples(st.integers(0, n), st.permutations(range(PARTITIONS)).map(lambda ps: ps[:2])),
            max_size=3,
            unique_by=lambda plant: plant[0],
        ),
    )
)


# The property over random plants is nightly; the fixed plants below keep the fast tier exact.
@pytest.mark.nightly
@FEW_EXAMPLES
@given(g0_plants)
def test_planted_g0_pairs_among_clean_transactions_are_found_exactly(
    spark: Any, tmp_path_factory: pytest.TempPathFactory, plant: Any
) -> None:
    txns, pairs = plant
    logs = clean_logs(txns)
    expected = []
    for gap, (p, q) in sorted(pairs, reverse=True):  # from the end: earlier gaps keep their place
        a, b = f"A{gap}:t1", f"B{gap}:t1"
        logs[(TOPIC, p)][gap:gap] = [a, b]
        logs[(TOPIC, q)][gap:gap] = [b, a]
        expected.append(("G0", a, b))
    tmp = tmp_path_factory.mktemp("cycles")
    result = _check(spark, tmp, logs)
    assert (result["G0"], result["G1c"]) == (len(pairs), 0)
    assert result["transactions"] == txns + 2 * len(pairs)
    assert _cycles(tmp) == sorted(expected)
