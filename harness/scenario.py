"""Scenario files: what cluster to start, what load to run, which faults, what the claim expects.

A scenario is YAML validated with pydantic; an invalid one is reported as one line naming the
field, never as a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from compose.kafka import DEFAULT_KAFKA_LINE, MODES, Mode, nodes_of
from compose.kafka import KafkaClusterConfig as _KafkaConfig
from compose.rabbitmq import NODE_NAMES
from nemesis.network import CLIENTS

RABBITMQ_NODES: tuple[str, ...] = NODE_NAMES  # the compose file's services

# loss / safe / unavailable: claims.md. duplicates: at least one message duplicated and nothing
# acknowledged lost; no-duplicates: nothing lost and nothing duplicated. On Kafka a duplicate is
# a message written at two offsets (the observed log); elsewhere, one delivered twice.
# reordered: at least one message first delivered after a later one of its producer (FIFO per
# producer broken) and nothing acknowledged lost. A list of words (R7: [duplicates, reordered])
# expects every one of them; it is kept as one string joined by "+".
EXPECTATIONS = ("loss", "safe", "unavailable", "duplicates", "no-duplicates", "reordered")
COMBINABLE = frozenset({"duplicates", "reordered"})


def _joined(value: object) -> object:
    return "+".join(str(v) for v in value) if isinstance(value, list) else value


def known_expectation(value: str) -> str:
    words = value.split("+")
    for word in words:
        if word not in EXPECTATIONS:
            raise ValueError(f"expect {word!r} is not one of {', '.join(EXPECTATIONS)}")
    if len(words) > 1 and not set(words) <= COMBINABLE:
        raise ValueError(f"only {' and '.join(sorted(COMBINABLE))} can be expected together")
    return value


Expectation = Annotated[str, BeforeValidator(_joined), AfterValidator(known_expectation)]
PartitionHandling = Literal["ignore", "pause_minority", "autoheal", "pause_if_all_down"]
QueueType = Literal["mirrored", "quorum", "classic"]
NetworkOp = Literal["isolate", "partition", "cut", "cut-clients", "heal"]
ProcessOp = Literal["kill", "stop", "start", "pause", "resume", "restart", "power-loss"]
# 002's manual resolution (R4): memory high watermark 0 on the nodes, then wait until their
# queues hold nothing (at most `within` seconds).
ProcedureOp = Literal["block-publishers", "wait-drained"]


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
    # Each node's data directory on the power-loss filesystem (lazyfs): needed by power-loss.
    lazy_disks: bool = False
    nodes: Annotated[int, Field(ge=2, le=3)] = 3  # rabbit1..rabbitN
    # HAProxy in front: every client through it, all on the first node while it answers (R4).
    load_balancer: bool = False
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
    # Each body padded to this many bytes (0: producer and seq alone, about 30 bytes).
    body_bytes: Annotated[int, Field(ge=0, le=1_048_576)] = 0


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
    op: NetworkOp | ProcessOp | ProcedureOp
    nodes: list[str] = Field(default_factory=list)
    within: Annotated[float, Field(gt=0, le=3600)] = 120.0  # wait-drained: the bound
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


class ErrorExpectation(Strict):
    """Clients must see this: at least one `f` outcome (send, commit) that is not ok and whose
    error contains `error` (any error when empty)."""

    f: Literal["send", "commit"] = "send"
    error: str = ""


class ScenarioBase(Strict):
    """What every scenario has; each system adds its cluster, workload and nemesis steps."""

    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+$")]
    description: str = ""
    expect: Expectation
    expect_errors: list[ErrorExpectation] = Field(default_factory=list)
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

    @model_validator(mode="after")
    def _steps_fit_the_cluster(self) -> Scenario:
        known = RABBITMQ_NODES[: self.cluster.nodes]
        for i, step in enumerate(self.nemesis):
            if step.op == "power-loss" and not self.cluster.lazy_disks:
                raise ValueError(f"nemesis.{i}: power-loss needs cluster.lazy_disks: true")
            named = [*step.nodes, *step.from_, *step.to, *(n for g in step.groups for n in g)]
            if unknown := [n for n in named if n not in known]:
                raise ValueError(
                    f"nemesis.{i}: no node {unknown[0]!r} in a cluster of {self.cluster.nodes}"
                )
        return self


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
    # assign: every partition from the earliest offset, nothing committed. group: a consumer
    # group member (rebalances), committing offsets synchronously every `commit_every` records;
    # every commit's outcome goes to the history (f: commit).
    mode: Literal["assign", "group"] = "assign"
    commit_every: Annotated[int, Field(ge=1, le=100_000)] = 100


FINAL_READER = "final"  # the group of the final read (a reader id no scenario may take)


class KafkaWorkload(Strict):
    producers: Annotated[list[KafkaProducerSpec], Field(min_length=1)]
    readers: Annotated[list[KafkaReaderSpec], Field(min_length=1)]
    drain_timeout: Annotated[float, Field(gt=0, le=3600)] = 60.0
    # After the drain, a fresh reader reads the whole log from its first offset: what a reader
    # saw during a fault (a stale leader's writes, truncated later) is no proof the log kept it.
    final_read: bool = True

    @model_validator(mode="after")
    def _final_reader_id_is_reserved(self) -> KafkaWorkload:
        if self.final_read and any(r.id == FINAL_READER for r in self.readers):
            raise ValueError(f"reader id {FINAL_READER!r} is the final read's own")
        return self


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


# ---- kafka: real clusters (ZooKeeper mode, KRaft combined, KRaft with dedicated controllers) --

KafkaOp = Literal[
    "isolate",  # the node drops what every other node sends it (clients still reach it)
    "partition",  # groups of node names cut apart both ways
    "cut",  # from -> to dropped on arrival (both_ways: and back)
    "cut-clients",
    "cut-from-quorum",  # the target and the quorum (ZooKeeper or controllers) cut both ways
    "degrade",  # from -> to: loss_pct, delay_ms (needs sch_netem), rate_kbit
    "heal",
    "kill",
    "stop",
    "start",
    "restart",
    "pause",
    "resume",
    "power-loss",  # the targets killed at once, their unsynced writes dropped (lazy_disks), started
    "rolling-restart",  # each target in turn: stop, start, wait until it is back in every ISR
    "elect",  # preferred or unclean leader election through the admin API
    "leaders",  # record leader placement (K23); expect_balanced judges it
]
# A role resolved from live metadata when the step runs, "stopped" (nodes the nemesis has
# down), "@label" (what an earlier step with that label resolved to), or node names.
SELECTOR_ROLES = frozenset(
    {"leader", "follower", "followers", "isr", "in-sync-followers", "out-of-sync", "replicas"}
    | {"controller", "non-controller", "non-controllers", "quorum", "brokers", "stopped"}
)
Selector = str | list[str]
_NEEDS_TARGET = {"isolate", "cut-clients", "cut-from-quorum", "kill", "stop", "start", "restart"}
_NEEDS_TARGET |= {"pause", "resume", "power-loss"}


class KafkaClusterSpec(Strict):
    system: Literal["kafka"]
    # The modes this row applies to (claims.md: both unless the row says otherwise); the first
    # is the default, `harness run --mode` picks another.
    modes: Annotated[list[Mode], Field(min_length=1)] = Field(
        default_factory=lambda: list[Mode](("zk", "kraft"))
    )
    brokers: Annotated[int, Field(ge=3, le=6)] = 3
    topic: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]+$")] = "jepsen"
    partitions: Annotated[int, Field(ge=1, le=64)] = 1
    replication_factor: Annotated[int, Field(ge=1, le=6)] = 3
    # Explicit replicas per partition, preferred leader first (rack placement, K21/K22).
    replica_assignment: list[list[int]] | None = None
    racks: dict[int, str] = Field(default_factory=dict)
    min_insync_replicas: Annotated[int, Field(ge=1, le=6)] = 2
    unclean_leader_election: bool = False
    replica_lag_time_max_ms: Annotated[int, Field(ge=500, le=60_000)] = 5000
    session_timeout_ms: Annotated[int, Field(ge=2000, le=60_000)] = 6000
    auto_leader_rebalance: bool = False
    leader_imbalance_check_interval_seconds: Annotated[int, Field(ge=1, le=3600)] = 300
    flush_messages: Annotated[int, Field(ge=1)] | None = None
    # Every broker's log directory on the power-loss filesystem (lazyfs): needed by power-loss.
    lazy_disks: bool = False
    image: str | None = None
    zookeeper_image: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> KafkaClusterSpec:
        if len(set(self.modes)) != len(self.modes):
            raise ValueError("modes must not repeat")
        if self.replication_factor > self.brokers:
            raise ValueError("replication_factor exceeds the number of brokers")
        ids = set(range(1, self.brokers + 1))
        if self.replica_assignment is not None:
            if len(self.replica_assignment) != self.partitions:
                raise ValueError("replica_assignment needs one replica list per partition")
            for replicas in self.replica_assignment:
                if len(replicas) != self.replication_factor or len(set(replicas)) != len(replicas):
                    raise ValueError("each replica list has replication_factor distinct brokers")
                if not set(replicas) <= ids:
                    raise ValueError(f"replica_assignment names a broker outside 1..{self.brokers}")
        if not set(self.racks) <= ids:
            raise ValueError(f"racks names a broker outside 1..{self.brokers}")
        return self

    def config(self, mode: Mode, kafka_line: str = DEFAULT_KAFKA_LINE) -> _KafkaConfig:
        """The compose layer's cluster configuration for one mode and Kafka release line."""
        return _KafkaConfig(
            mode=mode,
            kafka_line=kafka_line,
            brokers=self.brokers,
            racks=dict(self.racks),
            min_insync_replicas=self.min_insync_replicas,
            unclean_leader_election=self.unclean_leader_election,
            replica_lag_time_max_ms=self.replica_lag_time_max_ms,
            session_timeout_ms=self.session_timeout_ms,
            auto_leader_rebalance=self.auto_leader_rebalance,
            leader_imbalance_check_interval_seconds=self.leader_imbalance_check_interval_seconds,
            flush_messages=self.flush_messages,
            lazy_disks=self.lazy_disks,
            image=self.image,
            zookeeper_image=self.zookeeper_image,
        )

    def node_names(self, mode: Mode) -> set[str]:
        return {n.name for n in nodes_of(self.config(mode), "0.0.0")}


class KafkaStep(Strict):
    at: Annotated[float, Field(ge=0, le=3600)]
    op: KafkaOp
    target: Selector | None = None
    from_: Selector | None = Field(default=None, alias="from")
    to: Selector | None = None
    both_ways: bool = False
    groups: list[list[str]] = Field(default_factory=list)
    partition: Annotated[int, Field(ge=0)] = 0  # whose leader/followers/ISR a role means
    loss_pct: Annotated[float, Field(ge=0, le=100)] = 0.0
    delay_ms: Annotated[int, Field(ge=0, le=60_000)] = 0
    jitter_ms: Annotated[int, Field(ge=0, le=60_000)] = 0
    rate_kbit: Annotated[int, Field(ge=0, le=10_000_000)] = 0
    election: Literal["preferred", "unclean"] = "preferred"
    within: Annotated[float, Field(gt=0, le=600)] = 60.0  # elect / rolling-restart: time bound
    label: str = ""
    expect_balanced: bool | None = None  # leaders: every partition led by its preferred replica

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _arguments(self) -> KafkaStep:
        for sel in (self.target, self.from_, self.to):
            if isinstance(sel, str) and sel not in SELECTOR_ROLES and not sel.startswith("@"):
                roles = ", ".join(sorted(SELECTOR_ROLES))
                raise ValueError(f"{sel!r} is not a role ({roles}), an @label or a node list")
        if self.op in _NEEDS_TARGET and self.target is None:
            raise ValueError(f"{self.op} needs a target (a role or node names)")
        if self.op in ("cut", "degrade") and (self.from_ is None or self.to is None):
            raise ValueError(f"{self.op} needs from and to")
        if self.op == "degrade" and not (self.loss_pct or self.delay_ms or self.rate_kbit):
            raise ValueError("degrade needs loss_pct, delay_ms or rate_kbit")
        if self.op == "partition" and (len(self.groups) < 2 or any(not g for g in self.groups)):
            raise ValueError("partition needs at least two non-empty groups")
        return self

    def named_nodes(self) -> list[str]:
        names = [
            n for sel in (self.target, self.from_, self.to) if isinstance(sel, list) for n in sel
        ]
        return names + [n for g in self.groups for n in g]


class KafkaScenario(ScenarioBase):
    claim: str | None = None  # row of shared/claims.md, e.g. "K4"
    cluster: KafkaClusterSpec
    workload: KafkaWorkload
    nemesis: list[KafkaStep] = Field(default_factory=list)

    @model_validator(mode="after")
    def _nodes_exist_in_every_mode(self) -> KafkaScenario:
        labels: set[str] = set()
        for i, step in enumerate(self.nemesis):
            for sel in (step.target, step.from_, step.to):
                if isinstance(sel, str) and sel.startswith("@") and sel[1:] not in labels:
                    raise ValueError(f"nemesis.{i}: {sel} names no earlier step's label")
            if step.label:
                labels.add(step.label)
        for mode in self.cluster.modes:
            known = self.cluster.node_names(mode) | {CLIENTS}
            for i, step in enumerate(self.nemesis):
                unknown = [n for n in step.named_nodes() if n not in known]
                if unknown:
                    raise ValueError(
                        f"nemesis.{i}: no node {unknown[0]!r} in mode {mode} "
                        f"(nodes are {', '.join(sorted(known))})"
                    )
                if step.op == "power-loss" and not self.cluster.lazy_disks:
                    raise ValueError(f"nemesis.{i}: power-loss needs cluster.lazy_disks: true")
                if step.op == "cut-from-quorum" and mode == "kraft":
                    raise ValueError(
                        f"nemesis.{i}: cut-from-quorum needs a quorum apart from the brokers "
                        "(modes zk or kraft-dedicated; in kraft every voter is a broker)"
                    )
        return self


AnyScenario = Scenario | KafkaMockScenario | KafkaScenario
MODE_NAMES: tuple[str, ...] = MODES


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
    models: dict[str, type[Scenario] | type[KafkaMockScenario] | type[KafkaScenario]] = {
        "kafka-mock": KafkaMockScenario,
        "kafka": KafkaScenario,
    }
    model = models.get(system, Scenario)
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
