"""The run second by second, for the report's timeline: what the producers got back, what each
group received, when the anomalous messages were acknowledged, and the nemesis's steps.

Like Jepsen's rate and latency graphs, every series is bucketed by whole seconds since the
first event of the history; a send counts in the second its outcome arrived (its first ok for
an acknowledged one), its latency is that outcome's time less its invoke's. Only these few
rows per second leave Spark, so the timeline costs the same for 1M messages as for 1k.
"""

from __future__ import annotations

from typing import Any

from checkers.attribution import ATTRIBUTED, fault_steps, run_second, step_label
from checkers.messages import ABORTED
from contract.history import event_value

LATENCY_QUANTILES = (0.5, 0.99)


def _F() -> Any:
    from pyspark.sql import functions as F

    return F


def send_rates(summary: Any, run_start: float) -> Any:
    """(second, outcome, sends, p50_ms, p99_ms): sends by the second their outcome came back;
    the latency quantiles are of sends with an outcome and an invoke."""
    F = _F()
    done = F.coalesce(F.col("ack_time"), F.col("done_time"))
    latency_ms = (done - F.col("invoke_time")) * 1000.0
    quantiles = F.percentile_approx(latency_ms, list(LATENCY_QUANTILES), 1000)
    return (
        summary.filter(done.isNotNull())
        .groupBy(run_second(done, run_start).alias("second"), "outcome")
        .agg(F.count("*").alias("sends"), quantiles.alias("latency"))
        .select(
            "second",
            "outcome",
            "sends",
            F.col("latency")[0].alias("p50_ms"),
            F.col("latency")[1].alias("p99_ms"),
        )
    )


def delivery_rates(receives: Any, run_start: float) -> Any:
    """(group, second, deliveries): every ok receive, redeliveries included."""
    second = run_second(_F().col("time"), run_start)
    return receives.groupBy("group", second.alias("second")).count()


def anomalies_by_ack_second(placed: list[Any]) -> dict[str, dict[str, list[list[int]]]]:
    """{metric: {group: [[second, count], ...]}}: the lost, duplicated and reordered messages
    by the second each was acknowledged, in time order, from the collected rows of
    checkers.attribution.attribution_frame; never-acknowledged ones have no second and are
    left out."""
    counts: dict[tuple[str, str, int], int] = {}
    for r in placed:
        if r["second"] is not None:
            key = (r["metric"], r["group"], r["second"])
            counts[key] = counts.get(key, 0) + r["count"]
    out: dict[str, dict[str, list[list[int]]]] = {m: {} for m in ATTRIBUTED}
    for (metric, group, second), n in sorted(counts.items()):
        out[metric].setdefault(group, []).append([second, n])
    return out


def steps(nemesis: list[dict[str, Any]], run_start: float, run_end: float) -> list[dict[str, Any]]:
    """Every fault step, from its invoke to the next step's (the last to the run's end), with
    what it did and the nodes its roles resolved to ("leader of p0 = kafka2")."""
    invokes = fault_steps(nemesis)
    out = []
    for i, step in enumerate(invokes):
        end = invokes[i + 1]["time"] if i + 1 < len(invokes) else max(run_end, step["time"])
        out.append(
            {
                "number": i + 1,
                "f": step["f"],
                "label": step_label(i + 1, step["f"], step["value"], step["time"] - run_start),
                "start": round(step["time"] - run_start, 3),
                "end": round(end - run_start, 3),
                "resolved": _resolved_before(nemesis, step),
                "outcome": _outcome_of(nemesis, step),
            }
        )
    return out


def _resolved_before(nemesis: list[dict[str, Any]], step: dict[str, Any]) -> list[str]:
    """The role resolutions the nemesis recorded just before this step's invoke."""
    out: list[str] = []
    for e in nemesis:
        if e["time"] > step["time"]:
            break
        if e["f"] != "resolve":
            continue
        if e["time"] < step["time"] - 5.0:
            continue
        out = _resolution_words(e["value"])
    return out


def _resolution_words(raw: str | None) -> list[str]:
    value = event_value(raw)
    roles, nodes = value.get("roles") or {}, value.get("nodes") or {}
    where = f" of p{value['partition']}" if value.get("partition") is not None else ""
    return [
        f"{slot}: {role}{where} = {','.join(map(str, nodes.get(slot) or []))}"
        for slot, role in sorted(roles.items())
    ]


def _outcome_of(nemesis: list[dict[str, Any]], step: dict[str, Any]) -> str:
    """ok or fail: the first completion of the same f after the invoke; "open" if none."""
    for e in nemesis:
        if e["time"] >= step["time"] and e["f"] == step["f"] and e["type"] in ("ok", "fail"):
            return str(e["type"])
    return "open"


def frames(summary: Any, receives: Any, run_start: float) -> dict[str, Any]:
    """The timeline's series as frames of a few rows per second, by name, for build to read
    once collected (summary: the message table's sent messages)."""
    return {
        "send_rates": send_rates(summary, run_start),
        "delivery_rates": delivery_rates(receives, run_start),
    }


def build(
    rows: dict[str, list[Any]],
    placed: list[Any],
    nemesis: list[dict[str, Any]],
    states: list[dict[str, Any]],
    span: dict[str, Any],
    fault_windows: list[tuple[float, float]],
) -> dict[str, Any]:
    """The timeline.json document (its fields: README, "Reports"), from the collected rows of
    frames and of checkers.attribution.attribution_frame (placed)."""
    run_start, run_end = span["first"] or 0.0, span["last"] or 0.0
    # Every second of the run has a row, so that a second with no outcome reads as zero and
    # breaks the latency line instead of being drawn across.
    last_second = max(0, int(run_end - run_start))
    sends: dict[int, dict[str, Any]] = {
        s: {"second": s, "ok": 0, "fail": 0, "info": 0, ABORTED: 0, "p50_ms": None, "p99_ms": None}
        for s in range(last_second + 1)
    }
    for r in rows["send_rates"]:
        row = sends[min(max(r["second"], 0), last_second)]
        row[r["outcome"]] += r["sends"]
        if r["outcome"] == "ok":
            row["p50_ms"], row["p99_ms"] = _ms(r["p50_ms"]), _ms(r["p99_ms"])
    per_group: dict[str, dict[int, int]] = {}
    for r in rows["delivery_rates"]:
        counts = per_group.setdefault(r["group"], {})
        second = min(max(r["second"], 0), last_second)
        counts[second] = counts.get(second, 0) + r["count"]
    deliveries = {
        group: [[s, counts.get(s, 0)] for s in range(last_second + 1)]
        for group, counts in sorted(per_group.items())
    }
    return {
        "run_start": run_start,
        "seconds": round(run_end - run_start, 3),
        "sends": [sends[s] for s in sorted(sends)],
        "deliveries": deliveries,
        "anomalies_at_ack": anomalies_by_ack_second(placed),
        "steps": steps(nemesis, run_start, run_end),
        "fault_windows": [
            [round(a - run_start, 3), round(b - run_start, 3)] for a, b in fault_windows
        ],
        "partition_states": partition_states(states, run_start),
    }


def partition_states(states: list[dict[str, Any]], run_start: float) -> list[dict[str, Any]]:
    """Each leader/ISR change the partition watch recorded, at its run second (Kafka)."""
    out = []
    for s in states:
        value = event_value(s["value"])
        out.append(
            {
                "at": round(s["time"] - run_start, 3),
                "partition": s["partition"],
                "leader": value.get("leader"),
                "isr": value.get("isr") or [],
                "answered_by": value.get("answered_by"),
            }
        )
    return out


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
