"""A RabbitMQ scenario: the cluster (partition handling, queue type, nodes, lazy disks, a load
balancer, the user's own rabbitmq.conf keys, advanced.config and policies), the publishers and
consumers (their queues' arguments, their connections), and the nemesis steps."""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AliasChoices, ConfigDict, Field, model_validator

from compose.releases import SPEC_PATTERN
from contract.expectations import AfterHeal, DeclareWord
from contract.versions import version_key
from faults.registry import op as fault
from nemesis.picks import RANDOM_NODE, Shape, shape_refusal
from systems.problems import KeyProblem, did_you_mean
from systems.rabbitmq.cluster import NODE_NAMES
from systems.rabbitmq.membership import KHEPRI_ALWAYS
from systems.rabbitmq.policy import Policy
from systems.rabbitmq.settings import (
    ScalarField,
    advanced_refusal,
    conf_refusal,
    policies_refusal,
    queue_arguments_refusal,
    sets_partition_handling,
)
from systems.rabbitmq.upgrade_path import step_fields_refusal, upgrade_refusal
from systems.scenario import (
    CorruptFiles,
    CorruptHow,
    CorruptLength,
    CorruptWhile,
    DiskCall,
    DiskGlob,
    Keep,
    KnownOp,
    MessageCount,
    NodeNames,
    Probability,
    ScenarioBase,
    Seed,
    StepOffset,
    Strict,
    client_path_refusal,
    clock_refusal,
    disk_refusal,
    fake_clock_refusal,
)

RABBITMQ_NODES: tuple[str, ...] = NODE_NAMES  # the compose file's services
# A step may aim at a role of the workload's first queue (quorum queue or stream), resolved when
# the step runs: its leader, its followers, the nodes that hold no replica of it (a queue of
# fewer members than nodes: x-quorum-initial-group-size); or at the nodes an earlier step
# resolved (@label).
QUEUE_ROLES = ("leader", "followers", "non-members")
# Or at a node drawn anew when the step runs, from the run's seed (nemesis.picks).
DRAWN = (RANDOM_NODE,)
# The first line that ignores cluster_partition_handling (Khepri, not Mnesia, holds the
# cluster's metadata), where a scenario need not choose one.
IGNORES_PARTITION_HANDLING = (4, 3)
PartitionHandling = Literal["ignore", "pause_minority", "autoheal", "pause_if_all_down"]
# Streams (3.9+): append-only replicated logs read by offset; mirrored: classic queues under an
# ha-mode policy, which RabbitMQ 4.0 removed.
QueueType = Literal["mirrored", "quorum", "classic", "stream"]
# Where a release keeps its metadata (queues, exchanges, bindings, users): Mnesia up to 4.1
# (Khepri there only behind a feature flag the harness never enables), Khepri from 4.2.
MetadataStore = Literal["mnesia", "khepri"]


class RabbitMQClusterSpec(Strict):
    system: Literal["rabbitmq"] = "rabbitmq"
    """rabbitmq (the default)."""
    partition_handling: PartitionHandling | None = None
    """Required unless rabbitmq_conf (or advanced_config) sets cluster_partition_handling, or the
    release is 4.3 or later (which ignores it)."""
    pause_if_all_down_nodes: list[str] = Field(default_factory=list)
    """pause_if_all_down: a node pauses when it cannot reach any of these."""
    pause_if_all_down_recover: Literal["ignore", "autoheal"] = "autoheal"
    """pause_if_all_down: what a node does once it reaches them again."""
    queue_type: QueueType
    """The workload's queues: classic, mirrored (3.x), quorum or stream."""
    net_ticktime: Annotated[int, Field(ge=2, le=120)] = 5
    """Seconds; short so a partition is detected in seconds, not a minute."""
    lazy_disks: bool = False
    """Each node's data directory on the power-loss filesystem (lazyfs): needed by power-loss."""
    fake_clock: bool = False
    """Every node's processes under libfaketime, their clock set by the harness: needed by clock
    and clock-ok (docs/clock-faults.md; the image must carry the library: make setup's do)."""
    nodes: Annotated[int, Field(ge=1, le=len(NODE_NAMES))] = 3
    """rabbit1..rabbitN (1 to 7; the RabbitMQ team's Jepsen suite runs 5)."""
    load_balancer: bool = False
    """HAProxy in front: every client through it, all on the first node while it answers (R4)."""
    version: Annotated[str, Field(pattern=SPEC_PATTERN)] | None = None
    """The release line ("4.0") or release ("4.0.5") of the local image; None: 3.10, the last line
    with mirrored queues (an official image is preferred when present)."""
    image: str | None = None
    """A local image of your own for the nodes."""
    ha_promote_on_shutdown: Literal["when-synced", "always"] | None = None
    """Mirrored queues: whether an unsynchronised mirror may be promoted when the master's node
    shuts down (a pause is one) or fails; None leaves RabbitMQ's default (shutdown: when-synced,
    failure: always, since 3.7)."""
    ha_promote_on_failure: Literal["when-synced", "always"] | None = None
    """Mirrored queues: as ha_promote_on_shutdown, when the master's node fails."""
    ha_sync_mode: Literal["automatic", "manual"] = "automatic"
    """Mirrored queues: automatic, a new or rejoining mirror is synchronised at once (blocking the
    queue while it is); manual, RabbitMQ's default, it catches up only with new messages."""
    rabbitmq_conf: dict[str, ScalarField] = Field(default_factory=dict)
    """The user's own configuration (systems.rabbitmq.settings: how it meets the knobs above): any
    rabbitmq.conf key of the release, written after the harness's own lines; Erlang terms for the
    nodes' advanced.config, for what only lives there; policies set before the workload."""
    advanced_config: str | None = None
    """Erlang terms for the nodes' advanced.config, for what only lives there."""
    policies: list[Policy] = Field(default_factory=list)
    """Policies set before the workload."""
    metadata_store: MetadataStore | None = None
    """The metadata store the scenario's claim is about: mnesia (3.x, 4.0 and 4.1) or khepri (4.2
    and later). The harness switches no store: a release that keeps its metadata in the other
    refuses the scenario, so that a row written for one store is never measured on the other."""

    def node_names(self) -> tuple[str, ...]:
        """The cluster's nodes, rabbit1..rabbitN."""
        return RABBITMQ_NODES[: self.nodes]

    @model_validator(mode="after")
    def _own_configuration(self) -> RabbitMQClusterSpec:
        """The user's terms and policies: one line on the first the scenario may not set. (Its
        rabbitmq_conf keys are judged from the file's data, every one: config_problems.)"""
        chosen = {k for k in self.model_fields_set if getattr(self, k) is not None}
        line = None
        if self.advanced_config is not None:
            line = advanced_refusal(self.advanced_config, chosen)
        line = line or policies_refusal(
            self.policies, [], self.queue_type, self.version, self.model_fields_set
        )
        if line:
            raise ValueError(line)
        return self

    @model_validator(mode="after")
    def _partition_handling_given(self) -> RabbitMQClusterSpec:
        if self.version is not None and version_key(self.version) >= IGNORES_PARTITION_HANDLING:
            return self
        if self.partition_handling is None and not sets_partition_handling(
            self.rabbitmq_conf, self.advanced_config
        ):
            raise ValueError(
                "partition_handling is required (or rabbitmq_conf's cluster_partition_handling)"
            )
        return self

    @model_validator(mode="after")
    def _pause_if_all_down_needs_nodes(self) -> RabbitMQClusterSpec:
        handling = self.rabbitmq_conf.get("cluster_partition_handling", self.partition_handling)
        listed = any(
            k.startswith("cluster_partition_handling.pause_if_all_down.nodes.")
            for k in self.rabbitmq_conf
        )
        if handling == "pause_if_all_down" and not (self.pause_if_all_down_nodes or listed):
            raise ValueError("pause_if_all_down needs pause_if_all_down_nodes")
        _check_nodes(self.pause_if_all_down_nodes)
        return self

    @model_validator(mode="after")
    def _promotion_is_for_mirrored_queues(self) -> RabbitMQClusterSpec:
        promotion = self.ha_promote_on_shutdown or self.ha_promote_on_failure
        if promotion and self.queue_type != "mirrored":
            raise ValueError(
                "ha_promote_on_shutdown and ha_promote_on_failure are for mirrored queues"
            )
        return self

    @model_validator(mode="after")
    def _queue_type_exists_in_the_version(self) -> RabbitMQClusterSpec:
        if refusal := line_refusal(self, self.version):
            raise ValueError(refusal)
        return self


class Connection(Strict):
    """pika's ConnectionParameters of a client's connections; unset: the harness's
    (workloads.rabbitmq.topology.CONNECTION_DEFAULTS), else pika's."""

    heartbeat: Annotated[int, Field(ge=0, le=65_535)] | None = None
    """seconds; 0: none."""
    frame_max: Annotated[int, Field(ge=4096, le=131_072)] | None = None
    """bytes."""
    channel_max: Annotated[int, Field(ge=1, le=65_535)] | None = None
    blocked_connection_timeout: Annotated[float, Field(ge=0, le=3600)] | None = None
    connection_attempts: Annotated[int, Field(ge=1, le=100)] | None = None
    """per node."""
    retry_delay: Annotated[float, Field(ge=0, le=600)] | None = None
    """between those attempts."""
    socket_timeout: Annotated[float, Field(gt=0, le=600)] | None = None
    stack_timeout: Annotated[float, Field(gt=0, le=600)] | None = None

    def overrides(self) -> dict[str, int | float]:
        """The parameters the scenario set."""
        return {k: v for k, v in self.model_dump().items() if v is not None}


class Publisher(Strict):
    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]+$")]
    """The publisher's name in the history."""
    nodes: list[str] = Field(default_factory=list)
    """Connection list in the order the client tries it; empty: every node of the cluster, the
    first first (the RabbitMQ reliability article's connection factory had all three)."""
    count: MessageCount
    """Messages to publish: a number, or 60k, 1M."""
    rate: Annotated[float, Field(ge=0)] = 0.0
    """messages per second; 0 = as fast as in_flight allows."""
    in_flight: Annotated[int, Field(ge=1, le=10_000)] = 1
    """Unconfirmed messages at a time."""
    confirm_timeout: Annotated[float, Field(gt=0, le=600)] = 10.0
    """Seconds to wait for a confirm before the publish counts as unknown."""
    body_bytes: Annotated[int, Field(ge=0, le=1_048_576)] = 0
    """Each body padded to this many bytes (0: producer and seq alone, about 30 bytes)."""
    connection: Connection = Connection()
    """Connection settings."""


class Consumer(Strict):
    queue: str
    """The queue it consumes."""
    nodes: list[str] = Field(default_factory=list)
    """Connection list in the order the client tries it; empty: every node of the cluster."""
    prefetch: Annotated[int, Field(ge=1, le=65_535)] = 1
    """Unacknowledged deliveries at a time (basic.qos); ack multiple: deliveries per ack."""
    mode: Literal["subscribe", "poll", "mixed"] = "subscribe"
    """subscribe (basic.consume), poll (basic.get), or mixed: a coin flipped for each
    connection from the run's seed, as the RabbitMQ team's Jepsen clients flip one each."""
    ack: Literal["manual", "multiple", "auto"] = "manual"
    """manual: each delivery acknowledged once logged; multiple: every `prefetch` deliveries
    (and when the queue goes quiet) in one ack; auto: the broker forgets a message as it sends it
    (one in flight when a connection drops is lost: the checker counts it)."""
    delay: Annotated[float, Field(ge=0, le=60)] = 0.0
    """seconds per message before the ack."""
    connection: Connection = Connection()
    """Connection settings."""


class Drain(Strict):
    quiet: Annotated[float, Field(gt=0, le=600)] = 5.0
    """Seconds without a delivery after which a queue counts as drained."""
    timeout: Annotated[float, Field(gt=0, le=3600)] = 120.0
    """Seconds the drain may take."""


class Workload(Strict):
    exchange: str = "jepsen.fanout"
    """The fanout exchange the publishers publish to."""
    queues: Annotated[list[str], Field(min_length=1)]
    """Queues bound to it (each one gets every message)."""
    publishers: Annotated[list[Publisher], Field(min_length=1)]
    """Who publishes: at least one publisher."""
    consumers: list[Consumer]
    """Who consumes: one or more per queue."""
    drain: Drain = Drain()
    queue_arguments: dict[str, dict[str, ScalarField]] = Field(default_factory=dict)
    """A queue's own declare arguments (x-max-length, x-overflow, x-message-ttl,
    x-dead-letter-strategy, x-delivery-limit, ...), over those of its type."""
    dead_letter: dict[str, str] = Field(default_factory=dict)
    """A queue's dead-letter queue, by the queue's name: declared beside it, not bound to the
    exchange; the queue dead-letters to it (default exchange, the dead-letter queue's name as
    routing key, unless its queue_arguments say otherwise). A message that comes out of it counts
    for its queue's group, as dead-lettered."""

    @model_validator(mode="after")
    def _consistent(self) -> Workload:
        ids = [p.id for p in self.publishers]
        if len(ids) != len(set(ids)):
            raise ValueError("publisher ids must be unique")
        for q, args in self.queue_arguments.items():
            if q not in self.queues:
                raise ValueError(f"queue_arguments: {q!r} is not in queues")
            if odd := [a for a in args if not a.startswith("x-")]:
                raise ValueError(f"queue_arguments.{q}: {odd[0]!r} is no x- argument")
        for q, dlq in self.dead_letter.items():
            if q not in self.queues:
                raise ValueError(f"dead_letter: {q!r} is not in queues")
            if dlq in self.queues or list(self.dead_letter.values()).count(dlq) > 1:
                raise ValueError(f"dead_letter.{q}: {dlq!r} must be a queue of its own")
        for c in self.consumers:
            if c.queue not in self.queues and c.queue not in self.dead_letter.values():
                raise ValueError(f"consumer queue {c.queue!r} is not in queues or dead_letter")
        for q in self.queues:
            read = {q, self.dead_letter.get(q)}
            if not any(c.queue in read for c in self.consumers):
                raise ValueError(f"queue {q!r} has no consumer (of it or its dead-letter queue)")
        for p in self.publishers:
            _check_nodes(p.nodes)
        for c in self.consumers:
            _check_nodes(c.nodes)
        return self

    def group_of(self, queue: str) -> str:
        """The reader group a queue's deliveries count for: a dead-letter queue's, its queue's."""
        sources = {dlq: q for q, dlq in self.dead_letter.items()}
        return sources.get(queue, queue)

    def declared_arguments(self) -> dict[str, dict[str, ScalarField]]:
        """Each queue's own declare arguments: its dead-lettering, then the scenario's."""
        routed: dict[str, dict[str, ScalarField]] = {
            q: {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq}
            for q, dlq in self.dead_letter.items()
        }
        every = set(routed) | set(self.queue_arguments)
        return {q: {**routed.get(q, {}), **self.queue_arguments.get(q, {})} for q in every}


class SideDeclares(Strict):
    """What a declare asked of a node on one side of a partition must get."""

    answers: Annotated[list[DeclareWord], Field(min_length=1)]
    """The answers it may get, any of them: accepted, refused, timed-out, unreachable
    (docs/reference/expectations.md)."""
    after_heal: AfterHeal | None = None
    """Where its queue is found once the cluster has reunited: nowhere (no node lists it) or
    everywhere (every node that answered lists it); unset: not judged."""


class DeclareExpectations(Strict):
    """What the run's declare steps must show, by the side each target was on when asked: the
    nodes it could reach both ways, itself counted and the nodes down not (checkers.declares)."""

    minority: SideDeclares | None = None
    """A target that reached no more than half of the nodes."""
    majority: SideDeclares | None = None
    """A target that reached more than half of the nodes."""


def _older_name_of_target(schema: dict[str, Any]) -> None:
    """A step's target under its older name too, so that an editor takes the files that say
    nodes."""
    properties = schema.get("properties", {})
    if "target" in properties:
        properties["nodes"] = {**properties["target"], "description": "The older name of target."}


class NemesisStep(Strict):
    # Read when a step has both names of its target: the second is refused as an extra key.
    moved_keys: ClassVar[dict[str, str]] = {
        "nodes": "target and nodes are one field (nodes is its older name): give one",
        "target": "target and nodes are one field (nodes is its older name): give one",
    }

    at: Annotated[float, Field(ge=0, le=3600)]
    """seconds after the workload starts."""
    after_traffic: bool = False
    """A step meant to come after the workload's traffic (a merge, a last restart): the vacuity
    check does not count it among the faults that must meet the traffic."""
    op: Annotated[str, KnownOp("rabbitmq")]
    """The fault (or heal): see docs/reference/faults.md."""
    nodes: NodeNames = Field(default_factory=list, validation_alias=AliasChoices("target", "nodes"))
    """target (or nodes, as older files say): whom it hits: node names, a queue role (leader,
    followers), random-node (drawn anew each step from the run's seed) or an earlier step's
    @label."""
    within: Annotated[float, Field(gt=0, le=3600)] = 120.0
    """wait-drained: the bound; upgrade: the bound of each node's wait (back in the cluster, its
    quorum queue members in sync); declare: how long each target's answer is waited for (Khepri
    answers a minority's declare after its own 30 s: more than that to see its refusal)."""
    groups: list[list[str]] = Field(default_factory=list)
    """partition: the sides, each a list of nodes."""
    shape: Shape | None = None
    """partition, instead of groups: sides drawn anew each step from the run's seed: halves
    (first half of the nodes against the rest), random-halves, random-node (one against the
    rest), majorities-ring (each node sees a majority, no two the same; 4 nodes or more)."""
    from_: NodeNames = Field(default_factory=list, alias="from")
    """cut: the side whose traffic is cut."""
    to: NodeNames = Field(default_factory=list)
    """cut: the other side."""
    label: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]*$")] = ""
    """Names the nodes this step's roles resolved to, for a later step's @label."""
    delay_ms: Annotated[int, Field(ge=0, le=600_000)] = 0
    """delay: the clients' requests reach the targets this much later (the proxy)."""
    jitter_ms: Annotated[int, Field(ge=0, le=60_000)] = 0
    """delay: delay jitter."""
    both_ways: bool = False
    """delay, hold, slow-link: the answers too (a publisher's confirms, a consumer's
    deliveries)."""
    rate_kbit: Annotated[int, Field(ge=0, le=10_000_000)] = 0
    """slow-link: the bandwidth left, in kbit/s."""
    fail_on: DiskCall | None = None
    """disk-error: the calls that fail with EIO, write, fsync or read (a read the page cache
    answers never reaches the disk)."""
    path: DiskGlob = "*"
    """disk-error, corrupt, torn-write: the files whose calls fail (that it corrupts, whose
    writes tear), a glob relative to the node's /var/lib/rabbitmq
    (`*` spans directories); every file by default, but corrupt needs one."""
    probability: Probability = 1.0
    """disk-error: the chance that each of those calls fails."""
    files: CorruptFiles = 1
    """corrupt: how many of the files `path` matches are corrupted (drawn by the seed)."""
    length: CorruptLength = 1
    """corrupt: how many bytes of each file change (fewer where the file ends sooner)."""
    offset: StepOffset | None = None
    """corrupt: where in each file the bytes change, a byte position from its end when negative;
    drawn by the seed when not given. clock: the targets' clocks' offset from true time, in
    seconds, signed (3600: an hour ahead, -3600: an hour behind); each clock step sets it from
    true time, not from the last step's."""
    corruption: CorruptHow = "flip"
    """corrupt: how the bytes change: flip (one bit of each byte), random, or zero (a sector that
    reads back empty)."""
    seed: Seed | None = None
    """corrupt: the seed of its draws (files, offsets, bits); when not given, one is drawn and
    written to the history, to replay it with."""
    while_: CorruptWhile = Field(default="stopped", alias="while")
    """corrupt: stopped (the node killed, its files changed at rest, the node started: what it
    reads as it recovers) or running (changed under the open broker, which may have the old
    bytes cached)."""
    keep: Keep = 0.5
    """torn-write: the share of each matching file's last unsynced write a power loss keeps
    (in whole 512-byte sectors when it spans more than one)."""
    release: Annotated[str, Field(pattern=SPEC_PATTERN)] | None = None
    """upgrade: the release line ("4.0") or release ("4.0.5") the targets move to, a local image
    of it (make setup builds 3.10.8, 4.0.5 and 4.3.6)."""
    unsupported_path: bool = False
    """upgrade: run it although RabbitMQ's rolling upgrades do not support the path (a skipped
    series, a downgrade, flags of the last series still off), to see what the node does; such a
    path is refused otherwise."""
    feature: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.]+$")] | None = None
    """finalize-feature: the feature flag to enable (khepri_db moves the metadata store from
    Mnesia to Khepri), or all: every stable one, as after a finished upgrade."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        use_attribute_docstrings=True,
        json_schema_extra=_older_name_of_target,
    )

    @model_validator(mode="after")
    def _arguments(self) -> NemesisStep:
        for names in (self.nodes, self.from_, self.to):
            _check_nodes([n for n in names if not is_role(n)])
        for names in self.groups:
            if roles := [n for n in names if is_role(n)]:
                raise ValueError(
                    f"groups name nodes: {roles[0]!r} is resolved only in target, from and to "
                    "(a partition drawn as the run goes: shape)"
                )
            _check_nodes(names)
        arguments = fault(self.op).arguments
        if self.shape is not None and (arguments != "groups" or self.groups):
            raise ValueError("shape is for a partition, instead of its groups")
        if arguments == "groups" and self.shape is None:
            if len(self.groups) < 2 or any(not g for g in self.groups):
                raise ValueError(f"{self.op} needs at least two non-empty groups (or a shape)")
        elif arguments == "from-to":
            if not self.from_ or not self.to:
                raise ValueError(f"{self.op} needs from and to")
        elif arguments == "target" and not self.nodes:
            raise ValueError(f"{self.op} needs a target (node names, a role or an @label)")
        if refusal := client_path_refusal(self.op, self.delay_ms, self.rate_kbit):
            raise ValueError(refusal)
        if refusal := disk_refusal(self.op, self.fail_on, self.model_fields_set):
            raise ValueError(refusal)
        if refusal := clock_refusal(self.op, self.offset):
            raise ValueError(refusal)
        given = self.model_fields_set
        if refusal := step_fields_refusal(self.op, self.release, self.feature, given):
            raise ValueError(refusal)
        if RANDOM_NODE in self.from_ and RANDOM_NODE in self.to:
            raise ValueError(
                "random-node is drawn once a step: on both sides it cuts a node off itself"
            )
        return self


class RabbitMQScenario(ScenarioBase):
    cluster: RabbitMQClusterSpec
    """The cluster: its system, size, release and configuration."""
    workload: Workload
    """The clients: who writes, who reads, and how."""
    nemesis: list[NemesisStep] = Field(default_factory=list)
    """The faults, in time order: each step names an op, when it starts and whom it hits."""
    expect_declares: DeclareExpectations | None = None
    """What the declare steps must show, side by side: a run whose probes did not is not matched,
    whatever its messages say (the claims table says whether they held)."""

    def draws_targets(self) -> bool:
        return any(c.mode == "mixed" for c in self.workload.consumers) or any(
            step.shape is not None or RANDOM_NODE in (*step.nodes, *step.from_, *step.to)
            for step in self.nemesis
        )

    @model_validator(mode="after")
    def _configuration_fits_the_workload(self) -> RabbitMQScenario:
        c, w = self.cluster, self.workload
        line = queue_arguments_refusal(c.queue_type, w.queue_arguments)
        if c.queue_type == "stream" and w.dead_letter:
            line = line or "dead_letter: a stream dead-letters nothing (use quorum queues)"
        if c.queue_type == "stream" and (
            odd := next((x for x in w.consumers if x.mode != "subscribe" or x.ack == "auto"), None)
        ):
            line = line or (
                f"consumer of {odd.queue}: a stream is read by subscribing with manual acks "
                f"(mode subscribe, ack manual or multiple), not mode {odd.mode}, ack {odd.ack}"
            )
        line = line or policies_refusal(
            c.policies, w.queues, c.queue_type, c.version, c.model_fields_set, "cluster."
        )
        if line:
            raise ValueError(line)
        return self

    @model_validator(mode="after")
    def _steps_fit_the_cluster(self) -> RabbitMQScenario:
        known = self.cluster.node_names()
        labels: set[str] = set()
        client_nodes = [p.nodes for p in self.workload.publishers]
        client_nodes += [c.nodes for c in self.workload.consumers]
        for nodes in client_nodes:
            if outside := [n for n in nodes if n not in known]:
                raise ValueError(
                    f"workload: {outside[0]!r} is not a node of a cluster of {self.cluster.nodes}"
                )
        for i, step in enumerate(self.nemesis):
            roles = [n for n in (*step.nodes, *step.from_, *step.to) if is_role(n)]
            queue_roles = [r for r in roles if r in QUEUE_ROLES]
            if queue_roles and self.cluster.queue_type not in ("quorum", "stream"):
                raise ValueError(
                    f"nemesis.{i}: {queue_roles[0]} needs quorum queues or streams "
                    "(a leader to aim at)"
                )
            if unknown_labels := [
                r[1:] for r in roles if r.startswith("@") and r[1:] not in labels
            ]:
                raise ValueError(f"nemesis.{i}: no earlier step is labelled {unknown_labels[0]!r}")
            if step.label:
                labels.add(step.label)
            if step.shape and (refusal := shape_refusal(step.shape, self.cluster.nodes)):
                raise ValueError(f"nemesis.{i}: {refusal}")
            if fault(step.op).needs_lazy_disks and not self.cluster.lazy_disks:
                raise ValueError(f"nemesis.{i}: {step.op} needs cluster.lazy_disks: true")
            if refusal := fake_clock_refusal(i, step.op, self.cluster.fake_clock):
                raise ValueError(refusal)
            if fault(step.op).needs_proxy and self.cluster.load_balancer:
                raise ValueError(
                    f"nemesis.{i}: {step.op} faults the clients' path to each node, and with "
                    "cluster.load_balancer the clients reach the nodes through HAProxy alone"
                )
            named = [*step.nodes, *step.from_, *step.to, *(n for g in step.groups for n in g)]
            named = [n for n in named if not is_role(n)]
            if unknown := [n for n in named if n not in known]:
                raise ValueError(
                    f"nemesis.{i}: no node {unknown[0]!r} in a cluster of {self.cluster.nodes}"
                )
        if refusal := membership_refusal(self.nemesis, self.cluster, self.workload):
            raise ValueError(refusal)
        c = self.cluster
        if refusal := upgrade_refusal(self.nemesis, c.version, c.image is not None, known):
            raise ValueError(refusal)
        return self

    @model_validator(mode="after")
    def _declares_expected_of_declare_steps(self) -> RabbitMQScenario:
        expected = self.expect_declares
        if expected is None:
            return self
        if expected.minority is None and expected.majority is None:
            raise ValueError("expect_declares: name minority, majority or both")
        if not any(step.op == "declare" for step in self.nemesis):
            raise ValueError("expect_declares needs a declare step in the nemesis")
        return self


MEMBERSHIP_OUT = {"forget-node": "add-node", "shrink-queue": "grow-queue"}
QUEUE_MEMBERSHIP = ("shrink-queue", "grow-queue")


def membership_refusal(
    steps: list[NemesisStep], cluster: RabbitMQClusterSpec, workload: Workload
) -> str | None:
    """The first membership step that cannot be: a queue op without quorum queues, a
    forget-node that leaves the cluster no node, a shrink-queue that leaves the queue no
    member. Counted through the schedule, a role as the nodes it names at most (leader,
    random-node: one; followers: the queue's other members; an @label: one), a step healing
    with no target (or the non-members) as putting everything back; the run checks each step
    again on what is."""
    nodes = cluster.nodes
    replicas = _initial_members(cluster, workload)
    out = {"forget-node": 0, "shrink-queue": 0}
    whole = {"forget-node": nodes, "shrink-queue": replicas}
    for i, step in enumerate(steps):
        if step.op in QUEUE_MEMBERSHIP and cluster.queue_type != "quorum":
            return f"nemesis.{i}: {step.op} needs quorum queues (cluster.queue_type: quorum)"
        for out_op, heal in MEMBERSHIP_OUT.items():
            if step.op == heal:
                out[out_op] = max(0, out[out_op] - _counted(step.nodes, replicas, nodes))
                if not step.nodes or "non-members" in step.nodes:  # whatever is out
                    out[out_op] = 0
            elif step.op == out_op:
                out[out_op] += _counted(step.nodes, replicas, nodes)
                if out[out_op] >= whole[out_op]:
                    what = "the cluster no node" if out_op == "forget-node" else "a queue no member"
                    unit = "nodes" if out_op == "forget-node" else "members"
                    return (
                        f"nemesis.{i}: {out_op} would leave {what} ({whole[out_op]} {unit}, "
                        f"{out[out_op]} out by then): {heal} some back first"
                    )
    return None


def _initial_members(cluster: RabbitMQClusterSpec, workload: Workload) -> int:
    """How many members the first queue starts with: x-quorum-initial-group-size, else one on
    every node."""
    size = workload.queue_arguments.get(workload.queues[0], {}).get("x-quorum-initial-group-size")
    return min(int(size), cluster.nodes) if isinstance(size, int) and size > 0 else cluster.nodes


def _counted(names: list[str], replicas: int, nodes: int) -> int:
    """The nodes a target names at most: a node is one, a role the nodes it can stand for."""
    count = {"followers": replicas - 1, "non-members": nodes - replicas}
    return len(set(names)) if not names else sum(count.get(n, 1) for n in set(names))


def is_role(name: str) -> bool:
    """A target resolved when its step runs: a queue role, a drawn node or an earlier step's
    @label."""
    return name in QUEUE_ROLES or name in DRAWN or name.startswith("@")


def line_refusal(cluster: RabbitMQClusterSpec, version: str | None) -> str | None:
    """One line when the release (None: 3.10) lacks what the cluster needs: its queue type, or
    the metadata store its claim is about; else None."""
    return queue_type_refusal(cluster.queue_type, version) or metadata_store_refusal(
        cluster.metadata_store, version
    )


def metadata_store_refusal(store: str | None, version: str | None) -> str | None:
    """One line when the release keeps its metadata in another store than `store`, else None."""
    if store is None:
        return None
    khepri = version is not None and version_key(version) >= KHEPRI_ALWAYS
    if store == "mnesia" and khepri:
        return (
            f"RabbitMQ {version} keeps its metadata in Khepri (from 4.2; 4.3 removed Mnesia): "
            "metadata_store mnesia needs 4.1 or older"
        )
    if store == "khepri" and not khepri:
        return (
            f"RabbitMQ {version or '3.10'} keeps its metadata in Mnesia (Khepri only behind a "
            "feature flag the harness does not enable): metadata_store khepri needs 4.2 or later"
        )
    return None


def queue_type_refusal(queue_type: str, version: str | None) -> str | None:
    """One line when the release has no such queue type, else None."""
    if queue_type == "mirrored" and version is not None and version_key(version) >= (4,):
        return (
            f"RabbitMQ {version} has no mirrored queues (4.0 removed them): "
            "use quorum queues or streams, or version 3.10"
        )
    return None


def _check_nodes(names: list[str]) -> None:
    unknown = [n for n in names if n not in RABBITMQ_NODES]
    if unknown:
        hint = did_you_mean(unknown[0], [*RABBITMQ_NODES, *QUEUE_ROLES, *DRAWN])
        raise ValueError(
            f"unknown node {unknown[0]!r}{hint} (nodes are {', '.join(RABBITMQ_NODES)}; "
            f"roles are {', '.join((*QUEUE_ROLES, *DRAWN))})"
        )


def config_problems(data: object) -> list[KeyProblem]:
    """Every rabbitmq_conf key the scenario may not set, each with why (the harness's, a typed
    knob's the scenario set too, or one its release refuses). Read from the file's data rather
    than the model, so that a file with other problems has every one of these said too."""
    cluster = data.get("cluster") if isinstance(data, dict) else None
    conf = cluster.get("rabbitmq_conf") if isinstance(cluster, dict) else None
    if not isinstance(cluster, dict) or not isinstance(conf, dict):
        return []
    version, image = cluster.get("version"), cluster.get("image")
    if version is not None and not (isinstance(version, str) and re.match(SPEC_PATTERN, version)):
        return []  # the schema says what is wrong with the version; the keys wait for one
    chosen = {k for k, v in cluster.items() if v is not None}
    problems = []
    for key, value in conf.items():
        if not isinstance(key, str) or not _is_scalar(value):
            continue  # the schema says what is wrong with it
        own_image = image if isinstance(image, str) else None
        line = conf_refusal({key: value}, chosen, version, own_image)
        if line:
            message = line.removeprefix("rabbitmq_conf: ")
            problems.append(KeyProblem(("cluster", "rabbitmq_conf"), key, message))
    return problems


def _is_scalar(value: Any) -> bool:
    return isinstance(value, bool | int | float | str)
