"""The history contract: one JSON object per line, one file per process.

Other tools read these files, so the field set is fixed here and nowhere else.
Every event is written and flushed as it happens, so a process killed mid-run loses
nothing it had already logged.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Literal

EventType = Literal["invoke", "ok", "fail", "info"]
System = Literal["rabbitmq", "kafka"]

FIELDS: tuple[str, ...] = (
    "time",
    "process",
    "type",
    "f",
    "system",
    "stream",
    "group",
    "producer",
    "seq",
    "msg_id",
    "partition",
    "offset",
    "node",
    "error",
    "value",
    "redelivered",
)
EVENT_TYPES: frozenset[str] = frozenset({"invoke", "ok", "fail", "info"})
_FIELD_SET = frozenset(FIELDS)
_EMPTY_EVENT: dict[str, Any] = dict.fromkeys(FIELDS)
NEMESIS_PROCESS = "nemesis"
# Kafka runs: leader and ISR as clients' metadata showed them (systems.kafka.watch).
WATCH_PROCESS = "partition-watch"
PARTITION_STATE = "partition-state"
# Kafka runs: the broker coordinating a transactional or group id, as clients' metadata showed it.
COORDINATOR_STATE = "coordinator-state"
# A transactional client is asking its transaction's commit (EndTxn): info, `value.txn` names it.
END_TXN = "end-txn"
# A transactional client's instance initialising (InitProducerId, which bumps the epoch and fences
# every earlier instance of its transactional id): invoke when asked, ok when it returned, info
# when it failed (it may have bumped the epoch all the same); `value.transactional_id`.
INIT_TXN = "init-txn"
# Share groups (KIP-932), per record a share consumer got: `share-acquire` ok when poll() returned
# it to the consumer (`value.delivery_count` as the client exposes it, null where it does not;
# `value.client`); `share-ack` invoke when the consumer acknowledged it (`value.outcome`: accept,
# release or reject), then ok (the broker confirmed it), fail (refused: `error`) or info
# (unknown). Each names its record by stream (topic), group (the share group), partition and
# offset. A lock's expiry is no event: the checker infers it (checkers.share_groups).
SHARE_ACQUIRE = "share-acquire"
SHARE_ACK = "share-ack"
SHARE_OUTCOMES = ("accept", "release", "reject")
# The error of a record whose transaction its producer aborted on purpose (f: send, type: fail):
# neither acknowledged nor refused, so no count of refusals or unavailability takes it.
PLANNED_ABORT = "ABORTED: the producer aborted its transaction"
# A nemesis step's invoke: when the schedule set it (Unix time) and how late it began (seconds);
# what the step did is the rest of its value.
SCHEDULE_KEYS = ("scheduled", "lag")


def event_value(raw: Any) -> dict[str, Any]:
    """An event's `value` as an object, whether read back as JSON text (the checker's reader
    keeps it a string) or still a dict; anything else is empty."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    return raw if isinstance(raw, dict) else {}


_ENCODE = json.JSONEncoder(separators=(",", ":"), default=str).encode


def msg_id(producer: str, seq: int) -> str:
    return f"{producer}:{seq}"


def encode_body(producer: str, seq: int, size: int = 0) -> bytes:
    """The message body every workload sends: producer id and sequence number, padded to at
    least `size` bytes (a backlog that takes a mirror seconds to synchronise needs bulk)."""
    body = {"producer": producer, "seq": seq}
    plain = json.dumps(body, separators=(",", ":")).encode()
    if size <= len(plain):
        return plain
    pad = size - len(plain) - len(',"pad":""')
    return json.dumps(body | {"pad": "." * max(pad, 0)}, separators=(",", ":")).encode()


def decode_body(body: bytes) -> tuple[str | None, int | None]:
    """(producer, seq) from a body, or (None, None) for a body we did not write."""
    try:
        data = json.loads(body)
        producer, seq = data["producer"], data["seq"]
        if isinstance(producer, str) and isinstance(seq, int):
            return producer, seq
    except (ValueError, KeyError, TypeError):
        pass
    return None, None


def last_seq_sent(history_dir: Path, producer: str) -> int:
    """The highest sequence number a send of `producer` began with in the histories its
    instances wrote so far (`producer.jsonl`, `producer.2.jsonl`, ...), 0 for none: where a
    restarted instance goes on. Read while the run goes on, so before they are packed."""
    highest = 0
    for path in sorted(history_dir.glob(f"{producer}*.jsonl")):
        if path.stem != producer and not path.stem.startswith(f"{producer}."):
            continue
        with path.open(encoding="utf-8") as f:
            for line in f:
                if '"send"' not in line or '"invoke"' not in line:
                    continue  # cheap: most lines are not a send's invoke
                try:
                    e = json.loads(line)
                except ValueError:
                    continue  # a line cut short by the kill
                if (
                    e.get("f") == "send"
                    and e.get("type") == "invoke"
                    and e.get("producer") == producer
                ):
                    seq = e.get("seq")
                    highest = max(highest, seq if isinstance(seq, int) else 0)
    return highest


class HistoryWriter:
    """Appends events for one process to `<history_dir>/<process>.jsonl`.

    A line that cannot be written (a full disk) raises OSError, so a client that can no longer
    record stops; with `keep_going` (the harness's own nemesis) it is remembered in `failed`
    instead, and the fault or its heal goes ahead: a heal must never wait for its record.
    """

    def __init__(
        self, history_dir: Path, process: str, system: System, keep_going: bool = False
    ) -> None:
        history_dir.mkdir(parents=True, exist_ok=True)
        self.path = history_dir / f"{process}.jsonl"
        self.process = process
        self.system = system
        self.keep_going = keep_going
        self.failed: OSError | None = None  # the first line that could not be written
        # One write(2) per line, with O_APPEND: a line is in the file (the kernel's) once
        # write returns, whatever becomes of the process after; no buffer of ours holds any.
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        # Publishers write from I/O callbacks and timers; one lock keeps lines whole.
        self._lock = threading.Lock()
        self._scheduled: float | None = None  # when the next invoke was scheduled (a step)

    def schedule_next_invoke(self, scheduled: float | None) -> None:
        """The next invoke is a nemesis step the schedule set for `scheduled` (Unix time): its
        value says when (`scheduled`) and how late it began (`lag`, seconds). None: no step is
        pending (one that failed before its fault began leaves nothing for the next)."""
        self._scheduled = scheduled

    def write(self, type: EventType, f: str, **fields: Any) -> dict[str, Any]:
        # Every send and receive goes through here (two lines per message): kept lean, as
        # `make bench-clients` measures.
        if not fields.keys() <= _FIELD_SET:
            raise ValueError(f"not history fields: {sorted(fields.keys() - _FIELD_SET)}")
        event = {
            **_EMPTY_EVENT,
            "time": time.time(),
            "process": self.process,
            "type": type,
            "f": f,
            "system": self.system,
            **fields,
        }
        if event["producer"] is not None and event["seq"] is not None and event["msg_id"] is None:
            event["msg_id"] = msg_id(event["producer"], event["seq"])
        if self._scheduled is not None and type == "invoke":
            lag = round(event["time"] - self._scheduled, 3)
            scheduled = dict(zip(SCHEDULE_KEYS, (self._scheduled, lag), strict=True))
            event["value"] = {**(event["value"] or {}), **scheduled}
            self._scheduled = None
        data = (_ENCODE(event) + "\n").encode()
        with self._lock:
            if self.failed is not None:  # after a line cut short, nothing more: no torn middle
                return event
            try:
                self._write_all(data)
            except OSError as e:
                self.failed = self.failed or e
                if not self.keep_going:
                    raise
        return event

    def _write_all(self, data: bytes) -> None:
        if self._fd is None:
            raise ValueError(f"{self.path}: written after close")
        while data:  # a short write happens only as the disk fills: the rest, or ENOSPC
            data = data[os.write(self._fd, data) :]

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
