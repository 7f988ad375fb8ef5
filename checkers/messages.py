"""The message table: one row per message, from one pass over the history, and every per-group
count as a filter of it.

Every message a send names or a group received gets one row, made by a single aggregation of
the sends and ok receives by msg_id (groups are few and known first, so each gets its own
columns). The row holds what the sends said (outcome, invoke, acknowledgement, the position it
was written at) and, per group, how often it was delivered, its first delivery (by time, ties
by file and line), how many deliveries lacked the redelivered flag and how many had been
dead-lettered. Per reader group g,
with every acknowledged message of the run expected in every group:
  acked       msg_ids whose send ended ok
  received    msg_ids received in g
  lost        acked, never received in g
  duplicated  received more than once in g
  unflagged   duplicated in g with a delivery after the first that lacked the broker's
              redelivered flag (RabbitMQ; Kafka's receives carry no flag)
  unexpected  received in g, never sent (no invoke), or a body we did not write
  recovered   received in g although its send ended fail, info or never completed
  dead_lettered  received in g out of a dead-letter queue: a delivery the broker had
              dead-lettered (RabbitMQ's x-death: `value.death` in the history)
  both        received in g both out of its queue and out of its dead-letter queue
  reordered   first deliveries in g (by time, ties by file and line) whose seq is below the
              highest seq already first-delivered in g for the same (producer, partition)
  unseen      lost in g, acknowledged (at its lowest acknowledged position) above the highest
              offset g read in that partition, or where g read nothing: lost - unseen are holes
              below what g read
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from checkers.packing import (
    TICKS_PER_SECOND,
    Packing,
    acked_at_a_position,
    acking_node,
    name_of,
    ok_receive,
    ok_send,
    rank_in,
    reader_group,
)
from contract.history import PLANNED_ABORT

DataFrame = Any  # pyspark.sql.DataFrame; pyspark is imported where a query runs
DELIVERY_ORDER = ("time", "file", "line")  # ties in time break by file, then line
# What a first delivery keeps: its place in delivery order, then what reordering compares.
FIRST_FIELDS = (*DELIVERY_ORDER, "producer", "seq", "partition", "redelivered", "dead")
# Per group, in this order: the flags whose ids are written (checkers.verdict.METRICS adds
# reordered and unseen, which need more than one row).
ROW_METRICS = (
    "acked",
    "received",
    "lost",
    "duplicated",
    "unflagged",
    "unexpected",
    "recovered",
    "dead_lettered",
    "both",
)


ABORTED = "aborted"  # a send's outcome when its producer aborted the transaction on purpose


def planned_abort(col: Any) -> Any:
    """Whether an event is a send whose transaction its producer aborted on purpose."""
    return (col("type") == "fail") & (col("error") == PLANNED_ABORT)


def _F() -> Any:
    from pyspark.sql import functions as F

    return F


@dataclass(frozen=True)
class MessageTable:
    """The table and the groups whose columns it has (group i: d{i}, first{i}, unflagged{i})."""

    frame: DataFrame
    groups: tuple[str, ...]

    def summary(self) -> DataFrame:
        """The messages a send names (checkers.queries' summary: outcome, invoked, times,
        node, producer, first_delivery)."""
        return self.frame.filter(_F().col("sent"))

    def rows(self, metric: str) -> DataFrame:
        """(group, msg_id) of every message flagged with `metric` (one of ROW_METRICS) in
        every group, from one scan of the table."""
        return self.tagged((metric,)).drop("metric")

    def tagged(self, metrics: tuple[str, ...] = ROW_METRICS) -> DataFrame:
        """(group, metric, msg_id) of every message flagged with each of `metrics` in each
        group, from one scan of the table."""
        F = _F()
        if not self.groups:  # no reader: an empty array would have no type to write by
            blank = F.lit(None).cast("string")
            return self.frame.select(blank.alias("group"), blank.alias("metric"), "msg_id").limit(0)
        tags = [
            F.when(
                _flag(metric, i), F.struct(F.lit(g).alias("group"), F.lit(metric).alias("metric"))
            )
            for i, g in enumerate(self.groups)
            for metric in metrics
        ]
        return _flagged(self.frame, tags).select(
            F.col("tag.group").alias("group"), F.col("tag.metric").alias("metric"), "msg_id"
        )

    def first_deliveries(self) -> DataFrame:
        """(group, msg_id, time, file, line, producer, seq, partition): each message's first
        delivery in each group that received it."""
        F = _F()
        firsts = [
            F.when(
                F.col(f"first{i}").isNotNull(),
                F.struct(F.lit(g).alias("group"), F.col(f"first{i}").alias("first")),
            )
            for i, g in enumerate(self.groups)
        ]
        return _flagged(self.frame, firsts).select(
            F.col("tag.group").alias("group"),
            "msg_id",
            *[F.col(f"tag.first.{name}").alias(name) for name in FIRST_FIELDS],
        )

    def lost_at(self) -> DataFrame:
        """(group, msg_id, stream, partition, offset): each lost message with the lowest
        position it was acknowledged at; messages acknowledged without one are left out."""
        F = _F()
        placed = self.rows("lost").join(
            self.frame.filter(F.col("ack_position").isNotNull()).select("msg_id", "ack_position"),
            "msg_id",
        )
        return placed.select(
            "group",
            "msg_id",
            *[F.col(f"ack_position.{c}").alias(c) for c in ("stream", "partition", "offset")],
        )


def _flagged(frame: DataFrame, tags: list[Any]) -> DataFrame:
    """(msg_id, tag): a row per non-null tag of each of `frame`'s rows.

    The nulls are exploded and then dropped, rather than filtered out of the array by a lambda:
    Spark evaluates a lambda row by row without generated code, and this runs for every
    message and every tag."""
    F = _F()
    exploded = frame.select("msg_id", F.explode(F.array(*tags)).alias("tag"))
    return exploded.filter(F.col("tag").isNotNull())


def _flag(metric: str, i: int) -> Any:
    """Whether the row's message is `metric` in group i."""
    F = _F()
    deliveries = F.col(f"d{i}")
    ok = F.coalesce(F.col("outcome") == "ok", F.lit(False))
    if metric == "acked":
        return ok
    if metric == "received":
        return deliveries > 0
    if metric == "lost":
        return ok & (deliveries == 0)
    if metric == "duplicated":
        return deliveries > 1
    if metric == "unflagged":
        # Deliveries without the flag, less the first's own (a first delivery is no replay).
        first = F.col(f"first{i}")
        first_unflagged = F.coalesce(~first.redelivered & ~first.dead, F.lit(False))
        return (F.col(f"unflagged{i}") - first_unflagged.cast("int")) > 0
    if metric == "unexpected":
        return (deliveries > 0) & ~F.coalesce(F.col("invoked"), F.lit(False))
    if metric == "recovered":
        return (deliveries > 0) & F.col("sent") & ~ok
    if metric == "dead_lettered":
        return F.col(f"dead{i}") > 0
    if metric == "both":
        return (F.col(f"dead{i}") > 0) & (deliveries > F.col(f"dead{i}"))
    raise ValueError(f"not a per-row metric: {metric}")


def message_table(
    events: DataFrame, groups: list[str], packed: Packing | None = None
) -> MessageTable:
    """One row per msg_id of every send and every ok receive, in one aggregation:
      sent          whether a send names it (a body we did not write gets an id of its own)
      outcome       of its sends: ok wins, then aborted (its transaction aborted on purpose by
                    its producer: neither acknowledged nor refused), then fail, then info (an
                    invoke alone is info)
      invoked       a producer tried to send it
      producer      the producer its sends name (the lowest name, should they name several)
      invoke_time   its first invoke; done_time its first outcome (None for an invoke alone)
      ack_time      its first ok; node the node that acknowledged it where the history says
                    (RabbitMQ names it; Kafka's client does not: "unknown"; the lowest name
                    where its oks name several)
      ack_position  (stream, partition, offset): the lowest position an ok send names
      first_delivery  the first ok receive's time, in any group
    and per group i: d{i} deliveries, first{i} (FIRST_FIELDS of the first delivery, null if
    none), unflagged{i} deliveries whose redelivered flag is false, dead{i} deliveries the broker
    had dead-lettered. With `packed` (checkers.packing) the orders behind ack_position and
    first{i} are aggregated as integers, so Spark hashes rather than sorts; the table is the
    same."""
    F = _F()
    col = F.col
    is_send = col("f") == "send"
    is_receive = ok_receive()
    group = reader_group()
    own_id = F.concat(F.lit("?"), col("file"), F.lit(":"), col("line"))
    rows = events.filter(is_send | is_receive).select(
        "*",
        is_send.alias("is_send"),
        F.when(is_receive, group).alias("grp"),
        F.when(is_receive, F.coalesce(col("msg_id"), own_id)).otherwise(col("msg_id")).alias("key"),
        # A delivery carries a value only when the broker had dead-lettered it.
        (
            is_receive
            & col("value").isNotNull()
            & F.get_json_object("value", "$.death").isNotNull()
        ).alias("dead"),
    )
    sent = col("is_send")
    rank = (
        F.when(col("type") == "ok", 3)
        .when(col("type") == "fail", 2)
        .when(col("type") == "info", 1)
        .otherwise(0)
    )
    ok = ok_send()
    invoke = sent & (col("type") == "invoke")
    placed = acked_at_a_position()
    node = acking_node()
    counts = []
    for i, g in enumerate(groups):
        mine = col("grp") == g
        counts += [
            F.count(F.when(mine, 1)).alias(f"d{i}"),
            # A dead-lettered copy is a new delivery, not a replay: the broker does not flag it.
            F.count(F.when(mine & (col("redelivered") == F.lit(False)) & ~col("dead"), 1)).alias(
                f"unflagged{i}"
            ),
            F.count(F.when(mine & col("dead"), 1)).alias(f"dead{i}"),
        ]
    if packed is None:
        ordered = [
            F.min(F.when(sent, col("producer"))).alias("producer"),
            F.min(F.when(ok, node)).alias("node"),
            F.min(F.when(placed, F.struct("stream", "partition", "offset"))).alias("ack_position"),
            *[
                F.min(F.when(col("grp") == g, F.struct(*[col(c) for c in FIRST_FIELDS]))).alias(
                    f"first{i}"
                )
                for i, g in enumerate(groups)
            ],
        ]
    else:
        rows = rows.withColumn("_event", _event_key(packed))
        facts = packed.facts
        ordered = [
            F.min(F.when(sent, rank_in(facts.producers, col("producer")))).alias("producer"),
            F.min(F.when(ok, rank_in(facts.nodes, node))).alias("node"),
            F.min(F.when(placed, _position_key(packed))).alias("ack_position"),
            *[agg for i, g in enumerate(groups) for agg in _first_by_key(packed, i, g)],
        ]
    table = rows.groupBy(col("key").alias("msg_id")).agg(
        F.max(sent).alias("sent"),
        F.max(F.when(sent, rank)).alias("rank"),
        F.max(invoke).alias("invoked"),
        F.max(sent & planned_abort(col)).alias("planned_abort"),
        F.min(F.when(invoke, col("time"))).alias("invoke_time"),
        F.min(F.when(sent & ~invoke, col("time"))).alias("done_time"),
        F.min(F.when(ok, col("time"))).alias("ack_time"),
        F.min(F.when(col("grp").isNotNull(), col("time"))).alias("first_delivery"),
        *ordered,
        *counts,
    )
    if packed is not None:
        table = _unpacked(table, packed, len(groups))
    outcome = (
        F.when(~col("sent"), F.lit(None).cast("string"))
        .when(col("rank") == 3, "ok")
        .when(col("planned_abort"), ABORTED)
        .when(col("rank") == 2, "fail")
        .otherwise("info")
    )
    return MessageTable(
        table.withColumn("outcome", outcome).drop("rank", "planned_abort"),
        tuple(groups),
    )


# What a first delivery's packed key does not hold, each taken from the delivery with the
# lowest key (its file and line are in the key).
_CARRIED = tuple(f for f in FIRST_FIELDS if f not in ("file", "line"))


def _event_key(packed: Packing) -> Any:
    """(time, file, line) as one integer that orders as they do (checkers.packing)."""
    F = _F()
    ticks = ((F.col("time") - F.lit(packed.first_time)) * F.lit(float(TICKS_PER_SECOND))).cast(
        "long"
    )
    file = rank_in(packed.facts.files, F.col("file"))
    return (
        F.shiftleft(ticks, packed.file_bits + packed.line_bits)
        .bitwiseOR(F.shiftleft(file, packed.line_bits))
        .bitwiseOR(F.col("line"))
    )


def _position_key(packed: Packing) -> Any:
    """(stream, partition, offset) as one integer that orders as they do; a position without a
    stream ranks 0, first, as a null field orders in a struct."""
    F = _F()
    stream = F.coalesce(rank_in(packed.facts.streams, F.col("stream")), F.lit(0))
    return (
        F.shiftleft(stream, packed.partition_bits + packed.offset_bits)
        .bitwiseOR(F.shiftleft(F.col("partition"), packed.offset_bits))
        .bitwiseOR(F.col("offset") - F.lit(packed.lowest_offset))
    )


def _first_by_key(packed: Packing, i: int, g: str) -> list[Any]:
    """Group i's lowest event key, and what the delivery that has it carries: the key is
    unique per event, so each value is that one delivery's."""
    F = _F()
    key = F.when(F.col("grp") == g, F.col("_event"))
    carried = {"producer": rank_in(packed.facts.producers, F.col("producer"))}
    return [
        F.min(key).alias(f"_key{i}"),
        *[F.min_by(carried.get(c, F.col(c)), key).alias(f"_{c}{i}") for c in _CARRIED],
    ]


def _bits(column: Any, shift: int, width: int) -> Any:
    """`width` bits of a packed key, `shift` bits up."""
    F = _F()
    return F.shiftright(column, shift).bitwiseAND(F.lit((1 << width) - 1))


def _unpacked(table: DataFrame, packed: Packing, groups: int) -> DataFrame:
    """The packed columns as the struct path has them: names for ranks, structs for keys."""
    F = _F()
    col = F.col
    facts = packed.facts
    position = col("ack_position")
    offsets = packed.offset_bits
    firsts = []
    for i in range(groups):
        key = col(f"_key{i}")
        fields = {
            "file": name_of(facts.files, _bits(key, packed.line_bits, packed.file_bits)),
            "line": _bits(key, 0, packed.line_bits),
            "producer": name_of(facts.producers, col(f"_producer{i}")),
        }
        first = F.struct(*[fields.get(c, col(f"_{c}{i}")).alias(c) for c in FIRST_FIELDS])
        firsts.append(F.when(key.isNotNull(), first).alias(f"first{i}"))
    packed_columns = [f"_key{i}" for i in range(groups)] + [
        f"_{c}{i}" for i in range(groups) for c in _CARRIED
    ]
    return table.select(
        *[c for c in table.columns if c not in ("producer", "node", "ack_position")],
        name_of(facts.producers, col("producer")).alias("producer"),
        name_of(facts.nodes, col("node")).alias("node"),
        F.when(
            position.isNotNull(),
            F.struct(
                name_of(
                    facts.streams, F.shiftright(position, packed.partition_bits + offsets)
                ).alias("stream"),
                _bits(position, offsets, packed.partition_bits).alias("partition"),
                (_bits(position, 0, offsets) + F.lit(packed.lowest_offset)).alias("offset"),
            ),
        ).alias("ack_position"),
        *firsts,
    ).drop(*packed_columns)
