"""The PySpark checker: counts lost, duplicated, reordered, unexpected and recovered messages.

What each count means is in checkers.queries, one named query per count (unavailability and
stalls in checkers.availability, the control events in checkers.control); the history is read
by checkers.read and the ids behind the counts are written by checkers.ids.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from checkers import availability, releases, timeline
from checkers import queries as q
from checkers.attribution import (
    acks,
    attribute,
    attributed,
    attribution_frame,
    first_anomalies,
    placed_anomalies,
)
from checkers.control import (
    control_events,
    control_rows,
    coordinator_moves,
    nemesis_events,
    partition_states,
)
from checkers.cycles import check_cycles
from checkers.engine import (
    ONE_PARTITION_CONF,
    cancel_all,
    in_phase,
    phase,
    release,
    session_conf,
    together,
)
from checkers.frames import collected_together, in_spark_order, small_frame
from checkers.ids import in_natural_order, write_ids
from checkers.messages import MessageTable, message_table
from checkers.packing import HistoryFacts, facts_by_names, facts_of, packing
from checkers.read import History, HistoryError, read_history
from checkers.share_groups import ShareSetup, check_share_groups, share_event
from checkers.transactions import (
    check_transactions,
    read_committed_processes,
    transaction_event,
    without_aborted_records,
)
from checkers.verdict import METRICS as METRIC_IDS  # every count has its ids
from checkers.windows import client_path_spells, client_pauses, fault_windows, overlap

__all__ = ["METRIC_IDS", "CheckResult", "HistoryError", "check_history"]


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
    # Per producer: its sends begun, and its first and last invoke (checkers.pace: its rate).
    sending: dict[str, dict[str, Any]] = field(default_factory=dict)
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
    # A run that upgraded: the workload in each span between two upgrade or finalize-feature
    # events (checkers.releases.span_counts); None for any other run.
    release_counts: dict[str, Any] | None = None
    # What each share group did with its records (checkers.share_groups); None when no share
    # consumer wrote the history.
    share_groups: dict[str, Any] | None = None


def check_history(
    spark: Any,
    history_dir: Path,
    ids_dir: Path,
    expected_groups: list[str] | None = None,
    share: ShareSetup | None = None,
) -> CheckResult:
    """Counts every metric of every group; the ids behind them go to `ids_dir`. Each phase is
    marked for `harness check --profile` (checkers.engine.profile). A history read as one partition
    is checked with tuning.ONE_PARTITION_CONF, the session's own settings put back after. `share`:
    the run's share groups and their settings (checkers.share_groups), judged when the history
    has a share consumer's events or the run declares a share group."""
    with phase("read"):
        history = read_history(spark, history_dir)
    with session_conf(spark, ONE_PARTITION_CONF if history.one_partition else {}):
        return _checked(spark, history, ids_dir, expected_groups, share or ShareSetup())


def _checked(
    spark: Any,
    history: History,
    ids_dir: Path,
    expected_groups: list[str] | None,
    share: ShareSetup,
) -> CheckResult:
    events = history.events
    cached: list[Any] = []
    try:
        with phase("facts, control events"):
            facts, span, (transactional, shared), control = _facts_and_control(events)
        groups = sorted(set(facts.groups) | set(expected_groups or []))
        groups_df = small_frame(spark, [(g,) for g in groups], "group string")

        def kept_table() -> tuple[MessageTable, Any, Any]:
            # One aggregation makes a row per message; every per-group count is a filter of it.
            with phase("message table"):
                table = message_table(events, groups, packing(facts))
                table = replace(table, frame=_kept(cached, table.frame))
                # Asked again by the ids, the timeline and attribution: its window runs once.
                reordered = _kept(cached, q.reordered(table.first_deliveries()))
            return table, table.rows("lost"), reordered

        def kept_positions() -> Any:
            # The log's positions answer its anomalies and the readers' skips.
            with phase("positions"):
                return _kept(cached, q.positions(events))

        def kept_deliveries() -> Any:
            with phase("deliveries"):
                return _kept(cached, q.deliveries(events))

        stop = functools.partial(cancel_all, spark)  # a part failed: the others' jobs end
        (table, lost, reordered), positions, receives = together(
            [kept_table, kept_positions, kept_deliveries], stop
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
        nemesis = nemesis_events(control)
        windows = fault_windows(nemesis, span["last"] or 0.0)
        states = partition_states(control)

        def per_message() -> tuple[dict[str, dict[str, int]], dict[str, Any] | None]:
            # In this order: the ids files first, then the transactions' beside them.
            with phase("ids"):
                counts = write_ids(ordered, METRIC_IDS, groups, ids_dir)
            with phase("transactions"):
                transactions = check_transactions(
                    events,
                    ids_dir,
                    windows,
                    coordinator_moves(control),
                    lost,
                    client_pauses(nemesis, span["last"] or 0.0),
                    transactional,
                    client_path_spells(nemesis, span["last"] or 0.0),
                )
            if transactions is not None:
                with phase("cycles"):
                    transactions["cycles"] = check_cycles(events, ids_dir, transactional)
            return counts, transactions

        def share_groups() -> dict[str, Any] | None:
            if not shared and not share.declared:
                return None
            return check_share_groups(events, ids_dir, nemesis, span["first"] or 0.0, share)

        (
            (counts, transactions),
            log,
            (unavailability, stalls),
            (seconds, traffic, attribution, release_counts),
            (sends, errors, readers, (producers, sending)),
            shared_groups,
        ) = together(
            [
                per_message,
                in_phase("log", lambda: _log_anomalies(positions, events)),
                in_phase(
                    "unavailability, stalls",
                    lambda: _unavailability_and_stalls(summary, receives, groups_df, windows),
                ),
                in_phase(
                    "timeline, window traffic, attribution",
                    lambda: _over_time(
                        spark, summary, receives, flagged, nemesis, states, span, windows
                    ),
                ),
                in_phase(
                    "sends, errors, readers, producers",
                    lambda: _client_counts(
                        events, summary, receives, positions, _committed_view(events, transactional)
                    ),
                ),
                in_phase("share groups", share_groups),
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
            sending=sending,
            fault_windows=[{"start": a, "end": b, "seconds": round(b - a, 3)} for a, b in windows],
            unavailability=unavailability,
            stalls=stalls,
            history_span=span,
            timeline=seconds,
            nemesis=nemesis,
            partition_states=states,
            window_traffic=traffic,
            transactions=transactions,
            release_counts=release_counts,
            share_groups=shared_groups,
        )
    finally:
        for df in cached:
            release(df)


def _facts_and_control(
    events: Any,
) -> tuple[HistoryFacts, dict[str, Any], tuple[bool, bool], list[dict[str, Any]]]:
    """The history's facts (checkers.packing), its first and last time, whether any of it is a
    transaction's and whether any is a share consumer's, and its control events
    (checkers.control.control_rows), in one action."""
    from pyspark.sql import functions as F

    rows = collected_together(
        {
            "facts": facts_by_names(events),
            "span": q.run_span(
                events, transactional=F.max(transaction_event()), shared=F.max(share_event())
            ),
            "control": control_rows(events),
        }
    )
    facts = facts_of(rows["facts"])
    (times,) = rows["span"]
    span = {"first": times["first"], "last": times["last"]}
    _within_a_day(events, span)
    flags = (bool(times["transactional"]), bool(times["shared"]))
    return facts, span, flags, control_events(rows["control"])


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


READER_COUNTS = {"poll_skips": "poll_skip", "nonmonotonic_polls": "nonmonotonic"}
PRODUCER_COUNTS = {"nonmonotonic_sends": "nonmonotonic"}


def _client_counts(
    events: Any, summary: Any, receives: Any, positions: Any, committed: tuple[set[str], Any]
) -> tuple[
    dict[str, int],
    dict[str, dict[str, int]],
    dict[str, Any],
    tuple[dict[str, Any], dict[str, dict[str, Any]]],
]:
    """The sends by outcome, the clients' errors, the readers' and producers' anomalies, and
    each producer's sends begun and their span (checkers.queries.PACE), asked in one action (a
    few rows each)."""
    rows = collected_together(
        {
            "sends": _send_outcomes(summary),
            "errors": q.client_errors(events),
            "readers": _reader_flags(receives, positions, committed),
            "producers": _producer_flags(events, summary),
        }
    )
    return (
        _send_counts(rows["sends"]),
        _errors(rows["errors"]),
        _per_key(rows["readers"], "process", READER_COUNTS),
        (
            _per_key(rows["producers"], "producer", PRODUCER_COUNTS),
            {r["producer"]: {c: r[c] for c in q.PACE} for r in rows["producers"]},
        ),
    )


def _send_outcomes(summary: Any) -> Any:
    """(outcome, count, invoked): the sends of each outcome, and how many of them began."""
    from pyspark.sql import functions as F

    return summary.groupBy("outcome").agg(
        F.count("*").alias("count"), F.sum(F.col("invoked").cast("int")).alias("invoked")
    )


def _send_counts(rows: list[Any]) -> dict[str, int]:
    counts = {"ok": 0, "fail": 0, "info": 0, "invoked": 0}
    for r in rows:
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


def _unavailability_and_stalls(
    summary: Any, receives: Any, groups: Any, windows: list[tuple[float, float]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The producers' unavailability and the groups' stalls, asked in one action: only their
    figures and longest few come back, however many there are."""
    intervals = availability.with_fault_overlap(
        availability.unavailable_intervals(summary), windows
    )
    rows = collected_together(
        {
            "intervals": availability.longest_unavailable(intervals, LONGEST),
            "stalls": availability.stalls(summary, receives, groups, STALL_SECONDS),
        }
    )
    return _unavailability(rows["intervals"]), _stalls(rows["stalls"], windows)


def _unavailability(longest: list[Any]) -> dict[str, Any]:
    """Per producer, in producer order: how many unavailable intervals, their span, their
    seconds, the seconds of them inside fault windows, and the longest few (longest: the rows
    of checkers.availability.longest_unavailable)."""
    out: dict[str, Any] = {}
    for r in in_spark_order(longest, "producer", "n"):
        if r["n"] == 1:
            out[r["producer"]] = {
                "intervals": r["intervals"],
                "seconds": round(r["total_seconds"], 3),
                "in_fault_seconds": round(r["in_fault_seconds"], 3),
                "in_fault_sends": r["in_fault_sends"],
                "first": r["first"],
                "last": r["last"],
                "longest": [],
            }
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


def _over_time(
    spark: Any,
    summary: Any,
    receives: Any,
    flagged: dict[str, Any],
    nemesis: list[dict[str, Any]],
    states: list[dict[str, Any]],
    span: dict[str, Any],
    windows: list[tuple[float, float]],
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any], dict[str, Any] | None]:
    """The timeline (checkers.timeline), each fault window's traffic, which fault step and
    node each anomaly belongs to (checkers.attribution), and for a run that upgraded the
    workload in each span between its release events (checkers.releases), asked in one action:
    a few rows per second, per window, per step and per span."""
    run_start = span["first"] or 0.0
    frames = {
        **timeline.frames(summary, receives, run_start),
        "placed": attribution_frame(spark, nemesis, run_start, summary, flagged),
    }
    if windows:
        frames["traffic"] = availability.window_traffic(summary, receives, windows)
    cut = releases.spans(nemesis, run_start, span["last"] or run_start)
    if cut:
        frames |= _release_frames(spark, summary, receives, flagged, cut, run_start)
    rows = collected_together(frames)
    counted = (
        releases.span_counts(
            cut, rows["release_traffic"], rows["release_placed"], rows["release_anomalies"]
        )
        if cut
        else None
    )
    return (
        timeline.build(rows, rows["placed"], nemesis, states, span, windows),
        _window_traffic(rows.get("traffic", []), windows),
        attribute(rows["placed"]),
        counted,
    )


def _release_frames(
    spark: Any,
    summary: Any,
    receives: Any,
    flagged: dict[str, Any],
    cut: list[tuple[float, float]],
    run_start: float,
) -> dict[str, Any]:
    """The workload in each span between two release events (checkers.releases.spans),
    counted as a fault window's traffic is and with the anomalies placed as at the fault
    steps (each span a step named by its index, the last one open-ended), and the first
    anomalous messages of each group with their send and ack times."""
    last = len(cut) - 1
    steps = small_frame(
        spark,
        [(a, None if i == last else b, str(i)) for i, (a, b) in enumerate(cut)],
        "start double, `end` double, step string",
    )
    return {
        "release_traffic": availability.window_traffic(summary, receives, cut),
        "release_placed": placed_anomalies(attributed(flagged), acks(summary), steps, run_start),
        "release_anomalies": first_anomalies(flagged, summary, releases.LISTED),
    }


def _window_traffic(rows: list[Any], windows: list[tuple[float, float]]) -> list[dict[str, Any]]:
    """Per fault window, in order: its traffic (rows of checkers.availability.window_traffic), 0
    where it saw none."""
    seen = {(r["w_start"], r["w_end"]): r for r in rows}
    none = dict.fromkeys(availability.TRAFFIC, 0)
    return [
        {"start": a, "end": b, **{k: seen.get((a, b), none)[k] or 0 for k in availability.TRAFFIC}}
        for a, b in sorted(windows)
    ]


STALL_SECONDS = 1.0  # under continuous load, a second without progress is a blocked queue


def _stalls(rows: list[Any], windows: list[tuple[float, float]]) -> dict[str, Any]:
    """Per group: its stalls (rows of checkers.availability.stalls: gaps of a second or more are
    few, they all come back), their seconds and the seconds inside fault windows, and the
    longest few."""
    out: dict[str, Any] = {}
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


def _errors(rows: list[Any]) -> dict[str, dict[str, int]]:
    errors: dict[str, dict[str, int]] = {}
    for r in rows:
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
    """Counts of the observed log's anomalies, and the first few of each for a person to see."""
    rows = q.log_findings(positions, events, LOG_SAMPLES).collect()
    counts = next(r for r in rows if r["kind"] == "counts")
    inconsistent = in_spark_order(
        (r for r in rows if r["kind"] == "inconsistent_offsets"), "stream", "partition", "offset"
    )
    duplicated = in_spark_order(
        (r for r in rows if r["kind"] == "duplicate_offsets"), "msg_id", "stream"
    )
    return {
        "positions": counts["positions"],
        "inconsistent_offsets": counts["inconsistent_offsets"],
        "duplicate_offsets": counts["duplicate_offsets"],
        "samples": {
            "inconsistent_offsets": [
                f"{r['stream']}/{r['partition']}@{r['offset']}: {', '.join(r['msg_ids'])}"
                for r in inconsistent
            ],
            "duplicate_offsets": [f"{r['msg_id']}: {', '.join(r['at'])}" for r in duplicated],
        },
    }


def _committed_view(events: Any, transactional: bool) -> tuple[set[str], Any]:
    """With transactions: the read_committed readers, and the positions of the log they may
    see (the records of transactions judged aborted left out, those of unknown outcome no
    read_committed group read among them). Without: nobody, and no positions."""
    if not transactional:
        return set(), None
    return read_committed_processes(events), q.positions(without_aborted_records(events))


def _reader_flags(receives: Any, positions: Any, committed: tuple[set[str], Any]) -> Any:
    """Every process that received anything, with 0 where it has no offsets (RabbitMQ). A
    read_committed reader's skips are judged against the log less aborted records."""
    flags = q.read_anomalies(q.consecutive_reads(receives), positions, *committed)
    return _flags_per(receives.select("process"), flags, "process", READER_COUNTS)


def _producer_flags(events: Any, summary: Any) -> Any:
    flags = q.nonmonotonic_sends(events).select("producer", _true("nonmonotonic"))
    return _flags_per(q.producers(summary), flags, "producer", PRODUCER_COUNTS, q.PACE)


def _flags_per(
    everyone: Any, flags: Any, key: str, counted: dict[str, str], carried: tuple[str, ...] = ()
) -> Any:
    """For every `key` of `everyone` (a frame with that column), how many rows of `flags` (`key`
    and boolean columns) set each flag (count's name -> flag column), 0 where none: one union
    and one grouping for all. A key of `flags` that `everyone` lacks is left out. The `carried`
    columns of `everyone` (one row per key) come along as they are."""
    from pyspark.sql import functions as F

    listed = everyone.select(key, _true("listed"), *carried, *(_false(c) for c in counted.values()))
    return (
        listed.unionByName(
            flags.select(key, _false("listed"), *counted.values()), allowMissingColumns=True
        )
        .groupBy(key)
        .agg(
            F.count_if("listed").alias("listed"),
            *(F.count_if(flag).alias(name) for name, flag in counted.items()),
            *(F.max(c).alias(c) for c in carried),
        )
        .filter(F.col("listed") > 0)
    )


def _per_key(rows: list[Any], key: str, counted: dict[str, str]) -> dict[str, dict[str, int]]:
    """The rows of _flags_per as {key: {count's name: n}}, in key order."""
    return {r[key]: {name: r[name] for name in counted} for r in sorted(rows, key=lambda r: r[key])}


def _true(name: str) -> Any:
    from pyspark.sql import functions as F

    return F.lit(True).alias(name)


def _false(name: str) -> Any:
    from pyspark.sql import functions as F

    return F.lit(False).alias(name)
