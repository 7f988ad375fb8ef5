"""One small, named Spark query per thing the checker counts.

Each takes DataFrames of history events (checkers.lines.ROW_SCHEMA) and returns a DataFrame;
none brings anything per message back to the driver. Per reader group g, with every
acknowledged message of the run expected in every group:
  acked       distinct msg_ids whose send ended ok
  received    distinct msg_ids received in g
  lost        acked, never received in g
  duplicated  distinct msg_ids received more than once in g
  unflagged   duplicated in g with a delivery after the first that lacked the broker's
              redelivered flag (RabbitMQ; Kafka's receives carry no flag)
  unexpected  received in g, never sent (no invoke), or a body we did not write
  recovered   received in g although its send ended fail, info or never completed
  reordered   first deliveries in g (by time, ties by file and line) whose seq is below the
              highest seq already first-delivered in g for the same (producer, partition)
  unseen      lost in g, acknowledged above the highest offset g read in that partition (or
              where g read nothing): lost - unseen are holes below what g read
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

from contract.history import NEMESIS_PROCESS, PARTITION_STATE

DataFrame = Any  # pyspark.sql.DataFrame; pyspark is imported where a query runs
DELIVERY_ORDER = ("time", "file", "line")  # ties in time break by file, then line


def _F() -> Any:
    from pyspark.sql import functions as F

    return F


# ---- sends -------------------------------------------------------------------------------------


def sends(events: DataFrame) -> DataFrame:
    return events.filter(_F().col("f") == "send")


def send_summary(events: DataFrame) -> DataFrame:
    """(msg_id, outcome, invoked, ack_time, node, producer, invoke_time, done_time) of every
    message a send names: outcome ok wins, then fail, then info (an invoke alone is info);
    invoked says a producer tried to send it; ack_time is its first ok, node the node that
    acknowledged it where the history says (RabbitMQ names it; Kafka's client does not);
    done_time is its first outcome (None for an invoke alone)."""
    F = _F()
    rank = (
        F.when(F.col("type") == "ok", 3)
        .when(F.col("type") == "fail", 2)
        .when(F.col("type") == "info", 1)
        .otherwise(0)
    )
    ok = F.col("type") == "ok"
    invoke = F.col("type") == "invoke"
    best = (
        sends(events)
        .groupBy("msg_id")
        .agg(
            F.max(rank).alias("rank"),
            F.max(invoke).alias("invoked"),
            F.first("producer", ignorenulls=True).alias("producer"),
            F.min(F.when(invoke, F.col("time"))).alias("invoke_time"),
            F.min(F.when(~invoke, F.col("time"))).alias("done_time"),
            F.min(F.when(ok, F.col("time"))).alias("ack_time"),
            F.first(
                F.when(ok, F.coalesce(F.col("node"), F.lit("unknown"))), ignorenulls=True
            ).alias("node"),
        )
    )
    outcome = F.when(F.col("rank") == 3, "ok").when(F.col("rank") == 2, "fail").otherwise("info")
    return best.select(
        "msg_id",
        outcome.alias("outcome"),
        "invoked",
        "ack_time",
        "node",
        "producer",
        "invoke_time",
        "done_time",
    )


def acked(summary: DataFrame) -> DataFrame:
    return summary.filter(_F().col("outcome") == "ok").select("msg_id")


def refused_window(events: DataFrame) -> DataFrame:
    """One row: the first and last time a send was refused or left unknown."""
    F = _F()
    return (
        sends(events)
        .filter(F.col("type").isin("fail", "info"))
        .agg(F.min("time").alias("first"), F.max("time").alias("last"))
    )


def unavailable_intervals(summary: DataFrame) -> DataFrame:
    """(producer, start, end, sends, refused, unknown): each maximal run of a producer's sends,
    in order of completion, that ended fail or info (or never completed); from the earliest
    invoke among them to the last completion."""
    from pyspark.sql import Window

    F = _F()
    done = F.coalesce(F.col("done_time"), F.col("invoke_time"))
    in_order = (
        Window.partitionBy("producer")
        .orderBy(done, "msg_id")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    ok = F.col("outcome") == "ok"
    # Sends between the same two acks share the count of acks before them: one island each.
    islands = summary.filter(F.col("producer").isNotNull()).withColumn(
        "island", F.sum(ok.cast("int")).over(in_order)
    )
    return (
        islands.filter(~ok)
        .groupBy("producer", "island")
        .agg(
            F.min(F.coalesce(F.col("invoke_time"), done)).alias("start"),
            F.max(done).alias("end"),
            F.count("*").alias("sends"),
            F.sum((F.col("outcome") == "fail").cast("int")).alias("refused"),
            F.sum((F.col("outcome") == "info").cast("int")).alias("unknown"),
        )
        .drop("island")
    )


def with_fault_overlap(intervals: DataFrame, windows: DataFrame) -> DataFrame:
    """intervals with in_faults, the seconds of each inside the fault windows (w_start, w_end),
    and touches_fault, whether it meets one at all (a single refused send inside a fault spans
    next to no time, but it is a refusal the fault caused)."""
    F = _F()
    inside = F.greatest(F.lit(0.0), F.least("end", "w_end") - F.greatest("start", "w_start"))
    touches = (F.col("start") <= F.col("w_end")) & (F.col("end") >= F.col("w_start"))
    keys = ["producer", "start", "end", "sends", "refused", "unknown"]
    return (
        intervals.join(F.broadcast(windows), how="left")
        .groupBy(*keys)
        .agg(
            F.coalesce(F.sum(inside), F.lit(0.0)).alias("in_faults"),
            F.coalesce(F.max(touches), F.lit(False)).alias("touches_fault"),
        )
    )


def window_traffic(summary: DataFrame, receives: DataFrame, windows: DataFrame) -> DataFrame:
    """(w_start, w_end, acked, sends, exposed, delivered) per fault window: messages acknowledged
    and sends begun inside it, messages acknowledged before it and not yet delivered when it
    began (what it could still lose), and deliveries inside it. windows: (w_start, w_end)."""
    F = _F()
    w = F.broadcast(windows)

    def inside(column: str) -> Any:
        return (F.col(column) >= F.col("w_start")) & (F.col(column) <= F.col("w_end"))

    first = receives.groupBy("msg_id").agg(F.min("time").alias("first_delivery"))
    ok = F.col("outcome") == "ok"
    waiting = F.col("first_delivery").isNull() | (F.col("first_delivery") >= F.col("w_start"))
    exposed = ok & (F.col("ack_time") < F.col("w_start")) & waiting
    per_send = (
        summary.select("msg_id", "outcome", "ack_time", "invoke_time")
        .join(first, "msg_id", "left")
        .crossJoin(w)
        .groupBy("w_start", "w_end")
        .agg(
            F.sum((ok & inside("ack_time")).cast("int")).alias("acked"),
            F.sum(inside("invoke_time").cast("int")).alias("sends"),
            F.sum(exposed.cast("int")).alias("exposed"),
        )
    )
    delivered = (
        receives.select("time").crossJoin(w).filter(inside("time")).groupBy("w_start", "w_end")
    ).agg(F.count("*").alias("delivered"))
    return w.join(per_send, ["w_start", "w_end"], "left").join(
        delivered, ["w_start", "w_end"], "left"
    )


def stalls(
    summary: DataFrame, receives: DataFrame, groups: DataFrame, min_seconds: float
) -> DataFrame:
    """(group, start, end): each gap of at least `min_seconds` in a group's progress while sends
    were made (from the first invoke to the last outcome), progress being any send
    acknowledged (every group is fed every message) or any delivery to the group. A queue that
    confirms no publish and delivers nothing is blocked (a mirror synchronising), whatever
    the clients were told."""
    from pyspark.sql import Window

    F = _F()
    span = summary.agg(
        F.min("invoke_time").alias("from"), F.max("done_time").alias("to")
    ).crossJoin(groups)
    acks = summary.filter(F.col("outcome") == "ok").select(F.col("ack_time").alias("time"))
    progress = groups.crossJoin(acks).unionByName(receives.select("group", "time"))
    inside = progress.join(F.broadcast(span), "group").filter(
        F.col("time").between(F.col("from"), F.col("to"))
    )
    previous = F.lag("time").over(Window.partitionBy("group").orderBy("time"))
    return (
        inside.withColumn("start", previous)
        .filter(F.col("time") - F.col("start") >= min_seconds)
        .select("group", "start", F.col("time").alias("end"))
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


def messages(groups: DataFrame, summary: DataFrame, per_msg: DataFrame) -> DataFrame:
    """(group, msg_id, outcome, invoked, deliveries): every message sent, in every group, beside
    every message each group received. The per-group counts below are filters of this one table:
    outcome is null for a message never sent, deliveries for one the group never received."""
    return groups.crossJoin(summary).join(per_msg, ["group", "msg_id"], "full")


def acked_in(msgs: DataFrame) -> DataFrame:
    return msgs.filter(_F().col("outcome") == "ok").select("group", "msg_id")


def received(msgs: DataFrame) -> DataFrame:
    return msgs.filter(_F().col("deliveries").isNotNull()).select("group", "msg_id")


def lost(msgs: DataFrame) -> DataFrame:
    F = _F()
    return msgs.filter((F.col("outcome") == "ok") & F.col("deliveries").isNull()).select(
        "group", "msg_id"
    )


def duplicated(msgs: DataFrame) -> DataFrame:
    return msgs.filter(_F().col("deliveries") > 1).select("group", "msg_id")


def unflagged(receives: DataFrame) -> DataFrame:
    """Delivered again in g (any delivery after the first, by time) without the broker's
    redelivered flag: a replay RabbitMQ did not mark as one. Our publishers never publish a
    seq twice, so every RabbitMQ duplicate is a redelivery and should carry the flag. Kafka's
    receives carry no flag (null) and never count."""
    from pyspark.sql import Window

    F = _F()
    nth = F.row_number().over(Window.partitionBy("group", "msg_id").orderBy(*DELIVERY_ORDER))
    replays = receives.withColumn("n", nth).filter(
        (F.col("n") > 1) & (F.col("redelivered") == F.lit(False))
    )
    return replays.select("group", "msg_id").distinct()


def unexpected(msgs: DataFrame) -> DataFrame:
    """Received, never invoked by a producer (or a body we did not write)."""
    F = _F()
    never_sent = F.col("invoked").isNull() | ~F.col("invoked")
    return msgs.filter(F.col("deliveries").isNotNull() & never_sent).select("group", "msg_id")


def recovered(msgs: DataFrame) -> DataFrame:
    """Received, although its send ended fail, info or never completed."""
    F = _F()
    return msgs.filter(F.col("deliveries").isNotNull() & (F.col("outcome") != "ok")).select(
        "group", "msg_id"
    )


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
    every group, that names its position. Empty for RabbitMQ queues, whose events carry none."""
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
    """msg_ids observed at two or more distinct positions of one log: a retry written twice."""
    F = _F()
    position = F.concat_ws("@", F.concat_ws("/", "stream", "partition"), "offset")
    return (
        log.groupBy("stream", "msg_id")
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


def nemesis_events(events: DataFrame) -> DataFrame:
    """Every nemesis event (time, type, f, value), in order: a few rows per run, collected once
    for its steps, fault windows and leader-placement snapshots."""
    F = _F()
    return (
        events.filter(F.col("process") == NEMESIS_PROCESS)
        .select("time", "type", "f", "value")
        .orderBy("time", "file", "line")
    )


def partition_states(events: DataFrame) -> DataFrame:
    """(time, partition, value) of every leader/ISR change a run's partition watch recorded
    (Kafka; a few rows per run), in order."""
    F = _F()
    return (
        events.filter(F.col("f") == PARTITION_STATE)
        .select("time", "partition", "value")
        .orderBy("time", "file", "line")
    )


def run_span(events: DataFrame) -> DataFrame:
    """One row: the first and last time of the history."""
    F = _F()
    return events.agg(F.min("time").alias("first"), F.max("time").alias("last"))


def acks(summary: DataFrame) -> DataFrame:
    """(msg_id, ack_time, node) of every acknowledged message."""
    return summary.filter(_F().col("outcome") == "ok").select("msg_id", "ack_time", "node")


def attributed(flagged: dict[str, DataFrame]) -> DataFrame:
    """(metric, group, msg_id) of the lost, duplicated and reordered messages, in one frame
    (flagged: metric -> (group, msg_id))."""
    F = _F()
    frames = [flagged[m].select(F.lit(m).alias("metric"), "group", "msg_id") for m in ATTRIBUTED]
    out = frames[0]
    for df in frames[1:]:
        out = out.unionByName(df)
    return out


def by_step_and_node(flagged: DataFrame, ack_info: DataFrame, steps: DataFrame) -> DataFrame:
    """(metric, group, step, node, count) of flagged (metric, group, msg_id): each message tied
    to the step in effect when it was acknowledged (the last one started at or before its ack)
    and to its acking node. steps: (start, end, step), end None for the last."""
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
    return tied.groupBy("metric", "group", step.alias("step"), node.alias("node")).count()
