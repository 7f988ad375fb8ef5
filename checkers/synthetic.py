"""Synthetic Kafka histories: every anomaly the checker counts, at any size. The server's
warm-up and the JVM's training check (checkers.rehearsal) check one, and so do
`make bench` and the checker's tests.

One producer writes seq 1..n round-robin over three partitions of topic x; two reader groups read
the final log. Planted, at fixed rates: refused sends, retries written twice (duplicate offsets),
tail truncations after which later writes reuse acknowledged offsets (inconsistent offsets and
lost messages), skipped records (holes, poll skips), swapped neighbours (reorders, nonmonotonic
polls) and redeliveries (duplicates). A nemesis cuts and heals along the way, so attribution has
steps to tie anomalies to. Lines are written with the fields of contract.history, as a run would.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import TextIO

from contract.history import FIELDS
from contract.rundir import MANIFEST

PARTITIONS = 3
TOPIC = "x"
GROUPS = ("g1", "g2")
REFUSED_EVERY = 1000  # a send refused (fail, never written)
RETRIED_EVERY = 997  # a send written twice, acknowledged once
TRUNCATE_EVERY = 100_000  # a partition's tail of TRUNCATED acknowledged records is lost
TRUNCATED = 10
SKIP_RATE = 0.001  # a record a reader never sees
SWAP_EVERY = 997  # neighbours a reader gets in the wrong order
SECONDS_PER_LINE = 0.0001
FAULT_STEPS = 6


def _line(**fields: object) -> str:
    """A line as contract.history writes it: every field, nulls included."""
    return json.dumps({**dict.fromkeys(FIELDS), **fields}, separators=(",", ":")) + "\n"


def synth_run(run: Path, messages: int, seed: int = 7) -> Path:
    """`run` as a run directory holding a synthetic history of `messages` sends, made unless it
    is one already (its manifest is written last: a history cut short is made again)."""
    if not (run / MANIFEST).exists():
        shutil.rmtree(run / "history", ignore_errors=True)
        synth(run / "history", messages, seed)
        (run / MANIFEST).write_text(json.dumps({"groups": list(GROUPS)}) + "\n")
    return run


def synth(history: Path, messages: int, seed: int = 7) -> int:
    """Writes a history of `messages` sends into `history`; returns its number of lines."""
    rng = random.Random(seed)
    history.mkdir(parents=True)
    t = 1.7e9
    with open(history / "P.jsonl", "w") as fh:
        log, t, lines = _write_sends(fh, messages, t)
    with open(history / "nemesis.jsonl", "w") as fh:
        lines += _write_nemesis(fh, 1.7e9, t)
    for group in GROUPS:
        with open(history / f"c-{group}.jsonl", "w") as fh:
            t, n = _write_reads(fh, group, log, t, rng)
            lines += n
    return lines


def _write_sends(fh: TextIO, messages: int, t: float) -> tuple[list[list[int]], float, int]:
    """The producer's invokes and outcomes; returns each partition's final log (seq at offset)."""
    log: list[list[int]] = [[] for _ in range(PARTITIONS)]
    common = f'"process":"P","f":"send","system":"kafka","stream":"{TOPIC}","producer":"P"'
    lines = 0
    for seq in range(1, messages + 1):
        p = seq % PARTITIONS
        if seq % TRUNCATE_EVERY == TRUNCATE_EVERY // 2:
            del log[p][-TRUNCATED:]
        t += SECONDS_PER_LINE
        fh.write(_send(common, t, "invoke", seq))
        t += SECONDS_PER_LINE
        if seq % REFUSED_EVERY == REFUSED_EVERY // 2:
            fh.write(_send(common, t, "fail", seq, error='"NOT_ENOUGH_REPLICAS: refused"'))
        else:
            fh.write(_send(common, t, "ok", seq, p, len(log[p])))
            log[p].append(seq)
            if seq % RETRIED_EVERY == 0:
                log[p].append(seq)
        lines += 2
    return log, t, lines


def _send(
    common: str,
    t: float,
    type_: str,
    seq: int,
    partition: int | None = None,
    offset: int | None = None,
    error: str = "null",
) -> str:
    where = "null" if partition is None else partition
    at = "null" if offset is None else offset
    return (
        f'{{"time":{t!r},{common},"type":"{type_}","group":null,"seq":{seq},"msg_id":"P:{seq}",'
        f'"partition":{where},"offset":{at},"node":null,"error":{error},"value":null,'
        f'"redelivered":null}}\n'
    )


def _write_nemesis(fh: TextIO, start: float, end: float) -> int:
    """Cut and heal in turns, evenly over the producer's time."""
    lines = 0
    for i in range(FAULT_STEPS):
        f = "start-partition" if i % 2 == 0 else "stop-partition"
        value: dict = {"op": "isolate", "nodes": [f"kafka{i % 3 + 1}"]} if i % 2 == 0 else {}
        at = start + (end - start) * (i + 1) / (FAULT_STEPS + 1)
        for type_ in ("invoke", "ok"):
            fh.write(_line(time=at, process="nemesis", type=type_, f=f, value=value))
            lines += 1
    return lines


def _write_reads(
    fh: TextIO, group: str, log: list[list[int]], t: float, rng: random.Random
) -> tuple[float, int]:
    """One reader process of `group` reading every partition from 0, in turns of 100 records."""
    process = f"c-{group}"
    reads: list[tuple[int, int, int]] = []  # (partition, offset, seq)
    cursors = [0] * PARTITIONS
    while any(cursors[p] < len(log[p]) for p in range(PARTITIONS)):
        for p in range(PARTITIONS):
            for offset in range(cursors[p], min(cursors[p] + 100, len(log[p]))):
                if rng.random() >= SKIP_RATE:
                    reads.append((p, offset, log[p][offset]))
            cursors[p] = min(cursors[p] + 100, len(log[p]))
    for i in range(0, len(reads) - 1, SWAP_EVERY):
        reads[i], reads[i + 1] = reads[i + 1], reads[i]
    reads += rng.sample(reads, k=len(reads) // 500)  # redelivered after a rebalance
    common = (
        f'"process":"{process}","type":"ok","f":"receive","system":"kafka",'
        f'"stream":"{TOPIC}","group":"{group}","producer":"P"'
    )
    for p, offset, seq in reads:
        t += SECONDS_PER_LINE
        fh.write(
            f'{{"time":{t!r},{common},"seq":{seq},"msg_id":"P:{seq}","partition":{p},'
            f'"offset":{offset},"node":null,"error":null,"value":null,"redelivered":null}}\n'
        )
    return t, len(reads)
