"""Whether what happened matches what the claim expects."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

METRICS = ("acked", "received", "lost", "duplicated", "reordered", "unexpected", "recovered")


@dataclass(frozen=True)
class Judgement:
    outcome: str  # safe | loss | unavailable | anomalies | inconclusive
    matched: bool
    reason: str


def judge(
    groups: dict[str, dict[str, int]],
    sends: dict[str, int],
    expect: str | None,
    drain_complete: bool = True,
) -> Judgement:
    """The verdict. Without an expectation, any anomaly is a failure."""
    lost = sum(g["lost"] for g in groups.values())
    unexpected = sum(g["unexpected"] for g in groups.values())
    duplicated = sum(g["duplicated"] for g in groups.values())
    reordered = sum(g["reordered"] for g in groups.values())
    acked = sends.get("ok", 0)
    refused = sends.get("fail", 0) + sends.get("info", 0)
    losing = [name for name, g in groups.items() if g["lost"]]
    where = f" in {', '.join(sorted(losing))}" if losing else ""

    if lost and not drain_complete:
        # A message still sitting in a queue is not lost: we did not finish reading.
        return Judgement(
            "inconclusive",
            False,
            f"{lost} acknowledged messages not received, but a queue still held messages "
            "when the drain timed out",
        )
    if expect is None:
        anomalies = {
            "lost": lost,
            "unexpected": unexpected,
            "duplicated": duplicated,
            "reordered": reordered,
        }
        found = {k: v for k, v in anomalies.items() if v}
        if found:
            return Judgement("anomalies", False, ", ".join(f"{v} {k}" for k, v in found.items()))
        return Judgement("safe", True, f"{acked} acknowledged, none lost")
    if acked == 0 and expect != "unavailable":
        return Judgement("inconclusive", False, "no message was acknowledged: nothing was tested")
    if unexpected:
        return Judgement("anomalies", False, f"{unexpected} received messages were never sent")
    if expect == "loss":
        if lost:
            return Judgement("loss", True, f"reproduced: {lost} acknowledged messages lost{where}")
        return Judgement("safe", False, f"not reproduced: all {acked} acknowledged were received")
    if expect == "safe":
        if lost:
            return Judgement("loss", False, f"refuted: {lost} acknowledged messages lost{where}")
        return Judgement("safe", True, f"no acknowledged message lost ({acked} acknowledged)")
    if expect == "unavailable":
        if lost:
            return Judgement("loss", False, f"{lost} acknowledged messages lost{where}")
        if refused:
            return Judgement(
                "unavailable", True, f"{refused} sends refused or unknown, none acknowledged lost"
            )
        return Judgement("safe", False, "not reproduced: every send was acknowledged")
    raise ValueError(f"unknown expectation {expect!r}")


def summary_lines(verdict: dict[str, Any]) -> list[str]:
    """A short human summary of a verdict.json."""
    lines = [
        f"verdict: {verdict['outcome']} ({'matches' if verdict['matched'] else 'does not match'}"
        f" the expectation {verdict.get('expect') or 'none'}): {verdict['reason']}",
        "sends: " + ", ".join(f"{k} {v}" for k, v in sorted(verdict["sends"].items())),
    ]
    if verdict.get("cluster_recovered") is False:
        lines.append("warning: the cluster did not reunite within the recovery timeout")
    if verdict.get("drain_complete") is False:
        lines.append("warning: the drain could not confirm every queue empty")
    if window := verdict.get("refused_window"):
        lines.append(f"sends refused or unknown over {window['seconds']:.1f} s")
    for name, g in sorted(verdict["groups"].items()):
        lines.append(f"group {name}: " + ", ".join(f"{m} {g[m]}" for m in METRICS))
    if verdict.get("tier") == "kafka-mock":
        lines.append("tier: kafka-mock (librdkafka's mock cluster): proves the harness, not Kafka")
    if verdict.get("truncated_lines"):
        lines.append(f"truncated last lines skipped: {len(verdict['truncated_lines'])}")
    return lines
