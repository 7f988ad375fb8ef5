"""The PySpark checker: counts lost, duplicated, reordered, unexpected and recovered messages.

What each count means is in checkers.queries, one named query per count; the history is read
by checkers.read and the ids behind the counts are written by checkers.ids.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers import queries as q
from checkers.attribution import attribute
from checkers.ids import write_ids
from checkers.read import HistoryError, read_history
from checkers.verdict import METRICS as METRIC_IDS  # every count has its ids

__all__ = ["METRIC_IDS", "CheckResult", "HistoryError", "check_history", "spark_session"]


@dataclass
class CheckResult:
    groups: dict[str, dict[str, int]]
    ids_dir: Path  # ids/<group>/<metric>.txt behind every count
    sends: dict[str, int]
    truncated_lines: list[str] = field(default_factory=list)
    # When sends were refused or left unknown: the unavailability a claim may promise.
    refused_window: dict[str, float] | None = None
    # Not-ok outcomes by f (send, commit) and error name (the text before the first ":").
    errors: dict[str, dict[str, int]] = field(default_factory=dict)
    # The nemesis's leader-placement snapshots (f: leaders), in time order.
    placement: list[dict[str, Any]] = field(default_factory=list)
    # Offset-level anomalies of the observed log (Kafka), with a few samples each.
    log: dict[str, Any] = field(default_factory=dict)
    history_source: str = "jsonl"  # what the events were read from: jsonl or parquet
    # {metric: {group: {by_step: {step: n}, by_node: {node: n}}}}: which fault did it.
    attribution: dict[str, Any] = field(default_factory=dict)
    # Per reader process: poll_skips, nonmonotonic_polls; per producer: nonmonotonic_sends.
    readers: dict[str, dict[str, int]] = field(default_factory=dict)
    producers: dict[str, dict[str, int]] = field(default_factory=dict)


def spark_session(master: str = "local[*]") -> Any:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise HistoryError("Java is not installed: PySpark needs Java 17 or newer (make setup)")
    from pyspark.sql import SparkSession

    # Local mode stays on loopback; for a cluster master the driver binds where Spark's own
    # rules say (SPARK_LOCAL_IP if set, else the host's address), so executors can reach it.
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    log4j = f"-Dlog4j2.configurationFile=file:{Path(__file__).parent / 'log4j2.properties'}"
    spark = (
        SparkSession.builder.master(master)
        .appName("brokerjepsen-checker")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "2g")
        .config("spark.driver.extraJavaOptions", log4j)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def check_history(
    spark: Any, history_dir: Path, ids_dir: Path, expected_groups: list[str] | None = None
) -> CheckResult:
    """Counts every metric of every group; the ids behind them go to `ids_dir`."""
    history = read_history(spark, history_dir)
    events = history.events.cache()
    try:
        receives = q.deliveries(events)
        group_names = {r["group"] for r in receives.select("group").distinct().collect()}
        group_names |= set(expected_groups or [])
        groups = sorted(group_names)
        groups_df = spark.createDataFrame([(g,) for g in groups], "group string")
        per_msg = q.per_message(receives)
        acked = q.acked(events)
        lost = q.lost(groups_df, acked, per_msg)
        flagged = {
            "acked": groups_df.crossJoin(acked),
            "received": q.received(per_msg),
            "lost": lost,
            "unseen": q.unseen(lost, q.ack_positions(events), q.highest_read(receives)),
            "duplicated": q.duplicated(per_msg),
            "reordered": q.reordered(receives),
            "unexpected": q.unexpected(per_msg, q.invoked(events)),
            "recovered": q.recovered(per_msg, q.not_acked(events)),
        }
        counts = write_ids({m: flagged[m] for m in METRIC_IDS}, groups, ids_dir)
        return CheckResult(
            groups={g: counts[g] for g in groups},
            ids_dir=ids_dir,
            sends=_send_counts(events),
            truncated_lines=history.truncated_lines,
            history_source=history.source,
            refused_window=_refused_window(events),
            errors=_errors(events),
            placement=_placement(events),
            log=_log_anomalies(events),
            readers=_reader_anomalies(events),
            attribution=attribute(spark, events, flagged),
            producers=_producer_anomalies(events),
        )
    finally:
        events.unpersist()
        history.release()


def _send_counts(events: Any) -> dict[str, int]:
    counts = {"ok": 0, "fail": 0, "info": 0}
    rows = q.send_outcomes(events).groupBy("outcome").count().collect()
    counts.update({r["outcome"]: r["count"] for r in rows})
    counts["invoked"] = q.invoked(events).count()
    return counts


def _refused_window(events: Any) -> dict[str, float] | None:
    window = q.refused_window(events).collect()[0]
    if window["first"] is None:
        return None
    return {
        "first": window["first"],
        "last": window["last"],
        "seconds": round(window["last"] - window["first"], 3),
    }


def _errors(events: Any) -> dict[str, dict[str, int]]:
    errors: dict[str, dict[str, int]] = {}
    for r in q.client_errors(events).collect():
        errors.setdefault(r["f"], {})[r["name"] or "(no error text)"] = r["count"]
    return errors


def _placement(events: Any) -> list[dict[str, Any]]:
    return [
        {"time": r["time"], **json.loads(r["value"])}
        for r in q.leader_placements(events).collect()
        if r["value"]
    ]


LOG_SAMPLES = 5


def _log_anomalies(events: Any) -> dict[str, Any]:
    """Counts of the observed log's anomalies, and the first few of each for a person to see."""
    # Five questions of one log: computed once.
    log = q.observed_log(events).cache()
    try:
        return _log_counts(log)
    finally:
        log.unpersist()


def _log_counts(log: Any) -> dict[str, Any]:
    inconsistent = q.inconsistent_offsets(log)
    duplicates = q.duplicate_offsets(log)
    return {
        "positions": log.select("stream", "partition", "offset").distinct().count(),
        "inconsistent_offsets": inconsistent.count(),
        "duplicate_offsets": duplicates.count(),
        "samples": {
            "inconsistent_offsets": [
                f"{r['stream']}/{r['partition']}@{r['offset']}: {', '.join(r['msg_ids'])}"
                for r in inconsistent.orderBy("stream", "partition", "offset")
                .limit(LOG_SAMPLES)
                .collect()
            ],
            "duplicate_offsets": [
                f"{r['msg_id']}: {', '.join(r['at'])}"
                for r in duplicates.orderBy("msg_id").limit(LOG_SAMPLES).collect()
            ],
        },
    }


def _counts_by(df: Any, key: str) -> dict[str, int]:
    return {r[key]: r["count"] for r in df.groupBy(key).count().collect()}


def _reader_anomalies(events: Any) -> dict[str, dict[str, int]]:
    """Every process that received anything, with 0 where it has no offsets (RabbitMQ)."""
    names = q.reader_processes(events)
    pairs = q.consecutive_reads(events)
    skips = _counts_by(q.poll_skips(pairs, q.positions(events)), "process")
    backwards = _counts_by(q.nonmonotonic_polls(pairs), "process")
    return {
        p: {"poll_skips": skips.get(p, 0), "nonmonotonic_polls": backwards.get(p, 0)} for p in names
    }


def _producer_anomalies(events: Any) -> dict[str, dict[str, int]]:
    names = q.producer_names(events)
    behind = _counts_by(q.nonmonotonic_sends(events), "producer")
    return {p: {"nonmonotonic_sends": behind.get(p, 0)} for p in names}
