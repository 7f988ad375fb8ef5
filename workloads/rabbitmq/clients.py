"""RabbitMQ clients: confirming publishers and acking consumers that write the history.

Each client runs as its own process (`python -m workloads.rabbitmq.clients publisher|consumer
CONFIG`), so that one killed mid-run loses nothing it had already logged and a slow consumer
cannot stall a publisher. Every client stops by itself: at its message count, its drain's quiet
period, or its deadline."""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import random
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pika
import pika.exceptions
from pika.adapters.select_connection import SelectConnection
from pika.channel import Channel
from tenacity import Retrying, retry_if_result, wait_exponential

from contract.history import HistoryWriter, decode_body, encode_body
from contract.topology import Endpoint
from workloads.lifeline import tie_to_harness
from workloads.rabbitmq.topology import CONNECTION_ERRORS, HEARTBEAT, params

log = logging.getLogger("workloads.rabbitmq.clients")


@dataclass(frozen=True)
class PublisherConfig:
    process: str
    history_dir: str
    endpoints: list[Endpoint]
    exchange: str
    count: int
    deadline: float  # Unix time by which the publisher stops, whatever is left
    rate: float = 0.0
    in_flight: int = 1
    confirm_timeout: float = 10.0
    body_bytes: int = 0
    connection: dict[str, Any] = field(default_factory=dict)  # over CONNECTION_DEFAULTS


@dataclass(frozen=True)
class ConsumerConfig:
    process: str
    history_dir: str
    endpoints: list[Endpoint]
    queue: str
    deadline: float
    prefetch: int = 1
    delay: float = 0.0
    drain_quiet: float = 5.0
    drain_timeout: float = 120.0
    drain_at_start: bool = False  # a fresh consumer sent in to finish a drain
    # A stream: read by offset from the first, each delivery's offset recorded, and resumed
    # after the last one read when a connection is lost (as a Kafka consumer keeps its position).
    stream: bool = False
    group: str | None = None  # the reader group the history names; None: the queue
    start_offset: int | None = None  # a stream: the first offset to read (None: the first)
    connection: dict[str, Any] = field(default_factory=dict)  # over CONNECTION_DEFAULTS
    # How it reads: subscribe (basic.consume), poll (basic.get), or mixed (a coin flipped from
    # `seed` for each connection, as the RabbitMQ team's Jepsen clients flip one per client).
    mode: str = "subscribe"
    # How it acknowledges: manual (each delivery once logged), multiple (every `prefetch`
    # deliveries, and when the queue goes quiet, with multiple=true) or auto (the broker
    # forgets a message as it sends it: one in flight when a connection drops is gone).
    ack: str = "manual"
    seed: int = 0


def _retry_until(deadline: float) -> Retrying:
    """Reconnect with backoff until the work is done (True) or the deadline passes."""
    return Retrying(
        stop=lambda _: time.time() >= deadline,
        wait=wait_exponential(multiplier=0.1, max=2),
        retry=retry_if_result(lambda done: not done),
        retry_error_callback=lambda _: False,
    )


POLL_IDLE_S = 0.1  # a polling consumer's pause after basic.get found the queue empty
# Draining, a consumer quiet this long, with everything it logged acknowledged, asks the broker
# whether the queue holds anything more: an empty queue ends its drain there, not after the
# whole quiet period (the run asks the broker again once every consumer ended, and sends a fresh
# consumer to a queue that is not empty after all).
EMPTY_AFTER_S = 1.0

# ---- publisher ---------------------------------------------------------------------------


@dataclass
class _Outstanding:
    seq: int
    sent: float  # monotonic


@dataclass
class Publisher:
    """Publishes seq 1..count with confirms, persistent and mandatory.

    Confirm -> ok; nack or returned unroutable -> fail; confirm timeout, channel or
    connection loss before the confirm -> info (the broker may or may not have it).
    """

    cfg: PublisherConfig
    history: HistoryWriter
    next_seq: int = 1
    pending: dict[int, _Outstanding] = field(default_factory=dict)
    returned: set[int] = field(default_factory=set)
    _conn: SelectConnection | None = None
    _channel: Channel | None = None
    _endpoint: Endpoint | None = None
    _tag: int = 0
    _next_send_at: float = 0.0
    _properties: pika.BasicProperties = field(init=False)
    _pump_timer: Any = None  # the ioloop's handle of the next timed pump

    def __post_init__(self) -> None:
        # Persistent, and the same for every message: made once.
        headers = {"producer": self.cfg.process}
        self._properties = pika.BasicProperties(delivery_mode=2, headers=headers)

    def run(self) -> None:
        _retry_until(self.cfg.deadline)(self._round)
        # Whatever is still unconfirmed has an unknown outcome.
        self._resolve_all_info("publisher stopped before a confirm")

    def done(self) -> bool:
        return self.next_seq > self.cfg.count and not self.pending

    def _round(self) -> bool:
        for ep in self.cfg.endpoints:  # in order, as a connection factory given every node
            if self.done() or time.time() >= self.cfg.deadline:
                break
            self._session(ep)
        return self.done()

    def _session(self, ep: Endpoint) -> None:
        self._endpoint = ep
        self._pump_timer = None  # a timer of the last session's loop never fires
        self._conn = SelectConnection(
            params(ep, self.cfg.connection),
            on_open_callback=self._on_open,
            on_open_error_callback=self._on_open_error,
            on_close_callback=self._on_closed,
        )
        self._conn.ioloop.call_later(
            max(0.0, self.cfg.deadline - time.time()), self._stop_at_deadline
        )
        self._conn.ioloop.start()
        self._conn = self._channel = None

    def _on_open(self, conn: SelectConnection) -> None:
        log.info("connected to %s", self._endpoint)
        conn.channel(on_open_callback=self._on_channel)

    def _on_open_error(self, conn: SelectConnection, err: BaseException) -> None:
        log.info("cannot connect to %s: %r", self._endpoint, err)
        conn.ioloop.stop()

    def _on_channel(self, channel: Channel) -> None:
        self._channel = channel
        channel.add_on_close_callback(self._on_channel_closed)
        channel.add_on_return_callback(self._on_return)
        channel.confirm_delivery(ack_nack_callback=self._on_confirm, callback=self._on_confirming)

    def _on_confirming(self, _frame: Any) -> None:
        self._tag = 0  # delivery tags count from 1 on each channel
        self._pump()
        self._check_timeouts()

    def _on_channel_closed(self, _channel: Channel, reason: BaseException) -> None:
        log.info("channel closed: %r", reason)
        self._resolve_all_info(f"channel closed: {reason!r}")
        self._close()

    def _on_closed(self, conn: SelectConnection, reason: BaseException) -> None:
        log.info("connection closed: %r", reason)
        self._resolve_all_info(f"connection closed: {reason!r}")
        conn.ioloop.stop()

    def _stop_at_deadline(self) -> None:
        # Said before the close, which would call them a closed channel's: the broker refused
        # nothing, we stopped waiting.
        self._resolve_all_info("publisher stopped at its deadline before a confirm")
        self._close()

    def _close(self) -> None:
        conn = self._conn
        if conn is None:
            return
        if conn.is_open:
            conn.close()
            # A close on a dead TCP connection can wait long for CloseOk: bound it (by the
            # harness's heartbeat when the scenario turned heartbeats off).
            heartbeat = self.cfg.connection.get("heartbeat") or HEARTBEAT
            conn.ioloop.call_later(2 * heartbeat, conn.ioloop.stop)
        elif not conn.is_closing:
            conn.ioloop.stop()

    def _pump(self) -> None:
        channel, conn = self._channel, self._conn
        if channel is None or conn is None or not channel.is_open:
            return
        now = time.monotonic()
        while (
            len(self.pending) < self.cfg.in_flight
            and self.next_seq <= self.cfg.count
            and now >= self._next_send_at
            and time.time() < self.cfg.deadline
        ):
            self._publish(channel, self.next_seq)
            self.next_seq += 1
            if self.cfg.rate > 0:
                interval = 1.0 / self.cfg.rate
                # No burst to catch up after a stall: the rate is an upper bound.
                self._next_send_at = max(self._next_send_at + interval, now - interval)
        if self.done():
            self._close()
            return
        # One timer at most: a pump called by a confirm must not start a timer chain of its
        # own (one per confirm, each firing every 50 ms, was most of the publisher's CPU).
        if self._pump_timer is None:
            wait = self._next_send_at - now if self.cfg.rate > 0 else 0.05
            self._pump_timer = conn.ioloop.call_later(min(max(wait, 0.002), 0.05), self._timed_pump)

    def _timed_pump(self) -> None:
        self._pump_timer = None
        self._pump()

    def _publish(self, channel: Channel, seq: int) -> None:
        producer = self.cfg.process
        node = self._endpoint.node if self._endpoint else None
        self.history.write(
            "invoke", "send", stream=self.cfg.exchange, producer=producer, seq=seq, node=node
        )
        try:
            channel.basic_publish(
                exchange=self.cfg.exchange,
                routing_key="",
                body=encode_body(producer, seq, self.cfg.body_bytes),
                properties=self._properties,
                mandatory=True,
            )
        except CONNECTION_ERRORS as e:
            self._complete(seq, "info", f"publish raised {e!r}")
            self._close()
            return
        self._tag += 1
        self.pending[self._tag] = _Outstanding(seq, time.monotonic())

    def _on_return(self, _ch: Channel, _method: Any, _props: Any, body: bytes) -> None:
        _, seq = decode_body(body)
        if seq is not None:
            self.returned.add(seq)

    def _on_confirm(self, frame: Any) -> None:
        method = frame.method
        if method.multiple:  # pending holds tags in the order they were published
            tags = list(itertools.takewhile(lambda t: t <= method.delivery_tag, self.pending))
        else:
            tags = [method.delivery_tag]
        acked = isinstance(method, pika.spec.Basic.Ack)
        for tag in tags:
            out = self.pending.pop(tag, None)
            if out is None:
                continue
            if not acked:
                self._complete(out.seq, "fail", "nack")
            elif out.seq in self.returned:
                self._complete(out.seq, "fail", "unroutable (returned)")
            else:
                self._complete(out.seq, "ok", None)
        self._pump()

    def _check_timeouts(self) -> None:
        conn = self._conn
        if conn is None or not conn.is_open:
            return
        now = time.monotonic()
        if any(now - o.sent > self.cfg.confirm_timeout for o in self.pending.values()):
            # The channel's state is unknown: give up on it and reconnect.
            self._resolve_all_info(f"no confirm within {self.cfg.confirm_timeout} s")
            self._close()
            return
        conn.ioloop.call_later(0.2, self._check_timeouts)

    def _resolve_all_info(self, error: str) -> None:
        for tag in sorted(self.pending):
            self._complete(self.pending[tag].seq, "info", error)
        self.pending.clear()

    def _complete(self, seq: int, type: Any, error: str | None) -> None:
        self.returned.discard(seq)
        node = self._endpoint.node if self._endpoint else None
        self.history.write(
            type,
            "send",
            stream=self.cfg.exchange,
            producer=self.cfg.process,
            seq=seq,
            node=node,
            error=error,
        )


# ---- consumer ----------------------------------------------------------------------------


@dataclass
class Consumer:
    """Consumes with manual acks; logs each delivery before acking it.

    Until told to drain (SIGUSR1) it waits `delay` per message to build a backlog; draining,
    it reads without delay until the broker says the queue is empty (EMPTY_AFTER_S after its
    last delivery), or it stays quiet for `drain_quiet` seconds while connected, or
    `drain_timeout` passes.
    """

    cfg: ConsumerConfig
    history: HistoryWriter
    draining: bool = False
    drain_started: float = 0.0
    last_activity: float = 0.0
    finished: bool = False
    drain_timed_out: bool = False
    next_offset: int | None = None  # a stream: where the next session starts
    unacked: int = 0  # ack multiple: deliveries logged, not yet acknowledged
    last_tag: int | None = None  # ack multiple: the newest of them

    def __post_init__(self) -> None:
        self.next_offset = self.cfg.start_offset
        self.coin = random.Random(f"{self.cfg.seed}:{self.cfg.process}")

    def start_drain(self, *_: Any) -> None:
        if not self.draining:
            self.draining = True
            self.drain_started = self.last_activity = time.monotonic()

    def run(self) -> None:
        _retry_until(self.cfg.deadline)(self._round)

    def _should_stop(self) -> bool:
        if time.time() >= self.cfg.deadline:
            return True
        if not self.draining:
            return False
        now = time.monotonic()
        if now - self.drain_started >= self.cfg.drain_timeout:
            self.drain_timed_out = True
            return True
        return now - self.last_activity >= self.cfg.drain_quiet

    def _round(self) -> bool:
        for ep in self.cfg.endpoints:
            if self.finished or self._should_stop():
                self.finished = True
                break
            self._session(ep)
        return self.finished

    def _session(self, ep: Endpoint) -> None:
        try:
            conn = pika.BlockingConnection(params(ep, self.cfg.connection))
        except CONNECTION_ERRORS as e:
            log.info("cannot connect to %s: %r", ep, e)
            return
        log.info("connected to %s", ep)
        self.last_activity = max(self.last_activity, time.monotonic())
        self.unacked, self.last_tag = 0, None  # delivery tags are a channel's own
        try:
            channel = conn.channel()
            channel.basic_qos(prefetch_count=self.cfg.prefetch)
            mode = self._session_mode()
            self.history.write(
                "ok",
                "open",
                stream=self.cfg.queue,
                group=self.cfg.group or self.cfg.queue,
                node=ep.node,
                value={"mode": mode, "ack": self.cfg.ack, "prefetch": self.cfg.prefetch},
            )
            if mode == "poll":
                self._poll(conn, channel, ep)
            else:
                self._subscribe(conn, channel, ep)
            # ack multiple: what was logged since the last ack, before the channel goes (else
            # the broker requeues it, and a drain reads it again).
            self._ack_pending(channel)
            if conn.is_open:
                conn.close()
        except CONNECTION_ERRORS as e:
            log.info("session with %s ended: %r", ep, e)

    def _session_mode(self) -> str:
        if self.cfg.mode != "mixed":
            return self.cfg.mode
        return "poll" if self.coin.random() < 0.5 else "subscribe"

    def _subscribe(self, conn: Any, channel: Any, ep: Endpoint) -> None:
        deliveries = channel.consume(
            self.cfg.queue,
            auto_ack=self.cfg.ack == "auto",
            inactivity_timeout=0.25,
            arguments=self._consume_arguments(),
        )
        for method, props, body in deliveries:
            if self._should_stop():
                self.finished = True
                break
            if method is None:
                self._ack_pending(channel)
                if self._broker_says_empty(channel):
                    self.finished = True
                    break
                continue
            self._delivered(conn, channel, ep, method, props, body)

    def _broker_says_empty(self, channel: Any) -> bool:
        """Draining, quiet for EMPTY_AFTER_S, nothing unacknowledged: whether the broker counts
        no message ready in the queue. Not for a stream, which keeps what was read: quiet alone
        ends its drain."""
        if not self.draining or self.cfg.stream or self.unacked:
            return False
        if time.monotonic() - self.last_activity < EMPTY_AFTER_S:
            return False
        try:
            declared = channel.queue_declare(self.cfg.queue, passive=True)
        except CONNECTION_ERRORS:
            return False  # the session's own error handling takes it from here
        return int(declared.method.message_count) == 0

    def _poll(self, conn: Any, channel: Any, ep: Endpoint) -> None:
        """basic.get until told to stop; an empty queue is asked again after POLL_IDLE_S."""
        while not self._should_stop():
            method, props, body = channel.basic_get(self.cfg.queue, auto_ack=self.cfg.ack == "auto")
            if method is None:
                self._ack_pending(channel)
                if self._broker_says_empty(channel):
                    break
                conn.sleep(POLL_IDLE_S)
                continue
            self._delivered(conn, channel, ep, method, props, body)
        self.finished = True

    def _delivered(
        self, conn: Any, channel: Any, ep: Endpoint, method: Any, props: Any, body: bytes
    ) -> None:
        """A delivery logged, then (after the backlog's delay) acknowledged as the mode says."""
        producer, seq = decode_body(body)
        death = death_reason(props)
        self.history.write(
            "ok",
            "receive",
            stream=self.cfg.queue,
            group=self.cfg.group or self.cfg.queue,
            producer=producer,
            seq=seq,
            node=ep.node,
            redelivered=bool(method.redelivered),
            **self._position(props),
            **({"value": {"death": death}} if death else {}),
        )
        if self.cfg.delay and not self.draining:
            conn.sleep(self.cfg.delay)
        if self.cfg.ack == "manual":
            channel.basic_ack(method.delivery_tag)
        elif self.cfg.ack == "multiple":
            self.unacked, self.last_tag = self.unacked + 1, method.delivery_tag
            if self.unacked >= self.cfg.prefetch:
                self._ack_pending(channel)
        self.last_activity = time.monotonic()

    def _ack_pending(self, channel: Any) -> None:
        """ack multiple: everything logged so far, in one basic.ack."""
        if self.last_tag is not None:
            channel.basic_ack(self.last_tag, multiple=True)
            self.unacked, self.last_tag = 0, None

    def _consume_arguments(self) -> dict[str, Any] | None:
        if not self.cfg.stream:
            return None
        return {"x-stream-offset": "first" if self.next_offset is None else self.next_offset}

    def _position(self, props: Any) -> dict[str, Any]:
        """A stream delivery's place in the log (one log per stream: partition 0)."""
        if not self.cfg.stream:
            return {}
        offset = (props.headers or {}).get("x-stream-offset")
        if not isinstance(offset, int):
            return {}
        self.next_offset = offset + 1
        return {"partition": 0, "offset": offset}


# ---- dead letters and the entry point ------------------------------------------------------------


def death_reason(props: Any) -> str | None:
    """Why a delivery was dead-lettered (expired, rejected, maxlen, delivery_limit), from the
    headers RabbitMQ adds when it dead-letters a message; None for one that was not."""
    headers = getattr(props, "headers", None) or {}
    reason = headers.get("x-first-death-reason")
    if reason is None and isinstance(headers.get("x-death"), list) and headers["x-death"]:
        first = headers["x-death"][0]
        reason = first.get("reason") if isinstance(first, dict) else None
    if isinstance(reason, bytes):
        reason = reason.decode(errors="replace")
    return str(reason) if reason else None


def _load(cls: type, path: Path) -> Any:
    data = json.loads(path.read_text())
    data["endpoints"] = [Endpoint(**e) for e in data["endpoints"]]
    return cls(**data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workloads.rabbitmq.clients")
    parser.add_argument("role", choices=["publisher", "consumer"])
    parser.add_argument("config", type=Path)
    args = parser.parse_args(argv)
    tie_to_harness()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr
    )
    logging.getLogger("pika").setLevel(logging.WARNING)
    if args.role == "publisher":
        pcfg: PublisherConfig = _load(PublisherConfig, args.config)
        with HistoryWriter(Path(pcfg.history_dir), pcfg.process, "rabbitmq") as history:
            Publisher(pcfg, history).run()
        return 0
    ccfg: ConsumerConfig = _load(ConsumerConfig, args.config)
    with HistoryWriter(Path(ccfg.history_dir), ccfg.process, "rabbitmq") as history:
        consumer = Consumer(ccfg, history)
        signal.signal(signal.SIGUSR1, consumer.start_drain)
        if ccfg.drain_at_start:
            consumer.start_drain()
        consumer.run()
        if consumer.drain_timed_out:
            log.warning("drain timed out after %.0f s", ccfg.drain_timeout)
            return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
