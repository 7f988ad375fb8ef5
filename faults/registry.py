"""Every fault op, declared once.

A scenario's nemesis step names an op (`kill`, `isolate`, `broker-down`, ...). Each op is
declared here with the systems that dispatch it, the arguments it needs, the op that heals it
(kill -> start, pause -> resume, isolate -> heal, disk-full -> disk-ok, forget-node -> add-node)
or none for a one-off,
and the history name
(kill -> start, pause -> resume, isolate -> heal, disk-full -> disk-ok, clock -> clock-ok) or
none for a one-off, and the history name
its nemesis events carry. Each history name is declared with what it does to the run's fault
windows. Every reader of faults works from these two tables: each system's scenario schema
(which ops it accepts and what they need), each system's dispatcher (one handler per op, a test
holds them equal), the checker's fault windows and steps, and the report's labels.

Nothing here runs a fault: it only says what the faults are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

System = Literal["rabbitmq", "kafka", "kafka-mock"]
RABBITMQ: frozenset[System] = frozenset({"rabbitmq"})
KAFKA: frozenset[System] = frozenset({"kafka"})
MOCK: frozenset[System] = frozenset({"kafka-mock"})
REAL: frozenset[System] = RABBITMQ | KAFKA

# What a step must name besides its op:
#   target    the nodes it hits (RabbitMQ: nodes; Kafka: a role, @label or node names)
#   from-to   sources and destinations of a one-way link
#   groups    two or more node groups cut apart
#   optional  a target, or everything when none is named (heal)
#   none      nothing (the op names its own subject: the topic, the whole cluster)
#   client    one of the workload's clients (a producer's, reader's or copier's id)
Arguments = Literal["target", "from-to", "groups", "optional", "none", "client"]

# What a history name does to the fault windows (a span in which some fault is in effect):
#   network-start  a cut or degraded link begins (at the invoke)
#   network-heal   cuts end (at the ok), unless the heal reports cuts or degraded links left
#   heal-all       every fault of the kafka-mock tier ends (at the ok): links, brokers, errors
#   node-down      the nodes are down from the invoke until a node-up brings them back
#   node-up        the nodes are back (at the ok)
#   node-bounce    the nodes are down from the invoke to the ok of the same op
#   injected       queued errors are in effect from the invoke until a heal-all
#   client-down    the workload's clients are stopped from the invoke until a client-up
#   client-up      the clients run again (at the ok)
#   disk-start     the nodes' disks fail calls from the invoke until a disk-heal mends them
#   disk-heal      the nodes' disks mended (at the ok), unless it reports others still failing
#   membership-start  replicas moving between brokers, or a controller joining the KRaft
#                  quorum, from the invoke to the ok of the same op when that ok says it settled
#                  (moved, no throttle left; a voter now), else until a membership-heal; an ok
#                  that says what is still `out` puts back every member it no longer names
#   membership-heal   reassignments' throttles cleared, whatever still moves said (at the ok)
#   member-out     nodes out of the cluster, a controller out of the KRaft quorum, or queue
#                  members removed, from the invoke until a member-in puts them back
#   member-in      members back (at the ok), unless it reports others still out
#   clock-start    the nodes' clocks are off true time from the invoke until a clock-heal
#   clock-heal     the nodes' clocks true again (at the ok), unless it reports others still off
#   none           not a fault: an election, a snapshot, a procedure step, a note
Window = Literal[
    "network-start",
    "network-heal",
    "heal-all",
    "node-down",
    "node-up",
    "node-bounce",
    "injected",
    "client-down",
    "client-up",
    "disk-start",
    "disk-heal",
    "membership-start",
    "membership-heal",
    "member-out",
    "member-in",
    "clock-start",
    "clock-heal",
    "none",
]
# The windows that begin a fault (the rest end one, or are none): what the checker's coverage
# counts traffic in, and what a scenario's step must open to count as a fault before a run.
FAULT_WINDOWS: tuple[Window, ...] = (
    "network-start",
    "node-down",
    "node-bounce",
    "injected",
    "client-down",
    "disk-start",
    "membership-start",
    "member-out",
    "clock-start",
)


@dataclass(frozen=True)
class HistoryName:
    """The `f` of the nemesis's events for one kind of fault."""

    f: str
    label: str  # what the report calls it
    window: Window
    step: bool = True  # an invoke of it is a step of the schedule (attribution, report bands)


@dataclass(frozen=True)
class FaultOp:
    """One op a scenario's nemesis step can name."""

    name: str
    systems: frozenset[System]
    arguments: Arguments
    writes: tuple[str, ...]  # the history names of its events (a system writes one of them)
    healed_by: str | None  # the op that ends it; None: one-off, or itself a recovery
    needs_lazy_disks: bool = False
    needs_fake_clock: bool = False  # the nodes run under libfaketime (cluster.fake_clock)
    needs_proxy: bool = False  # the clients reach the brokers through Toxiproxy for it
    does: str = ""  # what it does, for the reference (docs/reference/faults.md)


HISTORY_NAMES: tuple[HistoryName, ...] = (
    HistoryName("start-partition", "network cut", "network-start"),
    HistoryName("start-degrade", "degraded link", "network-start"),
    HistoryName("start-slow", "slow link", "network-start"),
    HistoryName("start-delay", "clients' link delayed (proxy)", "network-start"),
    HistoryName("start-blackhole", "clients' link blackholed (proxy)", "network-start"),
    HistoryName("start-slow-link", "clients' link slowed (proxy)", "network-start"),
    HistoryName("start-hold", "clients' requests held (proxy)", "network-start"),
    # Written by a heal beside its stop-partition: part of that step, not one of its own.
    HistoryName(
        "release-clients", "clients' path healed, held requests delivered", "network-heal", False
    ),
    HistoryName("reset-clients", "clients' connections reset (proxy)", "none"),
    HistoryName("stop-partition", "heal", "network-heal"),
    HistoryName("heal", "heal everything", "heal-all"),
    HistoryName("kill", "kill -9", "node-down"),
    HistoryName("stop", "graceful stop", "node-down"),
    HistoryName("pause", "pause (frozen)", "node-down"),
    HistoryName("start", "start", "node-up"),
    HistoryName("resume", "resume", "node-up"),
    HistoryName("restart", "restart", "node-bounce"),
    HistoryName("power-loss", "power loss", "node-bounce"),
    HistoryName("inject-errors", "injected errors", "injected"),
    HistoryName("disk-error", "disk errors (EIO)", "disk-start"),
    HistoryName("disk-full", "disk full (ENOSPC)", "disk-start"),
    HistoryName("torn-write", "torn writes at a power loss", "disk-start"),
    HistoryName("disk-ok", "disks mended", "disk-heal"),
    # Its node is down from the invoke to the ok when it is corrupted at rest (while: stopped);
    # under a running broker the same span is the moment its bytes changed.
    HistoryName("corrupt", "data corrupted", "node-bounce"),
    HistoryName("reassign", "partitions reassigned", "membership-start"),
    HistoryName("add-broker", "broker added", "membership-start"),
    # A decommissioned broker is down (stopped) until a start brings it back.
    HistoryName("remove-broker", "broker decommissioned", "node-down"),
    # Written by a heal (or the end of the run) when a reassignment left a throttle or had not
    # settled: part of that heal, not a step of its own.
    HistoryName("end-reassign", "reassignment throttles cleared", "membership-heal", False),
    # A controller joins the KRaft quorum from the invoke until its ok (a voter then); a
    # removed one is out of it, and stopped, until an add-controller puts it back.
    HistoryName("add-controller", "controller added to the quorum", "membership-start"),
    HistoryName("remove-controller", "controller removed from the quorum", "member-out"),
    HistoryName("forget-node", "node forgotten (out of the cluster)", "member-out"),
    HistoryName("add-node", "node added back to the cluster", "member-in"),
    HistoryName("shrink-queue", "queue member removed", "member-out"),
    HistoryName("grow-queue", "queue member added", "member-in"),
    # A node recreated on another release's image, its data kept: down from the invoke to the
    # ok (one event per node, value {nodes: [name], from, to}).
    HistoryName("upgrade", "node upgraded (recreated on a release)", "node-bounce"),
    HistoryName("finalize-feature", "feature finalized", "none"),
    # A Kafka node recreated (or, a migration's controller, first started) to run as one phase
    # of a ZooKeeper-to-KRaft migration has it: down from the invoke to the ok (one event per
    # node, value {nodes: [name], phase}).
    HistoryName("migrate", "node migrated (ZooKeeper to KRaft)", "node-bounce"),
    HistoryName("clock", "clock skewed", "clock-start"),
    HistoryName("clock-ok", "clocks true again", "clock-heal"),
    HistoryName("pause-client", "client paused (SIGSTOP)", "client-down"),
    HistoryName("resume-client", "client resumed (SIGCONT)", "client-up"),
    HistoryName("kill-client", "client killed (SIGKILL)", "client-down"),
    HistoryName("stop-client", "client stopped (SIGTERM)", "client-down"),
    HistoryName("restart-client", "client restarted (a new instance)", "client-up"),
    HistoryName("broker-down", "broker down", "node-down"),
    HistoryName("broker-up", "broker up", "node-up"),
    HistoryName("move-leader", "leader moved", "none"),
    HistoryName("block-publishers", "publishers blocked", "none"),
    HistoryName("wait-drained", "wait until drained", "none"),
    HistoryName("declare", "metadata probe: a queue declared", "none"),
    # Written once the cluster has reunited at the end of the run: no step of the schedule.
    HistoryName("declared", "probe queues looked for after the heal", "none", step=False),
    HistoryName("elect", "leader election", "none"),
    HistoryName("leaders", "leader placement", "none", step=False),
)

OPS: tuple[FaultOp, ...] = (
    # network, both real systems (iptables in each node's namespace)
    FaultOp(
        "isolate",
        REAL,
        "target",
        ("start-partition",),
        "heal",
        does=(
            "Each target drops what every other node sends it (iptables, both ways between "
            "nodes); clients still reach it."
        ),
    ),
    FaultOp(
        "partition",
        REAL,
        "groups",
        ("start-partition",),
        "heal",
        does=(
            "Nodes that share no group are cut apart both ways; a node in two groups bridges "
            "them, a node in none is a group of its own."
        ),
    ),
    FaultOp(
        "cut",
        REAL,
        "from-to",
        ("start-partition",),
        "heal",
        does=(
            "Traffic from the `from` nodes to the `to` nodes is dropped (one way unless both_ways)."
        ),
    ),
    FaultOp(
        "cut-clients",
        REAL,
        "target",
        ("start-partition",),
        "heal",
        does=(
            "The workload's clients can no longer reach the targets; the nodes still see each "
            "other."
        ),
    ),
    FaultOp(
        "heal",
        REAL | MOCK,
        "optional",
        ("stop-partition", "heal", "release-clients", "end-reassign"),
        None,
        does=(
            "Ends every network fault (cuts and degraded links, and the clients' proxy's: what a "
            "hold held is delivered then), or those of the targets when named; on Kafka it also "
            "clears a reassignment's throttle."
        ),
    ),
    # processes, both real systems (Docker)
    FaultOp(
        "kill",
        REAL,
        "target",
        ("kill",),
        "start",
        does="SIGKILL to the targets' broker processes (the containers stop at once).",
    ),
    FaultOp(
        "stop",
        REAL,
        "target",
        ("stop",),
        "start",
        does="A graceful stop of the targets (SIGTERM, the broker's own shutdown).",
    ),
    FaultOp(
        "start",
        REAL,
        "target",
        ("start",),
        None,
        does="Starts stopped or killed targets again.",
    ),
    FaultOp(
        "restart",
        REAL,
        "target",
        ("restart",),
        None,
        does="A graceful stop and a start of the targets, one step.",
    ),
    FaultOp(
        "pause",
        REAL,
        "target",
        ("pause",),
        "resume",
        does=(
            "Freezes the targets' containers (the cgroup freezer, as docker pause): alive to the "
            "network, answering nothing."
        ),
    ),
    FaultOp(
        "resume",
        REAL,
        "target",
        ("resume",),
        None,
        does="Thaws paused targets.",
    ),
    FaultOp(
        "power-loss",
        REAL,
        "target",
        ("power-loss",),
        None,
        needs_lazy_disks=True,
        does=(
            "Kills the targets and drops what their filesystem had not synced (lazyfs), then "
            "starts them: a machine losing power."
        ),
    ),
    # disks, both real systems (lazyfs): the calls of the broker's own data directory fail,
    # never the host's disk; a fault of its own, mended by disk-ok (a network heal leaves it)
    FaultOp(
        "disk-error",
        REAL,
        "target",
        ("disk-error",),
        "disk-ok",
        needs_lazy_disks=True,
        does=(
            "The targets' data directories fail one kind of call with EIO (`fail_on`: write, fsync "
            "or read), on the files matching `path` (a glob), each call with `probability`: "
            "the broker's write(2), fsync(2) or read(2) returns the error, and the failed call "
            "changes nothing."
        ),
    ),
    FaultOp(
        "disk-full",
        REAL,
        "target",
        ("disk-full",),
        "disk-ok",
        needs_lazy_disks=True,
        does=(
            "The targets' data directories are full: writes and new files fail with ENOSPC and "
            "statfs (df, a broker's disk monitor) says no space is free; reads, fsyncs and "
            "deletions go on."
        ),
    ),
    FaultOp(
        "torn-write",
        REAL,
        "target",
        ("torn-write",),
        "disk-ok",
        needs_lazy_disks=True,
        does=(
            "At each power loss of the targets until their disk-ok, the last unsynced write of "
            "each file matching `path` is cut short, a share `keep` of it kept (whole sectors), "
            "and the file's earlier unsynced writes kept whole, rather than all of them dropped: "
            "a write torn by the power going while the disk wrote it back."
        ),
    ),
    FaultOp(
        "disk-ok",
        REAL,
        "optional",
        ("disk-ok",),
        None,
        needs_lazy_disks=True,
        does="Ends the disk faults of the targets, or of every node when none is named.",
    ),
    # one-off: nothing mends corrupted data; the history says which bytes it changed
    FaultOp(
        "corrupt",
        REAL,
        "target",
        ("corrupt",),
        None,
        needs_lazy_disks=True,
        does=(
            "Changes `length` bytes of `files` of the targets' data files matching `path` (a "
            "glob), at `offset` or a drawn one, by `corruption` (flip a bit of each, random, "
            "zero), from `seed`: at rest (`while: stopped`, the default: the node killed, its "
            "files changed, the node started) or under the running broker; in what it reads and "
            "in what survives a power loss. The history records each file, offset, old and new "
            "bytes."
        ),
    ),
    # clocks, both real systems (libfaketime in the nodes' containers, docs/clock-faults.md):
    # what the node's processes read as the time of day, never the host's clock nor the
    # monotonic clock; a fault of its own, ended by clock-ok (a network heal leaves it)
    FaultOp(
        "clock",
        REAL,
        "target",
        ("clock",),
        "clock-ok",
        needs_fake_clock=True,
        does=(
            "The targets' clocks read `offset` seconds off true time (signed: +3600 an hour "
            "ahead, -3600 an hour behind), from within a second of the step until a clock-ok: "
            "the time of day every process of the node reads jumps there; its monotonic clock "
            "and the host's clock are untouched. A later clock step sets a new offset from "
            "true time, not one added to the last."
        ),
    ),
    FaultOp(
        "clock-ok",
        REAL,
        "optional",
        ("clock-ok",),
        None,
        needs_fake_clock=True,
        does="Sets the targets' clocks, or every node's when none is named, back to true time.",
    ),
    # RabbitMQ: the manual resolution of a partition (memory watermark 0, wait for empty queues)
    FaultOp(
        "block-publishers",
        RABBITMQ,
        "target",
        ("block-publishers",),
        None,
        does=(
            "Sets the targets' memory watermark to 0, so that RabbitMQ blocks every publisher "
            "connected to them."
        ),
    ),
    FaultOp(
        "wait-drained",
        RABBITMQ,
        "target",
        ("wait-drained",),
        None,
        does=(
            "Waits (up to `within` seconds) until the targets' queues are empty: the manual way "
            "out of a partition."
        ),
    ),
    # RabbitMQ: a probe of the metadata store, not a fault (it opens no window)
    FaultOp(
        "declare",
        RABBITMQ,
        "target",
        ("declare",),
        None,
        does=(
            "Asks each target, at once, to declare a throwaway durable classic queue over AMQP "
            "(a write to the metadata store alone), waiting `within` seconds; the history says "
            "what each answered: accepted, refused (the broker's reply code and text), "
            "timed-out or unreachable. Once the cluster has reunited after the run's final "
            "heal, every node is asked which of those queues it lists, and they are deleted."
        ),
    ),
    # RabbitMQ: membership (rabbitmqctl, rabbitmq-queues): a node out of the cluster, a quorum
    # queue's member removed; each healed by its own op, or by the end of the run
    FaultOp(
        "forget-node",
        RABBITMQ,
        "target",
        ("forget-node",),
        "add-node",
        does=(
            "Takes the targets out of the cluster: their RabbitMQ application stopped "
            "(`rabbitmqctl stop_app`), then `rabbitmqctl forget_cluster_node` from a member that "
            "stays, which also removes their members of the quorum queues. Never the last member."
        ),
    ),
    FaultOp(
        "add-node",
        RABBITMQ,
        "optional",
        ("add-node",),
        None,
        does=(
            "Puts forgotten targets (none named: every forgotten node) back: each reset, joined to "
            "a member (`join_cluster`) and started (`start_app`); their queue members come back "
            "with a grow-queue or the end of the run."
        ),
    ),
    FaultOp(
        "shrink-queue",
        RABBITMQ,
        "target",
        ("shrink-queue",),
        "grow-queue",
        does=(
            "Removes the targets' members of the workload's quorum queues "
            "(`rabbitmq-queues delete_member`); refused where it would leave a queue no member."
        ),
    ),
    FaultOp(
        "grow-queue",
        RABBITMQ,
        "optional",
        ("grow-queue",),
        None,
        does=(
            "Adds members of the workload's quorum queues on the targets "
            "(`rabbitmq-queues add_member`); none named: every member the run removed, so each "
            "queue has its first members again."
        ),
    ),
    # rolling upgrades (systems.rabbitmq.upgrade): each node recreated on the release's image,
    # one at a time, its data kept; the new release's features finalized as a step of their own
    FaultOp(
        "upgrade",
        REAL,
        "optional",
        ("upgrade",),
        None,
        does=(
            "Moves the targets (none named: every node) onto `release`, one node at a time: each "
            "stopped, its container recreated on that release's image with its data kept, and "
            "waited for (back in the cluster, its replicas in sync; `within` seconds) before the "
            "next. Kafka: dedicated controllers first; a broker is back in the ISR of every "
            "partition it replicates, a controller caught up with the quorum's leader. RabbitMQ: "
            "a path its rolling upgrades do not support (a skipped series, a "
            "downgrade) is refused unless `unsupported_path: true`; a node that refuses to boot "
            "is recreated on its old release again."
        ),
    ),
    FaultOp(
        "finalize-feature",
        REAL,
        "none",
        ("finalize-feature",),
        None,
        does=(
            "Switches on what a finished upgrade leaves off. Kafka: its own tool (kafka-features "
            "upgrade), in a broker of the newest release, raises `feature` to `level`: "
            "`metadata.version` (a release such as 4.4, or a level such as 4.4-IV2), a numbered "
            "feature (transaction.version, group.version, ...) or `all` (every feature to the "
            "defaults of the release `level` names); the ok says the levels after. RabbitMQ: "
            "`rabbitmqctl enable_feature_flag` enables the flag `feature` (`all`: every stable "
            "one; `khepri_db` migrates the metadata store from Mnesia to Khepri); the ok says "
            "every flag's state and each node's metadata store after."
        ),
    ),
    # Kafka's ZooKeeper-to-KRaft migration (systems.kafka.migration): one phase a step, in
    # Kafka's order, so that faults can be scheduled between them
    FaultOp(
        "migrate",
        KAFKA,
        "none",
        ("migrate",),
        None,
        does=(
            "One `phase` of Kafka 3.9's ZooKeeper-to-KRaft migration of a zk cluster that "
            "declares `migration_controllers`, node by node, each waited for (`within` seconds) "
            "before the next: `controllers` formats the declared KRaft controllers with "
            "ZooKeeper's cluster id and starts them in migration mode; `brokers` recreates each "
            "broker with the migration's settings while still in ZooKeeper mode, back in the "
            "ISR, and the last waits for the active controller to log the copy of ZooKeeper's "
            "metadata (dual write begins); `kraft` recreates each broker in KRaft mode "
            "(process.roles=broker, node.id its broker.id, no ZooKeeper), back in the ISR; "
            "`finalize` recreates each controller without the migration's flag and ZooKeeper, "
            "caught up with the quorum's leader. The phases run in that order, each once; each "
            "node's move is one event, its ok saying whether it came back in sync and what its "
            "log and the controllers' said."
        ),
    ),
    # Kafka
    FaultOp(
        "cut-from-quorum",
        KAFKA,
        "target",
        ("start-partition",),
        "heal",
        does=(
            "Cuts the targets from the KRaft controller quorum (or ZooKeeper) while they still "
            "reach the brokers and clients."
        ),
    ),
    FaultOp(
        "degrade",
        KAFKA,
        "from-to",
        ("start-degrade",),
        "heal",
        does=(
            "Drops a share of the packets (loss_pct) or limits the bandwidth (rate_kbit) from "
            "`from` to `to`; delay and jitter need the kernel's netem."
        ),
    ),
    FaultOp(
        "rolling-restart",
        KAFKA,
        "optional",
        ("restart",),
        None,
        does=(
            "Restarts every broker (or the targets) one at a time, each back in the ISR before "
            "the next (within `within` seconds)."
        ),
    ),
    FaultOp(
        "elect",
        KAFKA,
        "none",
        ("elect",),
        None,
        does=(
            "Asks the controller for a leader election of the workload's partitions: preferred, "
            "or unclean."
        ),
    ),
    FaultOp(
        "leaders",
        KAFKA,
        "none",
        ("leaders",),
        None,
        does=(
            "Records where the partitions' leaders are (expect_balanced: every partition on its "
            "preferred replica)."
        ),
    ),
    # Kafka's membership (systems.kafka.membership): replicas moved by Kafka's reassignment tool
    # while the workload produces, a broker decommissioned, a spare broker added
    FaultOp(
        "reassign",
        KAFKA,
        "optional",
        ("reassign",),
        "heal",
        does=(
            "Moves every partition of the workload's topics (or those the targets lead) to the "
            "next replica set in the ring of brokers, with an optional replication `throttle` "
            "(bytes/s), and waits until the move completes or `within` passes; a heal clears "
            "the throttle."
        ),
    ),
    FaultOp(
        "remove-broker",
        KAFKA,
        "target",
        ("remove-broker",),
        "start",
        does=(
            "Decommissions one broker: its replicas of the workload's topics moved to the other "
            "brokers (within `within`), then a graceful stop, then, in KRaft, its registration "
            "removed (kafka-cluster.sh unregister). A start brings it back, with no replicas."
        ),
    ),
    FaultOp(
        "add-broker",
        KAFKA,
        "optional",
        ("add-broker",),
        None,
        does=(
            "Starts a spare broker (`cluster.spare_brokers`; the targets name which, else the "
            "first not started) and waits until it registers; `move_onto` then moves one replica "
            "of each partition onto it."
        ),
    ),
    # Kafka's controller quorum (systems.kafka.quorum, KIP-853): voters added and removed with
    # kafka-metadata-quorum, on a cluster formed with a dynamic quorum
    FaultOp(
        "add-controller",
        KAFKA,
        "optional",
        ("add-controller",),
        None,
        does=(
            "Starts a controller formatted without initial controllers (a spare: "
            "`cluster.spare_controllers`, the first not started unless the target names one; or "
            "one a remove-controller removed, named), waits until it has caught up as an "
            "observer, adds it with `kafka-metadata-quorum add-controller` run inside it, and "
            "waits (within `within`) until the voters list it. Needs "
            "`cluster.controller_quorum: dynamic`."
        ),
    ),
    # No op heals it in the registry's sense: the add-controller that puts it back is a fault
    # of its own (the quorum changing under load); its ok ends the removal's window all the same.
    FaultOp(
        "remove-controller",
        KAFKA,
        "target",
        ("remove-controller",),
        None,
        does=(
            "Removes one voter (`controller`: the active one, or a dedicated controller named) "
            "from the KRaft quorum with `kafka-metadata-quorum remove-controller` and its "
            "directory id, and stops it: removed, then stopped on Kafka 4.0 and later "
            "(pre-vote); stopped, then removed on 3.9, as its guide says. Never the last voter. "
            "An add-controller naming it puts it back. Needs `cluster.controller_quorum: dynamic`."
        ),
    ),
    # the clients' path through Toxiproxy (compose.proxy): the brokers advertise the proxy to
    # the workload's clients; the brokers' own traffic and the harness's stay direct
    FaultOp(
        "delay",
        REAL,
        "target",
        ("start-delay",),
        "heal",
        needs_proxy=True,
        does=(
            "What the workload's clients send the targets arrives delay_ms later (jitter_ms "
            "either way; both_ways: the answers too), through the clients' proxy."
        ),
    ),
    FaultOp(
        "hold",
        REAL,
        "target",
        ("start-hold",),
        "heal",
        needs_proxy=True,
        does=(
            "What the workload's clients send the targets (both_ways: and their answers) is "
            "held by the proxy and delivered, in order, only when the step is healed, even to a "
            "client that gave up and closed the connection meanwhile: the late request of a "
            "transaction that ended while it was held."
        ),
    ),
    FaultOp(
        "blackhole",
        REAL,
        "target",
        ("start-blackhole",),
        "heal",
        needs_proxy=True,
        does=(
            "What the workload's clients send the targets is dropped while their connections "
            "stay open: no error until the clients' own timeouts (the proxy closes those "
            "connections at the heal)."
        ),
    ),
    FaultOp(
        "slow-link",
        REAL,
        "target",
        ("start-slow-link",),
        "heal",
        needs_proxy=True,
        does=(
            "What the workload's clients send the targets (and, both_ways, the answers) passes "
            "at rate_kbit at most, through the clients' proxy: a slow link where degrade cannot."
        ),
    ),
    FaultOp(
        "reset-clients",
        REAL,
        "target",
        ("reset-clients",),
        None,
        needs_proxy=True,
        does="The proxy closes every connection of the workload's clients to the targets.",
    ),
    # the workload's own client processes (SIGSTOP, SIGCONT): a zombie instance (KIP-98)
    FaultOp(
        "pause-client",
        KAFKA,
        "client",
        ("pause-client",),
        "resume-client",
        does=(
            "Freezes one of the workload's clients (SIGSTOP): a zombie instance, alive but silent."
        ),
    ),
    FaultOp(
        "resume-client",
        KAFKA,
        "client",
        ("resume-client",),
        None,
        does="Thaws a paused client (SIGCONT).",
    ),
    FaultOp(
        "kill-client",
        KAFKA,
        "client",
        ("kill-client",),
        "restart-client",
        does=(
            "Kills one of the workload's clients and its process group (SIGKILL): a crash; "
            "what it had sent but not heard back about stays unknown."
        ),
    ),
    FaultOp(
        "stop-client",
        KAFKA,
        "client",
        ("stop-client",),
        "restart-client",
        does="Stops one of the workload's clients with SIGTERM: its own shutdown.",
    ),
    FaultOp(
        "restart-client",
        KAFKA,
        "client",
        ("restart-client",),
        None,
        does=(
            "Starts a new instance of a killed or stopped client, a process of its own in the "
            "history (`C1.2`, `P1.2`, ...): a copier or transactional producer with the same "
            "transactional id (a copier, the same group too), as Kafka's TransactionsTest "
            "bounces its copiers; a reader in the same group; a plain producer in its first "
            "instance's id space, from the sequence number after the last one begun."
        ),
    ),
    # kafka-mock: librdkafka's mock cluster through its own API
    FaultOp(
        "broker-down",
        MOCK,
        "target",
        ("broker-down",),
        "broker-up",
        does="The mock cluster takes the target broker down.",
    ),
    FaultOp(
        "broker-up",
        MOCK,
        "target",
        ("broker-up",),
        None,
        does="The mock cluster brings the target broker back.",
    ),
    FaultOp(
        "move-leader",
        MOCK,
        "none",
        ("move-leader",),
        None,
        does="The mock cluster moves the partition's leadership to another broker.",
    ),
    FaultOp(
        "produce-errors",
        MOCK,
        "none",
        ("inject-errors",),
        "heal",
        does="The mock cluster answers produce requests with errors (NOT_ENOUGH_REPLICAS, ...).",
    ),
    FaultOp(
        "rtt",
        MOCK,
        "target",
        ("start-slow",),
        "heal",
        does="The mock cluster delays the target broker's answers.",
    ),
)

_OPS = {op.name: op for op in OPS}
_HISTORY = {h.f: h for h in HISTORY_NAMES}


def op(name: str) -> FaultOp:
    return _OPS[name]


def ops_of(system: System) -> tuple[str, ...]:
    """The op names a system's scenarios may use, in declaration order."""
    return tuple(o.name for o in OPS if system in o.systems)


def check_op(system: System, name: str) -> str:
    """`name` if the system has that op; otherwise a one-line ValueError listing its ops."""
    known = ops_of(system)
    if name not in known:
        raise ValueError(f"{name!r} is not a {system} fault op (ops: {', '.join(known)})")
    return name


def window_of(f: str) -> Window:
    """What a nemesis event's `f` does to the fault windows ("none" for a name not declared)."""
    h = _HISTORY.get(f)
    return h.window if h else "none"


def is_step(f: str) -> bool:
    """Whether an invoke of `f` is a step of the schedule (a snapshot is not)."""
    h = _HISTORY.get(f)
    return h.step if h else True


def label_of(f: str) -> str:
    """The report's word for a history name (the name itself when not declared)."""
    h = _HISTORY.get(f)
    return h.label if h else f
