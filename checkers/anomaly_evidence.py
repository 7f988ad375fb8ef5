"""What checkers.explain reads of a run: the anomalies the checker wrote (ids/), what the
history says of those messages (their acknowledgements and reads, a torn transaction's records,
the nemesis's events), and what the brokers hold and logged of them (RUN_DIR/evidence/, read by
checkers.evidence_dumps, and the brokers' logs: truncations and elections)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.evidence_dumps import (
    LeaderChange,
    Record,
    Truncation,
    dump_records,
    log_events,
    metadata_leader_changes,
    text_lines,
    zookeeper_leader_changes,
)
from contract.history import NEMESIS_PROCESS, event_value
from contract.packed import frames, history_paths, is_packed
from contract.rundir import EVIDENCE_INDEX, ZOOKEEPER_TXNS, RunDir

# The evidence's index, as systems.evidence writes it (the checker reads runs, not systems).
# The anomalies explained: the ids file behind each, and whether it names transactions.
ANOMALIES = {"lost": "lost", "duplicated": "duplicated", "aborted read": "aborted_reads"}
TORN = "torn"
_DUMPS_NOT_TOPICS = ("transaction-state", "cluster-metadata", "find-hanging", ZOOKEEPER_TXNS)


@dataclass(frozen=True)
class Ack:
    partition: str
    offset: int | None
    node: str | None
    time: float


@dataclass
class FromHistory:
    """What the history says of the anomalous messages."""

    acks: dict[str, Ack] = field(default_factory=dict)
    reads: dict[str, set[tuple[str, int]]] = field(default_factory=dict)
    txn_records: dict[str, list[str]] = field(default_factory=dict)
    nemesis: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Evidence:
    """What the brokers hold and logged of the anomalous messages."""

    by_msg: dict[str, list[Record]] = field(default_factory=dict)
    by_offset: dict[tuple[str, int], list[Record]] = field(default_factory=dict)
    # (node, partition, producer id) -> the control records, in offset order
    markers: dict[tuple[str, str, int], list[Record]] = field(default_factory=dict)
    truncations: list[Truncation] = field(default_factory=list)
    elections: list[LeaderChange] = field(default_factory=list)
    payloads: bool = False  # whether the dumps printed the records' payloads


def evidence_missing(run: RunDir) -> str | None:
    """Why a run has no evidence to explain anything with, None when it has some."""
    index = run.evidence / EVIDENCE_INDEX
    if not index.exists():
        return "the run kept no evidence of the brokers (evidence/evidence.json is absent)"
    try:
        nodes = json.loads(index.read_text()).get("nodes") or []
    except ValueError:
        return "evidence/evidence.json is not JSON"
    if not any(_topic_dumps(n) for n in nodes):
        return "no node's log dump was kept (a broker whose dumps this checker cannot read)"
    return None


def _topic_dumps(node: dict[str, Any]) -> dict[str, str]:
    dumps = node.get("dumps") or {}
    return {name: path for name, path in dumps.items() if name not in _DUMPS_NOT_TOPICS}


def anomalies_of(ids_dir: Path) -> list[tuple[str, str, str]]:
    """(anomaly, group, id) of every anomaly the checker wrote: msg_ids, or for torn the
    transaction ids."""
    found = []
    for group_dir in sorted(p for p in ids_dir.glob("*") if p.is_dir()):
        for anomaly, name in [*ANOMALIES.items(), (TORN, TORN)]:
            path = group_dir / f"{name}.txt"
            if path.exists():
                found += [(anomaly, group_dir.name, k) for k in path.read_text().split()]
    return found


def _history_lines(path: Path) -> Iterator[bytes]:
    if not is_packed(path):
        with path.open("rb") as fh:
            yield from fh
        return
    for content, _ in frames(path):
        yield from content.splitlines()


def read_history(history_dir: Path, wanted: set[str], txns: set[str]) -> FromHistory:
    """The acknowledgements and reads of the `wanted` messages, the records of the `txns`, and
    the nemesis's events, streamed from the history (plain or packed)."""
    out = FromHistory()
    for path in history_paths(history_dir):
        for raw in _history_lines(path):
            try:
                e = json.loads(raw)
            except ValueError:
                continue  # the checker has said of a malformed line already
            if not isinstance(e, dict):
                continue
            if e.get("process") == NEMESIS_PROCESS:
                out.nemesis.append(e)
                continue
            if e.get("f") != "send" or e.get("type") != "ok":
                _read(out, e, wanted)
                continue
            mid = e.get("msg_id")
            txn = event_value(e.get("value")).get("txn")
            if txns and isinstance(txn, str) and txn in txns and isinstance(mid, str):
                out.txn_records.setdefault(txn, []).append(mid)
                wanted.add(mid)
            if mid in wanted:
                partition = f"{e.get('stream')}-{e.get('partition')}"
                out.acks[mid] = Ack(partition, e.get("offset"), e.get("node"), float(e["time"]))
    return out


def _read(out: FromHistory, e: dict[str, Any], wanted: set[str]) -> None:
    mid = e.get("msg_id")
    if e.get("f") == "receive" and e.get("type") == "ok" and mid in wanted:
        if isinstance(e.get("offset"), int):
            where = (f"{e.get('stream')}-{e.get('partition')}", e["offset"])
            out.reads.setdefault(str(mid), set()).add(where)


def read_evidence(run: RunDir, history: FromHistory, wanted: set[str], txns: bool) -> Evidence:
    """Each node's records of the wanted messages (by payload, or by the offsets the history
    names where the dumps printed none), its control markers when transactions are asked
    about, and the truncations and elections of the partitions involved."""
    out = Evidence()
    offsets = {(a.partition, a.offset) for a in history.acks.values() if a.offset is not None}
    offsets |= {where for reads in history.reads.values() for where in reads}
    nodes = json.loads((run.evidence / EVIDENCE_INDEX).read_text()).get("nodes") or []

    def keep(r: Record) -> bool:
        return (
            r.msg_id in wanted
            or (r.batch.partition, r.offset) in offsets
            or (txns and r.marker is not None)
        )

    for n in nodes:
        node = str(n.get("node"))
        for dump in _topic_dumps(n).values():
            for r in dump_records(node, text_lines(run.evidence / dump), keep):
                out.payloads = out.payloads or r.msg_id is not None
                if r.marker is not None:
                    key = (node, r.batch.partition, r.batch.producer_id)
                    out.markers.setdefault(key, []).append(r)
                    continue
                if r.msg_id is not None:
                    out.by_msg.setdefault(r.msg_id, []).append(r)
                out.by_offset.setdefault((r.batch.partition, r.offset), []).append(r)
        metadata = (n.get("dumps") or {}).get("cluster-metadata")
        if metadata:
            out.elections += metadata_leader_changes(text_lines(run.evidence / metadata))
        zookeeper = (n.get("dumps") or {}).get(ZOOKEEPER_TXNS)
        if zookeeper:
            out.elections += zookeeper_leader_changes(text_lines(run.evidence / zookeeper))
    partitions = {p for p, _ in offsets}
    for n in nodes:
        log = run.logs / f"{n.get('node')}.log"
        if log.exists():
            for event in log_events(str(n.get("node")), text_lines(log), partitions):
                if isinstance(event, Truncation):
                    out.truncations.append(event)
                else:
                    out.elections.append(event)
    for markers in out.markers.values():
        markers.sort(key=lambda r: r.offset)
    # Every node replicates the metadata log: one election, however many copies say it.
    unique = {
        (e.partition, e.leader, e.leader_epoch, e.start_offset is None): e for e in out.elections
    }
    out.elections = sorted(unique.values(), key=lambda e: (e.time or 0.0, e.start_offset is None))
    return out


def holders(ev: Evidence, mid: str, history: FromHistory) -> list[Record]:
    """The records of one message on every replica: by its payload where the dumps printed
    payloads, else at the offsets the history saw it at."""
    if ev.payloads:
        return ev.by_msg.get(mid, [])
    where = set(history.reads.get(mid, set()))
    ack = history.acks.get(mid)
    if ack is not None and ack.offset is not None:
        where.add((ack.partition, ack.offset))
    return [r for w in sorted(where) for r in ev.by_offset.get(w, [])]
