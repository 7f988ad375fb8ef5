"""Fencing (KIP-98's zombie fencing), from each instance's `init-txn` marks: which instances a
newer one of their transactional id had surely fenced, and which of their transactions were
open at that moment or asked their commit after it. checkers.transactions counts them in the
transactions section (fenced_open, fenced_while_paused, fenced_commits, zombie_commits) and
says what each means."""

from __future__ import annotations

from typing import Any

from checkers.frames import small_frame
from contract.history import INIT_TXN

DataFrame = Any


def _F() -> Any:
    from pyspark.sql import functions as F

    return F


def initialisations(events: DataFrame) -> DataFrame:
    """(producer, transactional_id, invoked, initialised): each instance's init_transactions
    that returned (its `init-txn` ok), from its invoke (null when the history lacks it) to its
    ok. A client's inits are one at a time, so an ok's invoke is the mark before it."""
    from pyspark.sql import Window

    F = _F()
    marks = events.filter(F.col("f") == INIT_TXN).select(
        "producer",
        "type",
        "time",
        F.get_json_object("value", "$.transactional_id").alias("transactional_id"),
    )
    order = Window.partitionBy("producer").orderBy(
        "time", F.when(F.col("type") == "invoke", 0).otherwise(1)
    )
    before = marks.withColumn("before", F.lag(F.struct("type", "time")).over(order))
    invoked = F.when(F.col("before.type") == "invoke", F.col("before.time"))
    return before.filter(F.col("type") == "ok").select(
        "producer", "transactional_id", invoked.alias("invoked"), F.col("time").alias("initialised")
    )


def _newer_inits(inits: DataFrame) -> DataFrame:
    """(producer, own, fenced_by, fenced_at): for each of a process's inits (`own`, when it
    returned), each init of another process sharing its transactional id (`fenced_by`) asked
    only after it, and when that one returned: it surely took a newer epoch and fenced this."""
    F = _F()
    rivals = inits.select(
        F.col("producer").alias("fenced_by"),
        "transactional_id",
        F.col("invoked").alias("rival_invoked"),
        F.col("initialised").alias("fenced_at"),
    )
    return (
        inits.select("producer", "transactional_id", F.col("initialised").alias("own"))
        .join(rivals, "transactional_id")
        .filter((F.col("fenced_by") != F.col("producer")) & (F.col("rival_invoked") > F.col("own")))
        .select("producer", "own", "fenced_by", "fenced_at")
    )


def fenced_open(
    spans: DataFrame, inits: DataFrame, pauses: list[tuple[str, float, float]]
) -> tuple[int, int]:
    """How many transactions were open when a newer instance of their transactional id
    initialised (checkers.transactions' fenced_open), and how many of them while their client
    was paused (fenced_while_paused: the zombie KIP-98 pictures, stopped dead and replaced)."""
    F = _F()
    # The instance a transaction belongs to: its process's latest init before its begin.
    own = (
        spans.join(inits.select("producer", F.col("initialised").alias("own")), "producer")
        .filter(F.col("own") <= F.col("begin"))
        .groupBy("producer", "txn", "begin", "end")
        .agg(F.max("own").alias("own"))
    )
    end = F.coalesce(F.col("end"), F.lit(float("inf")))
    open_across = (
        own.join(_newer_inits(inits), ["producer", "own"])
        .filter((F.col("begin") < F.col("fenced_at")) & (F.col("fenced_at") < end))
        .select("producer", "txn", "fenced_at")
        .cache()
    )
    try:
        fenced = open_across.select("producer", "txn").distinct().count()
        if not pauses:
            return int(fenced), 0
        paused = small_frame(
            spans.sparkSession, pauses, "producer string, paused double, resumed double"
        )
        within = (F.col("paused") <= F.col("fenced_at")) & (F.col("fenced_at") <= F.col("resumed"))
        while_paused = open_across.join(F.broadcast(paused), "producer").filter(within)
        return int(fenced), int(while_paused.select("producer", "txn").distinct().count())
    finally:
        open_across.unpersist()


def fenced_commits(
    commits: DataFrame, inits: DataFrame, outcomes: DataFrame, seen: DataFrame
) -> DataFrame:
    """(producer, txn, transactional_id, asked, fenced_by, fenced_at, outcome, seen): each
    commit asked (`end-txn`) by an instance that a newer instance of another process had
    surely fenced by then (checkers.transactions' fenced_commits), with the first such init
    (its process and when it returned), the transaction's outcome, and whether a read_committed
    group received a record of it (`seen`: its txn ids). A commit asked by a process that marks no
    inits is not judged."""
    F = _F()
    own = (
        commits.select("producer", "txn", "asked")
        .join(inits, "producer")
        .filter(F.col("initialised") <= F.col("asked"))
        .groupBy("producer", "txn", "asked")
        .agg(F.max(F.struct("initialised", "transactional_id")).alias("last"))
        .select(
            "producer",
            "txn",
            "asked",
            F.col("last.initialised").alias("own"),
            F.col("last.transactional_id").alias("transactional_id"),
        )
    )
    fenced = (
        own.join(_newer_inits(inits), ["producer", "own"])
        .filter(F.col("fenced_at") < F.col("asked"))
        .groupBy("producer", "txn", "transactional_id", "asked")
        .agg(F.min(F.struct("fenced_at", "fenced_by")).alias("first"))
    )
    return (
        fenced.join(outcomes.select("producer", "txn", "outcome"), ["producer", "txn"], "left")
        .join(seen.withColumn("seen", F.lit(True)), "txn", "left")
        .select(
            "producer",
            "txn",
            "transactional_id",
            "asked",
            F.col("first.fenced_by").alias("fenced_by"),
            F.col("first.fenced_at").alias("fenced_at"),
            F.coalesce("outcome", F.lit("info")).alias("outcome"),
            F.coalesce("seen", F.lit(False)).alias("seen"),
        )
    )
