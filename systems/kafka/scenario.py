"""A Kafka scenario on a real cluster: the cluster (modes, brokers, topic, settings), the
producers and readers, and the nemesis steps aimed by role at the moment they run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, model_validator

from faults.registry import OPS
from faults.registry import op as fault
from nemesis.network import CLIENTS
from systems.kafka.config import (
    DEFAULT_KAFKA_LINE,
    MIGRATION_LINE,
    KafkaClusterConfig,
    KafkaSettings,
    Mode,
    PropertyValue,
    dynamic_quorum_refusal,
    migration_refusal,
    mode_refusal,
    nodes_of,
    quorum_nodes,
    version_tuple,
)
from systems.kafka.configdefs import shipped_release
from systems.kafka.migration import PHASES, Phase, order_refusal
from systems.kafka.releases import KafkaReleaseError, check_spec
from systems.kafka.settings import (
    broker_to_topic,
    client_config_refusals,
    passthrough_refusals,
    topic_properties,
)
from systems.kafka.targets import (
    ALL_BUT,
    COORDINATOR_TOPICS,
    SELECTOR_ROLES,
    SHARE_COORDINATOR,
    is_selector,
)
from systems.kafka.workload_spec import (
    KafkaWorkload,
)
from systems.problems import KeyProblem, did_you_mean
from systems.scenario import (
    CorruptFiles,
    CorruptHow,
    CorruptLength,
    CorruptWhile,
    DiskCall,
    DiskGlob,
    Keep,
    KnownOp,
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


def _bare_node(value: object) -> object:
    """A lone name that is no role and no @label is a node (`target: kafka2`)."""
    if isinstance(value, str) and value not in SELECTOR_ROLES and not value.startswith("@"):
        return [value]
    return value


# A role resolved from live metadata when the step runs (systems.kafka.targets), "@label" (what
# an earlier step with that label resolved to), or node names.
Selector = Annotated[str | list[str], BeforeValidator(_bare_node)]
# The roles that may name several brokers at once: remove-broker takes one.
MANY_BROKER_ROLES = frozenset(
    {"followers", "isr", "in-sync-followers", "out-of-sync", "replicas", "quorum", "brokers"}
    | {"non-controllers", "non-transaction-coordinators", "stopped"}
)
# The ops that change the KRaft controller quorum's voters (systems.kafka.quorum).
QUORUM_OPS = ("add-controller", "remove-controller")
# The ops whose step names one of the workload's clients (`client: P1`) rather than nodes.
CLIENT_OPS = tuple(o.name for o in OPS if o.arguments == "client")
# Who a coordinator role needs in the workload before a step may aim at it.
COORDINATED_BY = {
    "transaction-coordinator": "a transactional producer",
    "group-coordinator": "a reader in mode group",
    SHARE_COORDINATOR: "share consumers (workload.share_consumers)",
}
# Share groups (KIP-932) are production-ready from 4.2, where share.version is on for a new
# cluster; on 4.1 they are a preview, enabled by hand, without the group's delivery count limit.
SHARE_GROUPS_SINCE = (4, 2)
SHARE_GROUPS_REFUSAL = "Kafka 4.2 or later (share groups, KIP-932; 4.1's are a preview)"
# The broker keys that bound a share group's configs (Kafka 4.4's defaults), by typed knob.
SHARE_BOUNDS = {
    "record_lock_duration_ms": (
        "group.share.min.record.lock.duration.ms",
        "group.share.max.record.lock.duration.ms",
    ),
    "delivery_count_limit": (
        "group.share.min.delivery.count.limit",
        "group.share.max.delivery.count.limit",
    ),
}
SHARE_BOUND_DEFAULTS = {
    "group.share.min.record.lock.duration.ms": 15000,
    "group.share.max.record.lock.duration.ms": 60000,
    "group.share.min.delivery.count.limit": 2,
    "group.share.max.delivery.count.limit": 10,
}


def _quoted_release(value: object) -> object:
    # YAML reads 4.10 as the number 4.1: a release unquoted is not what it says.
    if isinstance(value, int | float) and not isinstance(value, bool):
        raise ValueError(f'write the release quoted ("{value}"): YAML reads it as a number')
    return value


def _runnable_release(spec: str) -> str:
    try:
        return check_spec(spec)
    except KafkaReleaseError as e:
        raise ValueError(str(e).removeprefix("--kafka ")) from None


# A release line ("4.4") or release ("4.4.0") this harness runs, written quoted.
KafkaRelease = Annotated[
    str,
    BeforeValidator(_quoted_release, json_schema_input_type=str),
    AfterValidator(_runnable_release),
]
# What finalize-feature names: a feature as kafka-features spells it, or `all`.
FEATURE_NAME = r"^[a-z][a-z0-9_.]*$"
FEATURE_LEVEL = r"^\d+(\.\d+)?(-IV\d+)?$"
# The features whose level is a release (or a release's level), not a number.
RELEASE_LEVELED = ("metadata.version", "all")


def older(release: str, than: str) -> bool:
    """Whether a line or release comes before another, compared as far as both go ("3.9" is
    not older than "3.9.2")."""
    a, b = version_tuple(release), version_tuple(than)
    n = min(len(a), len(b))
    return a[:n] < b[:n]


def upgrade_refusal(
    op: str, release: str | None, feature: str | None, level: str | None
) -> str | None:
    """What an upgrade or finalize-feature step lacks, or its arguments on another op."""
    if op == "upgrade" and release is None:
        return 'upgrade needs a release (a line such as "4.4", or a release such as "4.4.0")'
    if release is not None and op != "upgrade":
        return f"release is for upgrade, not {op}"
    if op == "finalize-feature":
        if feature is None or level is None:
            return "finalize-feature needs a feature and a level"
        if feature not in RELEASE_LEVELED and not level.isdigit():
            return f"finalize-feature: {feature}'s level is a number, not {level!r}"
        if feature == "all" and "-IV" in level:
            return f'finalize-feature: all takes a release (such as "4.4"), not {level!r}'
    elif feature is not None or level is not None:
        return f"feature and level are for finalize-feature, not {op}"
    return None


class KafkaClusterSpec(KafkaSettings):
    # A key of another system's cluster, and what a Kafka scenario says instead.
    moved_keys: ClassVar[dict[str, str]] = {"version": "use cluster.release (or --kafka)"}

    system: Literal["kafka"]
    """kafka."""
    release: KafkaRelease | None = None
    """The Kafka release line ("4.4") or release ("4.3.1") to run, from 3.7 on; `harness run
    --kafka` overrides it; none: 3.9."""
    modes: Annotated[list[Mode], Field(min_length=1)] = Field(
        default_factory=lambda: list[Mode](("zk", "kraft"))
    )
    """The modes this row applies to (the catalogue: both unless the row says otherwise); the first
    is the default, `harness run --mode` picks another."""
    topic: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]+$")] = "jepsen"
    """The workload's topic."""
    partitions: Annotated[int, Field(ge=1, le=64)] = 1
    """Partitions of the workload's topic."""
    replication_factor: Annotated[int, Field(ge=1, le=6)] = 3
    """Replicas of each partition."""
    replica_assignment: list[list[int]] | None = None
    """Explicit replicas per partition, preferred leader first (rack placement, K21/K22)."""
    topic_config: dict[str, PropertyValue] = Field(default_factory=dict)
    """Any topic-level config of the workload's topic."""
    transaction_version: Annotated[int, Field(ge=0, le=2)] | None = None
    """Kafka 4.x: the transaction.version feature set once the cluster is up (0 and 1: the original
    protocol; 2: KIP-890's epoch bump per transaction, 4.x's default). Unset: the release's
    default."""

    @model_validator(mode="after")
    def _migrates_from_zookeeper(self) -> KafkaClusterSpec:
        """Migration controllers: ZooKeeper mode alone (on 3.9: the release is judged with the
        line, line_refusal), and no spare broker, which would start in whatever mode the
        cluster is in when an add-broker comes."""
        if not self.migration_controllers:
            return self
        for mode in self.modes:
            if refusal := migration_refusal(mode, MIGRATION_LINE, self.migration_controllers):
                raise ValueError(refusal)
        if self.spare_brokers:
            raise ValueError(
                "migration_controllers: a migration moves the brokers the cluster starts with; "
                "spare_brokers must be 0"
            )
        return self

    @model_validator(mode="after")
    def _dynamic_quorum_is_krafts(self) -> KafkaClusterSpec:
        if self.controller_quorum == "dynamic" and "zk" in self.modes:
            raise ValueError(
                "controller_quorum: dynamic is a KRaft quorum's (KIP-853): modes must not "
                "include zk"
            )
        if self.spare_controllers and self.controller_quorum != "dynamic":
            raise ValueError(
                "spare_controllers: a spare controller joins a dynamic quorum: set "
                "controller_quorum: dynamic"
            )
        return self

    @model_validator(mode="after")
    def _overrides_name_nodes(self) -> KafkaClusterSpec:
        # The keys themselves are judged from the file's data (config_problems), every one.
        node_ids = {n.node_id for mode in self.modes for n in nodes_of(self.config(mode), "0")}
        for node_id in self.broker_overrides:
            if node_id not in node_ids:
                known = ", ".join(map(str, sorted(node_ids)))
                raise ValueError(f"broker_overrides: no Kafka node {node_id} (node ids: {known})")
        return self

    def topic_properties(self) -> dict[str, str]:
        """The workload topic's configs. A typed knob is written at both levels, so a broker
        key that stands for one (the scenario left the knob unset) is the topic's too: a
        topic-level default would otherwise override the brokers' value the user chose."""
        return topic_properties(
            self.min_insync_replicas,
            self.unclean_leader_election,
            self.flush_messages,
            broker_to_topic(self.broker_config, self.model_fields_set) | self.topic_config,
        )

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
        every = self.brokers + self.spare_brokers
        if not set(self.racks) <= set(range(1, every + 1)):
            raise ValueError(f"racks names a broker outside 1..{every}")
        return self

    def config(self, mode: Mode, kafka_line: str = DEFAULT_KAFKA_LINE) -> KafkaClusterConfig:
        """The cluster to start: these settings in one mode, on one release line."""
        settings = self.model_dump(include=set(KafkaSettings.model_fields))
        return KafkaClusterConfig(**settings, mode=mode, kafka_line=kafka_line)

    def node_names(self, mode: Mode) -> set[str]:
        return {n.name for n in nodes_of(self.config(mode), "0.0.0")}


class KafkaStep(Strict):
    at: Annotated[float, Field(ge=0, le=3600)]
    """Seconds after the workload starts."""
    op: Annotated[str, KnownOp("kafka")]
    """The fault (or heal): see docs/reference/faults.md."""
    after_traffic: bool = False
    """A step meant to come after the workload's traffic (a merge, a last restart): the vacuity
    check does not count it among the faults that must meet the traffic."""
    target: Selector | None = None
    """Whom it hits: a role resolved when the step runs (leader, followers, controller, ...), an
    earlier step's @label, or node names."""
    from_: Selector | None = Field(default=None, alias="from")
    """cut, degrade: the side whose traffic is cut or degraded."""
    to: Selector | None = None
    """cut, degrade: the other side."""
    both_ways: bool = False
    """cut, degrade: both directions, not only from -> to; delay, hold, slow-link: the answers
    too."""
    groups: list[list[str]] = Field(default_factory=list)
    """partition: the sides, each a list of node names, roles (leader, controller,
    transaction-coordinator, ...) and @labels, resolved when the step runs; a node in no group
    is a side of its own."""
    partition: Annotated[int, Field(ge=0)] = 0
    """whose leader/followers/ISR a role means."""
    loss_pct: Annotated[float, Field(ge=0, le=100)] = 0.0
    """degrade: the share of packets dropped."""
    delay_ms: Annotated[int, Field(ge=0, le=600_000)] = 0
    """delay: the clients' requests arrive this much later (the proxy); degrade: added delay
    (needs the kernel's netem)."""
    jitter_ms: Annotated[int, Field(ge=0, le=60_000)] = 0
    """delay, degrade: delay jitter."""
    rate_kbit: Annotated[int, Field(ge=0, le=10_000_000)] = 0
    """degrade, slow-link: the bandwidth left, in kbit/s."""
    election: Literal["preferred", "unclean"] = "preferred"
    """elect: a preferred or an unclean leader election."""
    within: Annotated[float, Field(gt=0, le=600)] = 60.0
    """elect, rolling-restart: time bound; reassign, remove-broker, add-broker: how long the
    step waits for its moves to complete (its ok says whether they did); add-controller,
    remove-controller: how long it waits for the voters to change (else the step fails)."""
    label: str = ""
    """A name for the nodes this step's roles resolved to, for a later step's @label."""
    expect_balanced: bool | None = None
    """leaders: every partition led by its preferred replica."""
    client: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]+$")] | None = None
    """pause-client, resume-client: the workload client (a producer's, reader's or copier's id,
    or a share consumer's name)."""
    fail_on: DiskCall | None = None
    """disk-error: the calls that fail with EIO, write, fsync or read (a read the page cache
    answers never reaches the disk)."""
    path: DiskGlob = "*"
    """disk-error, corrupt, torn-write: the files whose calls fail (that it corrupts, whose
    writes tear), a glob relative to the broker's log directory
    (`*` spans directories: `*.log` is every segment); every file by default, but corrupt
    needs one."""
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
    throttle: Annotated[int, Field(ge=1024)] | None = None
    """reassign, add-broker (with move_onto): the moving replicas' replication limited to this
    many bytes/s (Kafka's replication throttle) until a heal or the end of the run clears it."""
    move_onto: bool = False
    """add-broker: once the new broker registers, one replica of each partition of the
    workload's topics moved onto it."""
    release: KafkaRelease | None = None
    """upgrade: the release the targets move to, a line ("4.4") or a release ("4.4.0"), no older
    than the one the cluster starts on."""
    feature: Annotated[str, Field(pattern=FEATURE_NAME)] | None = None
    """finalize-feature: metadata.version, a numbered feature (transaction.version,
    group.version, ...) or all (every feature to a release's defaults)."""
    level: (
        Annotated[
            str,
            BeforeValidator(_quoted_release, json_schema_input_type=str),
            Field(pattern=FEATURE_LEVEL),
        ]
        | None
    ) = None
    """finalize-feature: the level, quoted: metadata.version's a release ("4.4") or a level
    ("4.4-IV2"); a numbered feature's a number ("2"); all's a release ("4.4")."""
    phase: Phase | None = None
    """migrate: the phase of the ZooKeeper-to-KRaft migration, in this order, each once:
    controllers, brokers, kraft, finalize (docs/upgrade-faults.md)."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, use_attribute_docstrings=True
    )

    @model_validator(mode="after")
    def _arguments(self) -> KafkaStep:
        arguments = fault(self.op).arguments
        if arguments == "target" and self.target is None:
            raise ValueError(f"{self.op} needs a target (a role or node names)")
        if arguments == "from-to" and (self.from_ is None or self.to is None):
            raise ValueError(f"{self.op} needs from and to")
        if self.op == "degrade" and not (self.loss_pct or self.delay_ms or self.rate_kbit):
            raise ValueError("degrade needs loss_pct, delay_ms or rate_kbit")
        if refusal := client_path_refusal(self.op, self.delay_ms, self.rate_kbit):
            raise ValueError(refusal)
        if refusal := disk_refusal(self.op, self.fail_on, self.model_fields_set):
            raise ValueError(refusal)
        if refusal := clock_refusal(self.op, self.offset):
            raise ValueError(refusal)
        if refusal := self._membership_refusal():
            raise ValueError(refusal)
        if refusal := upgrade_refusal(self.op, self.release, self.feature, self.level):
            raise ValueError(refusal)
        if self.op == "migrate" and self.phase is None:
            raise ValueError(f"migrate needs a phase ({', '.join(PHASES)})")
        if self.phase is not None and self.op != "migrate":
            raise ValueError(f"phase is for migrate, not {self.op}")
        if arguments == "groups" and (len(self.groups) < 2 or any(not g for g in self.groups)):
            raise ValueError(f"{self.op} needs at least two non-empty groups")
        if arguments == "client":
            if self.client is None:
                raise ValueError(
                    f"{self.op} needs a client (a producer's, reader's or copier's id, or a "
                    "share consumer's name)"
                )
            if self.target is not None or self.from_ is not None or self.to is not None:
                raise ValueError(f"{self.op} names a client, not nodes")
        elif self.client is not None:
            raise ValueError(f"client is for {', '.join(CLIENT_OPS)}, not {self.op}")
        return self

    def _membership_refusal(self) -> str | None:
        """What a membership step's arguments cannot mean, or their use by another op."""
        if self.throttle is not None and self.op not in ("reassign", "add-broker"):
            return f"throttle is for reassign and add-broker, not {self.op}"
        if self.move_onto and self.op != "add-broker":
            return f"move_onto is for add-broker, not {self.op}"
        if self.op == "add-broker" and self.throttle is not None and not self.move_onto:
            return "add-broker: throttle limits the moves of move_onto: set move_onto: true"
        if self.op == "remove-broker":
            many = isinstance(self.target, list) and len(self.target) != 1
            if many or (isinstance(self.target, str) and self.target in MANY_BROKER_ROLES):
                return (
                    f"remove-broker takes one broker at a time, not {self.target}: a role naming "
                    "one (leader, follower, non-controller, a coordinator), an @label or a node"
                )
        if self.op in QUORUM_OPS and self.target is not None:
            many = isinstance(self.target, list) and len(self.target) != 1
            role = isinstance(self.target, str) and not self.target.startswith("@")
            if self.op == "remove-controller" and (many or (role and self.target != "controller")):
                return (
                    f"remove-controller takes one controller, not {self.target}: controller (the "
                    "active one), an @label or a controller's name"
                )
            if self.op == "add-controller" and (many or role):
                return (
                    f"add-controller starts one controller, not {self.target}: a spare's name, or "
                    "the @label or name of one a remove-controller removed (none: the first spare)"
                )
        return None

    def named_nodes(self) -> list[str]:
        """The node names the step gives as names (a role or @label in a partition's groups is
        resolved when it runs)."""
        names = [
            n for sel in (self.target, self.from_, self.to) if isinstance(sel, list) for n in sel
        ]
        return names + [n for g in self.groups for n in g if not is_selector(n)]

    def selectors(self) -> list[str]:
        """Every role and @label the step names, as target, from, to or in a group."""
        named = [sel for sel in (self.target, self.from_, self.to) if isinstance(sel, str)]
        return named + [n for g in self.groups for n in g if is_selector(n)]


class KafkaScenario(ScenarioBase):
    cluster: KafkaClusterSpec
    """The cluster: its system, size, release and configuration."""
    workload: KafkaWorkload
    """The clients: who writes, who reads, and how."""
    nemesis: list[KafkaStep] = Field(default_factory=list)
    """The faults, in time order: each step names an op, when it starts and whom it hits."""

    def kafka_line(self, requested: str | None = None) -> str:
        """The release line or release a run starts: --kafka's, else the scenario's, else 3.9."""
        return requested or self.cluster.release or DEFAULT_KAFKA_LINE

    def release_warning(self) -> str | None:
        """A line when the scenario's broker and topic keys cannot be judged here, before the
        run: its release's config definitions are not shipped (nor cached)."""
        c = self.cluster
        line = self.kafka_line()
        if not (c.broker_config or c.broker_overrides or c.topic_config) or shipped_release(line):
            return None
        return (
            f"Kafka {line}'s config definitions are not shipped: the broker and topic keys are "
            "checked when the run reads them from the image"
        )

    def upgrade_releases(self) -> list[str]:
        """The releases its upgrade steps move nodes to, in step order, each once."""
        found = (s.release for s in self.nemesis if s.op == "upgrade" and s.release)
        return list(dict.fromkeys(found))

    def upgrade_mode_refusal(self, mode: Mode) -> str | None:
        """One line when the mode cannot run a release its upgrade steps move to."""
        if mode == "zk" and any(version_tuple(r) >= (4,) for r in self.upgrade_releases()):
            return (
                f"{self.id} upgrades to Kafka 4, which has no ZooKeeper mode: run it in KRaft "
                "(ZooKeeper-mode clusters migrate to KRaft on 3.9 first)"
            )
        return None

    def line_refusal(self, line: str) -> str | None:
        """One line when a release line lacks what the scenario's clients use, else None."""
        upgrades = self.upgrade_releases()
        own = self.cluster.release
        if upgrades and own and (older(line, own) or older(own, line)):
            return f"{self.id} upgrades from Kafka {own}, its own release, not from {line}"
        for release in upgrades:
            if older(release, line):
                return f"{self.id} upgrades to Kafka {release}, older than {line}, its start"
        uses_848 = any(r.group_protocol == "consumer" for r in self.workload.readers)
        if uses_848 and version_tuple(line) < (4,):
            return f"{self.id}'s readers use the consumer group protocol (KIP-848): Kafka 4.0 on"
        if self.cluster.transaction_version is not None and version_tuple(line) < (4,):
            return f"{self.id} sets transaction_version, a feature of Kafka 4.0 on"
        if self.workload.share_consumers is not None and version_tuple(line) < SHARE_GROUPS_SINCE:
            return f"{self.id}'s share consumers need {SHARE_GROUPS_REFUSAL}, not {line}"
        if self.cluster.migration_controllers and (
            refusal := migration_refusal("zk", line, self.cluster.migration_controllers)
        ):
            return f"{self.id}: {refusal}"
        if self.cluster.controller_quorum == "dynamic":
            return dynamic_quorum_refusal(line)
        return None

    @model_validator(mode="after")
    def _runs_on_its_release(self) -> KafkaScenario:
        """A scenario that names its release (or is read for --kafka's) runs on it: what its
        clients use is there, and one of its modes."""
        line = self.cluster.release
        if line is None:
            return self
        if refusal := self.line_refusal(line):
            raise ValueError(f"cluster.release: {refusal}")
        refusals = [mode_refusal(line, m) for m in self.cluster.modes]
        if all(refusals):
            raise ValueError(f"cluster.modes: {refusals[0]}")
        return self

    @model_validator(mode="after")
    def _share_group_within_the_brokers_bounds(self) -> KafkaScenario:
        """The share group's lock duration and delivery count limit within the bounds the
        brokers set on every group's (their group.share.min/max.* keys, Kafka's defaults
        unless broker_config sets them): a group config outside them is refused by the
        broker as the run begins."""
        share = self.workload.share_consumers
        if share is None:
            return self
        for knob, (low_key, high_key) in SHARE_BOUNDS.items():
            value: int = getattr(share, knob)
            low, high = (self._broker_int(k) for k in (low_key, high_key))
            if value < low:
                raise ValueError(
                    f"workload.share_consumers.{knob} {value} is below the brokers' {low_key} "
                    f"({low}): lower it in cluster.broker_config"
                )
            if value > high:
                raise ValueError(
                    f"workload.share_consumers.{knob} {value} is above the brokers' {high_key} "
                    f"({high}): raise it in cluster.broker_config"
                )
        return self

    def _broker_int(self, key: str) -> int:
        """A broker key's value on every broker: broker_config's, else Kafka's default."""
        value = self.cluster.broker_config.get(key, SHARE_BOUND_DEFAULTS[key])
        try:
            return int(str(value))
        except ValueError:
            raise ValueError(f"cluster.broker_config.{key}: {value!r} is no number") from None

    @model_validator(mode="after")
    def _clients_exist(self) -> KafkaScenario:
        """Producers start within the workload; each client step names a client of the
        workload, each resume follows a pause of its client, and each restart a kill or stop
        of it."""
        if line := self.workload.late_start_refusal(self.timeouts.workload):
            raise ValueError(line)
        ids = self.workload.client_ids()
        paused: set[str] = set()
        ended: set[str] = set()
        for i, step in enumerate(self.nemesis):
            if step.client is None:
                continue
            if step.client not in ids:
                raise ValueError(
                    f"nemesis.{i}: {step.op}: no client {step.client!r} "
                    f"(clients are {', '.join(ids)})"
                )
            if step.op == "pause-client":
                paused.add(step.client)
            elif step.op == "resume-client":
                if step.client not in paused:
                    raise ValueError(
                        f"nemesis.{i}: {step.op} {step.client} follows no pause-client of it"
                    )
                paused.discard(step.client)
            elif step.op in ("kill-client", "stop-client"):
                paused.discard(step.client)
                ended.add(step.client)
            elif step.op == "restart-client":
                if step.client not in ended:
                    raise ValueError(
                        f"nemesis.{i}: restart-client {step.client} follows no kill-client or "
                        "stop-client of it"
                    )
                ended.discard(step.client)
        return self

    @model_validator(mode="after")
    def _membership_holds(self) -> KafkaScenario:
        """The brokers each membership step leaves: a remove-broker keeps replication_factor
        and min.insync.replicas brokers, an add-broker has a spare left, and a spare is named
        by no step before one starts it. A start of a decommissioned broker (its @label, or
        `stopped`) counts it back."""
        c = self.cluster
        spares = [f"kafka{i}" for i in range(c.brokers + 1, c.brokers + c.spare_brokers + 1)]
        brokers, removed_labels, removed = c.brokers, set(), 0
        for i, step in enumerate(self.nemesis):
            if step.op == "add-broker":
                if not spares:
                    raise ValueError(
                        f"nemesis.{i}: add-broker needs a spare broker: cluster.spare_brokers is "
                        f"{c.spare_brokers}, and the steps before it started "
                        f"{'them all' if c.spare_brokers else 'none'}"
                    )
                named = step.target if isinstance(step.target, list) else None
                if named and (len(named) != 1 or named[0] not in spares):
                    raise ValueError(
                        f"nemesis.{i}: add-broker starts one spare broker, not {named} "
                        f"(spares not started: {', '.join(spares)})"
                    )
                spares.remove(named[0] if named else spares[0])
                brokers += 1
            elif step.op == "remove-broker":
                brokers, removed = brokers - 1, removed + 1
                if brokers < c.replication_factor:
                    raise ValueError(
                        f"nemesis.{i}: remove-broker would leave {brokers} brokers for "
                        f"replication_factor {c.replication_factor}: its replicas have nowhere "
                        "to go"
                    )
                if brokers < c.min_insync_replicas:
                    raise ValueError(
                        f"nemesis.{i}: remove-broker would leave {brokers} brokers, fewer than "
                        f"min_insync_replicas {c.min_insync_replicas}: acks=all could never be "
                        "acknowledged again"
                    )
                if step.label:
                    removed_labels.add(step.label)
            elif step.op == "start" and removed:
                back = removed if step.target == "stopped" else 0
                if isinstance(step.target, str) and step.target[1:] in removed_labels:
                    back = 1
                brokers, removed = brokers + back, removed - back
            else:
                early = [n for n in step.named_nodes() if n in spares]
                if early:
                    raise ValueError(
                        f"nemesis.{i}: {early[0]} is a spare broker no add-broker has started yet"
                    )
        return self

    @model_validator(mode="after")
    def _migration_in_order(self) -> KafkaScenario:
        """migrate steps need the cluster's migration controllers and run Kafka's phases in
        order, each once; no step names a controller before migrate controllers starts it."""
        phases: list[str] = []
        controllers = {f"controller{i}" for i in range(1, self.cluster.migration_controllers + 1)}
        for i, step in enumerate(self.nemesis):
            if step.op == "migrate" and step.phase is not None:
                if not self.cluster.migration_controllers:
                    raise ValueError(
                        f"nemesis.{i}: migrate needs cluster.migration_controllers (the KRaft "
                        "controllers the migration starts; zk mode on 3.9)"
                    )
                phases.append(step.phase)
                if refusal := order_refusal(phases):
                    raise ValueError(f"nemesis.{i}: {refusal}")
            elif not phases:
                early = [n for n in step.named_nodes() if n in controllers]
                if early:
                    raise ValueError(
                        f"nemesis.{i}: {early[0]} is a migration controller no migrate "
                        "controllers step has started yet"
                    )
        return self

    @model_validator(mode="after")
    def _quorum_holds(self) -> KafkaScenario:
        """The voters each quorum step leaves, in every mode: a dynamic quorum to change, a
        spare (or a removed controller named) for each add-controller, never the last voter
        removed, never a combined node (removing a voter stops it), and no spare named by a
        step before one starts it."""
        steps = [(i, s) for i, s in enumerate(self.nemesis) if s.op in QUORUM_OPS]
        if steps and self.cluster.controller_quorum != "dynamic":
            i, step = steps[0]
            raise ValueError(
                f"nemesis.{i}: {step.op} needs cluster.controller_quorum: dynamic (a static "
                "quorum's voters are fixed when the cluster forms)"
            )
        for mode in self.cluster.modes:
            self._quorum_holds_in(mode)
        return self

    def _quorum_holds_in(self, mode: Mode) -> None:
        nodes = nodes_of(self.cluster.config(mode), "0.0.0")
        combined = {n.name for n in nodes if n.role == "combined"}
        # A zk cluster's controllers are the migration's (_migration_in_order), no quorum op's.
        spares = [n.name for n in nodes if n.spare and n.role == "controller" and mode != "zk"]
        voters = len(quorum_nodes(self.cluster.config(mode)))
        removed: set[str] = set()  # names, and @labels of the steps that removed them
        for i, step in enumerate(self.nemesis):
            named = step.target if isinstance(step.target, list) else []
            label = step.target if isinstance(step.target, str) else None
            if step.op == "remove-controller":
                if voters == 1:
                    raise ValueError(
                        f"nemesis.{i}: remove-controller would remove the last voter, which "
                        "Kafka refuses: add-controller one first"
                    )
                if named and named[0] in combined:
                    raise ValueError(
                        f"nemesis.{i}: remove-controller stops the controller it removes: "
                        f"{named[0]} is a broker too in mode {mode}"
                    )
                voters -= 1
                removed |= set(named) | ({f"@{step.label}"} if step.label else set())
            elif step.op == "add-controller":
                back = named[0] if named else label
                if back is not None and back in removed:
                    removed.discard(back)
                elif named and named[0] in spares:
                    spares.remove(named[0])
                elif named or label:
                    raise ValueError(
                        f"nemesis.{i}: add-controller starts a spare controller or one a "
                        f"remove-controller removed; {back} is neither (spares not started: "
                        f"{', '.join(spares) or 'none'})"
                    )
                elif not spares:
                    started = "them all" if self.cluster.spare_controllers else "none"
                    raise ValueError(
                        f"nemesis.{i}: add-controller needs a spare controller: "
                        f"cluster.spare_controllers is {self.cluster.spare_controllers}, and the "
                        f"steps before it started {started}"
                    )
                else:
                    spares.pop(0)
                voters += 1
            elif early := [n for n in step.named_nodes() if n in spares]:
                raise ValueError(
                    f"nemesis.{i}: {early[0]} is a spare controller no add-controller has started "
                    "yet"
                )
            elif out := [n for n in [*step.named_nodes(), *step.selectors()] if n in removed]:
                raise ValueError(
                    f"nemesis.{i}: {out[0]} is out of the quorum and stopped (remove-controller): "
                    "an add-controller puts it back first"
                )

    @model_validator(mode="after")
    def _nodes_exist_in_every_mode(self) -> KafkaScenario:
        labels: set[str] = set()
        coordinated = self.workload.coordinated()
        for i, step in enumerate(self.nemesis):
            for sel in step.selectors():
                role = ALL_BUT.get(sel, sel)
                if role in COORDINATOR_TOPICS and role not in coordinated:
                    raise ValueError(f"nemesis.{i}: {sel} needs {COORDINATED_BY[role]}")
                if role == SHARE_COORDINATOR and step.partition >= self.cluster.partitions:
                    raise ValueError(
                        f"nemesis.{i}: share-coordinator of partition {step.partition}: the topic "
                        f"has {self.cluster.partitions} (0..{self.cluster.partitions - 1})"
                    )
            for sel in step.selectors():
                if sel.startswith("@") and sel[1:] not in labels:
                    raise ValueError(f"nemesis.{i}: {sel} names no earlier step's label")
            if step.label:
                labels.add(step.label)
        for mode in self.cluster.modes:
            known = self.cluster.node_names(mode) | {CLIENTS}
            for i, step in enumerate(self.nemesis):
                unknown = [n for n in step.named_nodes() if n not in known]
                if unknown and (unknown[0] in SELECTOR_ROLES or unknown[0].startswith("@")):
                    raise ValueError(
                        f"nemesis.{i}: {unknown[0]} is resolved when the step runs, alone as its "
                        "target, from or to; a list of nodes or a partition's groups take node "
                        "names, or roles in a partition's groups"
                    )
                if unknown:
                    hint = did_you_mean(unknown[0], sorted(known | SELECTOR_ROLES))
                    raise ValueError(
                        f"nemesis.{i}: no node {unknown[0]!r} in mode {mode}{hint} "
                        f"(nodes are {', '.join(sorted(known))}; roles are "
                        f"{', '.join(sorted(SELECTOR_ROLES))})"
                    )
                if fault(step.op).needs_lazy_disks and not self.cluster.lazy_disks:
                    raise ValueError(f"nemesis.{i}: {step.op} needs cluster.lazy_disks: true")
                if refusal := fake_clock_refusal(i, step.op, self.cluster.fake_clock):
                    raise ValueError(refusal)
                if step.op == "cut-from-quorum" and mode == "kraft":
                    raise ValueError(
                        f"nemesis.{i}: cut-from-quorum needs a quorum apart from the brokers "
                        "(modes zk or kraft-dedicated; in kraft every voter is a broker)"
                    )
        return self


# ---- the scenario's own configuration keys, from the file's data ---------------------------------


def config_problems(data: object) -> list[KeyProblem]:
    """Every key of the scenario's own configuration that the harness, a typed knob, the release
    (cluster.release, else 3.9) or librdkafka refuses, each with why. Read from the file's data
    rather than the model, so that a file with other problems has every one of these said too;
    a map or value of the wrong shape is the schema's to say."""
    if not isinstance(data, dict):
        return []
    cluster, workload = data.get("cluster"), data.get("workload")
    problems = _cluster_problems(cluster) if isinstance(cluster, dict) else []
    if isinstance(workload, dict):
        problems += _client_problems(workload)
    return problems


def _properties(value: object) -> dict[str, Any]:
    """The keys of a map whose values a property may take (the schema says what the others
    are)."""
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and _is_property(v)}


def _is_property(value: object) -> bool:
    if isinstance(value, list):
        return all(isinstance(v, str) for v in value)
    return isinstance(value, str | int | float | bool)


def _cluster_problems(cluster: dict[str, Any]) -> list[KeyProblem]:
    release = cluster.get("release")
    try:
        line = DEFAULT_KAFKA_LINE if release is None else _runnable_release(release)
    except (ValueError, TypeError):
        line = None  # the schema says what is wrong with it
    judged_by = shipped_release(line) if line is not None else None
    overrides = cluster.get("broker_overrides")
    maps: list[tuple[tuple[str, ...], Literal["broker", "topic"], object]] = [
        (("cluster", "broker_config"), "broker", cluster.get("broker_config")),
        *(
            (("cluster", "broker_overrides", str(n)), "broker", o)
            for n, o in (overrides.items() if isinstance(overrides, dict) else ())
        ),
        (("cluster", "topic_config"), "topic", cluster.get("topic_config")),
    ]
    return [
        KeyProblem(path, key, why)
        for path, kind, values in maps
        for key, why in passthrough_refusals(kind, _properties(values), cluster, judged_by).items()
    ]


def _client_problems(workload: dict[str, Any]) -> list[KeyProblem]:
    problems = []
    for role, group in (("producer", "producers"), ("reader", "readers")):
        clients = workload.get(group)
        for i, client in enumerate(clients if isinstance(clients, list) else []):
            if not isinstance(client, dict):
                continue
            harness_keys: Mapping[str, str] = (
                {"group.protocol": "consumer"} if client.get("group_protocol") == "consumer" else {}
            )
            refused = client_config_refusals(
                role, client, _properties(client.get("config")), harness_keys
            )
            path = ("workload", group, str(i), "config")
            problems += [KeyProblem(path, key, why) for key, why in refused.items()]
    return problems
