"""When the clients could not get through, as named Spark queries over the message table:
each producer's unavailable intervals and their overlap with the fault windows, the groups'
stalls, and the traffic each fault window carried (what the coverage judges a run by).

Like checkers.queries, each takes DataFrames and returns one; none brings anything per message
back to the driver."""

from __future__ import annotations

from typing import Any

from checkers.frames import small_array
from checkers.messages import ABORTED

DataFrame = Any  # pyspark.sql.DataFrame; pyspark is imported where a query runs


def _F() -> Any:
    from pyspark.sql import functions as F

    return F


# ---- sends -------------------------------------------------------------------------------------


BUCKET_SECONDS = 1.0  # a producer's sends are numbered within buckets of this much time


def unavailable_intervals(summary: DataFrame) -> DataFrame:
    """(producer, start, end, sends, refused, unknown): each maximal run of a producer's sends,
    in order of completion, that ended fail or info (or never completed); from the earliest
    invoke among them to the last completion."""
    F = _F()
    ok = F.col("outcome") == "ok"
    # A record of a transaction its producer aborted on purpose was neither refused nor lost
    # in the making, and a message never sent (outcome null) is no send: neither is part of
    # any interval.
    sends = summary.filter(F.col("producer").isNotNull() & (F.col("outcome") != ABORTED))
    sends = sends.withColumn("done", F.coalesce(F.col("done_time"), F.col("invoke_time")))
    # Sends between the same two acks share the count of acks up to them: one island each.
    islands = _with_acks_so_far(sends, ok, "island")
    return (
        islands.filter(~ok)
        .groupBy("producer", "island")
        .agg(
            F.min(F.coalesce(F.col("invoke_time"), F.col("done"))).alias("start"),
            F.max("done").alias("end"),
            F.count("*").alias("sends"),
            F.sum((F.col("outcome") == "fail").cast("int")).alias("refused"),
            F.sum((F.col("outcome") == "info").cast("int")).alias("unknown"),
        )
        .drop("island")
    )


def _with_acks_so_far(sends: DataFrame, ok: Any, name: str) -> DataFrame:
    """sends with column `name`: its producer's acks up to and including each send, in
    (done, msg_id) order.

    Counted in one window per producer, a run's sends would be one task however long the run
    (10M sends of one producer could not get memory to spill). So the count runs within each
    bucket of BUCKET_SECONDS, in parallel, and each bucket adds the acks of the producer's
    earlier buckets: a few rows per second of the run, summed in order."""
    from pyspark.sql import Window

    F = _F()
    # Sends that never completed nor began order first, as nulls do in the order's sort.
    bucket = F.coalesce(F.floor(F.col("done") / BUCKET_SECONDS), F.lit(-(2**62)))
    in_bucket = (
        Window.partitionBy("producer", "bucket")
        .orderBy("done", "msg_id")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    earlier_buckets = (
        Window.partitionBy("producer").orderBy("bucket").rowsBetween(Window.unboundedPreceding, -1)
    )
    acks = ok.cast("long")
    bucketed = sends.withColumn("bucket", bucket.cast("long"))
    before = (
        bucketed.groupBy("producer", "bucket")
        .agg(F.sum(acks).alias("acks"))
        .select(
            "producer",
            "bucket",
            F.coalesce(F.sum("acks").over(earlier_buckets), F.lit(0)).alias("acks_before"),
        )
    )
    return (
        bucketed.withColumn("acks_within", F.sum(acks).over(in_bucket))
        .join(F.broadcast(before), ["producer", "bucket"])
        .withColumn(name, F.col("acks_before") + F.col("acks_within"))
        .drop("bucket", "acks_before", "acks_within")
    )


def with_fault_overlap(intervals: DataFrame, windows: list[tuple[float, float]]) -> DataFrame:
    """intervals with in_faults, the seconds of each inside the fault windows (start, end), and
    touches_fault, whether it meets one at all (a single refused send inside a fault spans next
    to no time, but it is a refusal the fault caused).

    A run's fault windows are few: each row carries them as a literal array (small_array), so
    the overlap costs no join, no grouping and no job of its own."""
    F = _F()
    bounds = small_array(windows, "w_start double, w_end double")

    def inside(w: Any) -> Any:
        later_start = F.greatest(F.col("start"), w["w_start"])
        return F.greatest(F.lit(0.0), F.least(F.col("end"), w["w_end"]) - later_start)

    def touches(w: Any) -> Any:
        return (F.col("start") <= w["w_end"]) & (F.col("end") >= w["w_start"])

    return intervals.select(
        "*",
        F.aggregate(bounds, F.lit(0.0), lambda seconds, w: seconds + inside(w)).alias("in_faults"),
        F.exists(bounds, touches).alias("touches_fault"),
    )


def longest_unavailable(intervals: DataFrame, longest: int) -> DataFrame:
    """Up to `longest` unavailable intervals of each producer (with_fault_overlap), each with
    its seconds and its rank n (1 the longest; ties by start), and on each its producer's
    totals: intervals (how many), first (start), last (end), total_seconds, in_fault_seconds,
    and in_fault_sends, the refused or unknown sends of the intervals that meet a fault window
    (the ones a fault can have caused: a publisher's in-flight sends at its own deadline are
    not).

    One pass over the intervals answers both: asked apart, the intervals were planned, and
    computed, once for each question."""
    from pyspark.sql import Window

    F = _F()
    per_producer = Window.partitionBy("producer")
    longest_first = per_producer.orderBy(F.desc("seconds"), "start")
    in_fault_sends = F.when(F.col("touches_fault"), F.col("refused") + F.col("unknown"))
    timed = intervals.withColumn("seconds", F.col("end") - F.col("start"))
    return timed.select(
        "*",
        F.row_number().over(longest_first).alias("n"),
        F.count("*").over(per_producer).alias("intervals"),
        F.min("start").over(per_producer).alias("first"),
        F.max("end").over(per_producer).alias("last"),
        F.sum("seconds").over(per_producer).alias("total_seconds"),
        F.sum("in_faults").over(per_producer).alias("in_fault_seconds"),
        F.sum(F.coalesce(in_fault_sends, F.lit(0))).over(per_producer).alias("in_fault_sends"),
    ).filter(F.col("n") <= longest)


TRAFFIC = ("acked", "sends", "exposed", "first_exposed", "delivered")


def window_traffic(
    summary: DataFrame, receives: DataFrame, windows: list[tuple[float, float]]
) -> DataFrame:
    """(w_start, w_end, *TRAFFIC) per fault window (start, end), when the history has any send
    or delivery (no row otherwise): messages acknowledged and sends begun inside it, messages
    acknowledged before it and not yet delivered when it began (what it could still lose),
    those of them no earlier window found exposed (summed over the windows, each message
    counts once), and deliveries inside it.

    Each send and each delivery is paired with every window (a literal array, exploded: no
    join) and the pairs of both kinds are summed in one aggregation."""
    F = _F()
    ordered = sorted(windows)
    # A message acknowledged before the previous window began was exposed at it too, if it
    # is still undelivered now: it was counted there first.
    previous = [float("-inf"), *(start for start, _ in ordered)][: len(ordered)]
    bounds = small_array(
        [(a, b, p) for (a, b), p in zip(ordered, previous, strict=True)],
        "w_start double, w_end double, w_prev double",
    )

    def inside(column: str) -> Any:
        return (F.col(column) >= F.col("w.w_start")) & (F.col(column) <= F.col("w.w_end"))

    def pairs(frame: DataFrame, *columns: str) -> DataFrame:
        return frame.select(F.explode(bounds).alias("w"), *columns)

    def counted(frame: DataFrame, **counts: Any) -> DataFrame:
        window = [F.col("w.w_start").alias("w_start"), F.col("w.w_end").alias("w_end")]
        return frame.select(*window, *[counts.get(c, F.lit(0)).alias(c) for c in TRAFFIC])

    ok = F.col("outcome") == "ok"
    waiting = F.col("first_delivery").isNull() | (F.col("first_delivery") >= F.col("w.w_start"))
    exposed = ok & (F.col("ack_time") < F.col("w.w_start")) & waiting
    first_exposed = exposed & (F.col("ack_time") >= F.col("w.w_prev"))
    per_send = counted(
        pairs(summary, "outcome", "ack_time", "invoke_time", "first_delivery"),
        acked=(ok & inside("ack_time")).cast("int"),
        sends=inside("invoke_time").cast("int"),
        exposed=exposed.cast("int"),
        first_exposed=first_exposed.cast("int"),
    )
    delivered = counted(pairs(receives, "time").filter(inside("time")), delivered=F.lit(1))
    return (
        per_send.unionByName(delivered)
        .groupBy("w_start", "w_end")
        .agg(*[F.sum(c).alias(c) for c in TRAFFIC])
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
