"""Dependency cycles between Kafka transactions: Adya's G0 and G1c, from the history alone.

Only committed transactions (their `f: txn` ended ok) take part; an aborted or unknown one
orders nothing. Two kinds of dependency order them, both read off where records were written:
  ww   write order: in one partition, committed writes (a transactional producer's ok sends, a
       copier's ok copies) sorted by offset; T_a -> T_b when T_a's write is the one just before
       T_b's (the log says T_a's write was installed first).
  wr   write-read: a committed copier transaction T_c copied the record a committed transaction
       T_p wrote at (topic, partition, offset) (its `f: copy` says where it read it, in
       `value.from`): T_p -> T_c (T_c saw what T_p wrote).
A cycle of these is an anomaly no serial order explains:
  G0   write cycle: a cycle of ww edges alone. Two transactions whose writes the log installed
       in opposite orders in two partitions: neither committed wholly before the other.
  G1c  cyclic information flow: a cycle with at least one wr edge. A copier read what T_p wrote,
       and T_p's writes also come after the copier's in some partition.
Each strongly connected component of more than one transaction holds at least one cycle; one is
reported per component, a G0 when the component's ww edges alone close one (the stronger
claim), else a G1c. networkx finds the components and the cycle, inside the Spark job: the edge
frame goes to one task (the graph is one group), which returns only the cycles and counts.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from checkers.transactions import _F, _txn_of, has_transactions, transaction_outcomes

DataFrame = Any
SAMPLES = 10  # cycles in verdict.json; cycles.txt holds all
CYCLES_FILE = "cycles.txt"
EDGE_COLUMNS = (
    "src",  # the transaction ordered first
    "dst",  # the transaction ordered after it
    "kind",  # ww or wr
    "stream",  # src's record: where it wrote it (and, for wr, where dst read it)
    "partition",
    "offset",
    "msg_id",
    "to_stream",  # dst's record: its next write there (ww), or where it wrote the copy (wr)
    "to_partition",
    "to_offset",
    "to_msg_id",
)


def committed_writes(events: DataFrame) -> DataFrame:
    """(txn, stream, partition, offset, msg_id, from_stream, from_partition, from_offset): every
    record a committed transaction wrote, a producer's send or a copier's copy; the from_
    columns are where a copy read its record (null for a send). A write's offset is null where
    no delivery report placed it: it orders nothing by ww, though its copy's source still
    orders by wr."""
    F = _F()
    committed = transaction_outcomes(events).filter(F.col("outcome") == "ok").select("txn")
    txn = _txn_of(F.col("value"))
    writes = events.filter(
        F.col("f").isin("send", "copy") & (F.col("type") == "ok") & txn.isNotNull()
    ).select(
        txn.alias("txn"),
        "stream",
        "partition",
        "offset",
        "msg_id",
        F.get_json_object("value", "$.from.stream").alias("from_stream"),
        F.get_json_object("value", "$.from.partition").cast("bigint").alias("from_partition"),
        F.get_json_object("value", "$.from.offset").cast("bigint").alias("from_offset"),
    )
    # The send's own type says its transaction's end; the join keeps the transaction's word.
    # (A transaction id names its producer: one row per transaction in `committed`.)
    return writes.join(committed, "txn").distinct()


def dependency_edges(events: DataFrame) -> DataFrame:
    """The ww and wr edges between committed transactions (EDGE_COLUMNS), each with the two
    records that order them."""
    return edges_between(committed_writes(events))


def edges_between(writes: DataFrame) -> DataFrame:
    """The edges of committed_writes's frame: cache it first, as check_cycles does, or each
    kind of edge reads the history again."""
    return _ww_edges(writes).unionByName(_wr_edges(writes))


def _ww_edges(writes: DataFrame) -> DataFrame:
    """Consecutive committed writes of different transactions in each partition: the log's
    order between them, whatever aborted records or markers lie between."""
    F = _F()
    from pyspark.sql import Window

    order = Window.partitionBy("stream", "partition").orderBy("offset")
    placed = writes.filter(F.col("offset").isNotNull())
    prev = F.lag(F.struct("txn", "offset", "msg_id")).over(order)
    paired = placed.select("*", prev.alias("prev")).filter(
        F.col("prev").isNotNull() & (F.col("prev.txn") != F.col("txn"))
    )
    return paired.select(
        F.col("prev.txn").alias("src"),
        F.col("txn").alias("dst"),
        F.lit("ww").alias("kind"),
        "stream",
        "partition",
        F.col("prev.offset").alias("offset"),
        F.col("prev.msg_id").alias("msg_id"),
        F.col("stream").alias("to_stream"),
        F.col("partition").alias("to_partition"),
        F.col("offset").alias("to_offset"),
        F.col("msg_id").alias("to_msg_id"),
    )


def _wr_edges(writes: DataFrame) -> DataFrame:
    """A committed copy of a record a committed transaction wrote: its writer -> the copier's
    transaction. A copy of an aborted or unknown transaction's record has no committed writer
    (reading it is an aborted read, checkers.transactions's concern) and orders nothing."""
    F = _F()
    copies = writes.filter(F.col("from_offset").isNotNull()).select(
        F.col("txn").alias("dst"),
        "from_stream",
        "from_partition",
        "from_offset",
        F.col("stream").alias("to_stream"),
        F.col("partition").alias("to_partition"),
        F.col("offset").alias("to_offset"),
        F.col("msg_id").alias("to_msg_id"),
    )
    sources = writes.filter(F.col("offset").isNotNull()).select(
        F.col("txn").alias("src"), "stream", "partition", "offset", "msg_id"
    )
    read_there = (
        (F.col("stream") == F.col("from_stream"))
        & (F.col("partition") == F.col("from_partition"))
        & (F.col("offset") == F.col("from_offset"))
    )
    joined = sources.join(copies, read_there).filter(F.col("src") != F.col("dst"))
    return joined.select(
        "src",
        "dst",
        F.lit("wr").alias("kind"),
        "stream",
        "partition",
        "offset",
        "msg_id",
        "to_stream",
        "to_partition",
        "to_offset",
        "to_msg_id",
    )


def find_cycles(edges: DataFrame) -> dict[str, Any]:
    """{"transactions", "edges": {"ww", "wr"}, "cycles"}: the graph's size and one cycle per
    strongly connected component, found by networkx in one Spark task that holds every edge
    (a dependency graph is one group: a cycle may run through any partition of the frame).
    mapInArrow, which a Spark Connect session has as a local one does (no RDD there); the one
    task answers one JSON row."""
    _pickled_by_value()
    found = edges.select(*EDGE_COLUMNS).repartition(1).mapInArrow(_search, "found string").collect()
    return json.loads(found[0]["found"]) if found else _search_rows([])


def _pickled_by_value() -> None:
    """The search travels to the Python worker as code, not as a name to import there: a
    worker's own copy of this module (a warm server started from another checkout, a cluster's
    workers) would search with other code than the verdict names. It needs networkx and
    pyarrow there, and nothing of the project."""
    import sys

    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _search(batches: Iterable[Any]) -> Iterator[Any]:
    """The one task's work: the graph of its rows, searched."""
    import pyarrow as pa

    rows = [row for batch in batches for row in batch.to_pylist()]
    yield pa.RecordBatch.from_pylist([{"found": json.dumps(_search_rows(rows))}])


def _search_rows(edges: list[dict[str, Any]]) -> dict[str, Any]:
    """The graph's size and its cycles, in transaction order. Edges are added sorted, so the
    cycle reported for a component does not depend on how Spark ordered the rows."""
    import networkx as nx

    graph = nx.DiGraph()
    for e in sorted(edges, key=_edge_key):
        if not graph.has_edge(e["src"], e["dst"]):
            graph.add_edge(e["src"], e["dst"], ww=[], wr=[])
        graph.edges[e["src"], e["dst"]][e["kind"]].append(e)
    components = [c for c in nx.strongly_connected_components(graph) if len(c) > 1]
    cycles = [_cycle_of(graph.subgraph(c)) for c in sorted(components, key=min)]
    counts = {kind: sum(kind == e["kind"] for e in edges) for kind in ("ww", "wr")}
    return {"transactions": graph.number_of_nodes(), "edges": counts, "cycles": cycles}


def _edge_key(e: dict[str, Any]) -> tuple[Any, ...]:
    """A total order of edges: a null (a copy of a body not ours has no msg_id) sorts last."""
    return tuple((e[c] is None, "" if e[c] is None else e[c]) for c in EDGE_COLUMNS[:7])


def _cycle_of(component: Any) -> dict[str, Any]:
    """One cycle of a strongly connected component: of ww edges alone if they close one (G0),
    else through a wr edge (G1c; with the ww edges acyclic, every cycle of the component
    takes a pair that only a wr edge orders)."""
    import networkx as nx

    ww_only = nx.subgraph_view(component, filter_edge=lambda a, b: bool(component[a][b]["ww"]))
    kind, found = "G0", _a_cycle(ww_only)
    if found is None:
        kind, found = "G1c", _a_cycle(component)
    assert found is not None, "a strongly connected component of two or more has a cycle"
    first = found.index(min(found))  # from its least transaction, as cycles.txt lists it
    pairs = found[first:] + found[:first]
    prefer = ("ww",) if kind == "G0" else ("wr", "ww")
    edges = [_evidence(component[a][b], prefer) for a, b in pairs]
    return {"kind": kind, "transactions": [a for a, _ in pairs], "edges": edges}


def _a_cycle(graph: Any) -> list[tuple[str, str]] | None:
    """A cycle's edges, or None; the search starts from each node in order, so one through
    any part of the graph is found."""
    import networkx as nx

    try:
        return [(a, b) for a, b, *_ in nx.find_cycle(graph, source=sorted(graph))]
    except nx.NetworkXNoCycle:
        return None


def _evidence(data: dict[str, Any], prefer: tuple[str, ...]) -> dict[str, Any]:
    """The records behind one edge of a cycle: its first, of the kind the cycle's class names."""
    return next(data[kind][0] for kind in prefer if data[kind])


def check_cycles(
    events: DataFrame, ids_dir: Path, transactional: bool | None = None
) -> dict[str, Any] | None:
    """The cycles section of the verdict, or None for a history without transactions:
    {"G0", "G1c", "transactions", "edges": {"ww", "wr"}, "samples"}: cycles of each class (one
    per strongly connected component), the committed transactions with any edge (the graph's
    nodes), edges of each kind, and the first SAMPLES cycles. Every cycle goes to
    ids_dir/cycles.txt, one line each: its class and its transactions in cycle order.
    `transactional` as checkers.transactions.check_transactions takes it."""
    if not (has_transactions(events) if transactional is None else transactional):
        return None
    writes = committed_writes(events).cache()
    try:
        found = find_cycles(edges_between(writes))
    finally:
        writes.unpersist()
    cycles = found["cycles"]
    ids_dir.mkdir(parents=True, exist_ok=True)
    lines = (" ".join([c["kind"], *c["transactions"]]) + "\n" for c in cycles)
    (ids_dir / CYCLES_FILE).write_text("".join(lines))
    return {
        "G0": sum(c["kind"] == "G0" for c in cycles),
        "G1c": sum(c["kind"] == "G1c" for c in cycles),
        "transactions": found["transactions"],
        "edges": found["edges"],
        "samples": cycles[:SAMPLES],
    }
