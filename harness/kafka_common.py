"""What every Kafka run shares, mock tier or real cluster: the clients and the drain."""

from __future__ import annotations

import signal
import time

from harness.runner import ScenarioRun
from harness.scenario import FINAL_READER


class KafkaClientsRun(ScenarioRun):
    """A run whose clients are workloads.kafka producers and readers."""

    client_module = "workloads.kafka"

    @property
    def bootstrap_servers(self) -> str:
        raise NotImplementedError

    def groups(self) -> list[str]:
        final = [FINAL_READER] if self.scenario.workload.final_read else []
        return [r.id for r in self.scenario.workload.readers] + final

    def _start_clients(self, start: float) -> list[str]:
        w, t, topic = self.scenario.workload, self.scenario.timeouts, self.scenario.cluster.topic
        common = {"bootstrap_servers": self.bootstrap_servers, "topic": topic}
        read_deadline = start + t.workload + t.recovery + w.drain_timeout + 30
        for r in w.readers:
            self._spawn(
                "reader",
                r.id,
                {
                    **common,
                    "group": r.id,
                    "deadline": read_deadline,
                    "mode": r.mode,
                    "commit_every": r.commit_every,
                },
            )
        for p in w.producers:
            self._spawn(
                "producer",
                p.id,
                {**common, **p.model_dump(exclude={"id"}), "deadline": start + t.workload},
            )
        return [p.id for p in w.producers]

    def _drain(self) -> None:
        """Readers read every partition up to its high-water mark, then exit 0; then the final
        read, a fresh reader from the first offset to the high-water marks."""
        readers = [r.id for r in self.scenario.workload.readers]
        for name in readers:
            self.clients[name].send_signal(signal.SIGUSR1)
        deadline = time.time() + self.scenario.workload.drain_timeout + 30
        codes = {name: self._wait_client(name, deadline) for name in readers}
        if self.scenario.workload.final_read:
            codes[FINAL_READER] = self._final_read()
        self.manifest["consumer_exit_codes"] = codes
        self.manifest["drain_complete"] = all(code == 0 for code in codes.values())

    def _final_read(self) -> int:
        deadline = time.time() + self.scenario.workload.drain_timeout + 30
        config = {
            "bootstrap_servers": self.bootstrap_servers,
            "topic": self.scenario.cluster.topic,
            "group": FINAL_READER,
            "deadline": deadline - 10,
            "final": True,
        }
        self._spawn("reader", FINAL_READER, config)
        return self._wait_client(FINAL_READER, deadline)
