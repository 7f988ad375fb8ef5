"""The metadata probe's client: one declare through one node, and the four answers it can give,
against a faked pika connection (what RabbitMQ raises is pika's own exception types)."""

from __future__ import annotations

import threading
from typing import Any

import pika
import pika.exceptions

from contract.expectations import DECLARE_ANSWERS
from contract.topology import Endpoint
from workloads.rabbitmq.declare import declare_queue

EP = Endpoint("rabbit3", "127.0.0.1", 5673)
KHEPRI_REFUSAL = (
    "INTERNAL_ERROR - Could not declare queue 'bj-declare-1-rabbit3' in vhost '/' on node "
    "'rabbit@rabbit3' because the metadata store operation timed out"
)


class Channel:
    def __init__(self, declare: Any) -> None:
        self.declare = declare
        self.asked: list[tuple[str, dict[str, Any]]] = []

    def queue_declare(self, queue: str, **kwargs: Any) -> None:
        self.asked.append((queue, kwargs))
        self.declare()


class Connection:
    def __init__(self, declare: Any) -> None:
        self.chan = Channel(declare)
        self.is_open = True
        self.closed = False

    def channel(self) -> Channel:
        return self.chan

    def close(self) -> None:
        self.closed, self.is_open = True, False


def connecting(conn: Connection, seen: list[pika.ConnectionParameters]) -> Any:
    def connect(params: pika.ConnectionParameters) -> Connection:
        seen.append(params)
        return conn

    return connect


def test_an_accepted_declare_is_a_durable_classic_queue_through_the_nodes_own_port() -> None:
    conn, seen = Connection(lambda: None), []
    answer = declare_queue(EP, "bj-declare-1-rabbit3", 5, connecting(conn, seen))
    assert (answer.answer, answer.error) == ("accepted", "")
    assert 0 <= answer.seconds < 5
    # No x-queue-type: a classic queue, whose declare is a metadata write and nothing else.
    assert conn.chan.asked == [("bj-declare-1-rabbit3", {"durable": True})]
    assert (seen[0].host, seen[0].port) == ("127.0.0.1", 5673) and conn.closed


def test_the_brokers_refusal_is_its_reply_code_and_text() -> None:
    def refuse() -> None:
        raise pika.exceptions.ConnectionClosedByBroker(541, KHEPRI_REFUSAL)

    answer = declare_queue(EP, "q", 5, connecting(Connection(refuse), []))
    assert answer.answer == "refused"
    assert answer.error == f"541 {KHEPRI_REFUSAL}"

    def channel_refusal() -> None:
        raise pika.exceptions.ChannelClosedByBroker(406, "PRECONDITION_FAILED - inequivalent arg")

    said = declare_queue(EP, "q", 5, connecting(Connection(channel_refusal), []))
    assert (said.answer, said.error) == ("refused", "406 PRECONDITION_FAILED - inequivalent arg")


def test_a_node_that_takes_no_connection_or_drops_it_is_unreachable() -> None:
    def closed_port(params: pika.ConnectionParameters) -> Connection:
        raise pika.exceptions.AMQPConnectionError("Connection refused")

    answer = declare_queue(EP, "q", 5, closed_port)
    assert answer.answer == "unreachable" and "AMQPConnectionError" in answer.error

    def lost() -> None:
        raise pika.exceptions.StreamLostError("Transport indicated EOF")

    said = declare_queue(EP, "q", 5, connecting(Connection(lost), []))
    assert said.answer == "unreachable" and "StreamLostError: Transport indicated EOF" in said.error


def test_no_answer_within_the_bound_is_timed_out_and_the_caller_does_not_wait_longer() -> None:
    release = threading.Event()
    conn = Connection(lambda: release.wait(10))
    try:
        answer = declare_queue(EP, "q", 0.3, connecting(conn, []))
    finally:
        release.set()  # the probe's thread ends with its connection
    assert answer.answer == "timed-out" and answer.error == "no answer in 0.3 s"
    assert 0.3 <= answer.seconds < 3


def test_every_answer_the_client_gives_is_a_word_the_expectations_know() -> None:
    answers = set()
    for declare in (lambda: None, _raise(pika.exceptions.ConnectionClosedByBroker(541, "x"))):
        answers.add(declare_queue(EP, "q", 5, connecting(Connection(declare), [])).answer)
    answers.add(declare_queue(EP, "q", 5, _raise_on_connect).answer)
    assert answers <= set(DECLARE_ANSWERS) and len(answers) == 3


def _raise(e: BaseException) -> Any:
    def go() -> None:
        raise e

    return go


def _raise_on_connect(params: pika.ConnectionParameters) -> Connection:
    raise OSError("no route to host")
