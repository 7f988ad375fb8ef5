"""RabbitMQ's metadata probe: the `declare` step asks each target node to declare a throwaway
queue of its own (workloads.rabbitmq.declare), all at once, and writes what each answered; once
the cluster has reunited after the run's final heal, `after_heal` asks every node which of those
queues it lists, writes it, and deletes them.

A probe, not a fault: it changes nothing a fault window counts (registry window "none"). Which
side of a partition each target was on is the checker's to say, from the nemesis's own cuts
(checkers.declares); the step records only what the client was told.

Over AMQP, through each node's own published port (the harness's path, never the clients'
proxy), because that is what shows the broker's answer as an application sees it: the reply code
and text of a refusal, or nothing at all. After the heal the nodes are asked with `rabbitmqctl
list_queues`, each its own view, so that a node whose metadata never rejoined the others' says
so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from contract.topology import Endpoint
from nemesis.containers import Nemesis, NemesisError
from workloads.rabbitmq.declare import DeclareAnswer, declare_queue

PREFIX = "bj-declare"
# After the reunion, the nodes' lists are read until two readings in a row agree (a metadata
# store still catching up), at most this many times, this far apart.
READINGS = 5
READING_INTERVAL = 2.0


class DeclareControl(Protocol):
    """What the probe asks of the cluster (systems.rabbitmq.cluster.RabbitMQCluster)."""

    def endpoints(self) -> list[Endpoint]: ...

    def queue_names(self, node: str) -> list[str]: ...

    def delete_queue(self, node: str, queue: str) -> None: ...


Ask = Callable[[Endpoint, str, float], DeclareAnswer]


def queue_name(step: int, node: str) -> str:
    """The probe queue of the run's `step`-th declare step on `node`: unique in the run, and
    saying which node was asked."""
    return f"{PREFIX}-{step}-{node}"


@dataclass
class Declares:
    """The run's probes: each declare step's queues, for the look after the heal."""

    control: DeclareControl
    nodes: list[str]
    ask: Ask = declare_queue
    queues: list[str] = field(default_factory=list)  # every queue a probe named, in order
    steps: int = 0
    sleep: Callable[[float], None] = time.sleep

    def probe(self, net: Nemesis, nodes: list[str], within: float) -> None:
        """Each node asked to declare a queue of its own, together; the step's ok holds each
        node's answer, how long it took and what the broker or the client said."""
        targets = sorted(set(nodes))
        if not targets:
            raise NemesisError("declare: no node to ask")
        self.steps += 1
        names = {n: queue_name(self.steps, n) for n in targets}
        endpoints = {e.node: e for e in self.control.endpoints()}
        if missing := [n for n in targets if n not in endpoints]:
            raise NemesisError(f"declare: {missing[0]} publishes no AMQP port")
        self.queues += names.values()

        def apply() -> dict[str, Any]:
            with ThreadPoolExecutor(len(targets)) as pool:
                asked = {n: pool.submit(self.ask, endpoints[n], names[n], within) for n in targets}
                return {"answers": {n: asdict(f.result()) for n, f in asked.items()}}

        net.logged("declare", {"nodes": targets, "queues": names, "within": within}, apply)

    def after_heal(self, net: Nemesis) -> None:
        """Which node lists which probe queue once the cluster has reunited; then each queue
        deleted through a node that lists it. Nothing to do when no declare step ran."""
        if not self.queues:
            return
        queues = list(self.queues)

        def apply() -> dict[str, Any]:
            listed, unanswered = self._settled_lists()
            found = {q: sorted(n for n, names in listed.items() if q in names) for q in queues}
            return {
                "found": found,
                "asked": sorted(listed),
                "unanswered": unanswered,
                "not_deleted": self._delete(found),
            }

        net.logged("declared", {"queues": queues}, apply)

    def _settled_lists(self) -> tuple[dict[str, set[str]], dict[str, str]]:
        """Each node's list of the probe queues, read until two readings agree (or READINGS
        readings), and the nodes that did not answer, with why."""
        last: dict[str, set[str]] | None = None
        unanswered: dict[str, str] = {}
        for reading in range(READINGS):
            if reading:
                self.sleep(READING_INTERVAL)
            listed: dict[str, set[str]] = {}
            unanswered = {}
            for node in self.nodes:
                try:
                    names = self.control.queue_names(node)
                except Exception as e:  # noqa: BLE001 - a node that does not answer says so
                    unanswered[node] = str(e).strip().splitlines()[0] if str(e).strip() else "?"
                    continue
                listed[node] = {q for q in names if q in self.queues}
            if listed == last:
                break
            last = listed
        return last or {}, unanswered

    def _delete(self, found: dict[str, list[str]]) -> dict[str, str]:
        """Each found queue deleted through a node that lists it; those that could not be, with
        why (a leftover empty queue harms nothing the checker counts)."""
        left: dict[str, str] = {}
        for queue, nodes in found.items():
            for node in nodes:
                try:
                    self.control.delete_queue(node, queue)
                    left.pop(queue, None)
                    break
                except Exception as e:  # noqa: BLE001 - try the next node that lists it
                    left[queue] = f"{node}: {e}"
        return left
