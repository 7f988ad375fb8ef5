"""Transactions: what each read_committed group saw of the transactional producers' writes.

A transactional producer (workloads.kafka.transactions) ends every record's send with its
transaction's outcome and names the transaction in the send's `value.txn`; each reader says its
isolation once (`f: open`). A transaction of unknown outcome (its client never learnt whether
it committed: it ended info, or never ended) is judged by what the read_committed groups saw:
committed if any of them received one of its records (read_committed returns no other), aborted
if none did. Judged so, whichever it did is held against the readers: committed, it may not be
seen in part; aborted, none of its records may be read. From those alone, per read_committed
group g:
  aborted_reads   records of an aborted transaction that g received (Adya's G1a, aborted read:
                  read_committed promises never to return them)
  torn            committed transactions (acknowledged, or of unknown outcome and seen
                  committed) g saw part of: g received at least one of its records, and missed
                  another at an offset at or below the highest g read in that record's
                  partition (g read past it; one it never reached is not torn); each sample
                  says which (`outcome` ok or info, and `evidence`)
  lost_txns       committed transactions with a record among g's `lost` (the message table's:
                  acknowledged at the commit, never received by g): which transactions the
                  lost records belong to, and how many of each
A transaction of unknown outcome that one read_committed group saw and another read past
without receiving any of its records is counted once per such group (`unknown_missed`, at the
section's top): had it committed, that group lost it; had it aborted, the other read aborted
records. An acknowledged one missed so is the message table's `lost`; this one, never
acknowledged, is nobody's loss there.
Across the transactional clients, fencing (KIP-98's zombie fencing), from each instance's
`init-txn` marks and each commit's `end-txn` mark:
  fenced_commits  commits asked by an instance a newer one had fenced: process A asked its
                  commit after another process B, sharing A's transactional id, had
                  initialised an instance (B's init-txn ok), B having asked its init only after
                  A's own latest init had returned (so B's epoch is surely the newer; inits
                  whose order the marks cannot tell are left out)
  zombie_commits  those of them that took effect: the commit acknowledged (txn ok), or a
                  read_committed group received a record of it; the coordinator had fenced A's
                  epoch, so its commit must have been refused
  fenced_open     A's transactions that were open (from their begin to their end, or to A's
                  last event) when such a newer instance's init returned: the zombie the
                  fencing is for, whether its client then asked the commit or learnt of the
                  fencing sooner (librdkafka finds it when it next adds a partition)
  fenced_while_paused  those of them whose client was paused (pause-client) at that moment
A copier's (the exactly-once copy's) transactions count among them; its copies of aborted
transactions read are aborted reads too (found by position, checkers.eos), and the verdict's
section holds the copy's own account under `copy`. Across the run: transactions committed,
aborted (planned: the producer's choice), and of unknown outcome; how many of the unknown ones
some read_committed group saw (judged committed); and how many were open while a fault was in
effect (the coverage's measure of a transactional run), how many had their commit (EndTxn, from
the client's `end-txn` mark to the transaction's end) in flight while a fault was in effect, and
how many had it in flight while the broker coordinating them moved (the partition watch's
`coordinator-state`: the transactional id's coordinator, or a copier's group's). A committed
record that a group read past and never received is the message table's `lost`; this module
adds the transaction-level view.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from checkers.eos import aborted_copies_read, check_copy
from checkers.fencing import fenced_commits, fenced_open, initialisations
from checkers.frames import small_frame
from checkers.held import Span, held_counts
from checkers.windows import PathSpell
from contract.history import END_TXN

DataFrame = Any
SAMPLES = 10  # per anomaly, in verdict.json; the ids files hold all
TXN_METRICS = ("aborted_reads", "torn", "lost_txns")
ZOMBIE_COMMITS = "zombie_commits"
# A transaction's end saying its instance had been fenced (librdkafka's _FENCED, the Java
# client's ProducerFencedException or InvalidProducerEpochException), lower-cased.
FENCED_ERRORS = (
    "fenced|invalid_?producer_?epoch"  # ids/zombie_commits.txt: the transactions, one a line
)


def _F() -> Any:
    from pyspark.sql import functions as F

    return F


def _txn_of(value: Any) -> Any:
    return _F().get_json_object(value, "$.txn")


def transaction_event() -> Any:
    """Whether an event is a transaction's begin or end: a history with one is transactional."""
    return _F().col("f") == "txn"


def has_transactions(events: DataFrame) -> bool:
    return bool(events.filter(transaction_event()).limit(1).count())


def transaction_outcomes(events: DataFrame) -> DataFrame:
    """(producer, txn, outcome, planned): each transaction's end (ok, fail, info); one that
    began and never ended (its producer killed) is info."""
    F = _F()
    txns = events.filter(F.col("f") == "txn").select(
        "producer",
        _txn_of(F.col("value")).alias("txn"),
        "type",
        F.coalesce(F.get_json_object("value", "$.planned") == "true", F.lit(False)).alias(
            "planned"
        ),
    )
    rank = F.when(F.col("type") == "invoke", 0).otherwise(1)
    ended = txns.groupBy("producer", "txn").agg(
        F.max(F.struct(rank.alias("r"), "type", "planned")).alias("end")
    )
    outcome = F.when(F.col("end.type") == "invoke", "info").otherwise(F.col("end.type"))
    return ended.select(
        "producer", "txn", outcome.alias("outcome"), F.col("end.planned").alias("planned")
    )


def transactional_records(events: DataFrame) -> DataFrame:
    """(msg_id, txn, stream, partition, offset): every record a transaction sent, where its
    delivery report placed it (null where none did)."""
    F = _F()
    ends = events.filter(
        (F.col("f") == "send") & (F.col("type") != "invoke") & _txn_of(F.col("value")).isNotNull()
    )
    return ends.groupBy("msg_id").agg(
        F.first(_txn_of(F.col("value"))).alias("txn"),
        F.first("stream").alias("stream"),
        F.first("partition", ignorenulls=True).alias("partition"),
        F.first("offset", ignorenulls=True).alias("offset"),
    )


def isolation_of_groups(events: DataFrame) -> dict[str, str]:
    """Each reader group's isolation level, as its readers said it."""
    F = _F()
    said = events.filter(F.col("f") == "open").select(
        F.coalesce("group", "stream").alias("group"),
        F.get_json_object("value", "$.isolation").alias("isolation"),
    )
    said = said.filter(F.col("isolation").isNotNull())
    return {r["group"]: r["isolation"] for r in said.distinct().collect()}


def read_committed_processes(events: DataFrame) -> set[str]:
    """The reader processes that said they read committed."""
    F = _F()
    said = events.filter(
        (F.col("f") == "open") & (F.get_json_object("value", "$.isolation") == "read_committed")
    )
    return {r["process"] for r in said.select("process").distinct().collect()}


def committed_reads(events: DataFrame, groups: list[str]) -> DataFrame:
    """(group, msg_id, stream, partition, offset): every ok receive of the read_committed
    `groups`."""
    F = _F()
    return (
        events.filter((F.col("f") == "receive") & (F.col("type") == "ok"))
        .select(
            F.coalesce("group", "stream").alias("group"), "msg_id", "stream", "partition", "offset"
        )
        .filter(F.col("group").isin(groups))
    )


def seen_committed_by(reads: DataFrame, records: DataFrame) -> DataFrame:
    """(txn, seen_by): each transaction a read_committed group (of `reads`) received a record
    of, in the stream it was sent to, with those groups, sorted. `records`: (msg_id, stream,
    txn, ...). A copy of the record in the exactly-once copy's output is the copier's
    transaction's, not this one's (checkers.eos judges those)."""
    F = _F()
    return (
        reads.select("group", "msg_id", "stream")
        .distinct()
        .join(records.select("msg_id", "stream", "txn"), ["msg_id", "stream"])
        .groupBy("txn")
        .agg(F.sort_array(F.collect_set("group")).alias("seen_by"))
    )


def judged(outcomes: DataFrame, seen_by: DataFrame) -> DataFrame:
    """(txn, outcome, judged, seen_by): each transaction's outcome as its client learnt it, and
    as it is judged: `committed` when acknowledged, or of unknown outcome and seen by a
    read_committed group (which returns committed records only); `aborted` when aborted, or of
    unknown outcome and seen by none (every read_committed reader that read past it passed it
    over, as an aborted one's records are)."""
    F = _F()
    with_seen = outcomes.select("txn", "outcome").join(seen_by, "txn", "left")
    committed = (F.col("outcome") == "ok") | (
        (F.col("outcome") == "info") & F.col("seen_by").isNotNull()
    )
    return with_seen.withColumn(
        "judged", F.when(committed, "committed").otherwise("aborted")
    ).select("txn", "outcome", "judged", "seen_by")


def without_aborted_records(events: DataFrame) -> DataFrame:
    """The events less every send and receive of a record of a transaction judged aborted
    (`judged`: aborted, or of unknown outcome and seen by no read_committed group): the log as
    a read_committed reader may see it (its skips over those records are no skips)."""
    F = _F()
    groups = [g for g, level in isolation_of_groups(events).items() if level == "read_committed"]
    sent = (
        events.filter((F.col("f") == "send") & _txn_of(F.col("value")).isNotNull())
        .select("msg_id", "stream", _txn_of(F.col("value")).alias("txn"))
        .distinct()
    )
    seen = seen_committed_by(committed_reads(events, groups), sent)
    aborted = (
        judged(transaction_outcomes(events), seen)
        .filter(F.col("judged") == "aborted")
        .join(sent, "txn")
        .select("msg_id")
        .distinct()
    )
    return events.join(F.broadcast(aborted), "msg_id", "left_anti")


def producer_clients(events: DataFrame) -> dict[str, str]:
    """Each transactional producer's client, as it said it (confluent-kafka or Kafka's Java
    client, and their versions): the history says which one wrote it."""
    F = _F()
    said = events.filter((F.col("f") == "open") & F.col("producer").isNotNull()).select(
        "producer", F.get_json_object("value", "$.client").alias("client")
    )
    return {r["producer"]: r["client"] for r in said.filter(F.col("client").isNotNull()).collect()}


def check_transactions(
    events: DataFrame,
    ids_dir: Path,
    windows: list[tuple[float, float]] | None = None,
    coordinator_moves: list[tuple[str, str, float, float]] | None = None,
    lost: DataFrame | None = None,
    pauses: list[tuple[str, float, float]] | None = None,
    transactional: bool | None = None,
    client_path: list[PathSpell] | None = None,
) -> dict[str, Any] | None:
    """The transactions section of the verdict, or None for a history without transactions.
    `lost` is the message table's (group, msg_id) of every lost message; `pauses` the
    (client, start, end) spells a client was paused (checkers.windows). The ids behind each
    count go to ids/<group>/aborted_reads.txt (msg_ids), torn.txt and lost_txns.txt
    (transaction ids), and ids/zombie_commits.txt (transaction ids). `transactional`: whether
    the history has transactions, when the caller knows (None: asked of `events`).
    `client_path`: the spells of the proxy's faults (checkers.windows.client_path_spells); with
    any, the section counts the transactions they held or delayed (checkers.held)."""
    if not (has_transactions(events) if transactional is None else transactional):
        return None
    F = _F()
    isolation = isolation_of_groups(events)
    committed_groups = sorted(g for g, level in isolation.items() if level == "read_committed")
    outcomes = transaction_outcomes(events).cache()
    sent = transactional_records(events).cache()
    reads = committed_reads(events, committed_groups).cache()
    verdicts = judged(outcomes, seen_committed_by(reads, sent)).cache()
    records = sent.join(verdicts, "txn").cache()
    try:
        aborted = _aborted_reads(reads, records) + aborted_copies_read(reads, events)
        torn, missed = _read_past(reads, records, committed_groups)
        lost_txns = [] if lost is None else _lost_in_transactions(lost, records, committed_groups)
        summary = _outcome_counts(outcomes)
        spans = _spans(events).cache()
        inits = initialisations(events).cache()
        cached = [spans, inits]
        try:
            commits = spans.filter(F.col("asked").isNotNull())
            summary["open_in_faults"] = _overlapping(spans, "begin", windows or [])
            summary["commits_in_faults"] = _overlapping(commits, "asked", windows or [])
            summary["commits_across_coordinator_moves"] = _across_moves(
                commits, _coordinator_keys(events), coordinator_moves or []
            )
            if client_path:
                summary |= _held(spans, events, client_path)
            seen = verdicts.filter(F.col("seen_by").isNotNull())
            summary["unknown_seen_committed"] = seen.filter(F.col("outcome") == "info").count()
            fenced = fenced_commits(commits, inits, outcomes, seen.select("txn"))
            cached.append(fenced.cache())
            summary["fenced_commits"] = fenced.count()
            took_effect = (F.col("outcome") == "ok") | F.col("seen")
            zombies = [
                r.asDict()
                for r in fenced.filter(took_effect).orderBy("asked", "producer", "txn").collect()
            ]
            summary["fenced_open"], summary["fenced_while_paused"] = fenced_open(
                spans, inits, pauses or []
            )
        finally:
            for df in cached:
                df.unpersist()
        summary[ZOMBIE_COMMITS] = len(zombies)
        summary["unknown_missed"] = len(missed)
        groups: dict[str, Any] = {
            g: {"isolation": level, "aborted_reads": 0, "aborted_read_txns": 0, "torn": 0}
            | ({"lost_txns": 0} if lost is not None else {})
            for g, level in sorted(isolation.items())
        }
        samples: dict[str, list[dict[str, Any]]] = {
            "aborted_reads": [],
            "torn": [],
            "unknown_missed": missed[:SAMPLES],
            "lost": [],
            ZOMBIE_COMMITS: zombies[:SAMPLES],
        }
        for r in aborted:
            g = groups[r["group"]]
            g["aborted_reads"] += 1
            samples["aborted_reads"] += [r] if len(samples["aborted_reads"]) < SAMPLES else []
        for group in committed_groups:
            txns = {r["txn"] for r in aborted if r["group"] == group}
            groups[group]["aborted_read_txns"] = len(txns)
        for r in torn:
            groups[r["group"]]["torn"] += 1
            samples["torn"] += [r] if len(samples["torn"]) < SAMPLES else []
        for r in lost_txns:
            groups[r["group"]]["lost_txns"] += 1
            samples["lost"] += [r] if len(samples["lost"]) < SAMPLES else []
        _write(ids_dir, "aborted_reads", [(r["group"], r["msg_id"]) for r in aborted])
        _write(ids_dir, "torn", [(r["group"], r["txn"]) for r in torn])
        _write(ids_dir, "unknown_missed", [(r["group"], r["txn"]) for r in missed])
        _write(ids_dir, "lost_txns", [(r["group"], r["txn"]) for r in lost_txns])
        ids_dir.mkdir(parents=True, exist_ok=True)
        (ids_dir / f"{ZOMBIE_COMMITS}.txt").write_text("".join(f"{r['txn']}\n" for r in zombies))
        clients = producer_clients(events)
        copy = check_copy(events, ids_dir, reads)
        if copy is not None:
            summary["unknown_seen_committed"] += copy["unknown_seen_committed"]
        section = summary | {"clients": clients, "groups": groups, "samples": samples}
        return section | ({"copy": copy} if copy is not None else {})
    finally:
        for df in (outcomes, sent, reads, verdicts, records):
            df.unpersist()


def _spans(events: DataFrame) -> DataFrame:
    """(producer, txn, begin, asked, end): each transaction from its begin to its end, and when
    its client asked its commit (`end-txn`; null when it never did). One that never ended (its
    client killed, or stopped at its deadline) ends with its client's last event: it is in
    flight in no fault or move after its client is gone."""
    F = _F()
    marks = events.filter(F.col("f").isin("txn", END_TXN)).select(
        "producer", _txn_of(F.col("value")).alias("txn"), "f", "type", "time"
    )
    last = events.groupBy(F.col("process").alias("producer")).agg(F.max("time").alias("last"))
    spans = marks.groupBy("producer", "txn").agg(
        F.min(F.when(F.col("f") == "txn", F.col("time"))).alias("begin"),
        F.min(F.when(F.col("f") == END_TXN, F.col("time"))).alias("asked"),
        F.max(F.when((F.col("f") == "txn") & (F.col("type") != "invoke"), F.col("time"))).alias(
            "ended"
        ),
    )
    return spans.join(last, "producer", "left").select(
        "producer", "txn", "begin", "asked", F.coalesce("ended", "last").alias("end")
    )


def _held(spans: DataFrame, events: DataFrame, spells: list[PathSpell]) -> dict[str, int]:
    """checkers.held's counts, on the driver: a run holds a few thousand transactions."""
    F = _F()
    keys = _coordinator_keys(events).filter(F.col("role") == "transaction-coordinator")
    ids: dict[str, set[str]] = {}
    for r in keys.collect():
        ids.setdefault(r["producer"], set()).add(r["key"])
    error = F.lower(F.coalesce(F.col("error"), F.lit("")))
    fenced = (
        events.filter((F.col("f") == "txn") & (F.col("type") != "invoke"))
        .filter(error.rlike(FENCED_ERRORS))
        .select("producer", _txn_of(F.col("value")).alias("txn"), F.lit(True).alias("fenced"))
        .distinct()
    )
    rows = (
        spans.join(fenced, ["producer", "txn"], "left")
        .select("producer", "txn", "begin", "asked", "end", F.coalesce("fenced", F.lit(False)))
        .collect()
    )
    return held_counts((Span(*r) for r in rows if r["begin"] is not None), spells, ids)


def _overlapping(spans: DataFrame, begin: str, windows: list[tuple[float, float]]) -> int:
    """How many of `spans` (from column `begin` to `end`, open-ended when null) met a window."""
    if not windows:
        return 0
    F = _F()
    end = F.coalesce(F.col("end"), F.lit(float("inf")))
    overlaps = F.lit(False)
    for start, stop in windows:
        overlaps = overlaps | ((F.col(begin) < F.lit(stop)) & (end > F.lit(start)))
    return int(spans.filter(overlaps).count())


def _coordinator_keys(events: DataFrame) -> DataFrame:
    """(producer, role, key): the ids whose coordinators serve each transactional client, as it
    said them (`open`): its transactional id, and a copier's group."""
    F = _F()
    said = events.filter((F.col("f") == "open") & F.col("producer").isNotNull())
    txn = said.select(
        "producer",
        F.lit("transaction-coordinator").alias("role"),
        F.get_json_object("value", "$.transactional_id").alias("key"),
    )
    group = said.select(
        "producer",
        F.lit("group-coordinator").alias("role"),
        F.get_json_object("value", "$.copy.group").alias("key"),
    )
    return txn.unionByName(group).filter(F.col("key").isNotNull()).distinct()


def _across_moves(
    commits: DataFrame, keys: DataFrame, moves: list[tuple[str, str, float, float]]
) -> int:
    """How many commits were in flight over the whole of a move of one of their client's
    coordinators: asked before the last answer naming the old broker, ended after the first
    naming the new one (checkers.control.coordinator_moves)."""
    if not moves:
        return 0
    F = _F()
    moved = small_frame(
        commits.sparkSession, moves, "role string, key string, left double, moved double"
    )
    end = F.coalesce(F.col("end"), F.lit(float("inf")))
    during = commits.join(keys, "producer").join(F.broadcast(moved), ["role", "key"])
    during = during.filter((F.col("asked") <= F.col("left")) & (F.col("moved") <= end))
    return int(during.select("txn").distinct().count())


def _outcome_counts(outcomes: DataFrame) -> dict[str, int]:
    F = _F()
    row = outcomes.agg(
        F.count("*").alias("transactions"),
        F.count(F.when(F.col("outcome") == "ok", 1)).alias("committed"),
        F.count(F.when(F.col("outcome") == "fail", 1)).alias("aborted"),
        F.count(F.when(F.col("planned"), 1)).alias("planned_aborts"),
        F.count(F.when(F.col("outcome") == "info", 1)).alias("unknown"),
    ).collect()[0]
    return {k: int(v) for k, v in row.asDict().items()}


def _aborted_reads(reads: DataFrame, records: DataFrame) -> list[dict[str, Any]]:
    """(group, msg_id, txn, partition, offset) of every read of a record of a transaction
    judged aborted, each record once per group. One of unknown outcome is judged aborted only
    when no read_committed group read it, so of those there are none: the aborted ones are
    the client's word."""
    F = _F()
    aborted = records.filter(F.col("judged") == "aborted").select("msg_id", "txn")
    rows = (
        reads.join(aborted, "msg_id")
        .groupBy("group", "msg_id", "txn")
        .agg(F.min("partition").alias("partition"), F.min("offset").alias("offset"))
        .orderBy("group", "txn", "partition", "offset")
    )
    return [r.asDict() for r in rows.collect()]


def _read_past(
    reads: DataFrame, records: DataFrame, groups: list[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(group, txn, outcome, evidence, read, missed, missed_ids) of the transactions judged
    committed that a group read past a record of without receiving it: those it saw in part
    (torn), and those of unknown outcome it saw none of (unknown_missed). `evidence` says why
    committed: its commit acknowledged (outcome ok), or seen committed by the read_committed
    groups it names (outcome info)."""
    F = _F()
    spark = reads.sparkSession
    committed = records.filter((F.col("judged") == "committed") & F.col("offset").isNotNull())
    group_names = spark.createDataFrame([(g,) for g in groups], "group string")
    # Per stream: a group reading the copy's output has read nothing of the input's partitions.
    highest = reads.groupBy("group", "stream", "partition").agg(F.max("offset").alias("highest"))
    got = reads.select("group", "msg_id").distinct().withColumn("got", F.lit(True))
    each = (
        committed.crossJoin(F.broadcast(group_names))
        .join(got, ["group", "msg_id"], "left")
        .join(highest, ["group", "stream", "partition"], "left")
    )
    read_past = F.col("highest").isNotNull() & (F.col("offset") <= F.col("highest"))
    missed = F.col("got").isNull() & read_past
    evidence = F.when(F.col("outcome") == "ok", F.lit("commit acknowledged")).otherwise(
        F.concat(F.lit("seen committed by "), F.array_join("seen_by", ", "))
    )
    per_txn = each.groupBy("group", "txn", "outcome", evidence.alias("evidence")).agg(
        F.count(F.when(F.col("got"), 1)).alias("read"),
        F.count(F.when(missed, 1)).alias("missed"),
        F.sort_array(F.collect_list(F.when(missed, F.col("msg_id")))).alias("missed_ids"),
    )
    # An acknowledged transaction a group saw none of is its `lost` in the message table.
    judged_here = (F.col("read") > 0) | (F.col("outcome") == "info")
    rows = per_txn.filter(judged_here & (F.col("missed") > 0)).orderBy("group", "txn").collect()
    torn = [r.asDict() for r in rows if r["read"] > 0]
    return torn, [r.asDict() for r in rows if r["read"] == 0]


def _lost_in_transactions(
    lost: DataFrame, records: DataFrame, groups: list[str]
) -> list[dict[str, Any]]:
    """(group, txn, records, lost, lost_ids): each committed transaction with a record a
    read_committed group lost, with how many records it wrote and the first SAMPLES lost."""
    F = _F()
    committed = records.filter(F.col("outcome") == "ok").select("msg_id", "txn")
    sizes = committed.groupBy("txn").agg(F.count("*").alias("records"))
    rows = (
        lost.filter(F.col("group").isin(groups))
        .join(committed, "msg_id")
        .groupBy("group", "txn")
        .agg(
            F.count("*").alias("lost"),
            F.slice(F.sort_array(F.collect_list("msg_id")), 1, SAMPLES).alias("lost_ids"),
        )
        .join(sizes, "txn")
        .select("group", "txn", "records", "lost", "lost_ids")
        .orderBy("group", "txn")
    )
    return [r.asDict() for r in rows.collect()]


def _write(ids_dir: Path, metric: str, rows: list[tuple[str, str]]) -> None:
    by_group: dict[str, list[str]] = {}
    for group, key in rows:
        by_group.setdefault(group, []).append(key)
    for group, keys in by_group.items():
        path = ids_dir / group / f"{metric}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{k}\n" for k in keys))
