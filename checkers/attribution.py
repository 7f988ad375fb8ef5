"""Which fault did it: lost, duplicated and reordered messages by the nemesis step in effect
when they were acknowledged, and by the node that acknowledged them.

Jepsen draws a timeline; this says which step of it each anomaly belongs to. A step is in
effect from its invoke until the next step's.
"""

from __future__ import annotations

from typing import Any

from checkers.frames import small_frame
from contract.history import SCHEDULE_KEYS, event_value
from faults.registry import is_step

DataFrame = Any  # pyspark.sql.DataFrame; pyspark is imported where a query runs
Column = Any  # pyspark.sql.Column

BEFORE_ANY_FAULT = "before any fault"
NEVER_ACKED = "never acknowledged"
ATTRIBUTED = ("lost", "duplicated", "reordered")


def _F() -> Any:
    from pyspark.sql import functions as F

    return F


def step_label(number: int, f: str, value: str | None, since_start: float) -> str:
    """ "3. start-partition isolate kafka2 at +15.7 s" """
    return f"{number}. {f}{_describe(value)} at +{since_start:.1f} s"


def step_number(label: str) -> int:
    """ "3. start-partition isolate kafka2 at +15.7 s" -> 3; a label of no step -> 0."""
    number = label.split(".", 1)[0]
    return int(number) if number.isdigit() else 0


def _in_time_order(row: Any) -> tuple[str, bool, int, str]:
    """A row of placed_anomalies by group, then its step as the run went (before any fault,
    each step, never acknowledged), then node: the answer's order is the run's, not Spark's."""
    return (row["group"], row["step"] == NEVER_ACKED, step_number(row["step"]), row["node"] or "")


def _describe(value: str | None) -> str:
    v = event_value(value)
    if value and not v:  # not an object: shown as written
        return f" {value}"
    return describe(v)


def describe(v: dict[str, Any]) -> str:
    """What a nemesis step did, from its value: " cut kafka4 -> kafka2,kafka3" """
    words = [str(v["op"])] if "op" in v else []
    for key in ("nodes", "clients"):
        if isinstance(v.get(key), list):
            words.append(",".join(map(str, v[key])))
    if isinstance(v.get("from"), list) and isinstance(v.get("to"), list):
        words.append(f"{','.join(map(str, v['from']))} -> {','.join(map(str, v['to']))}")
    if not words:
        said = (k for k in sorted(v) if k not in SCHEDULE_KEYS)
        words = [f"{k}={v[k]}" for k in said if not isinstance(v[k], (dict, list))]
    return "".join(f" {w}" for w in words)


def fault_steps(nemesis: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The nemesis's steps: each invoke of a fault (leader-placement snapshots are not faults),
    in order; nemesis: its events in order (checkers.control.nemesis_events)."""
    return [e for e in nemesis if e["type"] == "invoke" and is_step(e["f"])]


def steps_frame(spark: Any, nemesis: list[dict[str, Any]], run_start: float) -> Any:
    """(start, end, step) of every fault step; the last one lasts to the end of the run."""
    rows = fault_steps(nemesis)
    out = [
        (
            r["time"],
            rows[i + 1]["time"] if i + 1 < len(rows) else None,
            step_label(i + 1, r["f"], r["value"], r["time"] - run_start),
        )
        for i, r in enumerate(rows)
    ]
    return small_frame(spark, out, "start double, `end` double, step string")


def attribution_frame(
    spark: Any,
    nemesis: list[dict[str, Any]],
    run_start: float,
    summary: Any,
    flagged: dict[str, Any],
) -> Any:
    """(metric, group, step, node, second, count) of the lost, duplicated and reordered
    messages (placed_anomalies; summary: the message table's sent messages)."""
    steps = steps_frame(spark, nemesis, run_start)
    return placed_anomalies(attributed(flagged), acks(summary), steps, run_start)


def attribute(rows: list[Any]) -> dict[str, dict[str, dict[str, dict[str, int]]]]:
    """{metric: {group: {"by_step": {step: n}, "by_node": {node: n}}}} for lost, duplicated
    and reordered, from the collected rows of attribution_frame."""
    out: dict[str, dict[str, dict[str, dict[str, int]]]] = {m: {} for m in ATTRIBUTED}
    for r in sorted(rows, key=_in_time_order):
        g = out[r["metric"]].setdefault(r["group"], {"by_step": {}, "by_node": {}})
        g["by_step"][r["step"]] = g["by_step"].get(r["step"], 0) + r["count"]
        g["by_node"][r["node"]] = g["by_node"].get(r["node"], 0) + r["count"]
    return out


def acks(summary: DataFrame) -> DataFrame:
    """(msg_id, ack_time, node) of every acknowledged message."""
    return summary.filter(_F().col("outcome") == "ok").select("msg_id", "ack_time", "node")


def attributed(flagged: dict[str, DataFrame]) -> DataFrame:
    """(metric, group, msg_id) of the lost, duplicated and reordered messages, in one frame
    (flagged: metric -> (group, msg_id))."""
    F = _F()
    frames = [flagged[m].select(F.lit(m).alias("metric"), "group", "msg_id") for m in ATTRIBUTED]
    out = frames[0]
    for df in frames[1:]:
        out = out.unionByName(df)
    return out


def first_anomalies(flagged: dict[str, DataFrame], summary: DataFrame, limit: int) -> DataFrame:
    """(metric, group, msg_id, invoke_time, ack_time, node) of the first `limit` lost,
    duplicated and reordered messages of each group by their ack time (then msg_id; never
    acknowledged ones last): when each was sent and acknowledged, and by which node."""
    from pyspark.sql import Window

    F = _F()
    times = summary.select("msg_id", "invoke_time", "ack_time", "node")
    order = Window.partitionBy("metric", "group").orderBy(
        F.col("ack_time").asc_nulls_last(), F.col("msg_id")
    )
    return (
        attributed(flagged)
        .join(times, "msg_id", "left")
        .withColumn("n", F.row_number().over(order))
        .filter(F.col("n") <= limit)
        .select("metric", "group", "msg_id", "invoke_time", "ack_time", "node")
    )


def run_second(column: Column, run_start: float) -> Column:
    """The whole second since the run's first event at which `column`'s time falls."""
    F = _F()
    return F.floor(column - F.lit(run_start)).cast("int")


def placed_anomalies(
    flagged: DataFrame, ack_info: DataFrame, steps: DataFrame, run_start: float
) -> DataFrame:
    """(metric, group, step, node, second, count) of flagged (metric, group, msg_id): each
    message tied to the step in effect when it was acknowledged (the last one started at or
    before its ack), to its acking node and to its ack's run second (run_second; None for a
    message never acknowledged). steps: (start, end, step), end None for the last.

    The report's anomalies over time and their attribution to steps are both sums of these
    rows: the messages are joined to their acks once for both."""
    F = _F()
    placed = flagged.join(ack_info, "msg_id", "left")
    during = (F.col("ack_time") >= F.col("start")) & (
        F.col("end").isNull() | (F.col("ack_time") < F.col("end"))
    )
    tied = placed.join(F.broadcast(steps), during, "left")
    never = F.col("ack_time").isNull()
    step = F.when(never, F.lit(NEVER_ACKED)).otherwise(
        F.coalesce(F.col("step"), F.lit(BEFORE_ANY_FAULT))
    )
    node = F.when(never, F.lit(NEVER_ACKED)).otherwise(F.col("node"))
    second = run_second(F.col("ack_time"), run_start)
    return tied.groupBy(
        "metric", "group", step.alias("step"), node.alias("node"), second.alias("second")
    ).count()
