"""The exactly-once copy: what the copiers (workloads.kafka.copier) say they copied, against what
the input's producers had acknowledged and what read_committed readers of the output read.

A copier ends every copy with its transaction's outcome (`f: copy`: the input record's msg_id,
where its copy was written in the output, where it was read in the input). From those:
  copies          committed, aborted and unknown copies (and the unknown transactions a
                  read_committed group read a copy of: they committed)
  copied_twice    input records (by the position they were read at) copied by two committed
                  transactions or more: by the copiers' own account, the output holds them
                  twice (the message table's duplicates say whether a reader found both)
  never_copied    acknowledged input records no committed transaction copied (a loss on the
                  output is one of these, or a committed copy the output lost)
  copied_unrecorded
                  acknowledged input records no copy in the copiers' histories names, that a
                  read_committed group read in the output all the same: a copier killed after
                  its transaction committed and before it wrote what it had copied (it writes
                  its copies with their transaction's outcome); read_committed returns only
                  committed records, so they were copied, and are not counted never copied
  input_duplicates
                  input records the copiers read at two input offsets or more: the input's
                  producer wrote them twice. The copy owes each input record one copy, so the
                  output holding them twice is not the copy's duplicate: the verdict's
                  duplicate count leaves those out (`output_duplicates_from_input`) and says so
  aborted_copies_read
                  per read_committed group: copies of aborted transactions it read, found by
                  their position in the output (a record copied again later has the same
                  msg_id at another offset, so a msg_id cannot tell the aborted copy)
Whether every acknowledged input record is in the output once is the message table's question
(`lost`, `duplicated`) for the groups that read the output: this module explains its answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

DataFrame = Any
SAMPLES = 10


def _F() -> Any:
    from pyspark.sql import functions as F

    return F


def has_copies(events: DataFrame) -> bool:
    return bool(events.filter(_F().col("f") == "copy").limit(1).count())


def copies(events: DataFrame) -> DataFrame:
    """(process, txn, outcome, msg_id, stream, partition, offset, from_stream, from_partition,
    from_offset): every copy's end."""
    F = _F()
    ends = events.filter((F.col("f") == "copy") & (F.col("type") != "invoke"))
    source = F.col("value")
    return ends.select(
        "process",
        F.get_json_object(source, "$.txn").alias("txn"),
        F.col("type").alias("outcome"),
        "msg_id",
        "stream",
        "partition",
        "offset",
        F.get_json_object(source, "$.from.stream").alias("from_stream"),
        F.get_json_object(source, "$.from.partition").cast("long").alias("from_partition"),
        F.get_json_object(source, "$.from.offset").cast("long").alias("from_offset"),
    )


def aborted_copies_read(reads: DataFrame, events: DataFrame) -> list[dict[str, Any]]:
    """(group, msg_id, txn, partition, offset) of every read, by a group in `reads` (group,
    msg_id, stream, partition, offset), of a position an aborted copy was written at."""
    F = _F()
    aborted = (
        copies(events)
        .filter((F.col("outcome") == "fail") & F.col("offset").isNotNull())
        .select("txn", "stream", "partition", "offset")
    )
    rows = (
        reads.join(aborted, ["stream", "partition", "offset"])
        .select("group", "msg_id", "txn", "partition", "offset")
        .distinct()
        .orderBy("group", "txn", "partition", "offset")
    )
    return [r.asDict() for r in rows.collect()]


def seen_committed(done: DataFrame, reads: DataFrame) -> DataFrame:
    """(txn): copier transactions of unknown outcome that a read_committed group read a copy
    of, at the position the copy was written: they committed."""
    F = _F()
    unknown = done.filter((F.col("outcome") == "info") & F.col("offset").isNotNull())
    positions = reads.select("stream", "partition", "offset").distinct()
    return unknown.join(positions, ["stream", "partition", "offset"]).select("txn").distinct()


def check_copy(events: DataFrame, ids_dir: Path, reads: DataFrame) -> dict[str, Any] | None:
    """The copy's part of the verdict's transactions section, or None for a run without
    copiers. A copy counts as committed when its transaction committed, or ended unknown and a
    read_committed group (`reads`: group, msg_id, stream, partition, offset) read one of its
    copies: that transaction committed, and its input offsets with it. Ids go to
    ids/copied_twice.txt, ids/never_copied.txt and ids/copied_unrecorded.txt (msg_ids: the ids
    folder's top, beside the groups' folders)."""
    if not has_copies(events):
        return None
    F = _F()
    done = copies(events).cache()
    try:
        counts = done.agg(
            F.count(F.when(F.col("outcome") == "ok", 1)).alias("committed"),
            F.count(F.when(F.col("outcome") == "fail", 1)).alias("aborted"),
            F.count(F.when(F.col("outcome") == "info", 1)).alias("unknown"),
        ).collect()[0]
        seen_txns = seen_committed(done, reads).collect()
        seen = F.broadcast(
            done.sparkSession.createDataFrame(
                [(r["txn"], True) for r in seen_txns], "txn string, seen boolean"
            )
        )
        committed = done.join(seen, "txn", "left").filter(
            (F.col("outcome") == "ok") | F.col("seen").isNotNull()
        )
        twice = (
            committed.groupBy("from_stream", "from_partition", "from_offset")
            .agg(
                F.first("msg_id").alias("msg_id"),
                F.sort_array(F.collect_set("txn")).alias("txns"),
            )
            .filter(F.size("txns") >= 2)
            .orderBy("msg_id")
        )
        twice_rows = [r.asDict() for r in twice.collect()]
        input_streams = [r["from_stream"] for r in done.select("from_stream").distinct().collect()]
        acked = (
            events.filter(
                (F.col("f") == "send")
                & (F.col("type") == "ok")
                & F.col("stream").isin(input_streams)
            )
            .select("msg_id")
            .distinct()
        )
        uncopied = acked.join(committed.select("msg_id"), "msg_id", "left_anti")
        output_reads = reads.filter(~F.col("stream").isin(input_streams)).select("msg_id")
        unrecorded = (
            uncopied.join(done.select("msg_id"), "msg_id", "left_anti")
            .join(output_reads.distinct(), "msg_id")
            .orderBy("msg_id")
        )
        unrecorded_ids = [r["msg_id"] for r in unrecorded.collect()]
        never = uncopied.join(unrecorded, "msg_id", "left_anti").orderBy("msg_id")
        never_ids = [r["msg_id"] for r in never.collect()]
        doubled, from_input = _input_duplicates(committed)
        _write(ids_dir, "copied_twice", [r["msg_id"] for r in twice_rows])
        _write(ids_dir, "never_copied", never_ids)
        _write(ids_dir, "copied_unrecorded", unrecorded_ids)
        _write(ids_dir, "input_duplicates", doubled)
        return {
            "copies": {k: int(v) for k, v in counts.asDict().items()},
            "unknown_seen_committed": len(seen_txns),
            "copied_twice": len(twice_rows),
            "never_copied": len(never_ids),
            "copied_unrecorded": len(unrecorded_ids),
            "input_duplicates": len(doubled),
            "output_duplicates_from_input": from_input,
            "samples": {
                "copied_twice": twice_rows[:SAMPLES],
                "never_copied": never_ids[:SAMPLES],
                "copied_unrecorded": unrecorded_ids[:SAMPLES],
                "input_duplicates": doubled[:SAMPLES],
            },
        }
    finally:
        done.unpersist()


def _input_duplicates(committed: DataFrame) -> tuple[list[str], int]:
    """The msg_ids the copiers read at two input positions or more (the input's producer wrote
    them twice), and how many of them the output holds at no more positions than the input
    did: copied once per input record, as the copy promises, they are the input's duplicates in
    the output, not the copy's."""
    F = _F()
    per_message = committed.groupBy("msg_id").agg(
        F.countDistinct("from_stream", "from_partition", "from_offset").alias("inputs"),
        F.countDistinct("stream", "partition", "offset").alias("outputs"),
    )
    doubled = per_message.filter(F.col("inputs") >= 2).cache()
    try:
        ids = [r["msg_id"] for r in doubled.orderBy("msg_id").collect()]
        explained = doubled.filter(
            (F.col("outputs") >= 2) & (F.col("outputs") <= F.col("inputs"))
        ).count()
    finally:
        doubled.unpersist()
    return ids, int(explained)


def _write(ids_dir: Path, metric: str, ids: list[str]) -> None:
    ids_dir.mkdir(parents=True, exist_ok=True)
    path = ids_dir / f"{metric}.txt"
    path.write_text("".join(f"{i}\n" for i in ids))
