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
    F = _F()
    placed = events.filter(
        (F.col("type") == "ok")
        & F.col("f").isin("send", "receive")
        & F.col("partition").isNotNull()
        & F.col("offset").isNotNull()
        & F.col("msg_id").isNotNull()
    )
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
