"""The Kafka reader without a broker: it waits for its topic, and never calls nothing caught
up."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest


class FakeReaderConsumer:
    """Answers list_topics with no partitions `empty` times, then with one partition."""

    def __init__(self, empty: int) -> None:
        self.empty = empty

    def list_topics(self, topic: str, timeout: float) -> Any:
        partitions = {} if self.empty > 0 else {0: object()}
        self.empty -= 1
        tm = SimpleNamespace(error=None, partitions=partitions)
        return SimpleNamespace(topics={topic: tm})


def test_reader_waits_for_the_topic_and_never_calls_nothing_caught_up() -> None:
    import time

    from workloads.kafka.base import TopicNotFound, partitions_of
    from workloads.kafka.clients import _caught_up

    assert partitions_of(FakeReaderConsumer(2), "t", time.time() + 10) == [0]  # type: ignore[arg-type]
    with pytest.raises(TopicNotFound):
        partitions_of(FakeReaderConsumer(100), "t", time.time() + 1)  # type: ignore[arg-type]
    assert _caught_up(None, "t", {}) is False  # type: ignore[arg-type]
