"""What every Kafka run shares, mock tier or real cluster: the clients and the drain."""

from __future__ import annotations

import signal
import time

from harness.runner import ScenarioRun


class KafkaClientsRun(ScenarioRun):
    """A run whose clients are workloads.kafka producers and readers."""

    client_module = "workloads.kafka"

    @property
    def bootstrap_servers(self) -> str:
        raise NotImplementedError

    def groups(self) -> list[str]:
        return [r.id for r in self.scenario.workload.readers]

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
        """Readers read every partition up to its high-water mark, then exit 0."""
        readers = self.groups()
        for name in readers:
            self.clients[name].send_signal(signal.SIGUSR1)
        deadline = time.time() + self.scenario.workload.drain_timeout + 30
        codes = {name: self._wait_client(name, deadline) for name in readers}
        self.manifest["consumer_exit_codes"] = codes
        self.manifest["drain_complete"] = all(code == 0 for code in codes.values())
