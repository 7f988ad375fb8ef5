"""How a RabbitMQ client reaches the brokers (pika's connection parameters, what a lost
connection raises), and the exchange and queues a run declares before its clients start."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pika
import pika.exceptions
from pika.adapters.utils.connection_workflow import AMQPConnectorException

from contract.topology import Endpoint

HEARTBEAT = 5  # seconds; a dead TCP connection is noticed within two of these
# pika's ConnectionParameters every client connects with unless its scenario says otherwise:
# one attempt per node (the client goes on to the next node itself), bounded waits.
CONNECTION_DEFAULTS: dict[str, Any] = {
    "heartbeat": HEARTBEAT,
    "blocked_connection_timeout": 30,
    "connection_attempts": 1,
    "socket_timeout": 5,
    "stack_timeout": 10,
}
# What a lost, refused or timed-out connection raises (pika's connector errors are not
# AMQPErrors).
CONNECTION_ERRORS = (pika.exceptions.AMQPError, AMQPConnectorException, OSError)


def params(ep: Endpoint, connection: Mapping[str, Any] | None = None) -> pika.ConnectionParameters:
    """Where and how a client connects: the harness's parameters, then the scenario's."""
    return pika.ConnectionParameters(
        host=ep.host, port=ep.port, **{**CONNECTION_DEFAULTS, **(connection or {})}
    )


def declare_arguments(
    queue_type: str, own: Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """queue.declare's arguments for a queue type (classic and mirrored queues need none: a
    policy mirrors them), then the queue's own."""
    typed = {"x-queue-type": queue_type} if queue_type in ("quorum", "stream") else {}
    return {**typed, **(own or {})} or None


class DeclareRefused(Exception):
    """The broker refused a queue's declare (its arguments); one line naming the queue."""


def declare_topology(
    endpoints: list[Endpoint],
    exchange: str,
    queues: list[str],
    queue_type: str,
    arguments: Mapping[str, Mapping[str, Any]] | None = None,
    unbound: list[str] | None = None,
) -> None:
    """A durable fanout exchange bound to durable queues of the scenario's kind, and the
    `unbound` queues (dead-letter queues) beside it; `arguments`: a queue's own declare
    arguments, over its type's."""
    last: Exception | None = None
    for ep in endpoints:
        try:
            conn = pika.BlockingConnection(params(ep))
        except CONNECTION_ERRORS as e:
            last = e
            continue
        try:
            channel = conn.channel()
            channel.exchange_declare(exchange, exchange_type="fanout", durable=True)
            # A dead-letter queue first: a queue dead-letters from its first message on.
            for q in [*(unbound or []), *queues]:
                args = declare_arguments(queue_type, (arguments or {}).get(q))
                try:
                    channel.queue_declare(q, durable=True, arguments=args)
                except pika.exceptions.ChannelClosedByBroker as e:
                    raise DeclareRefused(f"RabbitMQ refused queue {q}: {e.reply_text}") from None
                if q in queues:
                    channel.queue_bind(q, exchange)
        finally:
            if conn.is_open:
                conn.close()
        return
    raise ConnectionError(f"no node accepted a connection to declare queues: {last!r}")
