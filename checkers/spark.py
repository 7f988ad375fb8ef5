"""The PySpark checker: counts lost, duplicated, reordered, unexpected and recovered messages.

What each count means is in checkers.queries, one named query per count; the history is read
by checkers.read and the ids behind the counts are written by checkers.ids.
"""

from __future__ import annotations

import functools
import json
import math
import os
import shutil
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from checkers import queries as q
from checkers import timeline
from checkers.attribution import attribute
from checkers.cycles import check_cycles
from checkers.engine import cancel_all, release
from checkers.frames import in_spark_order, small_frame
from checkers.ids import in_natural_order, write_ids
from checkers.jvm import driver_options
from checkers.messages import MessageTable, message_table
from checkers.packing import history_facts, packing
from checkers.profile import in_phase, phase
from checkers.read import HistoryError, read_history
from checkers.together import together
from checkers.transactions import (
    check_transactions,
    read_committed_processes,
    transaction_event,
    without_aborted_records,
)
from checkers.tuning import CHECKER_CONF
from checkers.verdict import METRICS as METRIC_IDS  # every count has its ids
from checkers.windows import client_pauses, fault_windows, overlap
from contract.cache import cache_root

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
    # When a fault was in effect (checkers.windows), and per producer when its sends were refused
    # or left unknown, and how much of that fell inside those windows.
    fault_windows: list[dict[str, float]] = field(default_factory=list)
    history_span: dict[str, float] = field(default_factory=dict)  # first and last event time
    unavailability: dict[str, Any] = field(default_factory=dict)
    # Per group: gaps of STALL_SECONDS or more in which no send was acknowledged and nothing was
    # delivered to it (a blocked queue), and how much of each fell inside the fault windows.
    stalls: dict[str, Any] = field(default_factory=dict)
    # Second by second, for the report (checkers.timeline): written to timeline.json.
    timeline: dict[str, Any] = field(default_factory=dict)
    # For the coverage (checkers.coverage): the nemesis's events, the partition watch's
    # states, and per fault window the traffic inside it.
    nemesis: list[dict[str, Any]] = field(default_factory=list)
    partition_states: list[dict[str, Any]] = field(default_factory=list)
    window_traffic: list[dict[str, Any]] = field(default_factory=list)
    # Transactional producers' transactions and what read_committed groups saw of them
    # (checkers.transactions); None when no producer was transactional.
    transactions: dict[str, Any] | None = None


def spark_session(
    master: str = "local[*]", history_bytes: int | None = None, archive_to: Path | None = None
) -> Any:
    """The checker's Spark session (an existing one as it is); its driver JVM starts as
    checkers.jvm says for a history of `history_bytes`, or writes the class archive
    `archive_to` when it exits."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise HistoryError("Java is not installed: PySpark needs Java 17 or newer (make setup)")

    # Local mode stays on loopback; for a cluster master the driver binds where Spark's own
    # rules say (SPARK_LOCAL_IP if set, else the host's address), so executors can reach it.
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # The one Python task of a transactional check (checkers.cycles) runs in a worker of
        # this interpreter, which has the checker's packages; PATH's python3 may have none.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    log4j = f"-Dlog4j2.configurationFile=file:{Path(__file__).parent / 'log4j2.properties'}"
    if archive_to is not None:
        jvm = f"-XX:ArchiveClassesAtExit={archive_to}"
    else:
        jvm = driver_options(history_bytes)
    # A master named is a Spark of this process's own: SPARK_REMOTE would make it a Connect
    # one, so the builder does not see it (and the environment keeps it for the children).
    remote = os.environ.pop("SPARK_REMOTE", None)
    try:
        spark = _built(master, f"{log4j} {jvm}".strip())
    finally:
        if remote is not None:
            os.environ["SPARK_REMOTE"] = remote
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _built(master: str, java_options: str) -> Any:
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    settings = {
        "spark.master": master,
        "spark.app.name": "brokerjepsen-checker",
        **CHECKER_CONF,
        "spark.driver.memory": os.environ.get("BJ_CHECKER_MEMORY", "6g"),
        "spark.driver.extraJavaOptions": java_options,
    }
    if SparkContext._active_spark_context is None:
        conf = SparkConf(loadDefaults=False).setAll(list(settings.items()))
        SparkContext(conf=conf, gateway=_quiet_gateway(conf))
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _quiet_gateway(conf: Any) -> Any:
    """The driver JVM, its stderr in jvm_log() rather than on the user's console: the launcher's
    own notes (an incubator module, the shell's log level) are no line of ours. A JVM that
    does not start says why in one line, from that file."""
    from pyspark.java_gateway import launch_gateway

    path = jvm_log()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as log:  # the JVM keeps its own descriptor: ours can close
        try:
            return launch_gateway(conf, popen_kwargs={"stderr": log})
        except Exception as e:  # noqa: BLE001 - PySpark's own error types vary by release
            said = path.read_text(errors="replace").strip().splitlines()
            last = said[-1] if said else (str(e).splitlines() or [type(e).__name__])[0]
            raise HistoryError(f"the checker's JVM did not start: {last} (see {path})") from e


def jvm_log() -> Path:
    """Where the last local checker JVM of this machine wrote its own output."""
    return cache_root() / "checker-jvm.log"


def check_history(
    spark: Any, history_dir: Path, ids_dir: Path, expected_groups: list[str] | None = None
) -> CheckResult:
    """Counts every metric of every group; the ids behind them go to `ids_dir`. Each phase is
    marked for `harness check --profile` (checkers.profile)."""
    with phase("read"):
        history = read_history(spark, history_dir)
    events = history.events
    cached: list[Any] = []
    try:
        with phase("deliveries, facts"):
            receives = _kept(cached, q.deliveries(events))
            facts = history_facts(events)
        groups = sorted(set(facts.groups) | set(expected_groups or []))
        groups_df = small_frame(spark, [(g,) for g in groups], "group string")

        def kept_table() -> tuple[MessageTable, Any, Any]:
            # One aggregation makes a row per message; every per-group count is a filter of it.
            with phase("message table"):
                table = message_table(events, groups, packing(facts))
                table = replace(table, frame=_kept(cached, table.frame))
                # Asked again by attribution and the timeline: each computed once.
                lost = _kept(cached, table.rows("lost"))
                reordered = _kept(cached, q.reordered(table.first_deliveries()))
            return table, lost, reordered

        def kept_positions() -> Any:
            # The log's positions answer its anomalies and the readers' skips.
            with phase("positions"):
                return _kept(cached, q.positions(events))

        def span_and_control() -> tuple[dict[str, Any], bool, list[dict[str, Any]]]:
            with phase("span, control events"):
                from pyspark.sql import functions as F

                any_txn = F.max(transaction_event())
                times = q.run_span(events, transactional=any_txn).collect()[0].asDict()
                span = {"first": times["first"], "last": times["last"]}
                _within_a_day(events, span)
                control = q.control_events(events)
                return span, bool(times["transactional"]), control

        stop = functools.partial(cancel_all, spark)  # a part failed: the others' jobs end
        (table, lost, reordered), positions, (span, transactional, control) = together(
            [kept_table, kept_positions, span_and_control], stop
        )
        summary = table.summary()
        flagged = {"lost": lost, "duplicated": table.rows("duplicated"), "reordered": reordered}
        unseen = q.unseen(table.lost_at(), q.highest_read(receives))
        # Sorted as the ids files are: the table's messages, then the other anomalies.
        ordered = [
            replace(table, frame=in_natural_order(table.frame)).tagged(),
            # Few, mostly none: one sort for both, rather than a job to sample each.
            in_natural_order(_tag(reordered, "reordered").unionByName(_tag(unseen, "unseen"))),
        ]
        nemesis = q.nemesis_events(control)
        windows = fault_windows(nemesis, span["last"] or 0.0)
        states = q.partition_states(control)

        def per_message() -> tuple[dict[str, dict[str, int]], dict[str, Any] | None]:
            # In this order: the ids files first, then the transactions' beside them.
            with phase("ids"):
                counts = write_ids(ordered, METRIC_IDS, groups, ids_dir)
            with phase("transactions"):
                transactions = check_transactions(
                    events,
                    ids_dir,
                    windows,
                    q.coordinator_moves(control),
                    lost,
                    client_pauses(nemesis, span["last"] or 0.0),
                    transactional,
                )
            if transactions is not None:
                with phase("cycles"):
                    transactions["cycles"] = check_cycles(events, ids_dir, transactional)
            return counts, transactions

        (
            (counts, transactions),
            log,
            readers,
            (unavailability, stalls),
            seconds,
            traffic,
            attribution,
            (sends, errors),
            producers,
        ) = together(
            [
                per_message,
                in_phase("log", lambda: _log_anomalies(positions, events)),
                in_phase(
                    "readers",
                    lambda: _reader_anomalies(
                        receives, positions, _committed_view(events, transactional)
                    ),
                ),
                in_phase(
                    "unavailability, stalls",
                    lambda: (
                        _unavailability(cached, summary, windows),
                        _stalls(summary, receives, groups_df, windows),
                    ),
                ),
                in_phase(
                    "timeline",
                    lambda: timeline.build(
                        summary, receives, flagged, nemesis, states, span, windows
                    ),
                ),
                in_phase("window traffic", lambda: _window_traffic(summary, receives, windows)),
                in_phase(
                    "attribution",
                    lambda: attribute(spark, nemesis, span["first"] or 0.0, summary, flagged),
                ),
                in_phase("sends, errors", lambda: (_send_counts(summary), _errors(events))),
                in_phase("producers", lambda: _producer_anomalies(events, summary)),
            ],
            stop,
        )
        return CheckResult(
            groups={g: counts[g] for g in groups},
            ids_dir=ids_dir,
            sends=sends,
            truncated_lines=history.truncated_lines,
            history_source=history.source,
            refused_window=_refused_window(unavailability),
            errors=errors,
            placement=_placement(nemesis),
            log=log,
            readers=readers,
            attribution=attribution,
            producers=producers,
            fault_windows=[{"start": a, "end": b, "seconds": round(b - a, 3)} for a, b in windows],
            unavailability=unavailability,
            stalls=stalls,
            history_span=span,
            timeline=seconds,
            nemesis=nemesis,
            partition_states=states,
            window_traffic=traffic,
            transactions=transactions,
        )
    finally:
        for df in cached:
            release(df)


def _tag(flagged: Any, metric: str) -> Any:
    """(group, msg_id) as (group, metric, msg_id)."""
    from pyspark.sql import functions as F

    return flagged.select("group", F.lit(metric).alias("metric"), "msg_id")


def _kept(kept: list[Any], frame: Any) -> Any:
    """A frame many questions ask, computed now and cut from its lineage (added to `kept`, to
    be released at the end): each later question plans from its rows, not again from the
    history's read (analysing and optimising the whole lineage on every action took about a
    sixth of a run-sized check)."""
    frame = frame.localCheckpoint(eager=True)
    kept.append(frame)
    return frame


MAX_SPAN = 86_400.0  # seconds: no run lasts a day; a history that does holds a wrong time


def _within_a_day(events: Any, span: dict[str, Any]) -> None:
    """Raises HistoryError naming the line whose time lies farthest from the history's median
    when the history spans more than MAX_SPAN (the timeline has a row per second), or holds a
    time that is no number (NaN sorts above every number, infinities at the ends)."""
    first, last = span["first"], span["last"]
    if first is None or last - first <= MAX_SPAN:
        return
    (median,) = events.approxQuantile("time", [0.5], 0.01)
    low = math.isfinite(last) and median - first > last - median
    order = events.time.asc() if low else events.time.desc()
    row = events.orderBy(order).select("file", "line", "time").first()
    odd = row["time"]
    how = (
        f"lies {abs(odd - median) / 86_400:.3g} days from the rest of the history"
        if math.isfinite(odd)
        else "is not a time"
    )
    raise HistoryError(
        f"{row['file']}:{row['line']}: time {odd} {how} (a run's history spans less than a day)"
    )


def _send_counts(summary: Any) -> dict[str, int]:
    from pyspark.sql import functions as F

    counts = {"ok": 0, "fail": 0, "info": 0, "invoked": 0}
    rows = summary.groupBy("outcome").agg(
        F.count("*").alias("count"), F.sum(F.col("invoked").cast("int")).alias("invoked")
    )
    for r in rows.collect():
        counts[r["outcome"]] = r["count"]
        counts["invoked"] += r["invoked"] or 0
    return counts


def _refused_window(unavailability: dict[str, Any]) -> dict[str, float] | None:
    """From the first send refused or left unknown to the last one's end, over every producer:
    the span of the unavailable intervals, so that it and they never disagree."""
    if not unavailability:
        return None
    first = min(u["first"] for u in unavailability.values())
    last = max(u["last"] for u in unavailability.values())
    return {"first": first, "last": last, "seconds": round(last - first, 3)}


LONGEST = 10  # unavailable intervals listed per producer, longest first


def _unavailability(
    kept: list[Any], summary: Any, windows: list[tuple[float, float]]
) -> dict[str, Any]:
    """Per producer: how many unavailable intervals, their seconds, the seconds of them inside
    fault windows, and the longest few. Only these figures come back, however many there are."""
    from pyspark.sql import functions as F

    intervals = q.with_fault_overlap(q.unavailable_intervals(summary), windows)
    # Computed once, then asked twice (totals, longest): planned from the history for each
    # question, the intervals took two thirds of this phase's 42 stages. (Asked in one query
    # of both, Spark reused only part of their exchanges: each question keeps other columns.)
    intervals = _kept(kept, intervals.withColumn("seconds", F.col("end") - F.col("start")))
    out = {p: {**totals, "longest": []} for p, totals in _interval_totals(intervals).items()}
    for r in _longest_intervals(intervals):
        out[r["producer"]]["longest"].append(
            {
                "start": r["start"],
                "end": r["end"],
                "seconds": round(r["seconds"], 3),
                "in_fault_seconds": round(r["in_faults"], 3),
                "sends": r["sends"],
                "refused": r["refused"],
                "unknown": r["unknown"],
            }
        )
    return out


def _interval_totals(intervals: Any) -> dict[str, dict[str, Any]]:
    """Per producer, in producer order: its unavailable intervals' count, span and seconds."""
    from pyspark.sql import functions as F

    # Refused or unknown sends in intervals that meet a fault window: the ones a fault can
    # have caused (a publisher's in-flight sends at its own deadline are not).
    in_fault_sends = F.when(F.col("touches_fault"), F.col("refused") + F.col("unknown"))
    rows = (
        intervals.groupBy("producer")
        .agg(
            F.count("*").alias("intervals"),
            F.min("start").alias("first"),
            F.max("end").alias("last"),
            F.sum("seconds").alias("seconds"),
            F.sum("in_faults").alias("in_fault_seconds"),
            F.sum(F.coalesce(in_fault_sends, F.lit(0))).alias("in_fault_sends"),
        )
        .collect()
    )
    return {
        r["producer"]: {
            "intervals": r["intervals"],
            "seconds": round(r["seconds"], 3),
            "in_fault_seconds": round(r["in_fault_seconds"], 3),
            "in_fault_sends": r["in_fault_sends"],
            "first": r["first"],
            "last": r["last"],
        }
        for r in in_spark_order(rows, "producer")
    }


def _longest_intervals(intervals: Any) -> list[Any]:
    """Up to LONGEST unavailable intervals of each producer, by producer, longest first."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    # The ranking is its window's only column, so Spark keeps each task's longest few before
    # the shuffle: a producer's intervals are not one task.
    longest_first = Window.partitionBy("producer").orderBy(F.desc("seconds"), "start")
    ranked = intervals.withColumn("n", F.row_number().over(longest_first))
    return in_spark_order(ranked.filter(F.col("n") <= LONGEST).collect(), "producer", "n")


STALL_SECONDS = 1.0  # under continuous load, a second without progress is a blocked queue


def _window_traffic(
    summary: Any, receives: Any, windows: list[tuple[float, float]]
) -> list[dict[str, Any]]:
    """Per fault window, in order: its traffic (checkers.queries.window_traffic), 0 where it
    saw none."""
    if not windows:
        return []
    rows = q.window_traffic(summary, receives, windows).collect()
    seen = {(r["w_start"], r["w_end"]): r.asDict() for r in rows}
    return [
        {"start": a, "end": b, **{k: seen.get((a, b), {}).get(k) or 0 for k in q.TRAFFIC}}
        for a, b in sorted(windows)
    ]


def _stalls(
    summary: Any, receives: Any, groups: Any, windows: list[tuple[float, float]]
) -> dict[str, Any]:
    """Per group: its stalls (checkers.queries.stalls), their seconds and the seconds inside
    fault windows, and the longest few. Gaps of a second or more are few: they come back."""
    out: dict[str, Any] = {}
    rows = q.stalls(summary, receives, groups, STALL_SECONDS).collect()
    for r in sorted(rows, key=lambda r: (r["group"], -(r["end"] - r["start"]), r["start"])):
        g = out.setdefault(r["group"], {"stalls": 0, "seconds": 0.0, "longest": []})
        seconds = r["end"] - r["start"]
        g["stalls"] += 1
        g["seconds"] = round(g["seconds"] + seconds, 3)
        if len(g["longest"]) < LONGEST:
            g["longest"].append(
                {
                    "start": r["start"],
                    "end": r["end"],
                    "seconds": round(seconds, 3),
                    "in_fault_seconds": round(overlap(r["start"], r["end"], windows), 3),
                }
            )
    return out


def _errors(events: Any) -> dict[str, dict[str, int]]:
    errors: dict[str, dict[str, int]] = {}
    for r in q.client_errors(events).collect():
        errors.setdefault(r["f"], {})[r["name"] or "(no error text)"] = r["count"]
    return errors


def _placement(nemesis: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The nemesis's leader-placement snapshots (f: leaders), in time order."""
    return [
        {"time": e["time"], **json.loads(e["value"])}
        for e in nemesis
        if e["type"] == "ok" and e["f"] == "leaders" and e["value"]
    ]


LOG_SAMPLES = 5


def _log_anomalies(positions: Any, events: Any) -> dict[str, Any]:
    """Counts of the observed log's anomalies, and the first few of each for a person to see.
    Anomalies are mostly none: the duplicates' positions are looked up only when there are
    some, and then only for the few shown."""
    rows = q.log_findings(positions, events, LOG_SAMPLES).collect()
    counts = next(r for r in rows if r["kind"] == "counts")
    inconsistent = in_spark_order(
        (r for r in rows if r["kind"] == "inconsistent_offsets"), "stream", "partition", "offset"
    )
    duplicated = [(r["stream"], r["msg_id"]) for r in rows if r["kind"] == "duplicate_offsets"]
    return {
        "positions": counts["positions"],
        "inconsistent_offsets": counts["inconsistent_offsets"],
        "duplicate_offsets": counts["duplicate_offsets"],
        "samples": {
            "inconsistent_offsets": [
                f"{r['stream']}/{r['partition']}@{r['offset']}: {', '.join(r['msg_ids'])}"
                for r in inconsistent
            ],
            "duplicate_offsets": _duplicate_samples(events, duplicated),
        },
    }


def _duplicate_samples(events: Any, duplicated: list[tuple[str | None, str]]) -> list[str]:
    """Each (stream, msg_id) of `duplicated` as msg_id and the positions the log holds it at,
    in msg_id order."""
    if not duplicated:
        return []
    which = small_frame(events.sparkSession, duplicated, "stream string, msg_id string")
    listed = q.positions_of(events, which).collect()
    return [
        f"{r['msg_id']}: {', '.join(r['at'])}" for r in in_spark_order(listed, "msg_id", "stream")
    ]


def _committed_view(events: Any, transactional: bool) -> tuple[set[str], Any]:
    """With transactions: the read_committed readers, and the positions of the log they may
    see (aborted records left out). Without: nobody, and no positions."""
    if not transactional:
        return set(), None
    return read_committed_processes(events), q.positions(without_aborted_records(events))


def _reader_anomalies(
    receives: Any, positions: Any, committed: tuple[set[str], Any] = (set(), None)
) -> dict[str, dict[str, int]]:
    """Every process that received anything, with 0 where it has no offsets (RabbitMQ). A
    read_committed reader's skips are judged against the log less aborted records."""
    flags = q.read_anomalies(q.consecutive_reads(receives), positions, *committed)
    counted = {"poll_skips": "poll_skip", "nonmonotonic_polls": "nonmonotonic"}
    return _flags_per(receives.select("process"), flags, "process", counted)


def _producer_anomalies(events: Any, summary: Any) -> dict[str, dict[str, int]]:
    flags = q.nonmonotonic_sends(events).select("producer", _true("nonmonotonic"))
    counted = {"nonmonotonic_sends": "nonmonotonic"}
    return _flags_per(q.producers(summary), flags, "producer", counted)


def _flags_per(
    everyone: Any, flags: Any, key: str, counted: dict[str, str]
) -> dict[str, dict[str, int]]:
    """For every `key` of `everyone` (a frame with that column), in key order, how many rows
    of `flags` (`key` and boolean columns) set each flag (count's name -> flag column), 0 where
    none: one union and one grouping for all. A key of `flags` that `everyone` lacks is left
    out."""
    from pyspark.sql import functions as F

    listed = everyone.select(key, _true("listed"), *(_false(c) for c in counted.values()))
    rows = (
        listed.unionByName(flags.select(key, _false("listed"), *counted.values()))
        .groupBy(key)
        .agg(
            F.count_if("listed").alias("listed"),
            *(F.count_if(flag).alias(name) for name, flag in counted.items()),
        )
        .filter(F.col("listed") > 0)
        .collect()
    )
    return {r[key]: {name: r[name] for name in counted} for r in sorted(rows, key=lambda r: r[key])}


def _true(name: str) -> Any:
    from pyspark.sql import functions as F

    return F.lit(True).alias(name)


def _false(name: str) -> Any:
    from pyspark.sql import functions as F

    return F.lit(False).alias(name)
