"""Share consumers (KIP-932, "Queues for Kafka"): members of one share group that read a topic
cooperatively, each record acquired by one of them for the group's lock duration and acknowledged
one by one, on confluent-kafka's ShareConsumer or on Kafka's own KafkaShareConsumer of the
release (workloads/kafka/java/ShareConsumer.java, which writes the same history).

The history of a share consumer (contract.history, SHARE_ACQUIRE and SHARE_ACK):
  share-acquire ok      a poll returned the record: `value.delivery_count` (the client's, null
                        when it has none) and `value.client`;
  share-ack invoke      the consumer acknowledged it, `value.outcome` accept, release or reject:
                        explicitly, or (implicit mode) as the next poll, or the close, accepts the
                        last poll's records; then, for the same record, one of
  share-ack ok          the broker confirmed it (the acknowledgement commit callback, no error),
  share-ack fail        it was refused: the broker's error (a lock that had expired: the record
                        is no longer this consumer's) or the client's own refusal,
  share-ack info        unknown: an error after which it may have been applied, or no answer
                        before the consumer closed.
A consumer killed leaves its acknowledgements without a completion: unknown too.

Drain: once asked (SIGUSR1, as a reader is), a consumer leaves when no record came for
`idle_s` (the group's lock duration and a margin, so that a record whose lock expired in another
consumer comes back first), or at its deadline.
"""

from __future__ import annotations

import logging
import random
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import (
    AcknowledgeType,
    IllegalStateException,
    KafkaError,
    KafkaException,
    Message,
    ShareConsumer,
    TopicPartition,
    libversion,
)
from confluent_kafka import version as confluent_version

from contract.history import (
    SHARE_ACK,
    SHARE_ACQUIRE,
    SHARE_OUTCOMES,
    EventType,
    HistoryWriter,
    decode_body,
)
from workloads.kafka.base import client_diagnostics
from workloads.kafka.transactions import JAVA_SLACK

log = logging.getLogger("workloads.kafka.share")

POLL_S = 0.5  # one poll's wait: short, so that the drain and the deadline are seen
CLOSE_TIMEOUT_S = 10.0  # what a close may take (the Java consumer's; the Python commit before it)
ERROR_PAUSE_S = 0.5  # after a poll that raised: no spin while the client refuses
UNANSWERED = "no answer before the consumer closed"

# Errors after which an acknowledgement is known not applied: the record was not this
# consumer's to acknowledge (its lock expired), the broker led no such partition, or it refused
# the request itself. Any other error leaves it unknown. The Java consumer's completionType
# refuses the same (tests/workloads/kafka/test_share.py compares).
_REFUSED = frozenset(
    {
        KafkaError.INVALID_RECORD_STATE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.INVALID_REQUEST,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.SHARE_SESSION_NOT_FOUND,
        KafkaError.INVALID_SHARE_SESSION_EPOCH,
    }
)
# Each of the contract's outcomes (SHARE_OUTCOMES) as the client names it.
_ACK_TYPES = {outcome: getattr(AcknowledgeType, outcome.upper()) for outcome in SHARE_OUTCOMES}


@dataclass(frozen=True)
class ShareConfig:
    process: str
    topic: str
    group: str  # the share group
    deadline: float  # Unix time: the consumer leaves here, drained or not
    client: str = "python"  # or "java": Kafka's own KafkaShareConsumer (ShareConsumer.java)
    acknowledgement: str = "implicit"  # share.acknowledgement.mode: implicit or explicit
    accept: float = 1.0  # explicit: the shares of each outcome, drawn per record
    release: float = 0.0
    reject: float = 0.0
    delay: float = 0.0  # seconds spent on each record before it is acknowledged
    max_poll_records: int = 100
    idle_s: float = 35.0  # draining: how long without a record before the group is idle
    java_version: str = ""  # the java client's kafka-clients release: the cluster's


def draw_outcome(rng: random.Random, cfg: ShareConfig) -> str:
    """One record's outcome, drawn by the shares (an explicit consumer's)."""
    r = rng.random()
    if r < cfg.accept:
        return "accept"
    return "release" if r < cfg.accept + cfg.release else "reject"


def share_settings(cfg: ShareConfig, bootstrap_servers: str) -> dict[str, Any]:
    """Every librdkafka setting the consumer depends on, explicit. The lock duration, delivery
    count limit and where a new group starts are the group's (set by the harness), not a
    client's."""
    return {
        "bootstrap.servers": bootstrap_servers,
        "group.id": cfg.group,
        "client.id": cfg.process,
        "share.acknowledgement.mode": cfg.acknowledgement,
        "max.poll.records": cfg.max_poll_records,
        "log_level": 3,
    } | client_diagnostics()


def share_java_properties(cfg: ShareConfig, bootstrap_servers: str) -> dict[str, str]:
    """The Java consumer's settings: the same keys, and share.acquire.mode record_limit, so that
    max.poll.records bounds a poll (batch_optimized, its default, may return more)."""
    return {
        "bootstrap.servers": bootstrap_servers,
        "group.id": cfg.group,
        "client.id": cfg.process,
        "share.acknowledgement.mode": cfg.acknowledgement,
        "max.poll.records": str(cfg.max_poll_records),
        "share.acquire.mode": "record_limit",
    }


def ack_outcome(err: KafkaError | None) -> tuple[EventType, str | None]:
    """The history type and error text of one acknowledgement's completion."""
    if err is None:
        return "ok", None
    text = f"{err.name()}: {err.str()}"
    return ("fail" if err.code() in _REFUSED else "info"), text


def _error_of(exc: BaseException | None) -> KafkaError | None:
    if exc is None:
        return None
    err = exc.args[0] if exc.args else None
    if isinstance(err, KafkaError):
        return err
    return KafkaError(KafkaError._FAIL, f"{type(exc).__name__}: {exc}")


@dataclass
class _Ack:
    producer: str | None
    seq: int | None
    outcome: str
    delivery_count: int | None


@dataclass
class AckBook:
    """The acknowledgements a consumer asked and has not heard of yet, by partition and offset
    (a record acquired again may be acknowledged again before the first answer: oldest first),
    each completion written as it comes."""

    history: HistoryWriter
    topic: str
    group: str
    pending: dict[tuple[int, int], deque[_Ack]] = field(default_factory=dict)

    def acquired(self, msg: Message, client: str) -> None:
        producer, seq = decode_body(msg.value() or b"")
        value = {"delivery_count": msg.delivery_count(), "client": client}
        self._write("ok", SHARE_ACQUIRE, msg.partition(), msg.offset(), producer, seq, value)

    def invoked(self, msg: Message, outcome: str) -> None:
        """The consumer acknowledged `msg` with `outcome`: written before the call that sends
        it, so that its completion always follows."""
        producer, seq = decode_body(msg.value() or b"")
        ack = _Ack(producer, seq, outcome, msg.delivery_count())
        partition, offset = msg.partition() or 0, msg.offset() or 0
        self.pending.setdefault((partition, offset), deque()).append(ack)
        self._write("invoke", SHARE_ACK, partition, offset, producer, seq, self._value(ack))

    def completed(self, partition: int, offsets: Iterable[int], err: KafkaError | None) -> None:
        """The broker's answer for these offsets of one partition."""
        type_, error = ack_outcome(err)
        for offset in sorted(offsets):
            self._complete(partition, offset, type_, error)

    def refused_locally(self, msg: Message, error: str) -> None:
        """The client refused the acknowledgement itself (the record no longer in flight): it
        was never sent."""
        self._complete(msg.partition() or 0, msg.offset() or 0, "fail", error)

    def on_commit(self, offsets: dict[TopicPartition, set[int]], exc: Any) -> None:
        """confluent-kafka's acknowledgement commit callback."""
        err = _error_of(exc)
        for tp, acked in offsets.items():
            self.completed(tp.partition, acked, err)

    def unanswered(self, why: str = UNANSWERED) -> None:
        """Every acknowledgement still without an answer, unknown."""
        for partition, offset in sorted(self.pending):
            while (partition, offset) in self.pending:
                self._complete(partition, offset, "info", why)

    def _complete(self, partition: int, offset: int, type_: EventType, error: str | None) -> None:
        queue = self.pending.get((partition, offset))
        if not queue:
            log.warning("an answer for %d@%d, never acknowledged", offset, partition)
            return
        ack = queue.popleft()
        if not queue:
            del self.pending[(partition, offset)]
        self._write(
            type_, SHARE_ACK, partition, offset, ack.producer, ack.seq, self._value(ack), error
        )

    @staticmethod
    def _value(ack: _Ack) -> dict[str, Any]:
        return {"outcome": ack.outcome, "delivery_count": ack.delivery_count}

    def _write(
        self,
        type_: EventType,
        f: str,
        partition: int | None,
        offset: int | None,
        producer: str | None,
        seq: int | None,
        value: dict[str, Any],
        error: str | None = None,
    ) -> None:
        self.history.write(
            type_,
            f,
            stream=self.topic,
            group=self.group,
            producer=producer,
            seq=seq,
            partition=partition,
            offset=offset,
            error=error,
            value=value,
        )


def opened_value(cfg: ShareConfig, client: str) -> dict[str, Any]:
    """What the consumer's `open` event says of it: its client and how it acknowledges."""
    return {
        "client": client,
        "share": {
            "acknowledgement": cfg.acknowledgement,
            "outcomes": {"accept": cfg.accept, "release": cfg.release, "reject": cfg.reject},
            "delay": cfg.delay,
            "max_poll_records": cfg.max_poll_records,
        },
    }


class PythonShareConsumer:
    """One share consumer on confluent-kafka's ShareConsumer."""

    def __init__(
        self,
        cfg: ShareConfig,
        bootstrap: str,
        history: HistoryWriter,
        draining: Callable[[], bool],
        consumer: Any = None,  # a test's fake; confluent-kafka's ShareConsumer otherwise
    ) -> None:
        self.cfg, self.draining = cfg, draining
        self.history = history
        self.book = AckBook(history, cfg.topic, cfg.group)
        self.consumer = consumer or ShareConsumer(share_settings(cfg, bootstrap))
        self.rng = random.Random(cfg.process)
        self.explicit = cfg.acknowledgement == "explicit"
        self.last_record = time.monotonic()
        self.previous: list[Message] = []  # implicit: the last poll's, accepted by the next

    def run(self) -> bool:
        """Consumes until drained (asked to drain, and no record for idle_s) or the deadline;
        whether it drained."""
        client = f"confluent-kafka {confluent_version()[0]} (librdkafka {libversion()[0]})"
        value = opened_value(self.cfg, client)
        self.history.write("ok", "open", stream=self.cfg.topic, group=self.cfg.group, value=value)
        self.consumer.set_acknowledgement_commit_callback(self.book.on_commit)
        try:
            self.consumer.subscribe([self.cfg.topic])
            while time.time() < self.cfg.deadline:
                got = self._poll()
                if got:
                    self._process(got)
                elif self.draining() and time.monotonic() - self.last_record >= self.cfg.idle_s:
                    return True
            return False
        finally:
            self._close()

    def _poll(self) -> list[Message]:
        """One poll, after the implicit acknowledgement of the last poll's records it sends."""
        self._accept_previous()
        try:
            msgs = self.consumer.poll(POLL_S)
        except (KafkaException, IllegalStateException) as e:
            log.warning("poll: %s", e)
            time.sleep(ERROR_PAUSE_S)
            return []
        got = []
        for m in msgs:
            if m.error() is None:
                got.append(m)
            else:
                log.info("poll: %s", m.error())
        return got

    def _process(self, msgs: list[Message]) -> None:
        self.last_record = time.monotonic()
        for m in msgs:
            self.book.acquired(m, "python")
        for m in msgs:
            if self.cfg.delay:
                time.sleep(max(0.0, min(self.cfg.delay, self.cfg.deadline - time.time())))
            if self.explicit:
                self._acknowledge(m, draw_outcome(self.rng, self.cfg))
            else:
                self.previous.append(m)
        if self.explicit:
            try:
                self.consumer.commit_async()
            except (KafkaException, IllegalStateException) as e:
                log.warning("commit_async: %s", e)  # the next poll or the close sends them

    def _acknowledge(self, msg: Message, outcome: str) -> None:
        self.book.invoked(msg, outcome)
        try:
            self.consumer.acknowledge(msg, _ACK_TYPES[outcome])
        except (KafkaException, IllegalStateException) as e:
            self.book.refused_locally(msg, f"{type(e).__name__}: {e}")

    def _accept_previous(self) -> None:
        for m in self.previous:
            self.book.invoked(m, "accept")
        self.previous = []

    def _close(self) -> None:
        """The last poll's records accepted by a commit of their own (in implicit mode a commit
        is documented to accept them; a close is not), then the close, which serves the
        callbacks of what was sent; what is still unanswered then is unknown."""
        had_previous = bool(self.previous)
        self._accept_previous()
        if had_previous and not self.explicit:
            try:
                self.consumer.commit_sync(CLOSE_TIMEOUT_S)
            except (KafkaException, IllegalStateException) as e:
                log.warning("commit_sync before close: %s", e)  # their answers stay unknown
        try:
            self.consumer.close()
        except (KafkaException, IllegalStateException, RuntimeError) as e:
            log.warning("close: %s", e)
        self.book.unanswered()


# ---- the Java client ----------------------------------------------------------------------------


def java_argv(cfg: ShareConfig, classpath: str, props: Path, history_path: Path) -> list[str]:
    """The Java consumer's command line (ShareConsumer.java's usage)."""
    from workloads.kafka.java_client import SHARE_CLASS

    return [
        "java",
        "-cp",
        classpath,
        SHARE_CLASS,
        str(props),
        str(history_path),
        cfg.process,
        cfg.topic,
        cfg.group,
        str(cfg.deadline),
        str(cfg.delay),
        str(cfg.idle_s),
        str(cfg.accept),
        str(cfg.release),
        str(cfg.reject),
        cfg.java_version,
    ]


def run_java_share_consumer(
    cfg: ShareConfig,
    bootstrap: str,
    history_path: Path,
    work_dir: Path,
    draining: Callable[[], bool] = lambda: False,
) -> int:
    """Kafka's Java client as this consumer: it writes `history_path` itself; its exit code (0
    drained, 3 the deadline first, as the Python consumer's; java_client.JAVA_CANNOT_START).
    Once `draining()` says so it is sent SIGUSR1, as a Java copier is."""
    from workloads.kafka.java_client import launch

    history_path.parent.mkdir(parents=True, exist_ok=True)
    props = work_dir / f"{cfg.process}.java.properties"
    return launch(
        "the java share consumer",
        cfg.java_version,
        share_java_properties(cfg, bootstrap),
        props,
        lambda classpath: java_argv(cfg, classpath, props, history_path),
        cfg.deadline,
        JAVA_SLACK,
        draining,
    )
