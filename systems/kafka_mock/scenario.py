"""A kafka-mock scenario: librdkafka's mock cluster in the harness's process, our Kafka clients,
faults through the mock's own API. Proves the harness; never a K-claim."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from faults.registry import op as fault
from systems.kafka.workload_spec import KafkaWorkload
from systems.scenario import KnownOp, ScenarioBase, Strict

# The roles the mock's metadata can answer (it has no control-plane quorum).
MockRole = Literal["leader", "followers", "isr", "replicas", "controller", "non-controllers"]


class KafkaMockClusterSpec(Strict):
    system: Literal["kafka-mock"]
    """kafka-mock: librdkafka's mock cluster, in the harness's process."""
    brokers: Annotated[int, Field(ge=1, le=9)] = 3
    """Mock brokers."""
    topic: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]+$")] = "jepsen"
    """The workload's topic."""
    partitions: Annotated[int, Field(ge=1, le=64)] = 3
    """Partitions of the workload's topic."""
    replication_factor: Annotated[int, Field(ge=1, le=9)] = 3
    """Replicas of each partition."""

    @model_validator(mode="after")
    def _rf_fits(self) -> KafkaMockClusterSpec:
        if self.replication_factor > self.brokers:
            raise ValueError("replication_factor exceeds the number of brokers")
        return self


class KafkaMockStep(Strict):
    at: Annotated[float, Field(ge=0, le=3600)]
    """Seconds after the workload starts."""
    op: Annotated[str, KnownOp("kafka-mock")]
    """The fault (or heal)."""
    after_traffic: bool = False
    """A step meant to come after the workload's traffic (a merge, a last restart): the vacuity
    check does not count it among the faults that must meet the traffic."""
    target: MockRole | None = None
    """Whom to hit: a role resolved from live metadata at the moment of the fault, or ids."""
    brokers: list[int] = Field(default_factory=list)
    partition: Annotated[int, Field(ge=0)] = 0
    to: int | None = None  # move-leader: the new leader's broker id
    errors: list[str] = Field(default_factory=list)
    """produce-errors: KafkaError names."""
    rtt_ms: Annotated[int, Field(ge=0, le=60_000)] = 0

    @model_validator(mode="after")
    def _arguments(self) -> KafkaMockStep:
        if fault(self.op).arguments == "target" and not (self.target or self.brokers):
            raise ValueError(f"{self.op} needs a target role or brokers")
        if self.op == "move-leader" and self.to is None:
            raise ValueError("move-leader needs to")
        if self.op == "produce-errors" and not self.errors:
            raise ValueError("produce-errors needs errors")
        return self


class KafkaMockScenario(ScenarioBase):
    claim: None = None
    """the mock tier never tests a K-claim."""
    cluster: KafkaMockClusterSpec
    """The cluster: its system, size, release and configuration."""
    workload: KafkaWorkload
    """The clients: who writes, who reads, and how."""
    nemesis: list[KafkaMockStep] = Field(default_factory=list)
    """The faults, in time order: each step names an op, when it starts and whom it hits."""

    @model_validator(mode="after")
    def _producers_start_within_the_workload(self) -> KafkaMockScenario:
        if line := self.workload.late_start_refusal(self.timeouts.workload):
            raise ValueError(line)
        return self

    @model_validator(mode="after")
    def _librdkafka_only(self) -> KafkaMockScenario:
        for p in self.workload.producers:
            if p.transaction is not None and p.transaction.client == "java":
                raise ValueError(
                    f"producer {p.id}: the java client needs a real cluster (the mock serves "
                    "librdkafka's protocol versions, not the Java client's)"
                )
        for c in self.workload.copiers:
            if c.client == "java":
                raise ValueError(
                    f"copier {c.id}: the java client needs a real cluster (the mock serves "
                    "librdkafka's protocol versions, not the Java client's)"
                )
        if self.workload.share_consumers is not None:
            raise ValueError(
                "share_consumers need a real cluster (Kafka 4.2 on): the mock tier runs none"
            )
        return self
