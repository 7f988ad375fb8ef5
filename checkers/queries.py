"""One small, named Spark query per thing the checker counts beyond the message table.

Each takes DataFrames of history events (checkers.lines.ROW_SCHEMA) or of the message table
(checkers.messages, where the per-group counts are defined) and returns a DataFrame; none
brings anything per message back to the driver. Besides the per-group counts:
  reordered   (of the first deliveries) those whose seq is below the highest seq already
              first-delivered in g for the same (producer, partition)
  unseen      (of the lost messages) those acknowledged above the highest offset g read there
Of the observed log (every ok send's and every ok receive's (stream, partition, offset,
msg_id), all groups):
  inconsistent_offsets  positions holding two or more distinct msg_ids
  duplicate_offsets     msg_ids observed at two or more positions of one log (a topic, or a
                        stream: a RabbitMQ fanout puts one copy in each stream by design)
Per reader process, consecutive receives in one partition in file line order, offsets a, b:
  poll_skips            a < b, and the observed log holds an offset strictly between
  nonmonotonic_polls    b <= a
Per producer, ok sends to one partition in seq order:
  nonmonotonic_sends    offset <= the offset of the previous one
RabbitMQ queue events carry no offsets: every offset-level count is 0 there; stream reads
carry them (partition 0 of the stream).
"""

from __future__ import annotations

from typing import Any

from checkers.messages import DELIVERY_ORDER, planned_abort
from contract.history import SHARE_ACK

DataFrame = Any  # pyspark.sql.DataFrame; pyspark is imported where a query runs
Column = Any  # pyspark.sql.Column


def _F() -> Any:
    from pyspark.sql import functions as F

    return F


# ---- sends -------------------------------------------------------------------------------------


def client_errors(events: DataFrame) -> DataFrame:
    """(f, name, count) of not-ok sends, commits, transactions and share consumers'
    acknowledgements, by the error text before its first ":"."""
    F = _F()
    name = F.regexp_extract(F.coalesce(F.col("error"), F.lit("")), r"^([^:]*)", 1)
    return (
        events.filter(
            F.col("type").isin("fail", "info")
            & F.col("f").isin("send", "commit", "txn", SHARE_ACK)
            & ~F.coalesce(planned_abort(F.col), F.lit(False))
        )
        .withColumn("name", name)
        .groupBy("f", "name")
        .count()
    )


# ---- receives ----------------------------------------------------------------------------------


def deliveries(events: DataFrame) -> DataFrame:
    """(group, process, time, stream, partition, offset, file, line) of every ok receive: what
    the checks of deliveries read (the message table has the rest)."""
    F = _F()
    receives = events.filter((F.col("f") == "receive") & (F.col("type") == "ok"))
    group = F.coalesce(F.col("group"), F.col("stream")).alias("group")
    columns = ("process", "time", "stream", "partition", "offset", "file", "line")
    return receives.select(group, *columns)


def reordered(first: DataFrame) -> DataFrame:
    """(group, msg_id) of first deliveries (checkers.messages.MessageTable.first_deliveries)
    whose seq is below the highest seq first-delivered before them in the same group, from the
    same producer, in the same partition."""
    from pyspark.sql import Window

    F = _F()
    before = (
        Window.partitionBy("group", "producer", "partition")
        .orderBy(*DELIVERY_ORDER)
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    return (
        first.withColumn("highest_before", F.max("seq").over(before))
        .filter(F.col("seq") < F.col("highest_before"))
        .select("group", "msg_id")
    )


# ---- the observed log (Kafka: every send and receive carries partition and offset) -------------


def positions(events: DataFrame) -> DataFrame:
    """(stream, partition, offset, ids, next_offset): every position an ok send or ok receive
    names, how many distinct msg_ids were observed there (0 for a body we did not write), and
    the next observed offset of its partition. Empty for RabbitMQ queues, whose events carry
    none.

    A count, not the msg_ids themselves: a count's buffer is a number, which Spark hashes in
    generated code, where a set of strings took an aggregation of objects, row by row. The
    msg_ids are looked up (ids_at) only for the few positions a person reads."""
    from pyspark.sql import Window

    F = _F()
    held = (
        _placed(events)
        .groupBy("stream", "partition", "offset")
        .agg(F.count_distinct("msg_id").alias("ids"))
    )
    after = Window.partitionBy("stream", "partition").orderBy("offset")
    return held.withColumn("next_offset", F.lead("offset").over(after))


def is_observed() -> Any:
    """Whether a position is of the observed log: it holds at least one of our msg_ids."""
    return _F().col("ids") > 0


def is_inconsistent() -> Any:
    """Whether a position (stream, partition, offset) holds two or more distinct msg_ids: an
    offset acknowledged or read as one message and later holding another (truncation after a
    fail-over)."""
    return _F().col("ids") > 1


def inconsistent_offsets(positions: DataFrame) -> DataFrame:
    """The inconsistent positions (is_inconsistent)."""
    return positions.filter(is_inconsistent())


def duplicate_offsets(events: DataFrame) -> DataFrame:
    """(stream, msg_id): msg_ids observed at two or more distinct positions of one log (a retry
    written twice).

    Two positions differ in partition or in offset, so a msg_id's least and greatest of each
    tell, and those are fixed-size aggregation buffers, which Spark hashes. Collecting every
    msg_id's positions to compare them made Spark sort them all: at 1M messages, a fifth of
    the check's executor time. The positions are listed (positions_of) only for the few a
    person reads."""
    F = _F()
    spread = (F.col("low_partition") != F.col("high_partition")) | (
        F.col("low_offset") != F.col("high_offset")
    )
    return (
        _placed(events)
        .filter(F.col("msg_id").isNotNull())
        .groupBy("stream", "msg_id")
        .agg(
            F.min("partition").alias("low_partition"),
            F.max("partition").alias("high_partition"),
            F.min("offset").alias("low_offset"),
            F.max("offset").alias("high_offset"),
        )
        .filter(spread)
        .select("stream", "msg_id")
    )


def log_findings(positions: DataFrame, events: DataFrame, samples: int) -> DataFrame:
    """The observed log's anomalies in one query: a row of kind "counts" (positions observed,
    inconsistent_offsets, duplicate_offsets), and the first `samples` of each anomaly as a row
    of its kind, in the order a person reads them: an inconsistent offset's (stream, partition,
    offset, msg_ids) by position, a duplicate's (stream, msg_id, at: its positions) by msg_id.
    Columns a kind does not have are null.

    One action where counting and sampling each anomaly took four or five: the duplicates'
    aggregation appears in the plan three times, and Spark runs its exchange once for all."""
    F = _F()
    inconsistent = inconsistent_offsets(positions)
    duplicates = duplicate_offsets(events)
    counts = positions.agg(
        F.count_if(is_observed()).alias("positions"),
        F.count_if(is_inconsistent()).alias("inconsistent_offsets"),
    ).crossJoin(duplicates.agg(F.count("*").alias("duplicate_offsets")))
    first_inconsistent = ids_at(
        events, inconsistent.orderBy("stream", "partition", "offset").limit(samples)
    )
    first_duplicates = positions_of(events, duplicates.orderBy("msg_id", "stream").limit(samples))
    return (
        counts.select(F.lit("counts").alias("kind"), "*")
        .unionByName(
            first_inconsistent.select(
                F.lit("inconsistent_offsets").alias("kind"),
                "stream",
                "partition",
                "offset",
                "msg_ids",
            ),
            allowMissingColumns=True,
        )
        .unionByName(
            first_duplicates.select(
                F.lit("duplicate_offsets").alias("kind"), "stream", "msg_id", "at"
            ),
            allowMissingColumns=True,
        )
    )


def ids_at(events: DataFrame, which: DataFrame) -> DataFrame:
    """(stream, partition, offset, msg_ids): for each position of `which` (a few rows), the
    distinct msg_ids observed there, sorted."""
    return _collected_where(events, which, ["partition", "offset"], _F().col("msg_id"), "msg_ids")


def positions_of(events: DataFrame, which: DataFrame) -> DataFrame:
    """(stream, msg_id, at): for each (stream, msg_id) of `which`, a few rows, the distinct
    positions the log holds it at, as stream/partition@offset, sorted."""
    F = _F()
    position = F.concat_ws("@", F.concat_ws("/", "stream", "partition"), "offset")
    return _collected_where(events, which, ["msg_id"], position, "at")


def _collected_where(
    events: DataFrame, which: DataFrame, on: list[str], collected: Column, name: str
) -> DataFrame:
    """(stream, *on, name): for each row of `which` (stream and `on`, a few rows), the distinct
    values of `collected` over the placed events that match it, sorted."""
    F = _F()
    # Null-safe on the stream: a history without one groups its msg_ids under null, and an
    # equality join would drop them here, and with them a sample counted from these rows.
    wanted = F.broadcast(which.select(F.col("stream").alias("w_stream"), *on))
    same_stream = F.col("stream").eqNullSafe(F.col("w_stream"))
    return (
        _placed(events)
        .join(wanted, on)
        .filter(same_stream)
        .groupBy("stream", *on)
        .agg(F.sort_array(F.collect_set(collected)).alias(name))
    )


def _placed(events: DataFrame) -> DataFrame:
    """ok sends and receives that name their (partition, offset)."""
    F = _F()
    return events.filter(
        (F.col("type") == "ok")
        & F.col("f").isin("send", "receive")
        & F.col("partition").isNotNull()
        & F.col("offset").isNotNull()
    )


def highest_read(receives: DataFrame) -> DataFrame:
    """(group, stream, partition, highest): the highest offset each group received there."""
    F = _F()
    placed = receives.filter(F.col("offset").isNotNull() & F.col("partition").isNotNull())
    return placed.groupBy("group", "stream", "partition").agg(F.max("offset").alias("highest"))


def unseen(lost_at: DataFrame, highest: DataFrame) -> DataFrame:
    """Lost messages (checkers.messages.MessageTable.lost_at) acknowledged above the highest
    offset the group read in that partition (or where it read nothing): never reached, rather
    than a hole below what it read."""
    F = _F()
    placed = lost_at.join(F.broadcast(highest), ["group", "stream", "partition"], "left")
    beyond = F.col("highest").isNull() | (F.col("offset") > F.col("highest"))
    return placed.filter(beyond).select("group", "msg_id")


PACE = ("sends_begun", "first_invoke", "last_invoke")  # the columns producers adds


def producers(summary: DataFrame) -> DataFrame:
    """(producer, *PACE) of every producer that sent anything (summary: the message table's
    sent messages), once each: how many of its messages it began to send, and the first and
    last of their invokes (each message's first invoke), which checkers.pace makes its rate."""
    F = _F()
    return (
        summary.filter(F.col("producer").isNotNull())
        .groupBy("producer")
        .agg(
            F.count_if(F.coalesce(F.col("invoked"), F.lit(False))).alias("sends_begun"),
            F.min("invoke_time").alias("first_invoke"),
            F.max("invoke_time").alias("last_invoke"),
        )
    )


def consecutive_reads(receives: DataFrame) -> DataFrame:
    """(process, stream, partition, a, b): each pair of consecutive receives of one reader process
    in one partition, in its file's line order; a and b are their offsets."""
    from pyspark.sql import Window

    F = _F()
    reads = receives.filter(F.col("partition").isNotNull() & F.col("offset").isNotNull())
    in_file_order = Window.partitionBy("process", "stream", "partition").orderBy("file", "line")
    return (
        reads.withColumn("a", F.lag("offset").over(in_file_order))
        .filter(F.col("a").isNotNull())
        .select("process", "stream", "partition", "a", F.col("offset").alias("b"))
    )


def read_anomalies(
    pairs: DataFrame,
    positions: DataFrame,
    committed_readers: set[str] | None = None,
    committed_positions: DataFrame | None = None,
) -> DataFrame:
    """(process, poll_skip, nonmonotonic) for each pair of consecutive reads:
      poll_skip     a < b, and the observed log holds an offset strictly between: a was
                    observed (it was read), so the next observed offset after a decides
      nonmonotonic  b <= a
    A read_committed reader (of `committed_readers`) is judged against the log less the
    records of transactions judged aborted (`committed_positions`: aborted, or of unknown outcome
    and read by no read_committed group, checkers.transactions), every other reader against
    `positions`.

    Both flags of a pair come from one row of one join: asked as two frames of the pairs,
    Spark ran their window twice (it reuses no exchange under different pushed filters)."""
    F = _F()

    def nexts(frame: DataFrame, committed: bool) -> DataFrame:
        return frame.select(
            "stream",
            "partition",
            F.col("offset").alias("a"),
            "next_offset",
            F.lit(committed).alias("committed"),
        )

    following = nexts(positions, False)
    committed = F.lit(False)
    if committed_readers:
        following = following.unionByName(nexts(committed_positions, True))
        committed = F.col("process").isin(sorted(committed_readers))
    judged = pairs.withColumn("committed", committed).join(
        following, ["stream", "partition", "a", "committed"], "left"
    )
    skipped = (F.col("b") > F.col("a")) & (F.col("next_offset") < F.col("b"))
    return judged.select(
        "process",
        F.coalesce(skipped, F.lit(False)).alias("poll_skip"),
        (F.col("b") <= F.col("a")).alias("nonmonotonic"),
    )


def nonmonotonic_sends(events: DataFrame) -> DataFrame:
    """ok sends of one producer to one partition, in seq order, written at or below the offset
    of that producer's previous ok send there."""
    from pyspark.sql import Window

    F = _F()
    acks = _placed(events).filter((F.col("f") == "send") & F.col("producer").isNotNull())
    by_seq = Window.partitionBy("producer", "stream", "partition").orderBy("seq")
    return acks.withColumn("previous", F.lag("offset").over(by_seq)).filter(
        F.col("previous").isNotNull() & (F.col("offset") <= F.col("previous"))
    )


def run_span(events: DataFrame, **also: Any) -> DataFrame:
    """One row: the first and last time of the history (first, last), and each aggregate of
    `also` (name: column) asked in the same pass."""
    F = _F()
    extra = [column.alias(name) for name, column in also.items()]
    return events.agg(F.min("time").alias("first"), F.max("time").alias("last"), *extra)
