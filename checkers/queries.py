"""One small, named Spark query per thing the checker counts.

Each takes DataFrames of history events (checkers.lines.ROW_SCHEMA) and returns a DataFrame;
none brings anything per message back to the driver. Per reader group g, with every
acknowledged message of the run expected in every group:
  acked       distinct msg_ids whose send ended ok
  received    distinct msg_ids received in g
  lost        acked, never received in g
  duplicated  distinct msg_ids received more than once in g
  unexpected  received in g, never sent (no invoke), or a body we did not write
  recovered   received in g although its send ended fail, info or never completed
  reordered   first deliveries in g (by time, ties by file and line) whose seq is below the
              highest seq already first-delivered in g for the same (producer, partition)
  unseen      lost in g, acknowledged above the highest offset g read in that partition (or
              where g read nothing): lost - unseen are holes below what g read
Of the observed log (every ok send's and every ok receive's (stream, partition, offset,
msg_id), all groups):
  inconsistent_offsets  positions holding two or more distinct msg_ids
  duplicate_offsets     msg_ids observed at two or more positions
Per reader process, consecutive receives in one partition in file line order, offsets a, b:
  poll_skips            a < b, and the observed log holds an offset strictly between
  nonmonotonic_polls    b <= a
Per producer, ok sends to one partition in seq order:
  nonmonotonic_sends    offset <= the offset of the previous one
RabbitMQ events carry no offsets: every offset-level count is 0 there.
"""

from __future__ import annotations

from typing import Any

from harness.history import NEMESIS_PROCESS

DataFrame = Any  # pyspark.sql.DataFrame; pyspark is imported where a query runs
DELIVERY_ORDER = ("time", "file", "line")  # ties in time break by file, then line


def _F() -> Any:
    from pyspark.sql import functions as F

    return F


# ---- sends -------------------------------------------------------------------------------------


def sends(events: DataFrame) -> DataFrame:
    return events.filter(_F().col("f") == "send")


def invoked(events: DataFrame) -> DataFrame:
    """msg_ids a producer tried to send."""
    F = _F()
    return sends(events).filter(F.col("type") == "invoke").select("msg_id").distinct()


def send_outcomes(events: DataFrame) -> DataFrame:
    """(msg_id, outcome): ok wins, then fail, then info; an invoke alone is info."""
    F = _F()
    rank = (
        F.when(F.col("type") == "ok", 3)
        .when(F.col("type") == "fail", 2)
        .when(F.col("type") == "info", 1)
        .otherwise(0)
    )
    best = sends(events).groupBy("msg_id").agg(F.max(rank).alias("rank"))
    outcome = F.when(F.col("rank") == 3, "ok").when(F.col("rank") == 2, "fail").otherwise("info")
    return best.select("msg_id", outcome.alias("outcome"))


def acked(events: DataFrame) -> DataFrame:
    return send_outcomes(events).filter(_F().col("outcome") == "ok").select("msg_id")


def not_acked(events: DataFrame) -> DataFrame:
    return send_outcomes(events).filter(_F().col("outcome") != "ok").select("msg_id")


def refused_window(events: DataFrame) -> DataFrame:
    """One row: the first and last time a send was refused or left unknown."""
    F = _F()
    return (
        sends(events)
        .filter(F.col("type").isin("fail", "info"))
        .agg(F.min("time").alias("first"), F.max("time").alias("last"))
    )


def client_errors(events: DataFrame) -> DataFrame:
    """(f, name, count) of not-ok sends and commits, by the error text before its first ":"."""
    F = _F()
    name = F.regexp_extract(F.coalesce(F.col("error"), F.lit("")), r"^([^:]*)", 1)
    return (
        events.filter(F.col("type").isin("fail", "info") & F.col("f").isin("send", "commit"))
        .withColumn("name", name)
        .groupBy("f", "name")
        .count()
    )


def leader_placements(events: DataFrame) -> DataFrame:
    """The nemesis's leader-placement snapshots, in time order (a few rows per run)."""
    F = _F()
    return (
        events.filter(
            (F.col("process") == NEMESIS_PROCESS)
            & (F.col("f") == "leaders")
            & (F.col("type") == "ok")
        )
        .select("time", "value")
        .orderBy("time")
    )


# ---- receives ----------------------------------------------------------------------------------


def deliveries(events: DataFrame) -> DataFrame:
    """Every ok receive, with its group; a body we did not write gets an id of its own."""
    F = _F()
    receives = events.filter((F.col("f") == "receive") & (F.col("type") == "ok"))
    receives = receives.withColumn("group", F.coalesce(F.col("group"), F.col("stream")))
    own_id = F.concat(F.lit("?"), F.col("file"), F.lit(":"), F.col("line"))
    return receives.withColumn("msg_id", F.coalesce(F.col("msg_id"), own_id))


def per_message(receives: DataFrame) -> DataFrame:
    """(group, msg_id, deliveries)."""
    return receives.groupBy("group", "msg_id").agg(_F().count("*").alias("deliveries"))


def received(per_msg: DataFrame) -> DataFrame:
    return per_msg.select("group", "msg_id")


def lost(groups: DataFrame, acked_ids: DataFrame, per_msg: DataFrame) -> DataFrame:
    return groups.crossJoin(acked_ids).join(per_msg, ["group", "msg_id"], "left_anti")


def duplicated(per_msg: DataFrame) -> DataFrame:
    return per_msg.filter(_F().col("deliveries") > 1).select("group", "msg_id")


def unexpected(per_msg: DataFrame, invoked_ids: DataFrame) -> DataFrame:
    return per_msg.join(invoked_ids, "msg_id", "left_anti").select("group", "msg_id")


def recovered(per_msg: DataFrame, not_acked_ids: DataFrame) -> DataFrame:
    return per_msg.join(not_acked_ids, "msg_id", "inner").select("group", "msg_id")


def reordered(receives: DataFrame) -> DataFrame:
    from pyspark.sql import Window

    F = _F()
    first = receives.withColumn(
        "n", F.row_number().over(Window.partitionBy("group", "msg_id").orderBy(*DELIVERY_ORDER))
    ).filter(F.col("n") == 1)
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


def observed_log(events: DataFrame) -> DataFrame:
    """Distinct (stream, partition, offset, msg_id) of every ok send and every ok receive, of
    every group, that names its position. Empty for RabbitMQ, whose events carry no offset."""
    placed = _placed(events).filter(_F().col("msg_id").isNotNull())
    return placed.select("stream", "partition", "offset", "msg_id").distinct()


def inconsistent_offsets(log: DataFrame) -> DataFrame:
    """Positions (stream, partition, offset) holding two or more distinct msg_ids: an offset
    acknowledged or read as one message and later holding another (truncation after a
    fail-over)."""
    F = _F()
    return (
        log.groupBy("stream", "partition", "offset")
        .agg(F.count("*").alias("ids"), F.sort_array(F.collect_list("msg_id")).alias("msg_ids"))
        .filter(F.col("ids") > 1)
    )


def duplicate_offsets(log: DataFrame) -> DataFrame:
    """msg_ids observed at two or more distinct positions: a retry written twice."""
    F = _F()
    position = F.concat_ws("@", F.concat_ws("/", "stream", "partition"), "offset")
    return (
        log.groupBy("msg_id")
        .agg(F.count("*").alias("positions"), F.sort_array(F.collect_list(position)).alias("at"))
        .filter(F.col("positions") > 1)
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


def positions(events: DataFrame) -> DataFrame:
    """Every observed (stream, partition, offset), with the next observed offset after it."""
    from pyspark.sql import Window

    F = _F()
    placed = _placed(events).select("stream", "partition", "offset").distinct()
    after = Window.partitionBy("stream", "partition").orderBy("offset")
    return placed.withColumn("next_offset", F.lead("offset").over(after))


def ack_positions(events: DataFrame) -> DataFrame:
    """(msg_id, stream, partition, offset) where each acknowledged message was written."""
    F = _F()
    acks = _placed(events).filter(F.col("f") == "send")
    return acks.groupBy("msg_id", "stream", "partition").agg(F.min("offset").alias("offset"))


def highest_read(receives: DataFrame) -> DataFrame:
    """(group, stream, partition, highest): the highest offset each group received there."""
    F = _F()
    placed = receives.filter(F.col("offset").isNotNull() & F.col("partition").isNotNull())
    return placed.groupBy("group", "stream", "partition").agg(F.max("offset").alias("highest"))


def unseen(lost_ids: DataFrame, acks: DataFrame, highest: DataFrame) -> DataFrame:
    """Lost messages acknowledged above the highest offset the group read in that partition (or
    where it read nothing): never reached, rather than a hole below what it read."""
    F = _F()
    placed = lost_ids.join(acks, "msg_id").join(highest, ["group", "stream", "partition"], "left")
    beyond = F.col("highest").isNull() | (F.col("offset") > F.col("highest"))
    return placed.filter(beyond).select("group", "msg_id")


def reader_processes(events: DataFrame) -> list[str]:
    F = _F()
    readers = events.filter((F.col("f") == "receive") & (F.col("type") == "ok"))
    return sorted(r["process"] for r in readers.select("process").distinct().collect())


def producer_names(events: DataFrame) -> list[str]:
    producing = sends(events).filter(_F().col("producer").isNotNull())
    return sorted(r["producer"] for r in producing.select("producer").distinct().collect())


def consecutive_reads(events: DataFrame) -> DataFrame:
    """(process, stream, partition, a, b): each pair of consecutive receives of one reader process
    in one partition, in its file's line order; a and b are their offsets."""
    from pyspark.sql import Window

    F = _F()
    reads = _placed(events).filter(F.col("f") == "receive")
    in_file_order = Window.partitionBy("process", "stream", "partition").orderBy("file", "line")
    return (
        reads.withColumn("a", F.lag("offset").over(in_file_order))
        .filter(F.col("a").isNotNull())
        .select("process", "stream", "partition", "a", F.col("offset").alias("b"))
    )


def poll_skips(pairs: DataFrame, observed: DataFrame) -> DataFrame:
    """Consecutive reads a < b with an observed offset strictly between: the reader skipped it.
    a was observed (it was read), so the next observed offset after a decides."""
    F = _F()
    nexts = observed.select("stream", "partition", F.col("offset").alias("a"), F.col("next_offset"))
    forward = pairs.filter(F.col("b") > F.col("a"))
    return forward.join(nexts, ["stream", "partition", "a"]).filter(
        F.col("next_offset") < F.col("b")
    )


def nonmonotonic_polls(pairs: DataFrame) -> DataFrame:
    """Consecutive reads whose second offset is not above the first."""
    return pairs.filter(_F().col("b") <= _F().col("a"))


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


# ---- which fault did it ------------------------------------------------------------------------

BEFORE_ANY_FAULT = "before any fault"
NEVER_ACKED = "never acknowledged"
ATTRIBUTED = ("lost", "duplicated", "reordered")


def fault_steps(events: DataFrame) -> DataFrame:
    """The nemesis's steps: each invoke of a fault (leader-placement snapshots are not faults),
    in time order; a few rows per run."""
    F = _F()
    return (
        events.filter(
            (F.col("process") == NEMESIS_PROCESS)
            & (F.col("type") == "invoke")
            & (F.col("f") != "leaders")
        )
        .select("time", "f", "value")
        .orderBy("time", "file", "line")
    )


def acks(events: DataFrame) -> DataFrame:
    """(msg_id, ack_time, acking_node): when each acknowledged message was acknowledged, and by
    which node where the history says (RabbitMQ names it; Kafka's client does not)."""
    F = _F()
    ok = sends(events).filter(F.col("type") == "ok")
    node = F.coalesce(F.col("node"), F.lit("unknown"))
    return ok.groupBy("msg_id").agg(F.min("time").alias("ack_time"), F.first(node).alias("node"))


def by_step_and_node(flagged: DataFrame, ack_info: DataFrame, steps: DataFrame) -> DataFrame:
    """(group, step, node, count) of flagged (group, msg_id): each message tied to the step in
    effect when it was acknowledged (the last one started at or before its ack) and to its
    acking node. steps: (start, end, step), end None for the last."""
    F = _F()
    placed = flagged.join(ack_info, "msg_id", "left")
    during = (F.col("ack_time") >= F.col("start")) & (
        F.col("end").isNull() | (F.col("ack_time") < F.col("end"))
    )
    tied = placed.join(F.broadcast(steps), during, "left")
    never = F.col("ack_time").isNull()
    step = F.when(never, F.lit(NEVER_ACKED)).otherwise(
        F.coalesce(F.col("step"), F.lit(BEFORE_ANY_FAULT))
    )
    node = F.when(never, F.lit(NEVER_ACKED)).otherwise(F.col("node"))
    return tied.groupBy("group", step.alias("step"), node.alias("node")).count()
