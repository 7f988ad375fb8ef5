"""Share groups (KIP-932): what each share group did with every record its consumers got, judged
by what a share group promises (docs/share-groups.md says each word at length).

A share consumer writes `share-acquire` (ok) for each record a poll gave it, with the delivery
count its client saw, and `share-ack` for each acknowledgement: its invoke (accept, release or
reject) and its end, ok (the broker confirmed it), fail (refused) or info (unknown). A record is
a position of a share group's topic (stream, partition, offset) holding one message (msg_id);
its deliveries are its acquisitions in the order they were seen (time, then file and line), and
each delivery's acknowledgement is the one its consumer asked after that acquisition and before
its next one of the record; a record's n-th answer (ok, fail, info) in a consumer's life (its
`open` events part them) is to that consumer's n-th acknowledgement of it, oldest first as both
clients answer. Per share group, with its delivery count limit L and lock duration:

  duplicated          records delivered again after a delivery whose accept was confirmed (two
                      confirmed accepts are one case of it): an accepted record is acknowledged
                      for good
  over_limit          records delivered at a delivery count above L (the count the client
                      reported): a release or lock expiry at count L archives a record. Not
                      judged by acquisitions: a leader's move forgets one without counting it
                      (KIP-932: the count is not exact), so a record may be acquired more than
                      L times within the limit; those acquisitions are reported
                      (`beyond_limit`), and so are the records delivered more than L times
                      whose client gave no count (`uncounted`), whose limit nothing can judge
  rejected_redelivered  records delivered again after a delivery whose reject was confirmed
  backwards           (reported, not judged) records with a delivery count below one an
                      earlier delivery of them had: KIP-932 keeps the count durably and calls
                      it imprecise, never decreasing
  lost                messages whose send was acknowledged, on a topic the group reads, that
                      no record of theirs settled by the end: none accepted or rejected with a
                      confirmed acknowledgement, none archived at the limit (delivered at count
                      L or above; where no count was reported, delivered L times: `archived_by`
                      says which), and none whose last acknowledgement (accept or reject) is
                      of unknown outcome. Told apart: `never_delivered` (no consumer got it)
                      and `unsettled` (delivered, then released, refused or left unacknowledged
                      below the limit, and never delivered again)
A delivery after one without a confirmed settlement is a redelivery, as the protocol means it:
  released            the earlier delivery's release was confirmed
  lock_expired        the earlier delivery was not settled (never acknowledged, its
                      acknowledgement refused or of unknown outcome) and the redelivery came a
                      lock duration (less LOCK_SLACK) or more after it: its lock expired
  dropped             not settled either, and sooner: the broker let the acquisition go
                      otherwise (its consumer left the group, the share-partition's leader
                      moved and forgot it)
An acknowledgement of unknown outcome never makes a later delivery an anomaly: only confirmed
ones settle a record. `left_at_end` counts the records no settlement ended, by how their last
delivery ended: acquired (never acknowledged), available (released, or its acknowledgement
refused) and unknown (its acknowledgement's outcome unknown).

Each anomaly is tied to the fault step in effect when it showed (a lost message at its send's
acknowledgement, a record at its offending delivery), to the consumer that showed it and to its
partition; the ids behind each count go to ids/<group>/share_<anomaly>.txt.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.attribution import BEFORE_ANY_FAULT, step_number, steps_frame
from checkers.frames import collected_together, in_spark_order
from contract.history import SHARE_ACK, SHARE_ACQUIRE, SHARE_OUTCOMES

DataFrame = Any  # pyspark.sql.DataFrame; pyspark is imported where a query runs

# Kafka's defaults (group.share.delivery.count.limit, group.share.record.lock.duration.ms).
DEFAULT_LIMIT = 5
DEFAULT_LOCK_MS = 30_000
# A lock starts when the broker acquires the record, a little before its consumer logs it: a
# redelivery seen this much short of a lock duration after the acquisition is still its expiry.
LOCK_SLACK = 1.0
SAMPLES = 10  # records per anomaly and group in verdict.json; the ids files hold them all

RECORD_ANOMALIES = ("duplicated", "over_limit", "rejected_redelivered", "backwards")
# What said an archived record reached the limit: a delivery's count, or (no count reported)
# the deliveries seen.
ARCHIVED_BY = ("delivery_count", "acquisitions")
# Acquisitions past the L-th (reported, not judged): how many, of how many records, and the
# records among them whose deliveries past the L-th carried no count.
BEYOND_LIMIT = ("acquisitions", "records", "uncounted")
ANOMALIES = ("lost", *RECORD_ANOMALIES)
# What the verdict judges: a share group promises none of them. `backwards` is reported only.
JUDGED = ("lost", "duplicated", "over_limit", "rejected_redelivered")
REDELIVERIES = ("released", "lock_expired", "dropped")
# How each acknowledged message ended in a group, best first: the last two are `lost`.
FATES = ("accepted", "rejected", "archived", "unknown", "unsettled", "never_delivered")
LOST_FATES = ("unsettled", "never_delivered")
LEFT = ("acquired", "available", "unknown")
STATUSES = ("ok", "fail", "info")  # an invoke with no end is info: its outcome is unknown
NEVER_DELIVERED = "never delivered"  # the consumer of a lost message no consumer got
# Per consumer: its acquisitions and how their acknowledgements ended.
CONSUMER_COUNTS = (
    "acquired",
    "accepted",
    "released",
    "rejected",
    "refused",
    "unknown",
    "unacknowledged",
)

# The ways into a record: its position and message (a position that held two messages, as after
# a truncation, is two records).
RECORD = ("group", "stream", "partition", "offset", "msg")


def _F() -> Any:
    from pyspark.sql import functions as F

    return F


# ---- the run's settings ------------------------------------------------------------------------


@dataclass(frozen=True)
class ShareSettings:
    """What a share group is judged by, and where it was read."""

    delivery_count_limit: int = DEFAULT_LIMIT
    lock_duration_ms: int = DEFAULT_LOCK_MS
    source: str = "Kafka's defaults"


@dataclass(frozen=True)
class ShareSetup:
    """The run's share groups as its manifest declares them (each one's topics and settings),
    and the settings of any other group the history names (the brokers')."""

    declared: Mapping[str, tuple[tuple[str, ...], ShareSettings]] = field(default_factory=dict)
    default: ShareSettings = ShareSettings()

    @classmethod
    def of(
        cls, declared: Mapping[str, Any] | None, broker: Mapping[str, Any] | None = None
    ) -> ShareSetup:
        """From the manifest's `share_groups` ({group: {topics, delivery_count_limit,
        lock_duration_ms, config: {the group's own keys}}}) and its brokers' settings: a group's
        own value first (its typed field, then `share.delivery.count.limit` /
        `share.record.lock.duration.ms` in its config), then the brokers' `group.share.*`, then
        Kafka's default."""
        broker = broker or {}
        default = ShareSettings(
            _int(broker.get("group.share.delivery.count.limit"), DEFAULT_LIMIT),
            _int(broker.get("group.share.record.lock.duration.ms"), DEFAULT_LOCK_MS),
            "the brokers' settings" if _names_a_setting(broker) else "Kafka's defaults",
        )
        groups = {}
        for name, spec in sorted((declared or {}).items()):
            spec = spec if isinstance(spec, Mapping) else {}
            config = spec.get("config")
            own: Mapping[str, Any] = config if isinstance(config, Mapping) else {}
            limit = spec.get("delivery_count_limit", own.get("share.delivery.count.limit"))
            lock = spec.get("lock_duration_ms", own.get("share.record.lock.duration.ms"))
            settings = ShareSettings(
                _int(limit, default.delivery_count_limit),
                _int(lock, default.lock_duration_ms),
                "the manifest" if limit is not None or lock is not None else default.source,
            )
            topics = spec.get("topics") or []
            groups[str(name)] = (tuple(str(t) for t in topics), settings)
        return cls(groups, default)

    def settings(self, group: str) -> ShareSettings:
        return self.declared[group][1] if group in self.declared else self.default

    def topics(self) -> list[tuple[str, str]]:
        """(group, topic) of every declared group's topics."""
        return [(g, t) for g, (topics, _) in self.declared.items() for t in topics]


def _names_a_setting(broker: Mapping[str, Any]) -> bool:
    keys = ("group.share.delivery.count.limit", "group.share.record.lock.duration.ms")
    return any(k in broker for k in keys)


def _int(value: Any, fallback: int) -> int:
    """A setting as a number (Kafka's settings are text), else the fallback."""
    if isinstance(value, bool):
        return fallback
    try:
        return int(str(value)) if value is not None else fallback
    except ValueError:
        return fallback


def share_event() -> Any:
    """Whether an event is a share consumer's: a history with one has share groups."""
    return _F().col("f").isin(SHARE_ACQUIRE, SHARE_ACK)


# ---- the deliveries ----------------------------------------------------------------------------


def share_marks(events: DataFrame) -> DataFrame:
    """Every share consumer event that names its record (RECORD, msg_id, process, life, time,
    file, line, kind: acquired, asked or ended, outcome, status, dc, client, error). `life`
    counts its consumer's `open` events up to it: a consumer restarted under its name is a new
    client that never hears of what the one before asked. One that names no group or position
    says nothing of a record: share_section counts them apart."""
    from pyspark.sql import Window

    F = _F()
    col = F.col
    kind = (
        F.when((col("f") == SHARE_ACQUIRE) & (col("type") == "ok"), "acquired")
        .when((col("f") == SHARE_ACK) & (col("type") == "invoke"), "asked")
        .when(col("f") == SHARE_ACK, "ended")
    )
    placed = col("group").isNotNull() & col("partition").isNotNull() & col("offset").isNotNull()
    opened = col("f") == "open"
    lives = (
        Window.partitionBy("process")
        .orderBy("time", "file", "line")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    lived = events.filter(share_event() | opened).select(
        "*", F.sum(opened.cast("int")).over(lives).alias("life")
    )
    return lived.filter(share_event() & placed).select(
        "group",
        "stream",
        "partition",
        "offset",
        F.coalesce(col("msg_id"), F.lit("")).alias("msg"),
        "msg_id",
        "process",
        "life",
        "time",
        "file",
        "line",
        kind.alias("kind"),
        F.get_json_object("value", "$.outcome").alias("outcome"),
        col("type").alias("status"),
        F.get_json_object("value", "$.delivery_count").cast("int").alias("dc"),
        F.get_json_object("value", "$.client").alias("client"),
        "error",
    )


def _window(*keys: str, before: bool = False) -> Any:
    """Over a record's (or a record's and consumer's) events in the order they were seen: every
    one up to the current (`before`: up to the one before it)."""
    from pyspark.sql import Window

    ordered = Window.partitionBy(*keys).orderBy("time", "file", "line")
    return ordered.rowsBetween(Window.unboundedPreceding, -1 if before else Window.currentRow)


def deliveries(marks: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(deliveries, unmatched): one row per acquisition (RECORD, msg_id, process, time, file,
    line, dc, client) with its acknowledgement: outcome and status (ok, fail, info; null when
    none was asked) of its last, and accepted, rejected, released (confirmed), refused and
    unknown flags over all of them; and the acknowledgements no acquisition of their consumer
    came before, by consumer.

    An acknowledgement belongs to its consumer's latest acquisition of the record before it. Its
    answer is the one its clients give it: both answer a record's acknowledgements oldest first
    (workloads/kafka/share.py's AckBook, ShareConsumer.java's pending queues), so the n-th answer
    of a record in a consumer's life is to its n-th acknowledgement of it in that life, however
    late it comes (the Java client's callbacks come at a later poll, after the record may have
    been acquired and acknowledged again). An acknowledgement no answer came to is of unknown
    outcome (info); an answer with no acknowledgement left to answer is dropped."""
    F = _F()
    col = F.col
    mine = _window(*RECORD, "process")
    this_life = _window(*RECORD, "process", "life")

    def seen(kind: str, window: Any) -> Any:
        return F.sum((col("kind") == kind).cast("int")).over(window)

    counted = marks.select(
        "*",
        seen("acquired", mine).alias("k"),
        seen("asked", mine).alias("j"),  # the acknowledgements' order, over every life
        seen("asked", this_life).alias("nth_asked"),
        seen("ended", this_life).alias("nth_ended"),
    )
    keys = [*RECORD, "process"]
    acquired = counted.filter(col("kind") == "acquired").select(
        *keys, "msg_id", "k", "time", "file", "line", "dc", "client"
    )
    asked = counted.filter(col("kind") == "asked").select(
        *keys, "life", col("nth_asked").alias("nth"), "k", "j", "outcome"
    )
    ended = counted.filter(col("kind") == "ended").select(
        *keys, "life", col("nth_ended").alias("nth"), "status", "error"
    )
    acks = asked.join(ended, [*keys, "life", "nth"], "left").select(
        *keys,
        "k",
        "j",
        "outcome",
        F.coalesce(col("status"), F.lit("info")).alias("status"),
        "error",
    )

    def confirmed(outcome: str) -> Any:
        return F.max((col("outcome") == outcome) & (col("status") == "ok"))

    per_delivery = (
        acks.filter(col("k") > 0)
        .groupBy(*keys, "k")
        .agg(
            F.max_by("outcome", "j").alias("outcome"),
            F.max_by("status", "j").alias("status"),
            F.max_by("error", "j").alias("ack_error"),
            confirmed("accept").alias("accepted"),
            confirmed("reject").alias("rejected"),
            confirmed("release").alias("released"),
            F.max(col("status") == "fail").alias("refused"),
            F.max(col("status") == "info").alias("unknown"),
        )
    )
    unmatched = acks.filter(col("k") == 0).groupBy("group", "process").count()
    flags = ("accepted", "rejected", "released", "refused", "unknown")
    joined = acquired.join(per_delivery, [*keys, "k"], "left").select(
        *keys,
        "msg_id",
        "k",
        "time",
        "file",
        "line",
        "dc",
        "client",
        "outcome",
        "status",
        "ack_error",
        *[F.coalesce(col(f), F.lit(False)).alias(f) for f in flags],
    )
    return joined, unmatched


def _per_group(values: Mapping[str, Any], fallback: Any) -> Any:
    """A column holding each group's value (few groups: a literal per group, no join)."""
    F = _F()
    out = F.lit(fallback)
    for group, value in values.items():
        out = F.when(F.col("group") == group, F.lit(value)).otherwise(out)
    return out


def in_order(delivered: DataFrame, setup: ShareSetup) -> DataFrame:
    """The deliveries with what their place among their record's says (each row's):
    n           its number among the record's deliveries, from 1
    limit       its group's delivery count limit
    after_accept, after_reject  an earlier delivery's accept (reject) was confirmed
    over        its delivery count above the limit (false where its client gave none)
    beyond      n above the limit: more acquisitions than the limit (a leader's move forgets
                one without counting it, so this alone says nothing)
    backwards   its delivery count below the highest an earlier delivery had
    redelivery  for a delivery after the first with no confirmed settlement before it: why it
                came (REDELIVERIES); null otherwise
    after_unknown  the delivery before it ended with an acknowledgement of unknown outcome"""
    F = _F()
    col = F.col
    groups = set(setup.declared)
    limit = _per_group(
        {g: setup.settings(g).delivery_count_limit for g in groups},
        setup.default.delivery_count_limit,
    )
    lock = _per_group(
        {g: setup.settings(g).lock_duration_ms / 1000 for g in groups},
        setup.default.lock_duration_ms / 1000,
    )
    from pyspark.sql import Window

    before = _window(*RECORD, before=True)
    ordered = Window.partitionBy(*RECORD).orderBy("time", "file", "line")
    staged = delivered.select(
        "*",
        F.row_number().over(ordered).alias("n"),
        limit.alias("limit"),
        lock.alias("lock"),
        F.coalesce(F.max("accepted").over(before), F.lit(False)).alias("after_accept"),
        F.coalesce(F.max("rejected").over(before), F.lit(False)).alias("after_reject"),
        F.max("dc").over(before).alias("prior_dc"),
        F.lag("time").over(ordered).alias("prev_time"),
        F.lag("released").over(ordered).alias("prev_released"),
        F.lag("status").over(ordered).alias("prev_status"),
    )
    settled_before = col("after_accept") | col("after_reject")
    redelivery = (
        F.when((col("n") == 1) | settled_before, F.lit(None).cast("string"))
        .when(col("prev_released"), "released")
        .when(col("time") - col("prev_time") >= col("lock") - F.lit(LOCK_SLACK), "lock_expired")
        .otherwise("dropped")
    )
    return staged.select(
        *[c for c in staged.columns if c not in ("prior_dc", "prev_released")],
        F.coalesce(col("dc") > col("limit"), F.lit(False)).alias("over"),
        (col("n") > col("limit")).alias("beyond"),
        F.coalesce(col("dc") < col("prior_dc"), F.lit(False)).alias("backwards"),
        redelivery.alias("redelivery"),
        ((col("n") > 1) & (col("prev_status") == "info")).alias("after_unknown"),
    )


def records(ordered: DataFrame) -> DataFrame:
    """One row per record (RECORD, msg_id) with its deliveries' story in short: acquisitions,
    max_dc, limit, accepted and rejected (any confirmed), each anomaly's flag with the time and
    consumer of its first offending delivery (`<anomaly>_at`, `<anomaly>_by`), its redeliveries
    by cause, its acquisitions past the limit (`beyond_limit`; `beyond_uncounted`: one of them
    carried no count), its fate (accepted, rejected, archived, unknown, unsettled), what said it
    was archived (`archived_by`: ARCHIVED_BY) and, for one no settlement ended, how its last
    delivery ended (`left`: acquired, available, unknown), by whom (`holder`).

    Archived: a delivery at count L or above (the broker archives at the release or lock expiry
    of one); only a record no delivery reported a count of falls back to L deliveries seen."""
    F = _F()
    col = F.col
    offending = {
        "duplicated": col("after_accept"),
        "over_limit": col("over"),
        "rejected_redelivered": col("after_reject"),
        "backwards": col("backwards"),
    }
    firsts = []
    for name, flag in offending.items():
        at = F.when(flag, col("time"))
        firsts += [
            F.max(flag).alias(name),
            F.min(at).alias(f"{name}_at"),
            F.min_by(F.when(flag, col("process")), F.coalesce(at, F.lit(float("inf")))).alias(
                f"{name}_by"
            ),
        ]
    last = F.max_by(
        F.struct("process", "outcome", "status", "released", "refused", "unknown"), "n"
    ).alias("last")
    per_record = ordered.groupBy(*RECORD).agg(
        F.min("msg_id").alias("msg_id"),
        F.count("*").alias("acquisitions"),
        F.max("dc").alias("max_dc"),
        F.first("limit").alias("limit"),
        F.max("accepted").alias("accepted"),
        F.max("rejected").alias("rejected"),
        *firsts,
        *[F.count(F.when(col("redelivery") == r, 1)).alias(r) for r in REDELIVERIES],
        F.count(F.when(col("after_unknown"), 1)).alias("after_unknown"),
        F.count(F.when(col("beyond"), 1)).alias("beyond_limit"),
        F.max(col("beyond") & col("dc").isNull()).alias("beyond_uncounted"),
        last,
    )
    counted = col("max_dc").isNotNull()
    reached = F.when(counted, col("max_dc") >= col("limit")).otherwise(
        col("acquisitions") >= col("limit")
    )
    settling = col("last.outcome").isin("accept", "reject") & col("last.unknown")
    fate = (
        F.when(col("accepted"), "accepted")
        .when(col("rejected"), "rejected")
        .when(reached, "archived")
        .when(settling, "unknown")
        .otherwise("unsettled")
    )
    left = (
        F.when(col("fate").isin("accepted", "rejected", "archived"), F.lit(None).cast("string"))
        .when(col("last.status").isNull(), "acquired")
        .when(col("last.unknown"), "unknown")
        .otherwise("available")
    )
    archived_by = F.when(
        col("fate") == "archived", F.when(counted, ARCHIVED_BY[0]).otherwise(ARCHIVED_BY[1])
    )
    with_fate = per_record.withColumn("fate", fate)
    return with_fate.select(
        "*",
        archived_by.alias("archived_by"),
        left.alias("left"),
        col("last.process").alias("holder"),
    ).drop("last")


def messages(events: DataFrame, recorded: DataFrame, pairs: DataFrame) -> DataFrame:
    """(group, stream, msg_id, partition, offset, acked_at, fate, holder): each message whose
    send was acknowledged on a topic a share group reads (`pairs`: group, stream), with the best
    fate of its records in that group (FATES' order) and the consumer that last held it;
    never_delivered where the group got none. Its position and time are its send's
    acknowledgement's (the lowest position, the first time)."""
    F = _F()
    col = F.col
    acked = (
        events.filter((col("f") == "send") & (col("type") == "ok") & col("msg_id").isNotNull())
        .groupBy("msg_id", "stream")
        .agg(
            F.min(F.struct("partition", "offset")).alias("at"),
            F.min("time").alias("acked_at"),
        )
    )
    best = F.min(F.struct(_fate_rank(col("fate")).alias("rank"), "fate", "holder"))
    fates = recorded.groupBy("group", "stream", "msg_id").agg(best.alias("best"))
    expected = acked.join(F.broadcast(pairs), "stream")
    return expected.join(fates, ["group", "stream", "msg_id"], "left").select(
        "group",
        "stream",
        "msg_id",
        col("at.partition").alias("partition"),
        col("at.offset").alias("offset"),
        "acked_at",
        F.coalesce(col("best.fate"), F.lit("never_delivered")).alias("fate"),
        F.coalesce(col("best.holder"), F.lit(NEVER_DELIVERED)).alias("holder"),
    )


def _fate_rank(fate: Any) -> Any:
    """A fate's place in FATES (0 best)."""
    F = _F()
    rank = F.lit(len(FATES))
    for i, name in reversed(list(enumerate(FATES))):
        rank = F.when(fate == name, F.lit(i)).otherwise(rank)
    return rank


def record_id() -> Any:
    """A record's id as the ids files and samples name it: "stream/partition@offset msg_id"."""
    F = _F()
    col = F.col
    return F.concat(
        F.coalesce(col("stream"), F.lit("?")),
        F.lit("/"),
        col("partition").cast("string"),
        F.lit("@"),
        col("offset").cast("string"),
        F.lit(" "),
        col("msg"),
    )


def anomaly_rows(recorded: DataFrame, judged_messages: DataFrame) -> DataFrame:
    """(group, anomaly, id, at, consumer, stream, partition): every anomaly, when and where it
    showed. A lost message's id is its msg_id, at its send's acknowledgement, by the consumer
    that last held it; a record's is `stream/partition@offset msg_id`, at its first offending
    delivery, by that delivery's consumer."""
    F = _F()
    col = F.col
    lost = judged_messages.filter(col("fate").isin(*LOST_FATES)).select(
        "group",
        F.lit("lost").alias("anomaly"),
        col("msg_id").alias("id"),
        col("acked_at").alias("at"),
        col("holder").alias("consumer"),
        "stream",
        "partition",
    )
    out = lost
    for name in RECORD_ANOMALIES:
        flagged = recorded.filter(col(name)).select(
            "group",
            F.lit(name).alias("anomaly"),
            record_id().alias("id"),
            col(f"{name}_at").alias("at"),
            col(f"{name}_by").alias("consumer"),
            "stream",
            "partition",
        )
        out = out.unionByName(flagged)
    return out


# ---- the section -------------------------------------------------------------------------------


def check_share_groups(
    events: DataFrame,
    ids_dir: Path,
    nemesis: list[dict[str, Any]],
    run_start: float,
    setup: ShareSetup | None = None,
) -> dict[str, Any] | None:
    """verdict.json's `share_groups` (assembled by share_section from what Spark counted), or
    None for a history no share consumer wrote. The ids behind each anomaly go to
    ids/<group>/share_<anomaly>.txt."""
    F = _F()
    setup = setup or ShareSetup()
    marks = share_marks(events)
    kept: list[DataFrame] = []
    try:
        delivered, unmatched = deliveries(marks)
        ordered = _kept(kept, in_order(delivered, setup))
        recorded = _kept(kept, _with_sends(records(ordered), events))
        pairs = _pairs(events.sparkSession, recorded, setup)
        judged_messages = _kept(kept, messages(events, recorded, pairs))
        anomalies = _kept(kept, anomaly_rows(recorded, judged_messages))
        steps = steps_frame(events.sparkSession, nemesis, run_start)
        rows = collected_together(
            {
                "groups": _group_counts(recorded),
                "fates": judged_messages.groupBy("group", "fate").count(),
                "acks": _ack_counts(ordered),
                "consumers": _consumer_counts(ordered),
                "partitions": _partition_counts(recorded),
                "placed": _placed(anomalies, steps),
                "samples": _samples(anomalies, ordered),
                "unmatched": unmatched,
                "unplaced": events.filter(share_event())
                .filter(F.col("group").isNull() | F.col("offset").isNull())
                .groupBy("process")
                .count(),
            }
        )
        if not any(rows[k] for k in ("groups", "unmatched", "unplaced")) and not setup.declared:
            return None
        _write_ids(ids_dir, anomalies)
    finally:
        for frame in kept:
            frame.unpersist()
    return share_section({k: [r.asDict(recursive=True) for r in v] for k, v in rows.items()}, setup)


def _kept(kept: list[DataFrame], frame: DataFrame) -> DataFrame:
    """A frame several questions ask, cached until the section is made."""
    frame = frame.cache()
    kept.append(frame)
    return frame


def _with_sends(recorded: DataFrame, events: DataFrame) -> DataFrame:
    """The records with `sent`: whether a send of the run began their message (null: a message
    nobody sent, or a body we did not write)."""
    F = _F()
    col = F.col
    began = col("f") == "send"
    sent = (
        events.filter(began & (col("type") == "invoke") & col("msg_id").isNotNull())
        .select("msg_id")
        .distinct()
        .withColumn("sent", F.lit(True))
    )
    return recorded.join(sent, "msg_id", "left")


def _pairs(spark: Any, recorded: DataFrame, setup: ShareSetup) -> DataFrame:
    """(group, stream): each declared group's topics, and every topic a group got a record of."""
    from checkers.frames import small_frame

    declared = small_frame(spark, setup.topics(), "group string, stream string")
    seen = recorded.select("group", "stream").distinct()
    return declared.unionByName(seen).distinct()


def _group_counts(recorded: DataFrame) -> DataFrame:
    """Per group: records, acquisitions, each record anomaly, redeliveries by cause, records
    left at the end by how, acquisitions past the limit (BEYOND_LIMIT), archived records by
    what said so (ARCHIVED_BY), records of messages no send began (`unexpected`: reported, not
    judged), and the topics it got records of."""
    F = _F()
    col = F.col
    return recorded.groupBy("group").agg(
        F.count("*").alias("records"),
        F.sum("acquisitions").alias("acquisitions"),
        *[F.count(F.when(col(a), 1)).alias(a) for a in RECORD_ANOMALIES],
        *[F.sum(r).alias(f"redelivered_{r}") for r in REDELIVERIES],
        F.sum("after_unknown").alias("redelivered_after_unknown"),
        *[F.count(F.when(col("left") == w, 1)).alias(f"left_{w}") for w in LEFT],
        F.sum("beyond_limit").alias("beyond_limit_acquisitions"),
        F.count(F.when(col("beyond_limit") > 0, 1)).alias("beyond_limit_records"),
        F.count(F.when(col("beyond_uncounted"), 1)).alias("beyond_limit_uncounted"),
        *[
            F.count(F.when(col("archived_by") == b, 1)).alias(f"archived_by_{b}")
            for b in ARCHIVED_BY
        ],
        F.count(F.when(col("sent").isNull(), 1)).alias("unexpected"),
        F.sort_array(F.collect_set("stream")).alias("topics"),
    )


def _ack_counts(ordered: DataFrame) -> DataFrame:
    """(group, outcome, status, count): the deliveries' acknowledgements."""
    F = _F()
    return (
        ordered.filter(F.col("outcome").isNotNull()).groupBy("group", "outcome", "status").count()
    )


def _consumer_counts(ordered: DataFrame) -> DataFrame:
    """Per group and consumer: its acquisitions and how their acknowledgements ended, and the
    client it said it was."""
    F = _F()
    col = F.col
    return ordered.groupBy("group", "process").agg(
        F.count("*").alias("acquired"),
        F.count(F.when(col("accepted"), 1)).alias("accepted"),
        F.count(F.when(col("released"), 1)).alias("released"),
        F.count(F.when(col("rejected"), 1)).alias("rejected"),
        F.count(F.when(col("refused"), 1)).alias("refused"),
        F.count(F.when(col("unknown"), 1)).alias("unknown"),
        F.count(F.when(col("status").isNull(), 1)).alias("unacknowledged"),
        F.max("client").alias("client"),
    )


def _partition_counts(recorded: DataFrame) -> DataFrame:
    """Per group, topic and partition: its records and acquisitions."""
    F = _F()
    return recorded.groupBy("group", "stream", "partition").agg(
        F.count("*").alias("records"), F.sum("acquisitions").alias("acquisitions")
    )


def _placed(anomalies: DataFrame, steps: DataFrame) -> DataFrame:
    """(group, anomaly, step, consumer, stream, partition, count): each anomaly tied to the step
    in effect when it showed (the last one begun at or before it; none: before any fault)."""
    F = _F()
    col = F.col
    during = (col("at") >= col("start")) & (col("end").isNull() | (col("at") < col("end")))
    tied = anomalies.join(F.broadcast(steps), during, "left")
    step = F.coalesce(col("step"), F.lit(BEFORE_ANY_FAULT))
    return tied.groupBy(
        "group", "anomaly", step.alias("step"), "consumer", "stream", "partition"
    ).count()


def _samples(anomalies: DataFrame, ordered: DataFrame) -> DataFrame:
    """The first SAMPLES anomalies of each kind and group (by when they showed, then id), each
    with every delivery of its record (a lost message's: of its records in the group), one row
    per delivery (none for a message never delivered)."""
    from pyspark.sql import Window

    F = _F()
    col = F.col
    first = Window.partitionBy("group", "anomaly").orderBy(col("at").asc_nulls_last(), "id")
    picked = (
        anomalies.withColumn("rank", F.row_number().over(first))
        .filter(col("rank") <= SAMPLES)
        .select("group", "anomaly", "id", "rank", "at", "stream", "partition")
    )
    story = ordered.select(
        col("group").alias("story_group"),
        col("msg_id").alias("story_msg"),
        record_id().alias("record"),
        col("process").alias("by"),
        col("time").alias("acquired_at"),
        "n",
        "dc",
        "outcome",
        "status",
        "ack_error",
        "redelivery",
    )
    lost = col("anomaly") == "lost"
    # Joined by names of their own: both sides come of the same frames.
    matches = (col("group") == col("story_group")) & (
        (lost & (col("id") == col("story_msg"))) | (~lost & (col("id") == col("record")))
    )
    return picked.join(story, matches, "left").select(
        "group",
        "anomaly",
        "id",
        "rank",
        col("at").alias("shown_at"),
        "record",
        "by",
        "acquired_at",
        "n",
        "dc",
        "outcome",
        "status",
        "ack_error",
        "redelivery",
    )


def _write_ids(ids_dir: Path, anomalies: DataFrame) -> None:
    """ids/<group>/share_<anomaly>.txt: every anomaly's id, one a line, sorted."""
    by_file: dict[tuple[str, str], list[str]] = {}
    for r in anomalies.select("group", "anomaly", "id").collect():
        by_file.setdefault((r["group"], r["anomaly"]), []).append(r["id"])
    for (group, anomaly), ids in sorted(by_file.items()):
        path = ids_dir / group / f"share_{anomaly}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{i}\n" for i in sorted(ids)))


# ---- from the counted rows to the section (plain Python) ---------------------------------------


def share_section(rows: Mapping[str, list[dict[str, Any]]], setup: ShareSetup) -> dict[str, Any]:
    """The section from the collected rows of check_share_groups (each a dict), by group: its
    topics and settings, its records and acquisitions, its acknowledgements by outcome and
    status, how its acknowledged messages ended (`fates`), each anomaly's count (lost split
    into never_delivered and unsettled), its redeliveries by cause, what was left at the end,
    per consumer and per partition, by fault step, and samples; at the top the anomalies over
    every group and the redeliveries the coverage counts."""
    names = sorted(
        set(setup.declared)
        | {r["group"] for part in ("groups", "fates", "consumers") for r in rows.get(part, [])}
    )
    groups = {g: _group(g, rows, setup) for g in names}
    totals = {a: sum(g[a] for g in groups.values()) for a in ANOMALIES}
    return {
        "groups": groups,
        "anomalies": totals,
        "judged": list(JUDGED),
        "released_redelivered": sum(g["redelivered"]["released"] for g in groups.values()),
        "lock_expired_redelivered": sum(g["redelivered"]["lock_expired"] for g in groups.values()),
        "acks_without_acquisition": {
            r["process"]: r["count"] for r in in_spark_order(rows.get("unmatched", []), "process")
        },
        "events_without_record": {
            r["process"]: r["count"] for r in in_spark_order(rows.get("unplaced", []), "process")
        },
    }


def _group(
    name: str, rows: Mapping[str, list[dict[str, Any]]], setup: ShareSetup
) -> dict[str, Any]:
    settings = setup.settings(name)
    counted = next((r for r in rows.get("groups", []) if r["group"] == name), {})
    fates = dict.fromkeys(FATES, 0)
    for r in rows.get("fates", []):
        if r["group"] == name:
            fates[r["fate"]] = r["count"]
    topics = sorted(
        set(setup.declared.get(name, ((), settings))[0]) | set(counted.get("topics") or [])
    )
    placed = [r for r in rows.get("placed", []) if r["group"] == name]
    out: dict[str, Any] = {
        "topics": topics,
        "delivery_count_limit": settings.delivery_count_limit,
        "lock_duration_ms": settings.lock_duration_ms,
        "settings_from": settings.source,
        "acked": sum(fates.values()),
        "records": counted.get("records") or 0,
        "acquisitions": counted.get("acquisitions") or 0,
        "unexpected": counted.get("unexpected") or 0,
        "acks": _acks(r for r in rows.get("acks", []) if r["group"] == name),
        "fates": fates,
        "lost": sum(fates[f] for f in LOST_FATES),
        "never_delivered": fates["never_delivered"],
        "unsettled": fates["unsettled"],
        **{a: counted.get(a) or 0 for a in RECORD_ANOMALIES},
        "redelivered": {r: counted.get(f"redelivered_{r}") or 0 for r in REDELIVERIES}
        | {"after_unknown_ack": counted.get("redelivered_after_unknown") or 0},
        "left_at_end": {w: counted.get(f"left_{w}") or 0 for w in LEFT},
        "beyond_limit": {b: counted.get(f"beyond_limit_{b}") or 0 for b in BEYOND_LIMIT},
        "archived_by": {b: counted.get(f"archived_by_{b}") or 0 for b in ARCHIVED_BY},
        "consumers": _consumers(name, rows, placed),
        "partitions": _partitions(name, rows, placed),
        "by_step": _by_step(placed),
        "samples": _samples_of(r for r in rows.get("samples", []) if r["group"] == name),
    }
    return out


def _acks(rows: Iterable[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """{outcome: {status: n}} with every outcome and status, 0 where none."""
    out = {o: dict.fromkeys(STATUSES, 0) for o in SHARE_OUTCOMES}
    for r in rows:
        if r["outcome"] in out and r["status"] in STATUSES:
            out[r["outcome"]][r["status"]] += r["count"]
    return out


def _consumers(
    name: str, rows: Mapping[str, list[dict[str, Any]]], placed: list[dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Per consumer: its client, its acquisitions and their acknowledgements, and the anomalies
    it showed (a lost message counts for the consumer that last held it)."""
    out: dict[str, dict[str, Any]] = {}
    for r in in_spark_order(
        (r for r in rows.get("consumers", []) if r["group"] == name), "process"
    ):
        out[r["process"]] = {"client": r.get("client")} | {k: r[k] or 0 for k in CONSUMER_COUNTS}
    for r in placed:
        consumer = r["consumer"] or NEVER_DELIVERED
        row = out.setdefault(consumer, {"client": None} | dict.fromkeys(CONSUMER_COUNTS, 0))
        row[r["anomaly"]] = row.get(r["anomaly"], 0) + r["count"]
    for row in out.values():
        for a in ANOMALIES:
            row.setdefault(a, 0)
    return dict(sorted(out.items()))


def partition_key(stream: Any, partition: Any) -> str:
    """ "orders/2" """
    return f"{stream}/{partition}"


def _partitions(
    name: str, rows: Mapping[str, list[dict[str, Any]]], placed: list[dict[str, Any]]
) -> dict[str, dict[str, int]]:
    """Per topic partition: its records and acquisitions, and its anomalies (a lost message in
    the partition its send was acknowledged in)."""
    out: dict[str, dict[str, int]] = {}
    for r in rows.get("partitions", []):
        if r["group"] == name:
            out[partition_key(r["stream"], r["partition"])] = {
                "records": r["records"],
                "acquisitions": r["acquisitions"],
            }
    for r in placed:
        key = partition_key(r["stream"], r["partition"])
        row = out.setdefault(key, {"records": 0, "acquisitions": 0})
        row[r["anomaly"]] = row.get(r["anomaly"], 0) + r["count"]
    for row in out.values():
        for a in ANOMALIES:
            row.setdefault(a, 0)
    return dict(sorted(out.items(), key=lambda kv: _partition_order(kv[0])))


def _partition_order(key: str) -> tuple[str, int, str]:
    topic, _, number = key.rpartition("/")
    return (topic, int(number), key) if number.isdigit() else (key, -1, key)


def _by_step(placed: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """{anomaly: {step: n}}, the steps in the order the run took them."""
    out: dict[str, dict[str, int]] = {}
    for r in sorted(placed, key=lambda r: (r["anomaly"], step_number(r["step"]), r["step"])):
        steps = out.setdefault(r["anomaly"], {})
        steps[r["step"]] = steps.get(r["step"], 0) + r["count"]
    return out


def _samples_of(rows: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """{anomaly: [{id, at, deliveries: [...]}, ...]}: each sampled anomaly with its record's
    deliveries in order (a lost message's, of every record of it), each delivery as its
    consumer saw it."""
    picked: dict[tuple[str, int], dict[str, Any]] = {}
    for r in rows:
        sample = picked.setdefault(
            (r["anomaly"], r["rank"]), {"id": r["id"], "at": r["shown_at"], "deliveries": []}
        )
        if r.get("by") is not None:
            sample["deliveries"].append(
                {
                    "record": r["record"],
                    "n": r["n"],
                    "consumer": r["by"],
                    "at": r["acquired_at"],
                    "delivery_count": r["dc"],
                    "ack": r["outcome"],
                    "status": r["status"],
                    "error": r["ack_error"],
                    "redelivery": r["redelivery"],
                }
            )
    out: dict[str, list[dict[str, Any]]] = {}
    for (anomaly, _), sample in sorted(picked.items()):
        sample["deliveries"].sort(key=lambda d: (d["at"], d["record"], d["n"]))
        out.setdefault(anomaly, []).append(sample)
    return out


# ---- what the verdict and the summary read ---------------------------------------------------


def judged_counts(section: Mapping[str, Any] | None) -> dict[str, int]:
    """The judged anomalies' totals (0 each without share groups)."""
    totals = (section or {}).get("anomalies") or {}
    return {a: int(totals.get(a) or 0) for a in JUDGED}


def lost_by_group(section: Mapping[str, Any] | None) -> dict[str, int]:
    """Each share group's lost messages."""
    return {g: int(s.get("lost") or 0) for g, s in ((section or {}).get("groups") or {}).items()}


WORDS = {
    "duplicated": "accepted twice or delivered after a confirmed accept",
    "over_limit": "delivered past the delivery count limit",
    "rejected_redelivered": "delivered again after a confirmed reject",
    "backwards": "with a delivery count below an earlier delivery's",
}


def broken_words(section: Mapping[str, Any] | None) -> str:
    """ "share groups broken: 2 records accepted twice or ..., 1 record delivered past ..." for
    the judged record anomalies; empty for none."""
    counts = judged_counts(section)
    said = [
        f"{counts[a]} record{'s' if counts[a] != 1 else ''} {WORDS[a]}"
        for a in JUDGED
        if a != "lost" and counts[a]
    ]
    return "share groups broken: " + ", ".join(said) if said else ""


def summary_lines(section: Mapping[str, Any] | None, run_start: float = 0.0) -> list[str]:
    """Per share group: its settings, what became of its messages, its anomalies and
    redeliveries, what was left at the end, then a few samples."""
    if not section:
        return []
    lines = []
    for name, g in sorted((section.get("groups") or {}).items()):
        fates = g["fates"]
        red = g["redelivered"]
        left = g["left_at_end"]
        lines.append(
            f"share group {name} on {', '.join(g['topics']) or 'no topic'} (delivery count limit "
            f"{g['delivery_count_limit']}, lock {g['lock_duration_ms']} ms, from "
            f"{g['settings_from']}): {g['acked']} acknowledged messages: "
            + ", ".join(f"{f.replace('_', ' ')} {fates[f]}" for f in FATES)
        )
        lines.append(
            f"share group {name}: lost {g['lost']} (never delivered {g['never_delivered']}, "
            f"unsettled {g['unsettled']}), "
            + ", ".join(f"{a.replace('_', ' ')} {g[a]}" for a in RECORD_ANOMALIES)
            + f"; {g['records']} records, {g['acquisitions']} acquisitions; redelivered after "
            f"a release {red['released']}, a lock expiry {red['lock_expired']}, otherwise "
            f"{red['dropped']} ({red['after_unknown_ack']} after an acknowledgement of unknown "
            f"outcome); left at the end: acquired {left['acquired']}, available "
            f"{left['available']}, unknown {left['unknown']}"
        )
        lines.append(f"share group {name}: {_limit_words(g)}")
        for anomaly, steps in sorted(g["by_step"].items()):
            shown = ", ".join(f"{k}: {n}" for k, n in steps.items())
            lines.append(f"share {anomaly} in {name} by fault step: {shown}")
        for anomaly, samples in sorted(g["samples"].items()):
            lines += [f"  {anomaly}: {story(s, run_start)}" for s in samples[:3]]
    unmatched = section.get("acks_without_acquisition") or {}
    if unmatched:
        said = ", ".join(f"{p} {n}" for p, n in unmatched.items())
        lines.append(f"share acknowledgements of records their consumer never acquired: {said}")
    return lines


def _limit_words(g: Mapping[str, Any]) -> str:
    """What the group's records did at the limit: archived by what, acquired beyond it."""
    beyond = g.get("beyond_limit") or dict.fromkeys(BEYOND_LIMIT, 0)
    by = g.get("archived_by") or dict.fromkeys(ARCHIVED_BY, 0)
    return (
        f"archived by count {by['delivery_count']}, by acquisitions (no count) "
        f"{by['acquisitions']}; beyond the limit: {beyond['acquisitions']} acquisitions of "
        f"{beyond['records']} records ({beyond['uncounted']} without a delivery count, not "
        "judged)"
    )


def story(sample: Mapping[str, Any], run_start: float = 0.0) -> str:
    """ "t/0@5 P:6: 1. c1 +3.2 s (count 1) accept ok; 2. c2 +9.0 s (count 2) ..." """
    deliveries = sample.get("deliveries") or []
    if not deliveries:
        return f"{sample['id']}: never delivered"
    parts = []
    for d in deliveries:
        count = "" if d["delivery_count"] is None else f" (count {d['delivery_count']})"
        ack = f" {d['ack']} {d['status']}" if d["ack"] else " not acknowledged"
        parts.append(f"{d['n']}. {d['consumer']} +{d['at'] - run_start:.1f} s{count}{ack}")
    return f"{sample['id']}: " + "; ".join(parts)
