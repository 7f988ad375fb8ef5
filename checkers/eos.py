"""The exactly-once copy: what the copiers (workloads.kafka.copier) say they copied, against what
the input's producers had acknowledged and what read_committed readers of the output read.

A copier ends every copy with its transaction's outcome (`f: copy`: the input record's msg_id,
where its copy was written in the output, where it was read in the input). From those:
  copies          committed, aborted and unknown copies
  copied_twice    input records (by the position they were read at) copied by two committed
                  transactions or more: by the copiers' own account, the output holds them
                  twice (the message table's duplicates say whether a reader found both)
  never_copied    acknowledged input records no committed transaction copied (a loss on the
                  output is one of these, or a committed copy the output lost)
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


def check_copy(events: DataFrame, ids_dir: Path) -> dict[str, Any] | None:
    """The copy's part of the verdict's transactions section, or None for a run without
    copiers; ids to ids/copied_twice.txt and ids/never_copied.txt (msg_ids: the ids folder's
    top, beside the groups' folders)."""
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
        committed = done.filter(F.col("outcome") == "ok")
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
        never = acked.join(committed.select("msg_id"), "msg_id", "left_anti").orderBy("msg_id")
        never_ids = [r["msg_id"] for r in never.collect()]
        _write(ids_dir, "copied_twice", [r["msg_id"] for r in twice_rows])
        _write(ids_dir, "never_copied", never_ids)
        return {
            "copies": {k: int(v) for k, v in counts.asDict().items()},
            "copied_twice": len(twice_rows),
            "never_copied": len(never_ids),
            "samples": {"copied_twice": twice_rows[:SAMPLES], "never_copied": never_ids[:SAMPLES]},
        }
    finally:
        done.unpersist()


def _write(ids_dir: Path, metric: str, ids: list[str]) -> None:
    ids_dir.mkdir(parents=True, exist_ok=True)
    path = ids_dir / f"{metric}.txt"
    path.write_text("".join(f"{i}\n" for i in ids))
