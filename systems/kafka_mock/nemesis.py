"""Faults on the kafka-mock tier: brokers down/up, leader moves, injected produce errors, delay.

Targets are roles (leader, followers, ISR, controller) resolved from live metadata when the
fault starts, or explicit broker ids. The mock cluster is reached through `MockFaults`, the
few calls the nemesis needs, so nothing here depends on how the cluster was started.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol

from confluent_kafka import KafkaError

from contract.history import HistoryWriter
from systems.kafka.targets import Metadata, resolve


class MockFaults(Protocol):
    def broker_down(self, broker: int) -> None: ...
    def broker_up(self, broker: int) -> None: ...
    def set_rtt(self, broker: int, rtt_ms: int) -> None: ...
    def set_leader(self, topic: str, partition: int, broker: int) -> None: ...
    def push_produce_errors(self, errors: list[int]) -> None: ...


class MockKafkaNemesis:
    def __init__(
        self,
        faults: MockFaults,
        metadata: Callable[[], Metadata],
        topic: str,
        history: HistoryWriter | None = None,
    ) -> None:
        self.faults = faults
        self.metadata = metadata
        self.topic = topic
        self.history = history
        self.down: set[int] = set()
        self.slow: set[int] = set()

    def brokers_for(self, role: str | None, brokers: list[int], partition: int) -> list[int]:
        if brokers:
            return sorted(brokers)
        md = self.metadata()
        by_name = {name: bid for bid, name in md.brokers.items()}
        return sorted(by_name[n] for n in resolve(md, role, self.topic, partition))  # type: ignore[arg-type]

    def apply(self, step: Any) -> None:
        """One scenario step (systems.kafka_mock.scenario.KafkaMockStep), by its op's handler."""
        HANDLERS[step.op](self, step)

    def _move_leader(self, step: Any) -> None:
        value = {"topic": self.topic, "partition": step.partition, "to": step.to}
        self._logged(
            "move-leader",
            value,
            lambda: self.faults.set_leader(self.topic, step.partition, step.to),
        )

    def _produce_errors(self, step: Any) -> None:
        codes = [getattr(KafkaError, name) for name in step.errors]
        self._logged(
            "inject-errors", {"errors": step.errors}, lambda: self.faults.push_produce_errors(codes)
        )

    def _on_brokers(self, f: str, act: Callable[[int], None], step: Any, **extra: Any) -> None:
        brokers = self.brokers_for(step.target, step.brokers, step.partition)
        value = {"target": step.target, "brokers": brokers, "partition": step.partition, **extra}
        self._logged(f, value, lambda: self._each(brokers, act))

    def _broker_down(self, step: Any) -> None:
        self._on_brokers("broker-down", self._down, step)

    def _broker_up(self, step: Any) -> None:
        self._on_brokers("broker-up", self._up, step)

    def _slow(self, step: Any) -> None:
        act = functools.partial(self._rtt, rtt_ms=step.rtt_ms)
        self._on_brokers("start-slow", act, step, rtt_ms=step.rtt_ms)

    def _each(self, brokers: list[int], act: Callable[[int], None]) -> None:
        for b in brokers:
            act(b)

    def _down(self, broker: int) -> None:
        self.faults.broker_down(broker)
        self.down.add(broker)

    def _up(self, broker: int) -> None:
        self.faults.broker_up(broker)
        self.down.discard(broker)

    def _rtt(self, broker: int, rtt_ms: int) -> None:
        self.faults.set_rtt(broker, rtt_ms)
        (self.slow.add if rtt_ms else self.slow.discard)(broker)

    def heal_all(self, force: bool = False) -> None:
        """Every broker up and fast again; idempotent."""
        if not (self.down or self.slow or force):
            return
        down, slow = sorted(self.down), sorted(self.slow)

        def heal() -> None:
            for b in down:
                self._up(b)
            for b in slow:
                self._rtt(b, 0)

        self._logged("heal", {"brokers_up": down, "rtt_reset": slow}, heal)

    def _logged(self, f: str, value: dict[str, Any], act: Callable[[], None]) -> None:
        if self.history:
            self.history.write("invoke", f, value=value)
        try:
            act()
        except Exception as e:
            if self.history:
                self.history.write("fail", f, value=value, error=str(e))
            raise
        if self.history:
            self.history.write("ok", f, value=value)


HANDLERS: dict[str, Callable[[MockKafkaNemesis, Any], None]] = {
    "heal": lambda m, _s: m.heal_all(force=True),
    "broker-down": MockKafkaNemesis._broker_down,
    "broker-up": MockKafkaNemesis._broker_up,
    "move-leader": MockKafkaNemesis._move_leader,
    "produce-errors": MockKafkaNemesis._produce_errors,
    "rtt": MockKafkaNemesis._slow,
}
