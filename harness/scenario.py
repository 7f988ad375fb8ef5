"""Scenario files: what cluster to start, what load to run, which faults, what the claim expects.

A scenario is YAML validated with pydantic; an invalid one is reported as one line naming the
field, never as a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from compose.rabbitmq import NODE_NAMES

RABBITMQ_NODES: tuple[str, ...] = NODE_NAMES  # the compose file's services

Expectation = Literal["loss", "safe", "unavailable"]
PartitionHandling = Literal["ignore", "pause_minority", "autoheal", "pause_if_all_down"]
QueueType = Literal["mirrored", "quorum", "classic"]
NetworkOp = Literal["isolate", "partition", "cut", "cut-clients", "heal"]
ProcessOp = Literal["kill", "stop", "start", "pause", "resume", "restart"]


class ScenarioError(Exception):
    """A scenario file that cannot be used; the message is one line for the user."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RabbitMQCluster(Strict):
    system: Literal["rabbitmq"] = "rabbitmq"
    partition_handling: PartitionHandling
    # pause_if_all_down: a node pauses when it cannot reach any of these.
    pause_if_all_down_nodes: list[str] = Field(default_factory=list)
    pause_if_all_down_recover: Literal["ignore", "autoheal"] = "autoheal"
    queue_type: QueueType
    # Seconds; short so a partition is detected in seconds, not a minute.
    net_ticktime: Annotated[int, Field(ge=2, le=120)] = 5
    image: str | None = None

    @model_validator(mode="after")
    def _pause_if_all_down_needs_nodes(self) -> RabbitMQCluster:
        if self.partition_handling == "pause_if_all_down" and not self.pause_if_all_down_nodes:
            raise ValueError("pause_if_all_down needs pause_if_all_down_nodes")
        _check_nodes(self.pause_if_all_down_nodes)
        return self


class Publisher(Strict):
    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]+$")]
    # Connection list in the order the client tries it (002: the factory had all three).
    nodes: list[str] = Field(default_factory=lambda: list(RABBITMQ_NODES))
    count: Annotated[int, Field(ge=1, le=10_000_000)]
    rate: Annotated[float, Field(ge=0)] = (
        0.0  # messages per second; 0 = as fast as in_flight allows
    )
    in_flight: Annotated[int, Field(ge=1, le=10_000)] = 1
    confirm_timeout: Annotated[float, Field(gt=0, le=600)] = 10.0


class Consumer(Strict):
    queue: str
    nodes: list[str] = Field(default_factory=lambda: list(RABBITMQ_NODES))
    prefetch: Annotated[int, Field(ge=1, le=65_535)] = 1
    delay: Annotated[float, Field(ge=0, le=60)] = 0.0  # seconds per message before the ack


class Drain(Strict):
    quiet: Annotated[float, Field(gt=0, le=600)] = 5.0
    timeout: Annotated[float, Field(gt=0, le=3600)] = 120.0


class Workload(Strict):
    exchange: str = "jepsen.fanout"
    queues: Annotated[list[str], Field(min_length=1)]
    publishers: Annotated[list[Publisher], Field(min_length=1)]
    consumers: list[Consumer]
    drain: Drain = Drain()

    @model_validator(mode="after")
    def _consistent(self) -> Workload:
        ids = [p.id for p in self.publishers]
        if len(ids) != len(set(ids)):
            raise ValueError("publisher ids must be unique")
        for c in self.consumers:
            if c.queue not in self.queues:
                raise ValueError(f"consumer queue {c.queue!r} is not in queues")
        for q in self.queues:
            if not any(c.queue == q for c in self.consumers):
                raise ValueError(f"queue {q!r} has no consumer")
        for p in self.publishers:
            _check_nodes(p.nodes)
        for c in self.consumers:
            _check_nodes(c.nodes)
        return self


class NemesisStep(Strict):
    at: Annotated[float, Field(ge=0, le=3600)]  # seconds after the workload starts
    op: NetworkOp | ProcessOp
    nodes: list[str] = Field(default_factory=list)
    groups: list[list[str]] = Field(default_factory=list)
    from_: list[str] = Field(default_factory=list, alias="from")
    to: list[str] = Field(default_factory=list)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _arguments(self) -> NemesisStep:
        for names in (self.nodes, self.from_, self.to, *self.groups):
            _check_nodes(names)
        if self.op == "partition":
            if len(self.groups) < 2 or any(not g for g in self.groups):
                raise ValueError("partition needs at least two non-empty groups")
        elif self.op == "cut":
            if not self.from_ or not self.to:
                raise ValueError("cut needs from and to")
        elif self.op != "heal" and not self.nodes:
            raise ValueError(f"{self.op} needs nodes")
        return self


class Timeouts(Strict):
    cluster_up: Annotated[float, Field(gt=0, le=1800)] = 240.0
    workload: Annotated[float, Field(gt=0, le=7200)] = 600.0
    recovery: Annotated[float, Field(gt=0, le=1800)] = 120.0


class ScenarioBase(Strict):
    """What every scenario has; each system adds its cluster, workload and nemesis steps."""

    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+$")]
    description: str = ""
    expect: Expectation
    timeouts: Timeouts = Timeouts()

    @model_validator(mode="after")
    def _ordered(self) -> ScenarioBase:
        times = [step.at for step in getattr(self, "nemesis", [])]
        if times != sorted(times):
            raise ValueError("nemesis steps must be in time order")
        return self


class Scenario(ScenarioBase):
    claim: str | None = None  # row of shared/claims.md, e.g. "R1"; None for a baseline
    cluster: RabbitMQCluster
    workload: Workload
    nemesis: list[NemesisStep] = Field(default_factory=list)


# ---- kafka-mock: librdkafka's mock cluster (proves our code, never a K-claim) -------------

KafkaMockOp = Literal["broker-down", "broker-up", "move-leader", "produce-errors", "rtt", "heal"]
KafkaRole = Literal["leader", "followers", "isr", "replicas", "controller", "non-controllers"]


class KafkaMockClusterSpec(Strict):
    system: Literal["kafka-mock"]
    brokers: Annotated[int, Field(ge=1, le=9)] = 3
    topic: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]+$")] = "jepsen"
    partitions: Annotated[int, Field(ge=1, le=64)] = 3
    replication_factor: Annotated[int, Field(ge=1, le=9)] = 3

    @model_validator(mode="after")
    def _rf_fits(self) -> KafkaMockClusterSpec:
        if self.replication_factor > self.brokers:
            raise ValueError("replication_factor exceeds the number of brokers")
        return self


class KafkaProducerSpec(Strict):
    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]+$")]
    count: Annotated[int, Field(ge=1, le=10_000_000)]
    rate: Annotated[float, Field(ge=0)] = 0.0
    acks: Literal["0", "1", "all"] = "all"
    enable_idempotence: bool = False
    retries: Annotated[int, Field(ge=0)] = 2147483647
    delivery_timeout_ms: Annotated[int, Field(ge=1)] = 30000
    request_timeout_ms: Annotated[int, Field(ge=1)] = 10000
    max_in_flight: Annotated[int, Field(ge=1, le=1000)] = 5


class KafkaReaderSpec(Strict):
    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]+$")]


class KafkaWorkload(Strict):
    producers: Annotated[list[KafkaProducerSpec], Field(min_length=1)]
    readers: Annotated[list[KafkaReaderSpec], Field(min_length=1)]
    drain_timeout: Annotated[float, Field(gt=0, le=3600)] = 60.0


class KafkaMockStep(Strict):
    at: Annotated[float, Field(ge=0, le=3600)]
    op: KafkaMockOp
    # Whom to hit: a role resolved from live metadata at the moment of the fault, or ids.
    target: KafkaRole | None = None
    brokers: list[int] = Field(default_factory=list)
    partition: Annotated[int, Field(ge=0)] = 0
    to: int | None = None  # move-leader: the new leader's broker id
    errors: list[str] = Field(default_factory=list)  # produce-errors: KafkaError names
    rtt_ms: Annotated[int, Field(ge=0, le=60_000)] = 0

    @model_validator(mode="after")
    def _arguments(self) -> KafkaMockStep:
        if self.op in ("broker-down", "broker-up", "rtt") and not (self.target or self.brokers):
            raise ValueError(f"{self.op} needs a target role or brokers")
        if self.op == "move-leader" and self.to is None:
            raise ValueError("move-leader needs to")
        if self.op == "produce-errors" and not self.errors:
            raise ValueError("produce-errors needs errors")
        return self


class KafkaMockScenario(ScenarioBase):
    claim: None = None  # the mock tier never tests a K-claim
    cluster: KafkaMockClusterSpec
    workload: KafkaWorkload
    nemesis: list[KafkaMockStep] = Field(default_factory=list)


AnyScenario = Scenario | KafkaMockScenario


def _check_nodes(names: list[str]) -> None:
    unknown = [n for n in names if n not in RABBITMQ_NODES]
    if unknown:
        raise ValueError(f"unknown node {unknown[0]!r} (nodes are {', '.join(RABBITMQ_NODES)})")


def _first_error(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(top level)"
    msg = first["msg"].removeprefix("Value error, ")
    more = len(err.errors()) - 1
    return f"{where}: {msg}" + (f" (and {more} more)" if more else "")


def parse_scenario(text: str, source: str = "<scenario>") -> AnyScenario:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ScenarioError(f"{source}:{where} not valid YAML") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: expected a mapping of scenario fields")
    cluster = data.get("cluster")
    system = cluster.get("system", "rabbitmq") if isinstance(cluster, dict) else "rabbitmq"
    model: type[Scenario] | type[KafkaMockScenario] = (
        KafkaMockScenario if system == "kafka-mock" else Scenario
    )
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise ScenarioError(f"{source}: {_first_error(e)}") from None


def load_scenario(path: Path) -> AnyScenario:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ScenarioError(f"{path}: cannot read ({e.strerror})") from None
    return parse_scenario(text, str(path))


def find_scenario(name: str, scenarios_dir: Path) -> Path:
    """A scenario by path or by id (scenarios/<id>.yaml)."""
    as_path = Path(name)
    if as_path.suffix in (".yaml", ".yml") or as_path.exists():
        return as_path
    for candidate in (scenarios_dir / f"{name}.yaml", scenarios_dir / f"{name}.yml"):
        if candidate.exists():
            return candidate
    known = ", ".join(sorted(p.stem for p in scenarios_dir.glob("*.yaml")))
    raise ScenarioError(f"no scenario {name!r} (known: {known})")
