"""Kafka clients on confluent-kafka: a producer whose every delivery report goes to the history,
and a reader that assigns every partition from the earliest offset.

Outcome of a send (the history's `type`):
  ok    the delivery report has no error: partition and offset recorded;
  fail  only errors that guarantee the record was not written: refused before it left the
        client, or rejected by the broker for what the record is (the same on every retry);
  info  everything else: timeouts (_MSG_TIMED_OUT may still have been written), transport
        errors, NOT_ENOUGH_REPLICAS_AFTER_APPEND, and any error that follows a retry, since
        an earlier attempt may have been written (confluent-kafka does not expose
        librdkafka's per-message persistence status).
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from contract.history import EventType, HistoryWriter, decode_body, encode_body
from workloads.kafka.base import (
    ProducerConfig,
    TopicNotFound,
    partitions_of,
    producer_settings,
    wait_to_start,
)
from workloads.kafka.copier import Copier, CopierConfig, run_java_copier
from workloads.kafka.properties import properties
from workloads.kafka.share import PythonShareConsumer, ShareConfig, run_java_share_consumer
from workloads.kafka.transactions import TransactionalProducer, TransactionConfig, run_java_producer
from workloads.lifeline import tie_to_harness

log = logging.getLogger("workloads.kafka.clients")

# Refused before the record left the client: nothing can have been written.
_LOCAL_NOT_SENT = frozenset(
    {
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._PURGE_QUEUE,
        KafkaError._INVALID_ARG,
        KafkaError._QUEUE_FULL,
    }
)
# Rejected by the broker for what the record or request is: every attempt was rejected alike.
_BROKER_REJECTED = frozenset(
    {
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.INVALID_RECORD,
        KafkaError.RECORD_LIST_TOO_LARGE,
        KafkaError.INVALID_REQUIRED_ACKS,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.TOPIC_EXCEPTION,
        KafkaError.INVALID_MSG,
    }
)


def delivery_outcome(err: KafkaError | None) -> tuple[EventType, str | None]:
    """The history type and error text for one delivery report."""
    if err is None:
        return "ok", None
    text = f"{err.name()}: {err.str()}"
    if err.code() in _LOCAL_NOT_SENT or err.code() in _BROKER_REJECTED:
        return "fail", text
    return "info", text


REFUSED_PAUSE_S = 0.1  # after a send the client refused at once: no spin while it refuses


def refusal_text(e: KafkaException) -> str:
    """A produce() refusal as the history's error: the librdkafka error's name and text."""
    err = e.args[0] if e.args else None
    if isinstance(err, KafkaError):
        return f"{err.name()}: {err.str()}"
    return f"{type(e).__name__}: {e}"


def run_producer(cfg: ProducerConfig, bootstrap_servers: str, history: HistoryWriter) -> None:
    """Produces seq first_seq..count (1..count but for a restarted instance) in its id space;
    stops at the count or the deadline, whichever comes first."""
    wait_to_start(cfg)
    producer = Producer(producer_settings(cfg, bootstrap_servers))
    outstanding: set[int] = set()
    send = functools.partial(history.write, f="send", stream=cfg.topic, producer=cfg.id_space)

    def delivered(seq: int, err: KafkaError | None, msg: Message) -> None:
        outstanding.discard(seq)
        type_, error = delivery_outcome(err)
        ok = type_ == "ok"
        send(
            type_,
            seq=seq,
            partition=msg.partition() if ok else None,
            offset=msg.offset() if ok else None,
            error=error,
        )

    next_at = time.monotonic()
    for seq in range(cfg.first_seq, cfg.count + 1):
        if time.time() >= cfg.deadline:
            break
        if cfg.rate > 0:
            time.sleep(max(0.0, next_at - time.monotonic()))
            next_at = max(next_at, time.monotonic() - 1.0 / cfg.rate) + 1.0 / cfg.rate
        send("invoke", seq=seq)
        outstanding.add(seq)
        while True:
            try:
                producer.produce(
                    cfg.topic,
                    value=encode_body(cfg.id_space, seq),
                    on_delivery=functools.partial(delivered, seq),
                )
                break
            except BufferError:  # local queue full: wait for deliveries, then retry
                producer.poll(0.1)
                if time.time() >= cfg.deadline:
                    outstanding.discard(seq)
                    send("fail", seq=seq, error="_QUEUE_FULL: local queue full at deadline")
                    break
            except KafkaException as e:
                # Refused before it was queued (the topic unknown to the metadata of brokers
                # just back from a power loss, say): never sent, so failed; the next goes on,
                # unless the producer itself is done for (a fatal error refuses every send).
                outstanding.discard(seq)
                send("fail", seq=seq, error=refusal_text(e))
                if e.args and isinstance(e.args[0], KafkaError) and e.args[0].fatal():
                    raise
                producer.poll(0)
                time.sleep(REFUSED_PAUSE_S)
                break
        producer.poll(0)
    producer.flush(max(0.0, cfg.deadline - time.time()))
    for seq in sorted(outstanding):
        send("info", seq=seq, error="no delivery report before the deadline")


@dataclass(frozen=True)
class ReaderConfig:
    process: str
    topic: str
    group: str  # the reader group the history records (and the consumer group in group mode)
    deadline: float
    mode: str = "assign"  # assign: every partition from the start; group: subscribe, commit
    commit_every: int = 100  # group mode: a synchronous offset commit every N records
    group_protocol: str = "classic"  # group mode: classic, or consumer (KIP-848)
    final: bool = False  # the final read: drains from the start, with no signal to wait for
    delay: float = 0.0  # seconds per record: a reader made to lag
    isolation: str = "read_committed"  # isolation.level: read_committed or read_uncommitted
    config: dict[str, Any] = field(default_factory=dict)  # the scenario's own librdkafka keys


# Commit errors after which the offsets may still have been written.
_COMMIT_UNKNOWN = frozenset(
    {KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError.REQUEST_TIMED_OUT}
)


def commit_outcome(err: KafkaError | None) -> tuple[EventType, str | None]:
    """The history type and error text for one offset commit."""
    if err is None or err.code() == KafkaError._NO_OFFSET:  # nothing new to commit
        return "ok", None
    return ("info" if err.code() in _COMMIT_UNKNOWN else "fail"), f"{err.name()}: {err.str()}"


def reader_settings(cfg: ReaderConfig, bootstrap_servers: str) -> dict[str, Any]:
    """Every setting a reader depends on, explicit, then the scenario's own keys."""
    group_mode = cfg.mode == "group"
    settings: dict[str, Any] = {
        "bootstrap.servers": bootstrap_servers,
        "group.id": cfg.group if group_mode else f"brokerjepsen-{cfg.process}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": cfg.isolation,
        "log_level": 3,
    }
    if group_mode and cfg.group_protocol == "consumer":
        # KIP-848: the broker's group coordinator assigns partitions and owns the session
        # timeout (group.consumer.session.timeout.ms); a client may not set it.
        settings["group.protocol"] = "consumer"
    else:
        settings["session.timeout.ms"] = 10000
    return settings | properties(cfg.config)


def read_all(
    cfg: ReaderConfig,
    bootstrap_servers: str,
    history: HistoryWriter,
    draining: Callable[[], bool],
) -> bool:
    """Reads every partition from the earliest offset; returns whether it caught up.

    Once `draining()` says so (the final drain), stops when every partition is read up to its
    high-water mark; until then, and at the latest, reads until the deadline. In group mode the
    reader is a consumer group member and commits its offsets every `commit_every` records.
    """
    group_mode = cfg.mode == "group"
    settings = reader_settings(cfg, bootstrap_servers)
    consumer = Consumer(settings)
    # What this group may see of transactions (the checker's aborted reads are a
    # read_committed group's): said once, before its first receive.
    isolation = {"isolation": settings["isolation.level"]}
    history.write("ok", "open", stream=cfg.topic, group=cfg.group, value=isolation)
    uncommitted = 0
    try:
        partitions = partitions_of(consumer, cfg.topic, min(cfg.deadline, time.time() + 60))
        if group_mode:
            consumer.subscribe([cfg.topic])
        else:
            consumer.assign([TopicPartition(cfg.topic, p, OFFSET_BEGINNING) for p in partitions])
        position = {p: 0 for p in partitions}
        while time.time() < cfg.deadline:
            msg = consumer.poll(0.2)
            if group_mode and uncommitted >= cfg.commit_every:
                uncommitted = 0
                _commit(consumer, cfg, history)
            if msg is not None and msg.error() is None:
                producer, seq = decode_body(msg.value() or b"")
                offset = msg.offset()
                history.write(
                    "ok",
                    "receive",
                    stream=cfg.topic,
                    group=cfg.group,
                    producer=producer,
                    seq=seq,
                    partition=msg.partition(),
                    offset=offset,
                )
                if offset is not None and (partition := msg.partition()) is not None:
                    position[partition] = offset + 1
                uncommitted += 1
                if cfg.delay:
                    time.sleep(cfg.delay)
                continue
            if draining() and _caught_up(consumer, cfg.topic, position):
                if group_mode and uncommitted:
                    _commit(consumer, cfg, history)
                return True
        return False
    finally:
        consumer.close()


def _commit(consumer: Consumer, cfg: ReaderConfig, history: HistoryWriter) -> None:
    """A synchronous commit of the consumed offsets, its outcome in the history."""
    history.write("invoke", "commit", stream=cfg.topic, group=cfg.group)
    err: KafkaError | None = None
    offsets: list[TopicPartition] = []
    try:
        offsets = consumer.commit(asynchronous=False) or []
    except KafkaException as e:
        err = e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None
        if err is None:
            raise
    type_, error = commit_outcome(err)
    value = {str(tp.partition): tp.offset for tp in offsets} if type_ == "ok" else None
    history.write(type_, "commit", stream=cfg.topic, group=cfg.group, error=error, value=value)


def _caught_up(consumer: Consumer, topic: str, position: dict[int, int]) -> bool:
    """Every partition read up to its high-water mark, as its leader tells it now. The
    consumer's own position counts too: a transaction's commit or abort marker takes an offset
    that no record is read at, and a read_committed reader's watermark is the last stable
    offset, past the marker."""
    if not position:
        return False
    try:
        fetched = consumer.position([TopicPartition(topic, p) for p in position])
    except KafkaException:
        fetched = []
    at = {tp.partition: tp.offset for tp in fetched if tp.offset >= 0}
    for partition, read in position.items():
        pos = max(read, at.get(partition, 0))
        try:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=5)
        except KafkaException:  # no leader now, or it did not answer: not known to be caught up
            return False
        if high < 0 or pos < high:
            return False
    return True


READER_NOT_CAUGHT_UP = 3  # exit code: the drain did not reach every high-water mark
READER_NO_TOPIC = 4  # exit code: the topic never showed partitions


def _transactional(
    pcfg: ProducerConfig, transaction: dict[str, Any], bootstrap: str, history_dir: Path, work: Path
) -> int:
    """A transactional producer, on the client its scenario chose."""
    txn = TransactionConfig(**transaction)
    if txn.client == "java":
        return run_java_producer(pcfg, txn, bootstrap, history_dir / f"{pcfg.process}.jsonl", work)
    with HistoryWriter(history_dir, pcfg.process, "kafka") as history:
        TransactionalProducer(pcfg, txn, bootstrap, history).run()
    return 0


def _copier(data: dict[str, Any], bootstrap: str, history_dir: Path, work: Path) -> int:
    """An exactly-once copier, on the client its scenario chose: it drains when signalled
    (SIGUSR1), as a reader does; a Java copier is passed the signal on (run_java_copier)."""
    cfg = CopierConfig(**data)
    drain = {"now": False}
    signal.signal(signal.SIGUSR1, lambda *_: drain.update(now=True))
    if cfg.client == "java":
        history_path = history_dir / f"{cfg.process}.jsonl"
        return run_java_copier(cfg, bootstrap, history_path, work, lambda: drain["now"])
    with HistoryWriter(history_dir, cfg.process, "kafka") as history:
        drained = Copier(cfg, bootstrap, history, lambda: drain["now"]).run()
    return 0 if drained else READER_NOT_CAUGHT_UP


def _share(data: dict[str, Any], bootstrap: str, history_dir: Path, work: Path) -> int:
    """A share consumer (KIP-932), on the client its scenario chose: it drains when signalled
    (SIGUSR1), as a reader does; a Java one is passed the signal on."""
    cfg = ShareConfig(**data)
    drain = {"now": False}
    signal.signal(signal.SIGUSR1, lambda *_: drain.update(now=True))
    if cfg.client == "java":
        history_path = history_dir / f"{cfg.process}.jsonl"
        return run_java_share_consumer(cfg, bootstrap, history_path, work, lambda: drain["now"])
    with HistoryWriter(history_dir, cfg.process, "kafka") as history:
        drained = PythonShareConsumer(cfg, bootstrap, history, lambda: drain["now"]).run()
    return 0 if drained else READER_NOT_CAUGHT_UP


def main(argv: list[str] | None = None) -> int:
    """`python -m workloads.kafka.clients producer|reader|copier|share CONFIG`: one client
    process of a run."""
    parser = argparse.ArgumentParser(prog="python -m workloads.kafka.clients")
    parser.add_argument("role", choices=["producer", "reader", "copier", "share"])
    parser.add_argument("config", type=Path)
    args = parser.parse_args(argv)
    tie_to_harness()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    data = json.loads(args.config.read_text())
    history_dir, bootstrap = Path(data.pop("history_dir")), data.pop("bootstrap_servers")
    if args.role == "producer":
        transaction = data.pop("transaction", None)
        pcfg = ProducerConfig(**data)
        if transaction is not None:
            return _transactional(pcfg, transaction, bootstrap, history_dir, args.config.parent)
        with HistoryWriter(history_dir, pcfg.process, "kafka") as history:
            run_producer(pcfg, bootstrap, history)
        return 0
    if args.role == "copier":
        return _copier(data, bootstrap, history_dir, args.config.parent)
    if args.role == "share":
        return _share(data, bootstrap, history_dir, args.config.parent)
    rcfg = ReaderConfig(**data)
    drain = {"now": rcfg.final}
    signal.signal(signal.SIGUSR1, lambda *_: drain.update(now=True))
    with HistoryWriter(history_dir, rcfg.process, "kafka") as history:
        try:
            caught_up = read_all(rcfg, bootstrap, history, lambda: drain["now"])
        except TopicNotFound as e:
            log.error("%s", e)
            return READER_NO_TOPIC
    return 0 if caught_up else READER_NOT_CAUGHT_UP


if __name__ == "__main__":
    sys.exit(main())
