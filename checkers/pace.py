"""How fast each producer sent, beside the rate its scenario asked for.

A producer's rate reached is its sends begun over the seconds from its first send's invoke to
its last one's (the checker's per-producer aggregation, checkers.spark); the rate asked is the
scenario's `rate` of that producer (Kafka's workload.producers, RabbitMQ's workload.publishers;
0: unthrottled, nothing asked). A producer the scenario does not name (an exactly-once copier)
was asked nothing either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Below this share of the rate asked a producer is slow: paced by its own commits or by a
# broker's backpressure, it tests fewer messages inside the fault windows than the scenario
# promises, so a clean verdict says less than its scenario suggests. A fifth of slack leaves
# room for the client's own pacing jitter and a slow start.
SLOW_SHARE = 0.8

# Why a slow producer was slow, where the scenario says: a transactional producer commits each
# transaction before it begins the next, so a commit's round trip paces every record.
COMMITS_ONE_AT_A_TIME = "its transactions commit one at a time"

# The keys with_pace adds to a producer's entry of verdict.json's `producers`: its figures, not
# anomalies counted (checkers.verdict lists those apart).
PACE_KEYS = ("sends_begun", "sending_seconds", "rate_asked", "rate_reached", "slow", "why_slow")


@dataclass(frozen=True)
class Asked:
    """What the scenario asked of one producer."""

    rate: float  # messages per second; 0: as fast as the client sends
    count: int | None  # messages to send; None where the scenario does not say
    transactional: bool


def asked_of(scenario_spec: dict[str, Any]) -> dict[str, Asked]:
    """Per producer id, what the scenario asked of it (Kafka producers, RabbitMQ publishers)."""
    workload = scenario_spec.get("workload") or {}
    clients = [
        *(workload.get("producers") or []),
        *(workload.get("publishers") or []),
    ]
    return {
        c["id"]: Asked(
            rate=float(c.get("rate") or 0.0),
            count=c["count"] if isinstance(c.get("count"), int) else None,
            transactional=c.get("transaction") is not None,
        )
        for c in clients
        if isinstance(c, dict) and isinstance(c.get("id"), str)
    }


def with_pace(
    producers: dict[str, dict[str, Any]],
    sending: dict[str, dict[str, Any]],
    scenario_spec: dict[str, Any],
) -> dict[str, dict[str, Any]]:
    """`producers` (per producer, its anomalies) with each one's pace added (PACE_KEYS), from
    `sending` (per producer: sends_begun, first_invoke, last_invoke) and the scenario."""
    asked = asked_of(scenario_spec)
    out: dict[str, dict[str, Any]] = {}
    for producer, counts in producers.items():
        s = sending.get(producer) or {}
        out[producer] = counts | pace(
            int(s.get("sends_begun") or 0),
            s.get("first_invoke"),
            s.get("last_invoke"),
            asked.get(producer),
        )
    return out


def pace(
    begun: int, first: float | None, last: float | None, asked: Asked | None
) -> dict[str, Any]:
    """One producer's PACE_KEYS. Its rate reached is None when its sends span no time (one send,
    or none). It is slow when it was asked a rate, reached less than SLOW_SHARE of it, and did
    not send its whole count: one that sent all it was asked to is short of nothing."""
    seconds = (last - first) if first is not None and last is not None else 0.0
    reached = begun / seconds if seconds > 0 else None
    rate = asked.rate if asked is not None else None
    finished = asked is not None and asked.count is not None and begun >= asked.count
    slow = bool(rate and reached is not None and reached < SLOW_SHARE * rate and not finished)
    return {
        "sends_begun": begun,
        "sending_seconds": round(seconds, 3),
        "rate_asked": rate,
        "rate_reached": round(reached, 1) if reached is not None else None,
        "slow": slow,
        "why_slow": COMMITS_ONE_AT_A_TIME if slow and asked and asked.transactional else None,
    }


def slow_lines(producers: dict[str, dict[str, Any]]) -> list[str]:
    """ "producer P1 reached 58/s of the 500/s asked (4 060 sends in 70.0 s): its transactions
    commit one at a time" per slow producer; the reason only where it is known."""
    lines = []
    for producer, p in sorted(producers.items()):
        if not p.get("slow"):
            continue
        line = (
            f"producer {producer} reached {per_second(p['rate_reached'])} of the "
            f"{per_second(p['rate_asked'])} asked ({grouped(p['sends_begun'])} sends in "
            f"{p['sending_seconds']:.1f} s)"
        )
        lines.append(line + (f": {p['why_slow']}" if p.get("why_slow") else ""))
    return lines


def per_second(rate: float) -> str:
    """58/s, 2.5/s: whole numbers where a tenth would be noise."""
    return f"{rate:.0f}/s" if rate >= 10 else f"{rate:.1f}".removesuffix(".0") + "/s"


def grouped(n: int) -> str:
    """4 060: digits in threes, as the summary writes counts a person compares."""
    return f"{n:,}".replace(",", " ")
