"""A metadata operation asked of one node, as a client sees it: a durable classic queue declared
over AMQP through that node, and what came back within a bound.

A classic queue, not a quorum queue: its declare is a write to the metadata store and nothing
else (a quorum queue's declare also forms the queue's own Raft cluster, which a minority cannot
do under either store), so what the node answers is the metadata store's answer. Durable and not
exclusive, so that it outlives the probe's connection and can be looked for after the heal.

pika's blocking connection waits for an answer as long as the broker takes (Khepri answers a
minority's declare after its own timeout, 30 s by default): the declare runs in a thread of its
own and the caller waits `within` seconds for it; past that the answer is timed-out and the
thread is left to end with its connection (it is a daemon, and its late answer is dropped).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pika
import pika.exceptions

from contract.topology import Endpoint
from workloads.rabbitmq.topology import CONNECTION_ERRORS, params

Connect = Callable[[pika.ConnectionParameters], Any]  # pika.BlockingConnection's shape


@dataclass(frozen=True)
class DeclareAnswer:
    """One declare's outcome (contract.expectations.DECLARE_ANSWERS), how long it took, and the
    broker's reply code and text or the client's error ("" when accepted)."""

    answer: str
    seconds: float
    error: str = ""


def declare_queue(
    endpoint: Endpoint, queue: str, within: float, connect: Connect = pika.BlockingConnection
) -> DeclareAnswer:
    """Declares `queue` (durable, classic) through `endpoint`'s node; waits `within` seconds."""
    started = time.monotonic()
    said: list[DeclareAnswer] = []

    def ask() -> None:
        answer, error = _declare(endpoint, queue, connect)
        said.append(DeclareAnswer(answer, round(time.monotonic() - started, 3), error))

    worker = threading.Thread(target=ask, name=f"declare-{queue}", daemon=True)
    worker.start()
    worker.join(within)
    if said:
        return said[0]
    return DeclareAnswer(
        "timed-out", round(time.monotonic() - started, 3), f"no answer in {within} s"
    )


def _declare(endpoint: Endpoint, queue: str, connect: Connect) -> tuple[str, str]:
    try:
        conn = connect(params(endpoint))
    except CONNECTION_ERRORS as e:
        return "unreachable", _said(e)
    try:
        conn.channel().queue_declare(queue, durable=True)
        return "accepted", ""
    except (
        pika.exceptions.ChannelClosedByBroker,
        pika.exceptions.ConnectionClosedByBroker,
    ) as e:
        return "refused", f"{e.reply_code} {e.reply_text}"
    except CONNECTION_ERRORS as e:  # the connection lost before any answer
        return "unreachable", _said(e)
    finally:
        try:
            if conn.is_open:
                conn.close()
        except CONNECTION_ERRORS:
            pass


def _said(e: BaseException) -> str:
    """The client's error in one line: its class, and its text when it has one."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
