"""A transactional producer on confluent-kafka (librdkafka: the TV1 transaction protocol, on any
cluster): records are sent in transactions of `size` records spread over every partition of the
topic, and each transaction is committed or, with probability `abort_ratio`, aborted.

The history says what a reader may see of each record, so a record's send ends only when its
transaction does (every send line carries `value.txn`, the transaction's id):
  ok    the commit returned: the record is committed at the partition and offset its delivery
        report gave;
  fail  the transaction was aborted: `abort_transaction` returned, or the producer never asked
        for the commit (a transaction whose EndTxn(commit) was never sent can only be aborted,
        by the coordinator's timeout or by the next instance's fencing);
  info  the commit was asked and its outcome is unknown (a fatal error or the deadline while
        committing): the transaction may have committed.
Each transaction also has `f: txn` events: an invoke when it begins and one outcome, with the
same type, its id, its records and, where the producer chose to abort, `planned: true`.
"""

from __future__ import annotations

import functools
import logging
import random
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException, Message, Producer, libversion

from contract.history import (
    END_TXN,
    INIT_TXN,
    PLANNED_ABORT,
    EventType,
    HistoryWriter,
    encode_body,
)
from workloads.kafka.base import ProducerConfig, producer_settings, wait_to_start

log = logging.getLogger("workloads.kafka.transactions")

TXN_CALL_TIMEOUT = (
    10.0  # seconds a single init/commit/abort call may block before it is asked again
)


@dataclass(frozen=True)
class TransactionConfig:
    size: int = 10  # records per transaction
    abort_ratio: float = 0.1  # the share of transactions the producer aborts on purpose
    timeout_ms: int = 60000  # transaction.timeout.ms
    transactional_id: str = ""  # default: the producer's id
    client: str = "confluent-kafka"  # or "java": Kafka's own client (workloads.kafka.java_client)
    java_version: str = ""  # the java client's kafka-clients release: the cluster's


def transactional_settings(
    cfg: ProducerConfig, txn: TransactionConfig, bootstrap: str
) -> dict[str, Any]:
    """The producer's settings with the transaction's own keys (idempotence is implied). A
    record may not outlive its transaction, so the delivery timeout is the transaction's when
    that is shorter (the scenario refuses a longer one it set itself)."""
    settings = producer_settings(cfg, bootstrap)
    return settings | {
        "transactional.id": txn.transactional_id or cfg.process,
        "transaction.timeout.ms": txn.timeout_ms,
        "delivery.timeout.ms": min(int(settings["delivery.timeout.ms"]), txn.timeout_ms),
        "enable.idempotence": True,
    }


def txn_id(process: str, number: int) -> str:
    return f"{process}:t{number}"


@dataclass
class OpenTransaction:
    """What one transaction sent, as its delivery reports come back."""

    id: str
    seqs: list[int] = field(default_factory=list)
    # seq: (partition, offset) as its delivery report gave them
    positions: dict[int, tuple[int | None, int | None]] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)

    def delivered(self, seq: int, err: KafkaError | None, msg: Message) -> None:
        if err is None:
            self.positions[seq] = (msg.partition(), msg.offset())
        else:
            self.errors[seq] = f"{err.name()}: {err.str()}"


def client_failure(e: Exception) -> str:
    """Why an instance is given up. confluent-kafka raises SystemError out of a poll, flush or
    commit when a callback ran while a fatal error (fencing) was being raised: the instance is
    as unusable as after a fatal error."""
    return str(e) if isinstance(e, Fatal) else f"the client failed: {e}"


class Fatal(Exception):
    """The producer cannot go on (fenced, or a fatal error): a new instance must take over."""


def _kafka_error(e: KafkaException) -> KafkaError | None:
    return e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None


def error_text(e: KafkaException) -> str:
    err = _kafka_error(e)
    return f"{err.name()}: {err.str()}" if err is not None else str(e)


class Hung(Fatal):
    """A call blocked well past its own timeout: the instance is abandoned as it is (librdkafka
    can block in send_offsets_to_transaction after the group coordinator died, its open issues
    5456 and 5511), and a new one fences it."""


HUNG_GRACE = 30.0  # seconds past a call's own timeout before it counts as hung


def within(call: Callable[[float], None], timeout: float) -> None:
    """`call(timeout)`, in a thread of its own so that a call that never returns is noticed:
    Hung when it is still running HUNG_GRACE seconds past its timeout (its thread is left
    behind, blocked, with the instance it belongs to)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call(timeout)
            outcome.append(None)
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread as it is
            outcome.append(e)

    worker = threading.Thread(target=run, name="txn-call", daemon=True)
    worker.start()
    worker.join(timeout + HUNG_GRACE)
    if not outcome:
        name = getattr(call, "__name__", "a transaction call")
        raise Hung(
            f"CLIENT_HUNG: {name} still blocked {timeout + HUNG_GRACE:.0f} s after it was "
            f"called with a timeout of {timeout:.0f} s"
        )
    if outcome[0] is not None:
        raise outcome[0]


def until_done(call: Callable[[float], None], deadline: float) -> None:
    """Calls `call(timeout)` until it returns, asking again while its error is retriable (a
    timeout, a coordinator moving) and the deadline allows; a fatal error raises Fatal (Hung
    for a call that never returned), an abortable one raises KafkaException for the caller to
    abort."""
    while True:
        try:
            within(call, max(1.0, min(TXN_CALL_TIMEOUT, deadline - time.time())))
            return
        except KafkaException as e:
            err = _kafka_error(e)
            if err is None or err.fatal():
                raise Fatal(error_text(e)) from e
            if err.txn_requires_abort():
                raise
            if not err.retriable() or time.time() >= deadline:
                raise Fatal(f"{err.name()}: {err.str()}") from e
            log.info("retrying after %s", err.name())


def drop_instance(producer: Producer | None, error: str) -> None:
    """Gives a transactional producer instance up: what it still holds is purged, unless a call
    of it hung (a hung instance is left as it is: its blocked call may hold what a purge
    needs)."""
    log.warning("transactional producer lost: %s", error)
    if producer is None or error.startswith("CLIENT_HUNG"):
        return
    try:  # a fenced or failed instance may refuse even these: it is dropped either way
        producer.purge()
        producer.flush(0)
    except (KafkaException, SystemError) as e:
        log.info("dropping the instance: %s", e)


class OneInstance:
    """What a transactional producer and an exactly-once copier share: one producer instance at
    a time (after a fatal error the next one's init_transactions fences the old and aborts
    what it left open), records handed to it until the deadline, its abort and its loss."""

    producer: Producer | None
    deadline: float  # Unix time
    history: HistoryWriter
    cfg: Any  # the client's own config: its `process` names it in the history

    def initialise(self, producer: Producer, transactional_id: str) -> None:
        """init_transactions on a new instance, marked in the history (f: init-txn): once it
        returns, the coordinator has bumped the id's epoch, so every earlier instance of the id
        is fenced, and this one is by the next instance's init. One that failed may have bumped
        the epoch all the same: its outcome is info."""
        value = {"transactional_id": transactional_id}
        self.history.write("invoke", INIT_TXN, producer=self.cfg.process, value=value)
        try:
            until_done(producer.init_transactions, self.deadline)
        except Exception as e:
            why = error_text(e) if isinstance(e, KafkaException) else client_failure(e)
            self.history.write("info", INIT_TXN, producer=self.cfg.process, value=value, error=why)
            raise
        self.history.write("ok", INIT_TXN, producer=self.cfg.process, value=value)

    def commit_asked(self, txn: str) -> None:
        """The history's mark that this transaction's commit (EndTxn) is being asked: from here
        to the transaction's end its commit is in flight (the coverage's commit-in-flight)."""
        self.history.write(
            "info", END_TXN, producer=self.cfg.process, value={"txn": txn, "commit": True}
        )

    def commit(self, txn: str) -> tuple[EventType, str | None, bool]:
        """Asks for the open transaction's commit: ok; unknown (info) when the instance is
        lost on the way; aborted when the broker refused it (a record not delivered), or
        unknown if the abort fails too."""
        assert self.producer is not None
        self.commit_asked(txn)
        try:
            until_done(self.producer.commit_transaction, self.deadline)
        except (Fatal, SystemError) as e:
            return self.lost_instance("info", client_failure(e))
        except KafkaException as e:
            return self.abort(error_text(e), planned=False, commit_asked=True)
        return "ok", None, False

    def produce_until_deadline(self, topic: str, **record: Any) -> None:
        """One record to the instance, waiting while its local queue is full."""
        assert self.producer is not None
        while True:
            try:
                self.producer.produce(topic, **record)
                self.producer.poll(0)
                return
            except BufferError:
                self.producer.poll(0.1)
                if time.time() >= self.deadline:
                    raise Fatal("_QUEUE_FULL: local queue full at deadline") from None

    def abort(
        self, error: str, planned: bool, commit_asked: bool = False
    ) -> tuple[EventType, str | None, bool]:
        """Aborts the open transaction. A transaction whose commit was never asked can only end
        aborted, whether or not the abort returns; one whose commit was asked and refused is
        aborted only if the abort returns (else its outcome is unknown)."""
        assert self.producer is not None
        try:
            until_done(self.producer.abort_transaction, self.deadline)
        except (Fatal, KafkaException, SystemError) as e:
            why = error_text(e) if isinstance(e, KafkaException) else client_failure(e)
            outcome: EventType = "info" if commit_asked else "fail"
            return self.lost_instance(outcome, f"{error}; the abort failed: {why}", planned)
        return "fail", error, planned

    def lost_instance(
        self, outcome: EventType, error: str, planned: bool = False
    ) -> tuple[EventType, str | None, bool]:
        """The instance can no longer be used: the next transaction starts a new one."""
        drop_instance(self.producer, error)
        self.producer = None
        return outcome, error, planned


class TransactionalProducer(OneInstance):
    """One producer instance at a time; after a fatal error the next one's `init_transactions`
    fences the old and aborts what it left open."""

    def __init__(
        self, cfg: ProducerConfig, txn: TransactionConfig, bootstrap: str, history: HistoryWriter
    ) -> None:
        self.cfg, self.txn, self.bootstrap, self.history = cfg, txn, bootstrap, history
        self.deadline = cfg.deadline
        self.rng = random.Random(cfg.process)
        self.producer: Producer | None = None
        self.partitions: list[int] = []
        self.send = functools.partial(
            history.write, f="send", stream=cfg.topic, producer=cfg.process
        )

    @property
    def transactional_id(self) -> str:
        return self.txn.transactional_id or self.cfg.process

    def announce(self) -> None:
        """Which client wrote this history, once before the first transaction."""
        client = f"confluent-kafka {confluent_kafka.version()} (librdkafka {libversion()[0]})"
        value = {"client": client, "transactional_id": self.transactional_id}
        self.history.write("ok", "open", producer=self.cfg.process, value=value)

    def start(self) -> None:
        """A fresh instance, initialised (fencing any earlier one with the same id)."""
        self.producer = Producer(transactional_settings(self.cfg, self.txn, self.bootstrap))
        self.initialise(self.producer, self.transactional_id)
        if not self.partitions:
            self.partitions = self._partitions()

    def _partitions(self) -> list[int]:
        assert self.producer is not None
        while time.time() < self.cfg.deadline:
            meta = self.producer.list_topics(self.cfg.topic, timeout=10).topics.get(self.cfg.topic)
            if meta is not None and meta.error is None and meta.partitions:
                return sorted(meta.partitions)
            time.sleep(0.5)
        raise Fatal(f"topic {self.cfg.topic} has no partitions in the brokers' metadata")

    def run(self) -> None:
        """Transactions until `count` records are sent or the deadline passes."""
        self.announce()
        # A late instance (start_at) inits only then: it fences whichever instance of its
        # transactional id is running, as a replacement started by an operator does.
        wait_to_start(self.cfg)
        seq, number = 0, 0
        next_at = time.monotonic()
        while seq < self.cfg.count and time.time() < self.cfg.deadline:
            if self.producer is None:
                try:
                    self.start()
                except (Fatal, SystemError) as e:
                    log.warning("cannot start a transactional producer: %s", e)
                    self.producer = None
                    time.sleep(1.0)
                    continue
            number += 1
            size = min(self.txn.size, self.cfg.count - seq)
            if self.cfg.rate > 0:  # the rate holds per transaction: its records go together
                next_at = max(next_at, time.monotonic() - 1.0) + size / self.cfg.rate
                time.sleep(max(0.0, next_at - time.monotonic()))
            open_txn = OpenTransaction(txn_id(self.cfg.process, number))
            outcome, error, planned = self._one(open_txn, range(seq + 1, seq + size + 1))
            seq += len(open_txn.seqs)
            self._record(open_txn, outcome, error, planned)
        if self.producer is not None:
            self.producer.flush(1.0)

    def _one(self, t: OpenTransaction, seqs: range) -> tuple[EventType, str | None, bool]:
        """Sends one transaction's records and ends it: its outcome, error and whether the
        abort was the producer's choice."""
        assert self.producer is not None
        producer = self.producer
        self.history.write("invoke", "txn", producer=self.cfg.process, value={"txn": t.id})
        try:
            producer.begin_transaction()
            for seq in seqs:
                self.send("invoke", seq=seq, value={"txn": t.id})
                t.seqs.append(seq)
                self._produce(t, seq)
            planned = self.rng.random() < self.txn.abort_ratio
            if planned:
                # Written first, then aborted: a record purged before it left the client would
                # test nothing of what readers may see.
                producer.flush(max(0.0, min(TXN_CALL_TIMEOUT, self.cfg.deadline - time.time())))
                return self.abort(PLANNED_ABORT, planned=True)
        except KafkaException as e:  # begin or produce refused: nothing committed
            return self.abort(error_text(e), planned=False)
        except (Fatal, SystemError) as e:
            return self.lost_instance("fail", client_failure(e))
        return self.commit(t.id)

    def _produce(self, t: OpenTransaction, seq: int) -> None:
        self.produce_until_deadline(
            self.cfg.topic,
            value=encode_body(self.cfg.process, seq),
            partition=self.partitions[seq % len(self.partitions)],
            on_delivery=functools.partial(t.delivered, seq),
        )

    def _record(
        self, t: OpenTransaction, outcome: EventType, error: str | None, planned: bool
    ) -> None:
        """The transaction's outcome, then each record's send as its outcome says."""
        value: dict[str, Any] = {"txn": t.id, "seqs": t.seqs}
        if planned:
            value["planned"] = True
        self.history.write(outcome, "txn", producer=self.cfg.process, error=error, value=value)
        for seq in t.seqs:
            partition, offset = t.positions.get(seq, (None, None))
            self.send(
                outcome,
                seq=seq,
                partition=partition,
                offset=offset,
                error=_send_error(outcome, planned, t.errors.get(seq), error),
                value={"txn": t.id},
            )


def _send_error(
    outcome: EventType, planned: bool, delivery_error: str | None, txn_error: str | None
) -> str | None:
    """A record's error: none when committed; the planned abort's mark, whatever became of the
    record's delivery (the checker counts those apart from refusals); else what refused it."""
    if outcome == "ok":
        return None
    if planned:
        return PLANNED_ABORT
    return delivery_error or txn_error


JAVA_SLACK = 60.0  # seconds past the deadline the Java client may take to end its last transaction


def java_properties(cfg: ProducerConfig, txn: TransactionConfig, bootstrap: str) -> dict[str, str]:
    """The Java producer's settings: the same knobs as the librdkafka producer's, in the Java
    client's names (max.block.ms bounds each blocking call, as TXN_CALL_TIMEOUT does here)."""
    settings = transactional_settings(cfg, txn, bootstrap)
    keys = (
        "bootstrap.servers",
        "acks",
        "enable.idempotence",
        "retries",
        "delivery.timeout.ms",
        "request.timeout.ms",
        "max.in.flight.requests.per.connection",
        "linger.ms",
        "compression.type",
        "transactional.id",
        "transaction.timeout.ms",
    )
    java = {
        k: str(settings[k]).lower() if isinstance(settings[k], bool) else str(settings[k])
        for k in keys
    }
    return java | {"max.block.ms": str(int(TXN_CALL_TIMEOUT * 1000))}


def run_java_producer(
    cfg: ProducerConfig, txn: TransactionConfig, bootstrap: str, history: Path, work: Path
) -> int:
    """Kafka's Java client as this producer: it writes `history` itself; its exit code."""
    from workloads.kafka.java_client import MAIN_CLASS, classpath, ensure
    from workloads.lifeline import die_with_parent

    ensure(txn.java_version)
    props = work / f"{cfg.process}.java.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in java_properties(cfg, txn, bootstrap).items()))
    argv = [
        "java",
        "-cp",
        classpath(txn.java_version),
        MAIN_CLASS,
        str(props),
        str(history),
        cfg.process,
        cfg.topic,
        str(cfg.count),
        str(cfg.rate),
        str(cfg.deadline),
        str(txn.size),
        str(txn.abort_ratio),
        txn.java_version,
        str(cfg.not_before),
    ]
    timeout = max(1.0, cfg.deadline - time.time()) + JAVA_SLACK
    try:
        return subprocess.run(
            argv, timeout=timeout, preexec_fn=die_with_parent, check=False
        ).returncode
    except subprocess.TimeoutExpired:
        log.error("the java client did not end %.0f s after its deadline", JAVA_SLACK)
        return 1
