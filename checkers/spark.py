"""The PySpark checker: counts lost, duplicated, reordered, unexpected and recovered messages.

Per reader group g, with every acknowledged message of the run expected in every group:
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

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.lines import ROW_SCHEMA, parse_line
from checkers.verdict import METRICS as METRIC_IDS  # every count has its ids
from harness.history import NEMESIS_PROCESS


class HistoryError(Exception):
    """A history that cannot be checked (malformed line, no files); one line for the user."""


@dataclass
class CheckResult:
    groups: dict[str, dict[str, int]]
    ids: dict[str, dict[str, list[str]]]
    sends: dict[str, int]
    truncated_lines: list[str] = field(default_factory=list)
    # When sends were refused or left unknown: the unavailability a claim may promise.
    refused_window: dict[str, float] | None = None
    # Not-ok outcomes by f (send, commit) and error name (the text before the first ":").
    errors: dict[str, dict[str, int]] = field(default_factory=dict)
    # The nemesis's leader-placement snapshots (f: leaders), in time order.
    placement: list[dict[str, Any]] = field(default_factory=list)


def spark_session(master: str = "local[*]") -> Any:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise HistoryError("Java is not installed: PySpark needs Java 17 or newer (make setup)")
    from pyspark.sql import SparkSession

    # Local mode stays on loopback; a cluster master needs the machine's own address.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1" if master.startswith("local") else "")
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


def _line_count(path: Path) -> int:
    count = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            count += chunk.count(b"\n")
    return count


def _ends_cut(path: Path) -> bool:
    """Whether the file's last line has no newline: a write cut off by a crash."""
    size = path.stat().st_size
    if size == 0:
        return False
    with open(path, "rb") as fh:
        fh.seek(size - 1)
        return fh.read(1) != b"\n"


def _natural(msg_id: str) -> tuple[str, int, str]:
    producer, _, seq = msg_id.rpartition(":")
    return (producer, int(seq), "") if seq.isdigit() else (msg_id, -1, msg_id)


def check_history(
    spark: Any, history_dir: Path, expected_groups: list[str] | None = None
) -> CheckResult:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    files = sorted(history_dir.glob("*.jsonl"))
    if not files:
        raise HistoryError(f"{history_dir}: no history files (*.jsonl)")
    sc = spark.sparkContext
    rdds = []
    for path in files:
        name = path.name
        lines = sc.textFile(str(path.resolve())).zipWithIndex()
        rdds.append(lines.map(lambda t, name=name: parse_line(name, t[1], t[0])))
    parsed = sc.union(rdds).filter(lambda r: r[0] != "skip").cache()

    truncated: list[str] = []
    for file, line, reason in sorted(
        parsed.filter(lambda r: r[0] == "bad").map(lambda r: r[1]).collect()
    ):
        path = history_dir / file
        if _ends_cut(path) and line == _line_count(path) + 1:
            truncated.append(f"{file}:{line}")
            continue
        raise HistoryError(f"{path}:{line}: malformed history line ({reason})")

    events = spark.createDataFrame(
        parsed.filter(lambda r: r[0] == "ok").map(lambda r: r[1]), ROW_SCHEMA
    )
    events = events.cache()

    sends = events.filter(F.col("f") == "send")
    invoked = sends.filter(F.col("type") == "invoke").select("msg_id").distinct()
    acked = sends.filter(F.col("type") == "ok").select("msg_id").distinct()
    # A send's outcome: ok wins, then fail, then info; an invoke alone is info.
    rank = (
        F.when(F.col("type") == "ok", 3)
        .when(F.col("type") == "fail", 2)
        .when(F.col("type") == "info", 1)
        .otherwise(0)
    )
    outcome = sends.groupBy("msg_id").agg(F.max(rank).alias("rank"))
    send_counts_rows = (
        outcome.select(
            F.when(F.col("rank") == 3, "ok")
            .when(F.col("rank") == 2, "fail")
            .otherwise("info")
            .alias("outcome")
        )
        .groupBy("outcome")
        .count()
        .collect()
    )
    send_counts = {"ok": 0, "fail": 0, "info": 0}
    send_counts.update({r["outcome"]: r["count"] for r in send_counts_rows})
    send_counts["invoked"] = invoked.count()
    window = (
        sends.filter(F.col("type").isin("fail", "info"))
        .agg(F.min("time").alias("first"), F.max("time").alias("last"))
        .collect()[0]
    )
    refused_window = (
        {
            "first": window["first"],
            "last": window["last"],
            "seconds": round(window["last"] - window["first"], 3),
        }
        if window["first"] is not None
        else None
    )
    not_acked = outcome.filter(F.col("rank") < 3).select("msg_id")

    errors: dict[str, dict[str, int]] = {}
    error_rows = (
        events.filter(F.col("type").isin("fail", "info") & F.col("f").isin("send", "commit"))
        .withColumn("name", F.regexp_extract(F.coalesce(F.col("error"), F.lit("")), r"^([^:]*)", 1))
        .groupBy("f", "name")
        .count()
        .collect()
    )
    for r in error_rows:
        errors.setdefault(r["f"], {})[r["name"] or "(no error text)"] = r["count"]
    placement = [
        {"time": r["time"], **json.loads(r["value"])}
        for r in events.filter(
            (F.col("process") == NEMESIS_PROCESS)
            & (F.col("f") == "leaders")
            & (F.col("type") == "ok")
        )
        .orderBy("time")
        .collect()
        if r["value"]
    ]

    receives = events.filter((F.col("f") == "receive") & (F.col("type") == "ok"))
    receives = receives.withColumn("group", F.coalesce(F.col("group"), F.col("stream")))
    # A body we did not write has no msg_id: give each such delivery its own id.
    receives = receives.withColumn(
        "msg_id",
        F.coalesce(F.col("msg_id"), F.concat(F.lit("?"), F.col("file"), F.lit(":"), F.col("line"))),
    )

    group_names = {r["group"] for r in receives.select("group").distinct().collect()}
    group_names |= set(expected_groups or [])
    groups_df = spark.createDataFrame([(g,) for g in sorted(group_names)], "group string")

    per_msg = receives.groupBy("group", "msg_id").agg(F.count("*").alias("deliveries"))

    order = ["time", "file", "line"]
    first = receives.withColumn(
        "n", F.row_number().over(Window.partitionBy("group", "msg_id").orderBy(*order))
    ).filter(F.col("n") == 1)
    before = (
        Window.partitionBy("group", "producer", "partition")
        .orderBy(*order)
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    reordered = (
        first.withColumn("highest_before", F.max("seq").over(before))
        .filter(F.col("seq") < F.col("highest_before"))
        .select("group", "msg_id")
    )

    flagged = {
        "acked": groups_df.crossJoin(acked),
        "received": per_msg.select("group", "msg_id"),
        "lost": groups_df.crossJoin(acked).join(per_msg, ["group", "msg_id"], "left_anti"),
        "duplicated": per_msg.filter(F.col("deliveries") > 1).select("group", "msg_id"),
        "reordered": reordered,
        "unexpected": per_msg.join(invoked, "msg_id", "left_anti").select("group", "msg_id"),
        "recovered": per_msg.join(not_acked, "msg_id", "inner").select("group", "msg_id"),
    }
    tagged = None
    for metric, df in flagged.items():
        df = df.select("group", "msg_id", F.lit(metric).alias("metric"))
        tagged = df if tagged is None else tagged.unionByName(df)
    assert tagged is not None
    flagged_rows = tagged.collect()

    ids: dict[str, dict[str, list[str]]] = {g: {m: [] for m in METRIC_IDS} for g in group_names}
    for r in flagged_rows:
        ids[r["group"]][r["metric"]].append(r["msg_id"])
    counts: dict[str, dict[str, int]] = {}
    for g in sorted(group_names):
        for m in METRIC_IDS:
            ids[g][m].sort(key=_natural)
        counts[g] = {m: len(ids[g][m]) for m in METRIC_IDS}
    parsed.unpersist()
    events.unpersist()
    return CheckResult(
        groups=counts,
        ids=ids,
        sends=send_counts,
        truncated_lines=truncated,
        refused_window=refused_window,
        errors=errors,
        placement=placement,
    )
