"""A stream reader's position: each delivery's offset recorded, and the next session resumed
after the last offset read (as a Kafka consumer keeps its position)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from contract.history import HistoryWriter
from workloads.rabbitmq.clients import Consumer, ConsumerConfig
from workloads.rabbitmq.topology import declare_arguments


def consumer(tmp_path: Path, stream: bool) -> Consumer:
    cfg = ConsumerConfig("c1", str(tmp_path), [], "q", deadline=0.0, stream=stream)
    return Consumer(cfg, HistoryWriter(tmp_path, "c1", "rabbitmq"))


def test_a_stream_reader_starts_at_the_first_offset_and_resumes_after_the_last_read(
    tmp_path: Path,
) -> None:
    c = consumer(tmp_path, stream=True)
    assert c._consume_arguments() == {"x-stream-offset": "first"}
    delivery = SimpleNamespace(headers={"x-stream-offset": 41})
    assert c._position(delivery) == {"partition": 0, "offset": 41}
    assert c._consume_arguments() == {"x-stream-offset": 42}
    # A delivery without the header says nothing about the position.
    assert c._position(SimpleNamespace(headers=None)) == {}
    assert c._consume_arguments() == {"x-stream-offset": 42}


def test_a_queue_reader_has_no_offsets(tmp_path: Path) -> None:
    c = consumer(tmp_path, stream=False)
    assert c._consume_arguments() is None
    assert c._position(SimpleNamespace(headers={"x-stream-offset": 3})) == {}


def test_queues_are_declared_with_their_type() -> None:
    assert declare_arguments("stream") == {"x-queue-type": "stream"}
    assert declare_arguments("quorum") == {"x-queue-type": "quorum"}
    assert declare_arguments("mirrored") is None and declare_arguments("classic") is None


def test_a_stream_groups_position_is_after_the_highest_offset_its_receives_recorded(
    tmp_path: Path,
) -> None:
    from systems.rabbitmq.run import final_group, stream_positions

    with HistoryWriter(tmp_path, "live", "rabbitmq") as live:
        for offset in (0, 1, 5, 3):
            live.write("ok", "receive", group="s", producer="A", seq=offset + 1, offset=offset)
    with HistoryWriter(tmp_path, "final", "rabbitmq") as final:
        final.write("ok", "receive", group=final_group("s"), producer="A", seq=1, offset=0)
        final.write("ok", "send", producer="A", seq=9)
    (tmp_path / "cut.jsonl").write_text('{"f": "receive", "group": "s", "offs')  # killed mid-line
    assert stream_positions(tmp_path, {"s", "s.final", "other"}) == {"s": 6, "s.final": 1}


def test_a_dead_lettered_delivery_says_why_and_another_says_nothing() -> None:
    from workloads.rabbitmq.clients import death_reason

    first = SimpleNamespace(headers={"x-first-death-reason": b"expired", "x-death": []})
    listed = SimpleNamespace(headers={"x-death": [{"reason": "rejected", "count": 1}]})
    assert death_reason(first) == "expired" and death_reason(listed) == "rejected"
    assert death_reason(SimpleNamespace(headers=None)) is None
    assert death_reason(SimpleNamespace(headers={"x-death": "odd"})) is None


class CountingChannel:
    """A channel whose passive declare counts `ready` messages in the queue."""

    def __init__(self, ready: int) -> None:
        self.ready, self.asked = ready, 0

    def queue_declare(self, queue: str, passive: bool = False) -> SimpleNamespace:
        assert passive and queue == "q"
        self.asked += 1
        return SimpleNamespace(method=SimpleNamespace(message_count=self.ready))


def test_a_draining_consumer_ends_when_the_broker_says_its_queue_is_empty(tmp_path: Path) -> None:
    import time

    c = consumer(tmp_path, stream=False)
    empty, full = CountingChannel(0), CountingChannel(3)
    assert not c._broker_says_empty(empty) and empty.asked == 0  # not draining yet
    c.start_drain()
    assert not c._broker_says_empty(empty) and empty.asked == 0  # not quiet long enough
    c.last_activity = time.monotonic() - 2
    assert not c._broker_says_empty(full) and full.asked == 1
    assert c._broker_says_empty(empty)
    c.unacked = 1  # what it logged must be acknowledged first
    assert not c._broker_says_empty(empty)


def test_a_draining_stream_reader_never_asks_the_queue_depth(tmp_path: Path) -> None:
    c = consumer(tmp_path, stream=True)
    c.start_drain()
    c.last_activity -= 60
    channel = CountingChannel(0)
    assert not c._broker_says_empty(channel) and channel.asked == 0
