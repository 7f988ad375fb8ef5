"""Static vacuity: a scenario whose faults cannot meet its traffic, said before it runs.

A run's coverage (checkers.coverage) calls a pass vacuous, and so inconclusive, when no message
was acknowledged while a fault was in effect and none acknowledged earlier was still waiting to
be delivered as one began. Some schedules can only end that way, whatever the brokers do: every
fault comes after the senders have sent everything and the readers have read it, or after the
workload's bound, when the producers have stopped. `vacuity_warnings` says so from the scenario
alone, one line per problem, so that `harness validate` and `harness run` warn before an hour
of cluster time is spent on a run that can only end "inconclusive".

Only steps that begin a fault count (the fault registry's windows: a kill, a cut, a pause, a
restart); a heal, a start, an election or a snapshot carries no fault of its own. A scenario
without fault steps gets no warning: a chaos base's steps are drawn later, and a baseline runs
none on purpose.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import floor
from typing import Protocol

from faults.registry import FAULT_WINDOWS, op, window_of
from systems.kafka.scenario import KafkaScenario
from systems.kafka.workload_spec import KafkaWorkload
from systems.kafka_mock.scenario import KafkaMockScenario
from systems.rabbitmq.scenario import RabbitMQScenario, Workload

# How fast an unthrottled sender could send at most, in messages per second. The faster it
# could be, the sooner its sends could end: a schedule is only sound when its first fault comes
# before that, on any machine. `make bench-clients` measured our Kafka producer near 63,000/s
# and our RabbitMQ publisher near 1,000/s with one confirm in flight, 9,400/s with 100, on two
# cores (docs/history.md); these bounds leave room for a faster machine.
KAFKA_SEND_BOUND = 100_000.0
RABBITMQ_SEND_BOUND_PER_IN_FLIGHT = 2_500.0
RABBITMQ_SEND_BOUND = 25_000.0


class Step(Protocol):
    """What this reads of a nemesis step, whatever its system."""

    @property
    def at(self) -> float: ...

    @property
    def op(self) -> str: ...

    @property
    def after_traffic(self) -> bool: ...


@dataclass(frozen=True)
class Sender:
    """A client that sends the workload's messages: a Kafka producer, a RabbitMQ publisher."""

    name: str  # "producer P1", "publisher A"
    count: int
    rate: float  # messages per second; 0: as fast as it can
    bound: float  # at most this fast when unthrottled
    start_at: float = 0.0

    def fastest_rate(self) -> float:
        return self.rate if self.rate > 0 else self.bound

    def earliest_end(self) -> float:
        """The soonest its last send can happen, in seconds after the workload starts."""
        return self.start_at + self.count / self.fastest_rate()

    def pace(self) -> str:
        if self.rate > 0:
            return f"at {_number(self.rate)}/s"
        return f"unthrottled, assumed at most {_number(self.bound)}/s"


def vacuity_warnings(
    spec: KafkaScenario | KafkaMockScenario | RabbitMQScenario,
) -> list[str]:
    """One line per reason the scenario's faults cannot meet its traffic (see the module's
    docstring), each naming the step and the second or the setting it would need."""
    steps: Sequence[Step] = spec.nemesis
    faults = [
        (i, step.op, step.at)
        for i, step in enumerate(steps)
        if is_fault(step.op) and not step.after_traffic
    ]
    if not faults:
        return []
    workload_end = spec.timeouts.workload
    senders = senders_of(spec)
    kind = senders[0].name.split()[0]  # producer, publisher
    warnings = [
        f"nemesis.{i} ({name}) at +{_number(at)} s is not before the workload's end "
        f"(timeouts.workload {_number(workload_end)}): the {kind}s have stopped by then, so "
        f"it can only land in the drain; give timeouts.workload more than {_number(at)}, or "
        "mark the step after_traffic: true if it is meant to come after the traffic"
        for i, name, at in faults
        if at >= workload_end
    ]
    first, name, at = faults[0]
    if at >= workload_end:
        return warnings  # every fault is past the bound: said above, step by step
    ends = [min(s.earliest_end(), workload_end) for s in senders]
    if max(ends) > at or reading_lasts_until(spec) > at:
        return warnings
    for s in senders:
        comes = "comes" if s.rate > 0 else "may come"
        warnings.append(
            f"nemesis.{first} ({name}) at +{_number(at)} s, the first fault, {comes} after "
            f"{s.name} has sent its {_number(s.count)} messages ({s.pace()}: by "
            f"+{_number(s.earliest_end())} s): every fault falls in the drain, with nothing in "
            f"flight to test; give it rate ≤ {_number(_down(s.count / (at - s.start_at)))}/s or "
            f"a count above {_number(floor(s.fastest_rate() * (at - s.start_at)))}"
        )
    return warnings


def is_fault(name: str) -> bool:
    """Whether a step of this op begins a fault (a heal, a start, an election does not)."""
    return any(window_of(f) in FAULT_WINDOWS for f in op(name).writes)


def senders_of(spec: KafkaScenario | KafkaMockScenario | RabbitMQScenario) -> list[Sender]:
    """Every client that sends the workload's messages. A Kafka copier sends only what the
    producers sent (its copies end with theirs, at the soonest), so the producers stand for it."""
    if isinstance(spec.workload, KafkaWorkload):
        return [
            Sender(f"producer {p.id}", p.count, p.rate, KAFKA_SEND_BOUND, p.start_at)
            for p in spec.workload.producers
        ]
    return [
        Sender(
            f"publisher {p.id}",
            p.count,
            p.rate,
            min(RABBITMQ_SEND_BOUND, RABBITMQ_SEND_BOUND_PER_IN_FLIGHT * p.in_flight),
        )
        for p in spec.workload.publishers
    ]


def reading_lasts_until(spec: KafkaScenario | KafkaMockScenario | RabbitMQScenario) -> float:
    """The soonest every message can have been delivered once, in seconds after the workload
    starts, when the readers are slowed on purpose (`delay`): a fault that comes while a backlog
    waits still meets acknowledged messages it could lose. 0 when some reader keeps up."""
    total = sum(s.count for s in senders_of(spec))
    if isinstance(spec.workload, KafkaWorkload):
        # Each reader of the input reads every record; readers of the copy read what the
        # copiers committed, which aborts make fewer, so they bound nothing.
        delays = [r.delay for r in spec.workload.readers if r.topic == "input"]
        return total * min(delays) if delays else 0.0
    return min(_queue_drained(spec.workload, q, total) for q in spec.workload.queues)


def _queue_drained(workload: Workload, queue: str, total: int) -> float:
    """The soonest a queue's consumers (its dead-letter queue's too) can have taken `total`
    messages, each consumer one per `delay`."""
    group = {queue, workload.dead_letter.get(queue)}
    delays = [c.delay for c in workload.consumers if c.queue in group]
    if not delays or min(delays) == 0:
        return 0.0
    return total / sum(1 / d for d in delays)


def _down(rate: float) -> float:
    """A rate rounded down to what a line says of it, never to 0 (which means unthrottled)."""
    return floor(rate) if rate >= 100 else max(0.1, floor(rate * 10) / 10)


def _number(value: float) -> str:
    """A figure as a line says it: 20 000, 0.2, 2 000."""
    if value >= 100 or value == int(value):
        return f"{round(value):,}".replace(",", " ")
    return f"{value:.2g}" if value < 1 else f"{value:.1f}".rstrip("0").rstrip(".")
