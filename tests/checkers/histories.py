"""Synthetic history events for the checker's tests: a send and its outcome, a delivery, a
rolling upgrade's nemesis events, and the history files they make, one a process."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from contract.history import FIELDS


def event(process: str, type_: str, f: str, t: float, **kw: Any) -> dict[str, Any]:
    e: dict[str, Any] = dict.fromkeys(FIELDS)
    e.update(time=t, process=process, type=type_, f=f, system="rabbitmq", **kw)
    if e["producer"] is not None and e["seq"] is not None:
        e["msg_id"] = f"{e['producer']}:{e['seq']}"
    return e


def send(producer: str, seq: int, t: float, outcome: str | None) -> list[dict[str, Any]]:
    events = [event(producer, "invoke", "send", t, producer=producer, seq=seq, stream="x")]
    if outcome:
        events.append(
            event(producer, outcome, "send", t + 0.001, producer=producer, seq=seq, stream="x")
        )
    return events


def recv(
    group: str, producer: str, seq: int, t: float, redelivered: bool = False, **kw: Any
) -> dict[str, Any]:
    return event(
        f"c-{group}",
        "ok",
        "receive",
        t,
        producer=producer,
        seq=seq,
        group=group,
        redelivered=redelivered,
        **{"stream": group, **kw},
    )


def write(history: Path, events: list[dict[str, Any]]) -> None:
    history.mkdir(parents=True, exist_ok=True)
    by_process: dict[str, list[str]] = defaultdict(list)
    for e in events:
        by_process[e["process"]].append(json.dumps(e))
    for process, lines in by_process.items():
        (history / f"{process}.jsonl").write_text("\n".join(lines) + "\n")


# A rolling upgrade's releases (checkers.releases).
OLD, NEW = "3.9.2", "4.4.0"


def nemesis_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The nemesis's events as the checker has them (checkers.control.nemesis_events): a line's
    `value` kept as the JSON text it was written as."""
    return [
        {
            "time": e["time"],
            "type": e["type"],
            "f": e["f"],
            "value": None if e["value"] is None else json.dumps(e["value"]),
            "error": e["error"],
        }
        for e in events
        if e["process"] == "nemesis"
    ]


def upgrade(
    node: str, at: float, took: float, outcome: str = "ok", old: str = OLD, new: str = NEW
) -> list[dict[str, Any]]:
    """One node's upgrade as the nemesis writes it: invoke, then ok (with what it waited for),
    fail or info."""
    value = {"nodes": [node], "from": old, "to": new}
    done = value | ({"in_sync": True, "waited_s": took} if outcome == "ok" else {})
    error = "the broker did not come back" if outcome != "ok" else None
    return [
        event("nemesis", "invoke", "upgrade", at, value=value | {"scheduled": at, "lag": 0.0}),
        event("nemesis", outcome, "upgrade", at + took, value=done, error=error),
    ]


def finalize(feature: str, level: str, at: float, levels: dict[str, str]) -> list[dict[str, Any]]:
    """A feature finalized as the nemesis writes it: invoke, then ok a second later with the
    levels the cluster reported."""
    value = {"feature": feature, "level": level}
    return [
        event("nemesis", "invoke", "finalize-feature", at, value=value),
        event("nemesis", "ok", "finalize-feature", at + 1, value=value | {"levels": levels}),
    ]
