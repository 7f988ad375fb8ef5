"""Synthetic history events for the checker's tests: a send and its outcome, a delivery, and
the history files they make, one a process."""

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
