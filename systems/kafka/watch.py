"""Leader and ISR of every partition, as a client's metadata shows them, through the workload
and the recovery: history/partition-watch.jsonl gets a `partition-state` line whenever they
change (and the first state of each partition), and a `coordinator-state` line whenever the
broker coordinating one of the workload's transactional or group ids changes (the leader of the
internal topic's partition the id hashes to; the first state of each id too).

A client's view, not the controller's: during a partition the broker that answers may be cut
off and answer from stale metadata (K4 found exactly that), so what it records is what clients
were told. A question that gets no answer within its timeout is recorded as nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from contract.history import COORDINATOR_STATE, PARTITION_STATE, HistoryWriter
from systems.kafka.targets import COORDINATOR_TOPICS, coordinator_partition

log = logging.getLogger("harness")

POLL_SECONDS = 1.0
ASK_TIMEOUT = 2.0


class PartitionWatch:
    """A daemon thread asking for the topic's metadata every second until stopped."""

    def __init__(
        self,
        admin_client: Any,
        topic: str,
        node_of: dict[int, str],
        history: HistoryWriter,
        coordinated: list[tuple[str, str]] | None = None,
    ) -> None:
        self.admin_client = admin_client  # confluent_kafka AdminClient
        self.topic = topic
        self.node_of = node_of  # broker id -> node name
        self.history = history
        self.coordinated = coordinated or []  # (role, id): whose coordinators to follow
        self._last: dict[int, tuple[str | None, tuple[str, ...]]] = {}
        self._coordinator: dict[tuple[str, str], tuple[int, str | None]] = {}
        # When each internal topic's metadata last answered: a change was made after it.
        self._answered: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="partition-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Idempotent; the thread ends within one question's timeout."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=ASK_TIMEOUT + POLL_SECONDS + 5)
        self.history.close()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll_once()
            except Exception as e:  # noqa: BLE001 - a watch never stops a run
                log.debug("partition watch: %s", e)
            self._stop.wait(POLL_SECONDS)

    def poll_once(self) -> None:
        self.admin_client.poll(0)  # serves the client's queued log lines to its logger
        self.poll_partitions()
        for topic in dict.fromkeys(COORDINATOR_TOPICS[role] for role, _ in self.coordinated):
            self.poll_coordinators(topic)

    def poll_partitions(self) -> None:
        metadata = self.admin_client.list_topics(self.topic, timeout=ASK_TIMEOUT)
        topic = metadata.topics.get(self.topic)
        if topic is None or topic.error is not None:
            return
        for p, pm in sorted(topic.partitions.items()):
            leader = self.node_of.get(pm.leader) if pm.leader >= 0 else None
            isr = tuple(sorted(self.node_of.get(b, str(b)) for b in pm.isrs))
            if self._last.get(p) == (leader, isr):
                continue
            self._last[p] = (leader, isr)
            self.history.write(
                "info",
                PARTITION_STATE,
                stream=self.topic,
                partition=p,
                node=leader,
                value={
                    "leader": leader,
                    "isr": list(isr),
                    "answered_by": self.node_of.get(metadata.orig_broker_id),
                },
            )

    def poll_coordinators(self, internal_topic: str) -> None:
        """The coordinator of each followed id whose role lives in `internal_topic` (which
        exists only once a client has asked for a coordinator)."""
        metadata = self.admin_client.list_topics(internal_topic, timeout=ASK_TIMEOUT)
        topic = metadata.topics.get(internal_topic)
        if topic is None or topic.error is not None or not topic.partitions:
            return
        since, self._answered[internal_topic] = self._answered.get(internal_topic), time.time()
        for role, key in self.coordinated:
            if COORDINATOR_TOPICS[role] != internal_topic:
                continue
            p = coordinator_partition(key, len(topic.partitions))
            pm = topic.partitions.get(p)
            leader = self.node_of.get(pm.leader) if pm is not None and pm.leader >= 0 else None
            if self._coordinator.get((role, key)) == (p, leader):
                continue
            self._coordinator[(role, key)] = (p, leader)
            self.history.write(
                "info",
                COORDINATOR_STATE,
                stream=internal_topic,
                partition=p,
                node=leader,
                value={
                    "role": role,
                    "key": key,
                    "leader": leader,
                    "answered_by": self.node_of.get(metadata.orig_broker_id),
                    # The previous answer's time: the change came between it and this one.
                    "since": since,
                },
            )
