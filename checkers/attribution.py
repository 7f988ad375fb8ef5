"""Which fault did it: lost, duplicated and reordered messages by the nemesis step in effect
when they were acknowledged, and by the node that acknowledged them.

Jepsen draws a timeline; this says which step of it each anomaly belongs to. A step is in
effect from its invoke until the next step's.
"""

from __future__ import annotations

import json
from typing import Any

from checkers import queries as q


def step_label(number: int, f: str, value: str | None, since_start: float) -> str:
    """ "3. start-partition isolate kafka2 at +15.7 s" """
    return f"{number}. {f}{_describe(value)} at +{since_start:.1f} s"


def _describe(value: str | None) -> str:
    try:
        v = json.loads(value) if value else {}
    except ValueError:
        return f" {value}"
    if not isinstance(v, dict):
        return f" {v}"
    words = [str(v["op"])] if "op" in v else []
    if isinstance(v.get("nodes"), list):
        words.append(",".join(map(str, v["nodes"])))
    if isinstance(v.get("from"), list) and isinstance(v.get("to"), list):
        words.append(f"{','.join(map(str, v['from']))} -> {','.join(map(str, v['to']))}")
    if not words:
        words = [f"{k}={v[k]}" for k in sorted(v) if not isinstance(v[k], (dict, list))]
    return "".join(f" {w}" for w in words)


def steps_frame(spark: Any, events: Any) -> Any:
    """(start, end, step) of every fault step; the last one lasts to the end of the run."""
    from pyspark.sql import functions as F

    rows = q.fault_steps(events).collect()
    started = events.agg(F.min("time")).collect()[0][0] or 0.0
    out = [
        (
            r["time"],
            rows[i + 1]["time"] if i + 1 < len(rows) else None,
            step_label(i + 1, r["f"], r["value"], r["time"] - started),
        )
        for i, r in enumerate(rows)
    ]
    return spark.createDataFrame(out, "start double, `end` double, step string")


def attribute(
    spark: Any, events: Any, flagged: dict[str, Any]
) -> dict[str, dict[str, dict[str, dict[str, int]]]]:
    """{metric: {group: {"by_step": {step: n}, "by_node": {node: n}}}} for lost, duplicated
    and reordered."""
    steps = steps_frame(spark, events)
    ack_info = q.acks(events)
    out: dict[str, dict[str, dict[str, dict[str, int]]]] = {}
    for metric in q.ATTRIBUTED:
        per_group: dict[str, dict[str, dict[str, int]]] = {}
        for r in q.by_step_and_node(flagged[metric], ack_info, steps).collect():
            g = per_group.setdefault(r["group"], {"by_step": {}, "by_node": {}})
            g["by_step"][r["step"]] = g["by_step"].get(r["step"], 0) + r["count"]
            g["by_node"][r["node"]] = g["by_node"].get(r["node"], 0) + r["count"]
        out[metric] = per_group
    return out
