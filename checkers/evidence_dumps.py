"""Reading a Kafka run's own evidence (systems.kafka.evidence): the batches and records of
Kafka's log dumps, the leader changes of its metadata log (or, in ZooKeeper mode, of
ZooKeeper's transaction log), and the truncations and leader changes its brokers logged.

Each reader streams its text a line at a time and keeps only what it is asked about: a run's
dumps hold every record it wrote, on every replica. What a line does not say in the form
expected (a stack trace the dump tool printed, a record of another format) is passed over: the
evidence explains anomalies, and a line it cannot read explains none.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import zstandard

from checkers.broker_errors import epoch_of, without_docker_time
from contract.history import decode_body, msg_id

DUMPING = "Dumping "
BATCH_START = "baseOffset: "
RECORD_START = "| offset: "
# "key: value" pairs of a batch or record line; the payload (JSON) is read apart.
_FIELD = re.compile(r"(\w+): (\S+)")
_MS = 1000.0


@dataclass(frozen=True)
class Batch:
    """One record batch as a replica holds it."""

    node: str
    partition: str
    base_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    leader_epoch: int
    transactional: bool
    control: bool
    time: float | None  # the batch's CreateTime, seconds


@dataclass(frozen=True)
class Record:
    """One record of a batch: its message (from its payload, when the dump printed it) or its
    control marker (COMMIT or ABORT)."""

    batch: Batch
    offset: int
    sequence: int
    msg_id: str | None
    marker: str | None = None


@dataclass(frozen=True)
class LeaderChange:
    """A partition's leader as the metadata log set it, or as a broker logged taking it."""

    time: float | None
    partition: str
    leader: str  # a node name where known, else "broker <id>"; "none" for no leader
    leader_epoch: int | None
    isr: tuple[str, ...] = ()
    start_offset: int | None = None  # a broker's own line: the offset its epoch starts at
    line: str = ""


@dataclass(frozen=True)
class Truncation:
    """A replica's log cut back to `offset`: every record at `offset` or above removed."""

    node: str
    time: float | None
    partition: str
    offset: int
    line: str


def text_lines(path: Path) -> Iterator[str]:
    """The lines of a dump or log, zstd-compressed (`.zst`) or plain, streamed."""
    if path.suffix != ".zst":
        with path.open(errors="replace") as fh:
            yield from (line.rstrip("\n") for line in fh)
        return
    with path.open("rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as src:
        text = io.TextIOWrapper(src, encoding="utf-8", errors="replace")
        yield from (line.rstrip("\n") for line in text)


def _int(fields: dict[str, str], key: str, default: int = -1) -> int:
    try:
        return int(fields[key])
    except (KeyError, ValueError):
        return default


def _ms(value: str | None) -> float | None:
    return int(value) / _MS if value is not None and value.lstrip("-").isdigit() else None


def partition_of_dump(line: str) -> str:
    """ "Dumping /data/kafka1/jepsen-0/00000000000000000000.log" -> "jepsen-0" (older dumps
    name no node: /data/jepsen-0/...)."""
    parts = line.removeprefix(DUMPING).strip().split("/")
    return parts[-2] if len(parts) >= 2 else ""


def _message_of(rest: str) -> str | None:
    """The message id of a record line's payload, None for one we did not write."""
    _, found, payload = rest.partition(" payload: ")
    if not found:
        return None
    producer, seq = decode_body(payload.strip().encode())
    return msg_id(producer, seq) if producer is not None and seq is not None else None


def dump_records(
    node: str, lines: Iterable[str], keep: Callable[[Record], bool] = lambda r: True
) -> Iterator[Record]:
    """The records of one node's dump (DumpLogSegments --deep-iteration, with or without
    --print-data-log), each with its batch, those `keep` accepts."""
    partition = ""
    batch: Batch | None = None
    for line in lines:
        if line.startswith(DUMPING):
            partition, batch = partition_of_dump(line), None
        elif line.startswith(BATCH_START):
            f = dict(_FIELD.findall(line))
            batch = Batch(
                node=node,
                partition=partition,
                base_offset=_int(f, "baseOffset"),
                last_offset=_int(f, "lastOffset"),
                producer_id=_int(f, "producerId"),
                producer_epoch=_int(f, "producerEpoch"),
                base_sequence=_int(f, "baseSequence"),
                leader_epoch=_int(f, "partitionLeaderEpoch"),
                transactional=f.get("isTransactional") == "true",
                control=f.get("isControl") == "true",
                time=_ms(f.get("CreateTime")),
            )
        elif line.startswith(RECORD_START) and batch is not None:
            head, _, _ = line.partition(" payload: ")
            f = dict(_FIELD.findall(head))
            record = Record(
                batch=batch,
                offset=_int(f, "offset"),
                sequence=_int(f, "sequence"),
                msg_id=_message_of(line),
                marker=f.get("endTxnMarker"),
            )
            if keep(record):
                yield record


def metadata_leader_changes(lines: Iterable[str]) -> Iterator[LeaderChange]:
    """Every partition's leader as KRaft's metadata log set it (PARTITION_RECORD, then each
    PARTITION_CHANGE_RECORD that names a leader), with the record's time. The change record
    carries no epoch: KRaft bumps a partition's leader epoch when its leader changes, so the
    epoch is counted from the partition's creation."""
    topics: dict[str, str] = {}
    brokers: dict[int, str] = {}
    epochs: dict[str, int] = {}
    for line in lines:
        if not line.startswith(RECORD_START) or " payload: {" not in line:
            continue
        head, _, payload = line.partition(" payload: ")
        try:
            record = json.loads(payload)
        except ValueError:
            continue
        kind, data = record.get("type"), record.get("data") or {}
        time = _ms(dict(_FIELD.findall(head)).get("CreateTime"))
        if kind == "TOPIC_RECORD":
            topics[data.get("topicId", "")] = str(data.get("name"))
        elif kind == "REGISTER_BROKER_RECORD":
            hosts = [e.get("host") for e in data.get("endPoints") or [] if e.get("host")]
            internal = [h for h in hosts if not str(h)[:1].isdigit()]
            if internal or hosts:
                brokers[int(data.get("brokerId", -1))] = str((internal or hosts)[0])
        elif kind in ("PARTITION_RECORD", "PARTITION_CHANGE_RECORD") and "leader" in data:
            topic = topics.get(data.get("topicId", ""))
            if topic is None:
                continue
            partition = f"{topic}-{data.get('partitionId')}"
            if kind == "PARTITION_RECORD":
                epochs[partition] = int(data.get("leaderEpoch", 0))
            elif partition in epochs:
                epochs[partition] += 1
            yield LeaderChange(
                time=time,
                partition=partition,
                leader=_broker_name(int(data["leader"]), brokers),
                leader_epoch=epochs.get(partition),
                isr=tuple(_broker_name(int(b), brokers) for b in data.get("isr") or []),
                line=line.strip(),
            )


# A ZooKeeper transaction as its TxnLogToolkit prints it: "11/29/26, 8:26:57 AM UTC session
# 0x... cxid 0x1 zxid 0x6 <op>" (Java's short date and medium time in the JVM's locale; JDK 20
# and later put a narrow space before AM/PM). Kafka's controller writes a partition's state in a
# `multi` (a check of /controller_epoch, then the write), which the tool prints with its binary
# length prefixes: "multi check:...;setData:\0\0\0)/brokers/topics/t/partitions/0/state\0\0\0L
# {...}"; a plain write reads "setData /path,{...},1".
_ZK_TXN = re.compile(
    r"^(?P<when>\d{1,2}/\d{1,2}/\d{2}, \d{1,2}:\d{2}:\d{2}[ \u202f][AP]M) (?P<zone>\S+) "
    r"session \S+ cxid \S+ zxid \S+ (?P<rest>.*)$"
)
_ZK_WRITE = re.compile(
    r"(?:create|setData):?[^/]{0,8}"
    r"(?P<path>/brokers/(?:ids/(?P<broker>\d+)|topics/(?P<topic>[^/\x00\s,]+)/partitions/"
    r"(?P<partition>\d+)/state))"
)
_ZK_DATA_WITHIN = 8  # characters between a path and its JSON: a length prefix, or a comma


def _zk_time(when: str, zone: str) -> float | None:
    try:
        at = datetime.strptime(when.replace("\u202f", " "), "%m/%d/%y, %I:%M:%S %p")
    except ValueError:
        return None
    if zone not in ("UTC", "GMT", "Z"):
        return None  # a zone the containers do not run in: no time rather than a wrong one
    return at.replace(tzinfo=UTC).timestamp()


def _zk_writes(rest: str) -> Iterator[tuple[re.Match[str], dict[str, Any]]]:
    """Each write of a broker's registration or a partition's state in one transaction, with
    the znode's JSON (a write whose data is not JSON right after its path is passed over)."""
    for m in _ZK_WRITE.finditer(rest):
        brace = rest.find("{", m.end(), m.end() + _ZK_DATA_WITHIN + 1)
        if brace < 0:
            continue
        try:
            value, _ = json.JSONDecoder().raw_decode(rest, brace)
        except ValueError:
            continue
        if isinstance(value, dict):
            yield m, value


def zookeeper_leader_changes(lines: Iterable[str]) -> Iterator[LeaderChange]:
    """Every partition's leader and ISR as ZooKeeper mode's controller wrote them to the
    partition's state znode, from ZooKeeper's own transaction log (seconds: the tool prints no
    milliseconds). The znode carries the leader epoch itself; a write that changes only the ISR
    is no leader change and is passed over (KRaft's change records name no leader then)."""
    brokers: dict[int, str] = {}
    last: dict[str, tuple[object, object]] = {}
    for line in lines:
        txn = _ZK_TXN.match(line)
        if txn is None:
            continue
        for m, data in _zk_writes(txn["rest"]):
            if m["broker"] is not None:
                if data.get("host"):
                    brokers[int(m["broker"])] = str(data["host"])
                continue
            if "leader" not in data:
                continue
            partition = f"{m['topic']}-{m['partition']}"
            if last.get(partition) == (leader := (data["leader"], data.get("leader_epoch"))):
                continue
            last[partition] = leader
            yield LeaderChange(
                time=_zk_time(txn["when"], txn["zone"]),
                partition=partition,
                leader=_broker_name(int(data["leader"]), brokers),
                leader_epoch=int(data["leader_epoch"]) if "leader_epoch" in data else None,
                isr=tuple(_broker_name(int(b), brokers) for b in data.get("isr") or []),
                line=_printable(line),
            )


def _printable(line: str) -> str:
    """A transaction's line without its binary length prefixes, for the explanations."""
    return "".join(c if c.isprintable() else " " for c in line).strip()


def _broker_name(broker: int, brokers: dict[int, str]) -> str:
    if broker < 0:
        return "none"
    return brokers.get(broker, f"broker {broker}")


# "[UnifiedLog partition=jepsen-0, dir=/var/lib/kafka/data] Truncating to offset 6489"
_LOG_TRUNCATED = re.compile(
    r"\[UnifiedLog partition=(?P<partition>[^,\]]+)[^\]]*\] Truncating to offset (?P<offset>\d+)"
)
# "Truncating partition jepsen-0 with TruncationState(offset=6489, completed=true) due to ..."
_FETCHER_TRUNCATED = re.compile(
    r"Truncating partition (?P<partition>\S+) with TruncationState\(offset=(?P<offset>\d+)"
)
# "[Broker id=1] Leader jepsen-0 with topic id Some(...) starts at leader epoch 1 from offset
# 6489 with partition epoch 1, ..."
_BECAME_LEADER = re.compile(
    r"\] Leader (?P<partition>\S+) with topic id .*? starts at leader epoch (?P<epoch>\d+) "
    r"from offset (?P<offset>\d+)"
)
_LOG_TIME = re.compile(r"^\[(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] ")


def _log_time(line: str, docker_at: float | None) -> float | None:
    if docker_at is not None:
        return docker_at
    m = _LOG_TIME.match(line)
    return epoch_of(m["time"], "%Y-%m-%d %H:%M:%S,%f") if m else None


def log_events(
    node: str, lines: Iterable[str], partitions: set[str] | None = None
) -> Iterator[Truncation | LeaderChange]:
    """A broker's log, as the truncations of its replicas' logs and the leaderships it took,
    of `partitions` (None: every partition). A truncation the replica fetcher decided and the
    log's own line for it are both kept: the fetcher's says why, the log's that it happened
    ("Truncating to N has no effect" lines are neither)."""
    for raw in lines:
        if "Truncating" not in raw and "starts at leader epoch" not in raw:
            continue
        line, docker_at = without_docker_time(raw)
        match = (
            _LOG_TRUNCATED.search(line)
            or _FETCHER_TRUNCATED.search(line)
            or _BECAME_LEADER.search(line)
        )
        if match is None or (partitions is not None and match["partition"] not in partitions):
            continue
        at = _log_time(line, docker_at)
        if match.re is _BECAME_LEADER:
            yield LeaderChange(
                time=at,
                partition=match["partition"],
                leader=node,
                leader_epoch=int(match["epoch"]),
                start_offset=int(match["offset"]),
                line=line.strip(),
            )
        else:
            yield Truncation(node, at, match["partition"], int(match["offset"]), line.strip())
