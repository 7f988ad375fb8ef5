"""The exactly-once copy (consume-transform-produce) on confluent-kafka: copiers in one consumer
group read the input topic read_committed and copy each record, body unchanged, into the same
partition of the output topic, in transactions that also commit the input offsets they consumed
(`send_offsets_to_transaction`). This is the shape of Kafka's own TransactionalMessageCopier and
of every exactly-once stream processor: if it holds, the output holds each input record once.

The history says, for each copier transaction, what it copied and how it ended:
  f: txn   an invoke when the transaction begins and one outcome (ok committed, fail aborted,
           info unknown), `value.txn` its id, as a transactional producer's;
  f: copy  at the transaction's end, one event per record copied, of the transaction's outcome:
           `producer`/`seq` the input record's identity (its body), `stream`/`partition`/
           `offset` where the copy was written in the output topic, and `value.from` where the
           record was read in the input topic.
After an abort the copier rejoins its group, to start again from the last committed offsets:
its aborted copies are written again by a later transaction.

With `client: java` the copier is Kafka's own Java client of the cluster's release
(workloads/kafka/java/TransactionalCopier.java, which writes the same history): on a 4.x cluster
whose transaction.version is 2 it speaks KIP-890's transaction protocol (TV2). After an abort it
stays in its group and seeks back to the group's committed offsets (as Kafka's own
TransactionalMessageCopier does). It is drained as this one is, by SIGUSR1: the Python process
that runs it passes the signal on.
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
    libversion,
)

from contract.history import PLANNED_ABORT, EventType, HistoryWriter, decode_body
from workloads.kafka.base import (
    ProducerConfig,
    TopicNotFound,
    client_diagnostics,
    partitions_of,
)
from workloads.kafka.transactions import (
    JAVA_SLACK,
    TXN_CALL_TIMEOUT,
    Fatal,
    OneInstance,
    TransactionConfig,
    client_failure,
    error_text,
    java_properties,
    transactional_settings,
    until_done,
)

log = logging.getLogger("workloads.kafka.copier")


@dataclass(frozen=True)
class CopierConfig:
    process: str
    input_topic: str
    output_topic: str
    group: str  # the consumer group every copier of the copy shares
    deadline: float  # Unix time: the copier stops here, drained or not
    size: int = 50  # records per transaction, at most
    abort_ratio: float = 0.0  # the share of transactions the copier aborts on purpose
    timeout_ms: int = 60000  # transaction.timeout.ms
    transactional_id: str = ""  # default: the copier's id
    delivery_timeout_ms: int = 30000
    request_timeout_ms: int = 10000
    client: str = "confluent-kafka"  # or "java": Kafka's own client (workloads.kafka.java_client)
    java_version: str = ""  # the java client's kafka-clients release: the cluster's


def _as_producer(cfg: CopierConfig) -> tuple[ProducerConfig, TransactionConfig]:
    """The copier's producer as a transactional producer's configuration."""
    pcfg = ProducerConfig(
        cfg.process,
        cfg.output_topic,
        count=0,
        deadline=cfg.deadline,
        enable_idempotence=True,
        delivery_timeout_ms=cfg.delivery_timeout_ms,
        request_timeout_ms=cfg.request_timeout_ms,
    )
    txn = TransactionConfig(
        size=cfg.size,
        abort_ratio=cfg.abort_ratio,
        timeout_ms=cfg.timeout_ms,
        transactional_id=cfg.transactional_id,
        client=cfg.client,
        java_version=cfg.java_version,
    )
    return pcfg, txn


def copier_producer_settings(cfg: CopierConfig, bootstrap: str) -> dict[str, Any]:
    """The copier's producer: a transactional producer's settings (acks all, idempotent)."""
    return transactional_settings(*_as_producer(cfg), bootstrap)


def copier_consumer_settings(cfg: CopierConfig, bootstrap: str) -> dict[str, Any]:
    """The copier's consumer: a group member that reads committed records only and commits
    nothing itself (its offsets go with its transactions)."""
    return {
        "bootstrap.servers": bootstrap,
        "group.id": cfg.group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
        "session.timeout.ms": 10000,
        "log_level": 3,
    } | client_diagnostics()


JAVA_PRODUCER_PREFIX = "producer."
JAVA_CONSUMER_PREFIX = "consumer."
_LIBRDKAFKA_ONLY = frozenset({"log_level", "debug"})


def copier_java_properties(cfg: CopierConfig, bootstrap: str) -> dict[str, str]:
    """The Java copier's settings, one properties file for both of its clients: the producer's
    (`producer.` + the Java transactional producer's, workloads.kafka.transactions) and the
    consumer's (`consumer.` + the same keys as the librdkafka copier's). A poll returns at most
    one transaction's records; every blocking call is bounded (max.block.ms, and the consumer's
    default.api.timeout.ms for a call given no timeout of its own)."""
    producer = java_properties(*_as_producer(cfg), bootstrap)
    consumer = {
        k: str(v).lower() if isinstance(v, bool) else str(v)
        for k, v in copier_consumer_settings(cfg, bootstrap).items()
        if k not in _LIBRDKAFKA_ONLY
    } | {
        "max.poll.records": str(cfg.size),
        "default.api.timeout.ms": str(int(TXN_CALL_TIMEOUT * 1000)),
    }
    return {JAVA_PRODUCER_PREFIX + k: v for k, v in producer.items()} | {
        JAVA_CONSUMER_PREFIX + k: v for k, v in consumer.items()
    }


def consumed_offsets(msgs: list[Message]) -> list[TopicPartition]:
    """The offsets a transaction commits for what it copied: per input partition, the one after
    the last record copied."""
    after: dict[tuple[str, int], int] = {}
    for m in msgs:
        key = (m.topic() or "", m.partition() or 0)
        after[key] = max(after.get(key, 0), (m.offset() or 0) + 1)
    return [TopicPartition(t, p, o) for (t, p), o in sorted(after.items())]


@dataclass
class CopyTransaction:
    """What one copier transaction copied, as its delivery reports come back."""

    id: str
    msgs: list[Message]
    positions: dict[int, tuple[int | None, int | None]] = field(default_factory=dict)

    def delivered(self, i: int, err: KafkaError | None, msg: Message) -> None:
        if err is None:
            self.positions[i] = (msg.partition(), msg.offset())


class Copier(OneInstance):
    """One copier: a consumer and one transactional producer instance at a time."""

    def __init__(
        self,
        cfg: CopierConfig,
        bootstrap: str,
        history: HistoryWriter,
        draining: Callable[[], bool],
    ) -> None:
        self.cfg, self.bootstrap, self.history, self.draining = cfg, bootstrap, history, draining
        self.deadline = cfg.deadline
        self.rng = random.Random(cfg.process)
        self.producer: Producer | None = None
        self.consumer: Consumer | None = None
        self.number = 0

    @property
    def transactional_id(self) -> str:
        return self.cfg.transactional_id or self.cfg.process

    def run(self) -> bool:
        """Copies until drained (asked to drain, and nothing left in its partitions) or the
        deadline; whether it drained."""
        client = f"confluent-kafka {confluent_kafka.version()} (librdkafka {libversion()[0]})"
        value = {
            "client": client,
            "transactional_id": self.transactional_id,
            "copy": {"group": self.cfg.group, "input": self.cfg.input_topic},
        }
        self.history.write("ok", "open", producer=self.cfg.process, value=value)
        try:
            while time.time() < self.cfg.deadline:
                if not self._ready():
                    time.sleep(1.0)
                    continue
                assert self.consumer is not None
                msgs = [
                    m
                    for m in self.consumer.consume(self.cfg.size, timeout=0.5)
                    if m.error() is None
                ]
                if msgs:
                    self._copy(msgs)
                elif self.draining() and self._drained():
                    return True
            return False
        finally:
            self._close()

    def _ready(self) -> bool:
        """A producer initialised (fencing an earlier instance of the same id) and a consumer
        in the group; False while either cannot be had yet."""
        try:
            if self.producer is None:
                producer = Producer(copier_producer_settings(self.cfg, self.bootstrap))
                self.initialise(producer, self.transactional_id)
                self.producer = producer
        except (Fatal, KafkaException, SystemError) as e:
            log.warning("cannot start a transactional producer: %s", e)
            return False
        if self.consumer is None:
            self.consumer = Consumer(copier_consumer_settings(self.cfg, self.bootstrap))
            self.consumer.subscribe([self.cfg.input_topic])
        return True

    def _drained(self) -> bool:
        """The copy is done: every partition of the input copied to its end, as the group's
        committed offsets say (they move only with committed transactions), or, for a partition
        this copier holds, as its own position says (a read_committed position passes the
        markers and aborted records no copy commits past). Judged over every input partition,
        not only the assigned ones: a copier must not leave while a partition nobody holds at
        the moment is still to copy."""
        assert self.consumer is not None
        try:
            partitions = partitions_of(self.consumer, self.cfg.input_topic, time.time() + 10)
            every = [TopicPartition(self.cfg.input_topic, p) for p in partitions]
            committed = {tp.partition: tp.offset for tp in self.consumer.committed(every, 10)}
            held = self.consumer.position(self.consumer.assignment())
            at = {tp.partition: max(tp.offset, committed.get(tp.partition, -1)) for tp in held}
            for tp in every:
                _, high = self.consumer.get_watermark_offsets(tp, timeout=5)
                if high < 0 or at.get(tp.partition, committed.get(tp.partition, -1)) < high:
                    return False
        except (KafkaException, TopicNotFound):
            return False
        return True

    def _copy(self, msgs: list[Message]) -> None:
        self.number += 1
        t = CopyTransaction(f"{self.cfg.process}:t{self.number}", msgs)
        self.history.write("invoke", "txn", producer=self.cfg.process, value={"txn": t.id})
        outcome, error, planned = self._one(t)
        value: dict[str, Any] = {"txn": t.id, "copies": len(msgs)}
        if planned:
            value["planned"] = True
        self.history.write(outcome, "txn", producer=self.cfg.process, error=error, value=value)
        for i, m in enumerate(msgs):
            self._record_copy(t, i, m, outcome, PLANNED_ABORT if planned else error)
        if outcome != "ok":
            self._rejoin()

    def _record_copy(
        self, t: CopyTransaction, i: int, m: Message, outcome: EventType, error: str | None
    ) -> None:
        producer, seq = decode_body(m.value() or b"")
        partition, offset = t.positions.get(i, (None, None))
        source = {"stream": m.topic(), "partition": m.partition(), "offset": m.offset()}
        self.history.write(
            outcome,
            "copy",
            stream=self.cfg.output_topic,
            producer=producer,
            seq=seq,
            partition=partition,
            offset=offset,
            error=None if outcome == "ok" else error,
            value={"txn": t.id, "from": source},
        )

    def _one(self, t: CopyTransaction) -> tuple[EventType, str | None, bool]:
        """Copies one batch in one transaction with its input offsets, and ends it."""
        assert self.producer is not None and self.consumer is not None
        producer, consumer = self.producer, self.consumer
        try:
            producer.begin_transaction()
            for i, m in enumerate(t.msgs):
                self._produce(t, i, m)
            if self.rng.random() < self.cfg.abort_ratio:
                producer.flush(max(0.0, min(TXN_CALL_TIMEOUT, self.cfg.deadline - time.time())))
                return self.abort(PLANNED_ABORT, planned=True)
            offsets = consumed_offsets(t.msgs)
            metadata = consumer.consumer_group_metadata()
            until_done(
                lambda timeout: producer.send_offsets_to_transaction(offsets, metadata, timeout),
                self.cfg.deadline,
            )
        except KafkaException as e:  # refused before the commit was asked: abort
            return self.abort(error_text(e), planned=False)
        except (Fatal, SystemError) as e:
            return self.lost_instance("fail", client_failure(e))
        return self.commit(t.id)

    def _produce(self, t: CopyTransaction, i: int, m: Message) -> None:
        self.produce_until_deadline(
            self.cfg.output_topic,
            value=m.value(),
            key=m.key(),
            partition=m.partition() or 0,  # a consumed record always has one
            on_delivery=functools.partial(t.delivered, i),
        )

    def _rejoin(self) -> None:
        """After a transaction that did not commit, the consumer's position is past records
        whose copies were not committed: a new member starts from the committed offsets."""
        if self.consumer is not None:
            try:
                self.consumer.close()
            except (KafkaException, RuntimeError) as e:
                log.info("closing the consumer: %s", e)
        self.consumer = None

    def _close(self) -> None:
        self._rejoin()
        if self.producer is not None:
            self.producer.flush(1.0)


def run_java_copier(
    cfg: CopierConfig,
    bootstrap: str,
    history_path: Path,
    work_dir: Path,
    draining: Callable[[], bool] = lambda: False,
) -> int:
    """Kafka's Java client as this copier: it writes `history_path` itself; its exit code (0
    drained, 3 the deadline first, as the librdkafka copier's; java_client.JAVA_CANNOT_START).
    Once `draining()` says so it is sent SIGUSR1 (the drain), again every DRAIN_RESEND seconds
    until it ends."""
    from workloads.kafka.java_client import COPIER_CLASS, launch

    history_path.parent.mkdir(parents=True, exist_ok=True)

    def argv(classpath: str) -> list[str]:
        return [
            "java",
            "-cp",
            classpath,
            COPIER_CLASS,
            str(work_dir / f"{cfg.process}.java.properties"),
            str(history_path),
            cfg.process,
            cfg.input_topic,
            cfg.output_topic,
            str(cfg.deadline),
            str(cfg.size),
            str(cfg.abort_ratio),
            cfg.java_version or "",
        ]

    return launch(
        "the java copier",
        cfg.java_version,
        copier_java_properties(cfg, bootstrap),
        work_dir / f"{cfg.process}.java.properties",
        argv,
        cfg.deadline,
        JAVA_SLACK,
        draining,
    )
