"""Why each anomalous message is what it is, from the brokers' own evidence (RUN_DIR/evidence/,
read by checkers.evidence_dumps) joined with the history.

For every message a group lost or got twice, and every record of a transaction read as aborted
or seen torn, it says which replicas hold it now (node, offset, and its batch's producer id,
epoch, sequence and leader epoch), the acknowledgement it had, the fault step in effect then,
and its cause:
  lost        the truncation that removed it: a replica's log cut back to an offset at or
              below the one acknowledged, after the acknowledgement, and the leader elected
              before it (the metadata log's, else the broker's own line); or the replicas that
              still hold it (it was never read); else unexplained
  duplicated  the batches holding it at two offsets or more, and what their producer ids,
              epochs and sequences say of the retry the broker did not deduplicate
  aborted read, torn
              the control marker (COMMIT or ABORT) that ended its batch on each replica
A message the evidence does not explain is counted as unexplained, never dropped. Each message
counts once per anomaly, whichever groups saw it (groups read the same acknowledged messages);
explanations.csv has a row per group. What it reads of the run is gathered by
checkers.anomaly_evidence.
"""

from __future__ import annotations

import bisect
import csv
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.anomaly_evidence import (
    TORN,
    Ack,
    Evidence,
    FromHistory,
    anomalies_of,
    evidence_missing,
    holders,
    read_evidence,
    read_history,
)
from checkers.attribution import BEFORE_ANY_FAULT, fault_steps, step_label
from checkers.evidence_dumps import LeaderChange, Record, Truncation
from contract.rundir import RunDir

EXPLANATIONS = "explanations.csv"
UNEXPLAINED = "no replica holds it and no truncation explains it"
NOT_FOUND = "no replica holds it"
SAMPLE_LIMIT = 3
COLUMNS = (
    "group",
    "anomaly",
    "msg_id",
    "explained",
    "cause",
    "node",
    "offset",
    "producer_id",
    "epoch",
    "sequence",
    "leader_epoch",
    "time",
    "ack",
    "step",
    "replicas",
    "evidence",
)


@dataclass
class Explanation:
    anomaly: str
    msg_id: str
    cause: str
    explained: bool
    node: str | None = None
    record: Record | None = None
    time: float | None = None
    line: str = ""
    replicas: list[Record] = field(default_factory=list)
    leader_epoch: int | None = None  # a lost record's: the epoch it was acknowledged in


def explain_lost(
    mid: str, ack: Ack | None, held: list[Record], ev: Evidence, start: float
) -> Explanation:
    if held:
        nodes = ", ".join(sorted({r.batch.node for r in held}))
        return Explanation(
            "lost", mid, f"still held by {nodes}: on a replica's disk, never read", True,
            held[0].batch.node, held[0], replicas=held,
        )  # fmt: skip
    if ack is None or ack.offset is None:
        return Explanation("lost", mid, UNEXPLAINED, False)
    if answered := _answered_as_duplicate(mid, ack, ev):
        return answered
    cut = [
        t
        for t in ev.truncations
        if t.partition == ack.partition
        and t.offset <= ack.offset
        and (t.time is None or t.time >= ack.time)
    ]
    if not cut:
        return Explanation("lost", mid, UNEXPLAINED, False)
    # The acking node's own truncation first: that is where the record was; then the earliest.
    cut.sort(key=lambda t: (t.node != ack.node, t.time or 0.0))
    t = cut[0]
    then = _election_at(ev.elections, ack.partition, ack.time)
    acked_by = ack.node or (f"{then.leader} (the leader then)" if then else "an unrecorded node")
    elected = _elected_before(ev.elections, ack.partition, t)
    cause = (
        f"acknowledged by {acked_by}"
        + (f" in leader epoch {then.leader_epoch}" if then is not None else "")
        + f", truncated on {t.node} at {_since(t.time, start)}"
        + (
            f" after {elected.leader} was elected (leader epoch {elected.leader_epoch}, "
            f"{_since(elected.time, start)})"
            if elected is not None
            else ""
        )
    )
    line = t.line + (f" | {elected.line}" if elected is not None else "")
    epoch = then.leader_epoch if then is not None else None
    return Explanation("lost", mid, cause, True, t.node, None, t.time, line, leader_epoch=epoch)


def _answered_as_duplicate(mid: str, ack: Ack, ev: Evidence) -> Explanation | None:
    """A lost record whose acknowledged offset holds another message of its producer on every
    replica that has the offset: the broker answered its batch with the offsets of that earlier
    batch. A batch that repeats a batch in the log (the same producer id, epoch and sequence
    numbers) is taken for a retry of it: answered with the first one's offsets, not written."""
    assert ack.offset is not None
    there = ev.by_offset.get((ack.partition, ack.offset), [])
    producer = mid.rsplit(":", 1)[0]
    # An earlier batch (written before the ack came back) of an idempotent producer (with
    # sequence numbers): a later one at the offset is what a new leader wrote after a truncation.
    others = [
        r
        for r in there
        if r.msg_id is not None
        and r.msg_id != mid
        and r.batch.base_sequence >= 0
        and r.batch.time is not None
        and r.batch.time <= ack.time
    ]
    if not others or any(
        r.msg_id is not None and r.msg_id.rsplit(":", 1)[0] != producer for r in others
    ):
        return None
    first = others[0]
    b = first.batch
    nodes = ", ".join(sorted({r.batch.node for r in others}))
    cause = (
        f"answered with the offsets of an earlier batch of its producer, {b.partition}@"
        f"{b.base_offset}-{b.last_offset} (producer id {b.producer_id}, epoch "
        f"{b.producer_epoch}, sequences {b.base_sequence}-"
        f"{b.base_sequence + b.last_offset - b.base_offset}) on {nodes}: its own batch, with "
        "the same producer id, epoch and sequence numbers, was taken for a retry of that one "
        "and never written"
    )
    line = f"{ack.partition}@{ack.offset} holds {first.msg_id} (sequence {first.sequence})"
    return Explanation(
        "lost", mid, cause, True, b.node, first, b.time, line, replicas=others,
        leader_epoch=b.leader_epoch,
    )  # fmt: skip


def _since(t: float | None, start: float) -> str:
    return f"+{t - start:.1f} s" if t is not None else "an unknown time"


def _election_at(elections: list[LeaderChange], partition: str, at: float) -> LeaderChange | None:
    """The partition's leadership in effect at a time: the last election before it."""
    before = [e for e in elections if e.partition == partition and (e.time or 0.0) <= at]
    return before[-1] if before else None


def _elected_before(
    elections: list[LeaderChange], partition: str, t: Truncation
) -> LeaderChange | None:
    """The latest election of another node as the partition's leader before the truncation."""
    before = [
        e
        for e in elections
        if e.partition == partition
        and e.leader not in (t.node, "none")
        and (t.time is None or (e.time or 0.0) <= t.time)
    ]
    return before[-1] if before else None


def explain_duplicated(mid: str, held: list[Record]) -> Explanation:
    at: dict[tuple[str, int], Record] = {}
    for r in held:
        at.setdefault((r.batch.partition, r.offset), r)
    if len(at) < 2:
        cause = "the replicas hold it at fewer than two offsets"
        return Explanation("duplicated", mid, cause, False, replicas=held)
    a, b = (at[k] for k in sorted(at)[:2])
    if a.batch.producer_id < 0 or b.batch.producer_id < 0:
        why = "idempotence off: a retried batch written again"
    elif a.batch.producer_id != b.batch.producer_id:
        why = "two producer ids: a new producer's retry, which idempotence cannot deduplicate"
    elif a.batch.producer_epoch != b.batch.producer_epoch:
        why = "a new producer epoch: the retry was not deduplicated against the old epoch's"
    else:
        why = "the same producer id, epoch and sequence: the broker did not deduplicate it"
    cause = f"written twice ({why})"
    line = " | ".join(_batch_words(r) for r in (a, b))
    return Explanation("duplicated", mid, cause, True, a.batch.node, a, a.batch.time, line, held)


def _batch_words(r: Record) -> str:
    b = r.batch
    return (
        f"{b.node} {b.partition}@{r.offset} in batch {b.base_offset}-{b.last_offset} producer "
        f"{b.producer_id} epoch {b.producer_epoch} sequence {r.sequence} leader epoch "
        f"{b.leader_epoch}"
    )


def explain_transactional(anomaly: str, mid: str, held: list[Record], ev: Evidence) -> Explanation:
    if not held:
        return Explanation(anomaly, mid, NOT_FOUND, False)
    ended: dict[str, list[str]] = defaultdict(list)
    lines = []
    for r in held:
        marker = _marker_after(ev, r)
        word = marker.marker if marker is not None else "no marker"
        ended[str(word)].append(r.batch.node)
        where = f"at {marker.offset}" if marker is not None else "yet"
        lines.append(f"{_batch_words(r)}: {word} {where}")
    said = "; ".join(
        f"{word} on {', '.join(sorted(nodes))}" for word, nodes in sorted(ended.items())
    )
    cause = f"its batch ended by {said}"
    return Explanation(
        anomaly, mid, cause, True, held[0].batch.node, held[0], held[0].batch.time,
        " | ".join(lines), held,
    )  # fmt: skip


def _marker_after(ev: Evidence, r: Record) -> Record | None:
    """The control record that ended a transactional batch on its replica: the first of its
    producer's after it in the partition."""
    markers = ev.markers.get((r.batch.node, r.batch.partition, r.batch.producer_id), [])
    i = bisect.bisect_right([m.offset for m in markers], r.batch.last_offset)
    return markers[i] if i < len(markers) else None


def step_at(steps: list[tuple[float, str]], at: float | None) -> str:
    """The fault step in effect at a time: the last one invoked at or before it."""
    if at is None:
        return ""
    label = BEFORE_ANY_FAULT
    for start, name in steps:
        if start <= at:
            label = name
    return label


def explain_run(run: RunDir, run_start: float) -> tuple[dict[str, Any] | None, str | None]:
    """verdict.json's explanations, and RUN_DIR/explanations.csv; (None, why) when the run has
    no evidence to explain with."""
    missing = evidence_missing(run)
    if missing is not None:
        return None, missing
    anomalies = anomalies_of(run.ids)
    txns = {k for anomaly, _, k in anomalies if anomaly == TORN}
    wanted = {k for anomaly, _, k in anomalies if anomaly != TORN}
    history = read_history(run.history, wanted, txns) if anomalies else FromHistory()
    tx = any(a in (TORN, "aborted read") for a, _, _ in anomalies)
    ev = read_evidence(run, history, wanted, tx) if anomalies else Evidence()
    steps = _steps(history.nemesis, run_start)
    explained: dict[tuple[str, str], Explanation] = {}
    rows = []
    for anomaly, group, key in anomalies:
        ids = history.txn_records.get(key, []) if anomaly == TORN else [key]
        for mid in ids:
            e = explained.get((anomaly, mid))
            if e is None:
                e = explained[(anomaly, mid)] = _explain(anomaly, mid, history, ev, run_start)
            rows.append(_row(group, e, history.acks.get(mid), steps, run_start))
        if anomaly == TORN and not ids:
            e = Explanation(TORN, key, "the history names none of its records", False)
            explained[(anomaly, key)] = e
            rows.append(_row(group, e, None, steps, run_start))
    _write_csv(run.path / EXPLANATIONS, rows)
    return summary_of(list(explained.values()), history, steps), None


def _explain(anomaly: str, mid: str, h: FromHistory, ev: Evidence, start: float) -> Explanation:
    held = holders(ev, mid, h)
    if anomaly == "lost":
        return explain_lost(mid, h.acks.get(mid), held, ev, start)
    if anomaly == "duplicated":
        return explain_duplicated(mid, held)
    ack = h.acks.get(mid)
    if not held and ack is not None and ack.offset is not None:
        # A record a torn transaction's readers missed and no replica holds: lost the same way.
        answered = _answered_as_duplicate(mid, ack, ev)
        if answered is not None:
            answered.anomaly = anomaly
            return answered
    return explain_transactional(anomaly, mid, held, ev)


def _steps(nemesis: list[dict[str, Any]], run_start: float) -> list[tuple[float, str]]:
    """(start, label) of each fault step, labelled as checkers.attribution labels them."""
    events = [
        {
            "time": float(e["time"]),
            "type": e.get("type"),
            "f": e.get("f"),
            "value": json.dumps(e["value"]) if isinstance(e.get("value"), dict) else e.get("value"),
        }
        for e in sorted(nemesis, key=lambda e: float(e["time"]))
    ]
    return [
        (s["time"], step_label(i + 1, s["f"], s["value"], s["time"] - run_start))
        for i, s in enumerate(fault_steps(events))
    ]


def _row(
    group: str, e: Explanation, ack: Ack | None, steps: list[tuple[float, str]], start: float
) -> dict[str, Any]:
    r, b = e.record, (e.record.batch if e.record is not None else None)
    return {
        "group": group,
        "anomaly": e.anomaly,
        "msg_id": e.msg_id,
        "explained": e.explained,
        "cause": e.cause,
        "node": e.node or "",
        # A record no replica holds is shown where it was acknowledged.
        "offset": r.offset if r is not None else (ack.offset if ack is not None else ""),
        "producer_id": b.producer_id if b is not None else "",
        "epoch": b.producer_epoch if b is not None else "",
        "sequence": r.sequence if r is not None else "",
        "leader_epoch": b.leader_epoch if b is not None else _blank(e.leader_epoch),
        "time": f"{e.time - start:.3f}" if e.time is not None else "",
        "ack": _ack_words(ack) if ack is not None else "",
        "step": step_at(steps, ack.time if ack is not None else None),
        "replicas": " ".join(f"{x.batch.node}@{x.offset}" for x in e.replicas),
        "evidence": e.line,
    }


def _blank(value: int | None) -> int | str:
    return "" if value is None else value


def _ack_words(ack: Ack) -> str:
    return f"{ack.partition}@{ack.offset}" + (f" by {ack.node}" if ack.node else "")


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def summary_of(
    explanations: list[Explanation], history: FromHistory, steps: list[tuple[float, str]]
) -> dict[str, Any]:
    """Counts of the messages explained and not, grouped by anomaly and cause, most first,
    each with samples."""
    counts: Counter[tuple[str, str, bool]] = Counter()
    samples: dict[tuple[str, str, bool], list[str]] = defaultdict(list)
    for e in explanations:
        key = (e.anomaly, e.cause, e.explained)
        counts[key] += 1
        if len(samples[key]) < SAMPLE_LIMIT:
            ack = history.acks.get(e.msg_id)
            said = e.msg_id + (f" acknowledged at {_ack_words(ack)}" if ack else "")
            if ack is not None and steps:
                said += f" during {step_at(steps, ack.time)}"
            if e.replicas:
                said += " held at " + ", ".join(f"{r.batch.node}@{r.offset}" for r in e.replicas)
            samples[key].append(said)
    causes = [
        {"anomaly": a, "cause": c, "explained": ok, "count": n, "samples": samples[(a, c, ok)]}
        for (a, c, ok), n in sorted(counts.items(), key=lambda kv: (kv[0][2], -kv[1], kv[0]))
    ]
    explained = sum(1 for e in explanations if e.explained)
    return {
        "messages": len(explanations),
        "explained": explained,
        "unexplained": len(explanations) - explained,
        "file": EXPLANATIONS,
        "causes": causes,
    }


def summary_lines(verdict: dict[str, Any]) -> list[str]:
    """One line for the verdict's summary, when it counted an anomaly: how many anomalous
    messages the brokers' evidence explains and the commonest cause, or why it has none."""
    section = verdict.get("explanations")
    if section is None:
        why = verdict.get("explanations_missing")
        return [f"explanations: none ({why})"] if why and _anomalous(verdict) else []
    if not section["messages"]:
        return []
    top = next((c for c in section["causes"] if c["explained"]), None)
    return [
        f"explanations: {section['explained']} of {section['messages']} anomalous messages "
        f"explained by the brokers' evidence, {section['unexplained']} unexplained"
        + (f"; most: {top['count']} {top['anomaly']}, {top['cause']}" if top else "")
        + f" ({section['file']})"
    ]


def _anomalous(verdict: dict[str, Any]) -> bool:
    groups = (verdict.get("groups") or {}).values()
    txn_groups = ((verdict.get("transactions") or {}).get("groups") or {}).values()
    return any(g.get("lost") or g.get("duplicated") for g in groups) or any(
        g.get("aborted_reads") or g.get("torn") for g in txn_groups
    )
