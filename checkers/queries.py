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

from checkers.frames import in_spark_order, small_array
from checkers.messages import ABORTED, DELIVERY_ORDER, planned_abort
from contract.history import COORDINATOR_STATE, NEMESIS_PROCESS, PARTITION_STATE, event_value

DataFrame = Any  # pyspark.sql.DataFrame; pyspark is imported where a query runs
Column = Any  # pyspark.sql.Column


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


def client_errors(events: DataFrame) -> DataFrame:
    """(f, name, count) of not-ok sends and commits, by the error text before its first ":"."""
    F = _F()
    name = F.regexp_extract(F.coalesce(F.col("error"), F.lit("")), r"^([^:]*)", 1)
    return (
        events.filter(
            F.col("type").isin("fail", "info")
            & F.col("f").isin("send", "commit", "txn")
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


# ---- which fault did it ------------------------------------------------------------------------

BEFORE_ANY_FAULT = "before any fault"
NEVER_ACKED = "never acknowledged"
ATTRIBUTED = ("lost", "duplicated", "reordered")


CONTROL = ("time", "process", "type", "f", "partition", "value")  # of a control event


def control_rows(events: DataFrame) -> DataFrame:
    """(*CONTROL, file, line) of every nemesis event and every leader/ISR and coordinator change
    the partition watch recorded (Kafka): a few rows per run, collected once (control_events)
    for the fault steps, windows, leader-placement snapshots, the partitions' states and the
    coordinators' moves."""
    F = _F()
    watched = F.col("f").isin(PARTITION_STATE, COORDINATOR_STATE)
    return events.filter((F.col("process") == NEMESIS_PROCESS) | watched).select(
        *CONTROL, "file", "line"
    )


def control_events(rows: list[Any]) -> list[dict[str, Any]]:
    """The collected control_rows as (*CONTROL) dicts, in order (of time, then as written)."""
    return [{k: r[k] for k in CONTROL} for r in in_spark_order(rows, "time", "file", "line")]


def nemesis_events(control: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The nemesis's (time, type, f, value) among the control events."""
    keys = ("time", "type", "f", "value")
    return [{k: e[k] for k in keys} for e in control if e["process"] == NEMESIS_PROCESS]


def partition_states(control: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The partition watch's (time, partition, value) among the control events."""
    keys = ("time", "partition", "value")
    return [{k: e[k] for k in keys} for e in control if e["f"] == PARTITION_STATE]


def coordinator_moves(control: list[dict[str, Any]]) -> list[tuple[str, str, float, float]]:
    """(role, id, left, moved) of every move of the broker coordinating an id the partition
    watch followed, from one broker to another (a spell with no leader between them is part of
    the move; the same broker back after one is no move): it happened after `left`, the last
    answer that still named the old broker, and by `moved`, the first that named the new one.
    (A history without the watch's `since` bounds a move by the state before it, wider.)"""
    named: dict[tuple[str, str], tuple[str, float]] = {}  # a broker, and the last answer naming it
    in_gap: set[tuple[str, str]] = set()  # ids whose last state had no leader
    moves = []
    for e in control:
        if e["f"] != COORDINATOR_STATE:
            continue
        v = event_value(e["value"])
        key, leader, at = (str(v.get("role")), str(v.get("key"))), v.get("leader"), float(e["time"])
        before = named.get(key)
        if before is None or leader == before[0]:
            if leader is not None:
                named[key] = (leader, at)
            in_gap.discard(key)
            continue
        old, last_named = before
        since = v.get("since")
        if key not in in_gap and isinstance(since, (int, float)):
            last_named = max(last_named, float(since))  # the answer before this one named it
        if leader is None:
            named[key] = (old, last_named)
            in_gap.add(key)
            continue
        moves.append((key[0], key[1], last_named, at))
        named[key] = (leader, at)
        in_gap.discard(key)
    return moves


def run_span(events: DataFrame, **also: Any) -> DataFrame:
    """One row: the first and last time of the history (first, last), and each aggregate of
    `also` (name: column) asked in the same pass."""
    F = _F()
    extra = [column.alias(name) for name, column in also.items()]
    return events.agg(F.min("time").alias("first"), F.max("time").alias("last"), *extra)


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


def run_second(column: Column, run_start: float) -> Column:
    """The whole second since the run's first event at which `column`'s time falls."""
    F = _F()
    return F.floor(column - F.lit(run_start)).cast("int")


def placed_anomalies(
    flagged: DataFrame, ack_info: DataFrame, steps: DataFrame, run_start: float
) -> DataFrame:
    """(metric, group, step, node, second, count) of flagged (metric, group, msg_id): each
    message tied to the step in effect when it was acknowledged (the last one started at or
    before its ack), to its acking node and to its ack's run second (run_second; None for a
    message never acknowledged). steps: (start, end, step), end None for the last.

    The report's anomalies over time and their attribution to steps are both sums of these
    rows: the messages are joined to their acks once for both."""
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
    second = run_second(F.col("ack_time"), run_start)
    return tied.groupBy(
        "metric", "group", step.alias("step"), node.alias("node"), second.alias("second")
    ).count()
