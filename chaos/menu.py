"""The faults a generated schedule draws from, per system, in the fault registry's ops.

A family is what a user names in `--faults` (partition, kill, pause, ...). Drawing one gives a
fault step and the step that heals it (kill -> start of the same nodes, cut -> heal), or no
heal for a one-off (a restart, a power loss, an election). Targets are roles resolved when the
step runs (the leader of a partition, a follower, the controller) where the system has roles,
and node names otherwise, so a schedule keeps hitting the leader wherever leadership moved. A
Kafka workload with transactions adds its coordinators (the transactional id's, the copiers'
group's) to the roles a target draws.

Each family holds one kind of the cluster's state: at most one network fault, one process
fault (a one-off restart, power loss or election included) and one clock skew are in effect at
a time, so a heal never ends a fault it did not pair with and a restart never lands on a paused
node.

A family of several ops with weights deals them from a bag (`Draws.deal`): each op as many times
as its weight, shuffled, so that a schedule that draws the family as often as its bag holds draws
every op of it, in the weights' proportions.

Some ops go one way only: an upgrade, a feature finalized, a phase of a migration. Their family
is a path (`Family.path`): its steps in their one legal order, each drawn once, every other draw
until the path ends (the generator's turn), on a cluster no other fault is in, so that faults
come between the steps (the cluster half upgraded, upgraded but not finalized, mid-migration). A
probe (`Family.rides`) is no fault of its own: it is drawn inside a fault of the kind it rides
(a declare while a partition is on).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from systems.kafka.migration import PHASES

Kind = Literal["network", "process", "client", "clock", "probe"]
Step = dict[str, Any]
# What ends a drawn fault: one step, several in order (a disk mended, then its node restarted),
# or none (a one-off).
Heal = Step | list[Step] | None


@dataclass(frozen=True)
class ClusterShape:
    """What the generator must know of the cluster it aims at."""

    system: str  # kafka | rabbitmq | kafka-mock
    brokers: tuple[str, ...]  # nodes holding data (Kafka brokers, RabbitMQ nodes)
    nodes: tuple[str, ...]  # every node of the cluster (brokers, ZooKeeper, controllers)
    partitions: int = 1
    lazy_disks: bool = False
    quorum_apart: bool = False  # Kafka: a control-plane quorum outside the brokers (zk, dedicated)
    roles: tuple[str, ...] = ()  # the roles a target may name (none: node names only)
    # Kafka: coordinator roles a target may name besides the partition and controller roles
    # (only coordinators of the workload's own clients: the schema refuses any other).
    coordinators: tuple[str, ...] = ()
    # Kafka: the workload clients a client fault may end and start again.
    restartable: tuple[str, ...] = ()
    # RabbitMQ: the clients reach the nodes through HAProxy alone (no path of theirs to fault).
    load_balancer: bool = False
    # RabbitMQ: the workload's queues are quorum queues (their members can be grown back).
    quorum_queues: bool = False
    # The nodes' clocks can be set off true time (cluster.fake_clock).
    fake_clock: bool = False
    # Kafka: brokers declared but not started (cluster.spare_brokers), for add-broker.
    spares: int = 0
    # Kafka: the fewest brokers a decommission must leave (the replication factor, min ISR).
    keep_brokers: int = 0
    # The base's upgrade path (chaos.upgrade_path): upgrade and finalize-feature steps, in order.
    upgrade_path: tuple[Step, ...] = field(default=(), hash=False)
    # The nodes an upgrade naming none moves, in the order it takes them (Kafka: dedicated
    # controllers first, then by id): an upgrade of the path is drawn one node at a time.
    upgradable: tuple[str, ...] = ()
    # Kafka, a zk cluster: the KRaft controllers its migration starts (migration_controllers).
    migration_controllers: int = 0
    # Kafka, a dynamic quorum (KIP-853): its dedicated voters as it forms, and its spares.
    voters: tuple[str, ...] = ()
    spare_controllers: int = 0


class Draws(random.Random):
    """A schedule's random source, and what its families remember from one draw to the next
    within it: their bags of ops and the spare brokers started. Seeded like random.Random, it
    gives the same numbers: a family that deals nothing draws what it always drew."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.bags: dict[str, list[str]] = {}
        self.brokers_added = 0
        self.controllers_added = 0
        self.path_taken: dict[str, int] = {}  # per path family: how many of its steps are drawn
        self.rides: dict[str, int] = {}  # per probe: the faults of its kind drawn so far

    def deal(
        self,
        bag: str,
        weights: Mapping[str, int],
        allowed: Callable[[str], bool] = lambda _op: True,
    ) -> str:
        """The next op of a bag: each op as many times as its weight, shuffled, dealt one by
        one, and a new bag when it is empty. Each bag holds every op and a schedule starts with
        a full one, so a schedule that draws a family as often as its bag holds draws each of
        its ops (the nightly counts on it), where weighted choices might leave the rarest out.
        An op not `allowed` now (no spare broker left) is passed over; a bag left with none
        allowed is dealt anew."""
        cards = self.bags.setdefault(bag, [])
        for _ in range(2):
            for i, op in enumerate(cards):
                if allowed(op):
                    return cards.pop(i)
            cards[:] = [op for op, n in weights.items() for _ in range(n)]
            self.shuffle(cards)
        raise ValueError(f"no op of {bag} can be drawn on this cluster")


def _no_time(_shape: ClusterShape, _step: Step) -> float:
    return 0.0


@dataclass(frozen=True)
class Family:
    name: str
    kind: Kind
    draw: Callable[[Draws, ClusterShape, str], tuple[Step, Heal]]
    # What it needs of the cluster besides the system (lazy disks, a quorum apart).
    fits: Callable[[ClusterShape], bool] = field(default=lambda _shape: True)
    # Drawn when no families are named; the others only when asked for by name.
    default: bool = True
    # A path of one-way steps (see the module's docstring): the steps, in order, for a cluster.
    path: Callable[[ClusterShape], list[Step]] | None = None
    # A probe drawn inside the faults of this kind, never on its own.
    rides: Kind | None = None
    # How long the nemesis is busy with a step (its nodes moved one by one, a probe's wait):
    # the steps run one after another, so the next draw comes after it.
    lasts: Callable[[ClusterShape, Step], float] = _no_time

    def left(self, rng: Draws, shape: ClusterShape) -> bool:
        """Whether it has a step left to draw (a path drawn to its end has none)."""
        return self.path is None or rng.path_taken.get(self.name, 0) < len(self.path(shape))


# ---- targets -----------------------------------------------------------------------------------

# Roles a generated fault aims at, most often the leader (where a fault costs the most).
KAFKA_ROLES = ("leader", "leader", "follower", "followers", "controller", "non-controller")
MOCK_ROLES = ("leader", "leader", "followers", "controller", "non-controllers")
# RabbitMQ quorum queues and streams: the first queue's leader or followers, as the broker names
# them when the step runs.
RABBITMQ_ROLES = ("leader", "leader", "followers")
BY_NAME = 0.25  # how often a target is a broker by name rather than a role


def _target(rng: random.Random, shape: ClusterShape) -> Step:
    """{"target": role, "partition": p} or the system's way of naming nodes."""
    if shape.system == "rabbitmq":
        if shape.roles and rng.random() >= BY_NAME:
            return {"nodes": [rng.choice(shape.roles)]}
        return {"nodes": [rng.choice(shape.brokers)]}
    if shape.system == "kafka-mock":
        if rng.random() < BY_NAME:
            return {"brokers": [rng.randint(1, len(shape.brokers))]}
        return {"target": rng.choice(MOCK_ROLES), "partition": rng.randrange(shape.partitions)}
    if rng.random() < BY_NAME:
        return {"target": [rng.choice(shape.brokers)]}
    # Without coordinators the choice is among the same roles as ever: a seed draws the
    # schedule it always drew.
    role = rng.choice((shape.roles or KAFKA_ROLES) + shape.coordinators)
    if role in shape.coordinators:
        # Found by its client's id, not by a partition: a partition here would mislead a reader.
        return {"target": role}
    return {"target": role, "partition": rng.randrange(shape.partitions)}


def _aims_at_a_role(shape: ClusterShape, fault: Step) -> bool:
    """Whether the fault names a role, resolved when it runs (its heal then needs a label)."""
    if shape.system == "kafka":
        return isinstance(fault.get("target"), str)
    return shape.system == "rabbitmq" and any(n in RABBITMQ_ROLES for n in fault.get("nodes", []))


def _again(shape: ClusterShape, fault: Step, label: str) -> Step:
    """The same nodes the fault resolved to, for its heal."""
    if shape.system == "kafka":
        return {"target": f"@{label}"}
    if shape.system == "kafka-mock":
        return {}
    if _aims_at_a_role(shape, fault):
        return {"nodes": [f"@{label}"]}
    return {"nodes": list(fault["nodes"])}


def _halves(rng: random.Random, nodes: tuple[str, ...]) -> list[list[str]]:
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    cut = rng.randint(1, len(shuffled) // 2)
    return [sorted(shuffled[:cut]), sorted(shuffled[cut:])]


def _pair(rng: random.Random, shape: ClusterShape) -> Step:
    """Two ends of a link: the leader and its followers on Kafka, else two nodes by name."""
    if shape.system == "kafka" and rng.random() >= BY_NAME:
        ends = ("leader", "followers") if rng.random() < 0.5 else ("followers", "leader")
        return {"from": ends[0], "to": ends[1], "partition": rng.randrange(shape.partitions)}
    if shape.roles and shape.system == "rabbitmq" and rng.random() >= BY_NAME:
        ends = ("leader", "followers") if rng.random() < 0.5 else ("followers", "leader")
        return {"from": [ends[0]], "to": [ends[1]]}
    a, b = rng.sample(shape.brokers, 2)
    return {"from": [a], "to": [b]}


# ---- network -------------------------------------------------------------------------------------


def _heal() -> Step:
    """Every network fault of a generated schedule ends with a heal of everything: only one
    is in effect at a time."""
    return {"op": "heal"}


def _partition(rng: random.Random, shape: ClusterShape, label: str) -> tuple[Step, Step | None]:
    """Isolate one node, split the cluster in halves, a bridge, a one-way cut, or the clients
    cut from a node."""
    shapes = ["isolate", "halves", "one-way", "clients"]
    if len(shape.brokers) >= 3:
        shapes.append("bridge")
    how = rng.choice(shapes)
    if how == "isolate":
        step: Step = {"op": "isolate", **_target(rng, shape)}
    elif how == "halves":
        step = {"op": "partition", "groups": _halves(rng, shape.nodes)}
    elif how == "bridge":
        # The bridge talks to both sides; the sides do not talk to each other.
        bridge, *rest = rng.sample(shape.brokers, len(shape.brokers))
        side = rng.randint(1, len(rest) - 1)
        step = {
            "op": "partition",
            "groups": [sorted([bridge, *rest[:side]]), sorted([bridge, *rest[side:]])],
        }
    elif how == "one-way":
        step = {"op": "cut", **_pair(rng, shape)}
    else:
        step = {"op": "cut-clients", **_target(rng, shape)}
    # A label names what a role resolved to; a step aimed by node names needs none.
    return {**step, "label": label} if _aims_at_a_role(shape, step) else step, _heal()


def _slow(rng: random.Random, shape: ClusterShape, label: str) -> tuple[Step, Step | None]:
    """A lossy or narrow link (no delay: that needs the kernel's netem)."""
    ends = _pair(rng, shape)
    if rng.random() < 0.5:
        how: Step = {"loss_pct": float(rng.choice((10, 25, 50)))}
    else:
        how = {"rate_kbit": rng.choice((256, 1024, 4096))}
    return {"op": "degrade", **ends, **how}, _heal()


# The faults of the clients' path through the proxy, by weight: delays and holds (the late
# requests a transaction's window needs) drawn three times as often as the others.
CLIENT_PATH_OPS: dict[str, float] = {
    "hold": 3,
    "delay": 3,
    "blackhole": 1,
    "slow-link": 1,
    "reset-clients": 1,
}


def _client_path(rng: random.Random, shape: ClusterShape, label: str) -> tuple[Step, Step | None]:
    """A fault of the clients' traffic to some brokers (the proxy): on a transactional base, a
    delay or hold aims at the transaction coordinator half the time (the EndTxn's path)."""
    op = rng.choices(list(CLIENT_PATH_OPS), list(CLIENT_PATH_OPS.values()))[0]
    coordinator = "transaction-coordinator" in shape.coordinators
    if op in ("hold", "delay") and coordinator and rng.random() < 0.5:
        target: Step = {"target": "transaction-coordinator"}
    else:
        target = _target(rng, shape)
    step: Step = {"op": op, **target}
    if op == "delay":
        step |= {"delay_ms": rng.choice((2000, 6000, 12000)), "jitter_ms": rng.choice((0, 500))}
    elif op == "slow-link":
        step["rate_kbit"] = rng.choice((64, 256, 1024))
    if op == "reset-clients":
        return step, None
    return {**step, "label": label}, _heal()


def _quorum(rng: random.Random, shape: ClusterShape, label: str) -> tuple[Step, Step | None]:
    """A broker (often the controller) cut from the control-plane quorum."""
    target = _target(rng, shape)
    return {"op": "cut-from-quorum", **target, "label": label}, _heal()


def _mock_rtt(rng: random.Random, shape: ClusterShape, label: str) -> tuple[Step, Step | None]:
    return {"op": "rtt", **_target(rng, shape), "rtt_ms": rng.choice((200, 1000, 3000))}, _heal()


def _mock_errors(rng: random.Random, shape: ClusterShape, label: str) -> tuple[Step, Step | None]:
    errors = rng.choice(
        (["NOT_LEADER_FOR_PARTITION"], ["REQUEST_TIMED_OUT"], ["NOT_ENOUGH_REPLICAS"])
    )
    return {"op": "produce-errors", "errors": errors * rng.randint(1, 5)}, _heal()


# ---- processes -----------------------------------------------------------------------------------


def _down_up(down: str, up: str) -> Callable[..., tuple[Step, Step | None]]:
    def draw(rng: random.Random, shape: ClusterShape, label: str) -> tuple[Step, Step | None]:
        fault = {"op": down, **_target(rng, shape)}
        if shape.system == "kafka" or _aims_at_a_role(shape, fault):
            fault["label"] = label
        return fault, {"op": up, **_again(shape, fault, label)}

    return draw


def _client_bounce(rng: random.Random, shape: ClusterShape, label: str) -> tuple[Step, Step]:
    """A workload client killed -9 or stopped, and started again when the fault ends (a copier
    or transactional producer with its transactional id, a reader in its group, a producer in
    its id space): kafkatest's client bounce."""
    client = rng.choice(shape.restartable)
    end = "kill-client" if rng.random() < 0.5 else "stop-client"
    return {"op": end, "client": client}, {"op": "restart-client", "client": client}


def _has_restartable_clients(shape: ClusterShape) -> bool:
    return bool(shape.restartable)


def _has_client_paths(shape: ClusterShape) -> bool:
    return not shape.load_balancer


def _mock_down(rng: random.Random, shape: ClusterShape, label: str) -> tuple[Step, Step | None]:
    # The mock's broker-up needs the broker's id, which a role resolves only at run time: its
    # heal (everything back) brings it up.
    return {"op": "broker-down", **_target(rng, shape)}, _heal()


def _once(op: str) -> Callable[..., tuple[Step, Step | None]]:
    def draw(rng: random.Random, shape: ClusterShape, label: str) -> tuple[Step, Step | None]:
        return {"op": op, **_target(rng, shape)}, None

    return draw


def _elect(rng: random.Random, shape: ClusterShape, label: str) -> tuple[Step, None]:
    # Preferred only: an unclean election an operator forces loses data by design, whatever
    # the configuration promises.
    return {"op": "elect", "election": "preferred", "within": 30.0}, None


def _move_leader(rng: random.Random, shape: ClusterShape, label: str) -> tuple[Step, None]:
    return {
        "op": "move-leader",
        "partition": rng.randrange(shape.partitions),
        "to": rng.randint(1, len(shape.brokers)),
    }, None


# ---- disks -------------------------------------------------------------------------------------

# The disk faults, by weight (a bag of 7: see Draws.deal): failing calls most often (each kind of
# call is its own finding), a full disk, and, rarer, a corruption, since it alone can make a
# safe configuration lose data (one replica's damage is what replication should mask; the draw
# says which files), and a torn write, which shows only at the power loss that follows it.
DISK_OPS: dict[str, int] = {"disk-error": 3, "disk-full": 2, "corrupt": 1, "torn-write": 1}
# What a corruption damages, per system: the workload's own data, never the control plane
# (Kafka's topics whose names begin with _ are the cluster's own: __cluster_metadata,
# __consumer_offsets, __transaction_state), a segment's records or its index.
CORRUPT_PATHS: dict[str, tuple[str, ...]] = {
    "kafka": ("[!_]*/*.log", "[!_]*/*.log", "[!_]*/*.index"),
    # Ra's segments and write-ahead log, the quorum queues' data (mnesia/<node>/quorum/...).
    "rabbitmq": ("*/quorum/*.segment", "*/quorum/*.wal"),
}
# What a power loss tears: the workload's log (a last record cut short), or every file the
# broker had not synced, its metadata log and Ra's write-ahead log among them.
TORN_PATHS: dict[str, tuple[str, ...]] = {
    "kafka": ("[!_]*/*.log", "*"),
    "rabbitmq": ("*/quorum/*.wal", "*"),
}


def _disk(rng: Draws, shape: ClusterShape, label: str) -> tuple[Step, Heal]:
    """A node's disk failing its calls, full, its writes torn at a power loss, or its data
    corrupted at rest. A failing or full disk is mended and its node restarted: a broker takes
    a log directory that failed offline until it restarts (Kafka) or crashes on it (RabbitMQ's
    Ra WAL), as an operator replaces the disk and restarts the broker. A torn write is what a
    power loss leaves, so the node loses power before its disk is mended (the power loss
    starts it again). A corruption is a one-off on a stopped node (killed, changed, started):
    nothing mends it."""
    op = rng.deal("disk", DISK_OPS)
    fault: Step = {"op": op, **_target(rng, shape)}
    if op == "corrupt":
        fault |= {
            "path": rng.choice(CORRUPT_PATHS[shape.system]),
            "length": rng.choice((1, 16, 512)),
            "corruption": rng.choice(("flip", "random", "zero")),
            "seed": rng.randrange(1 << 31),  # from the schedule's: the seed replays it
        }
        return fault, None
    if op == "disk-error":
        fault["fail_on"] = rng.choice(("write", "fsync", "read"))
    elif op == "torn-write":
        keep = rng.choice((0.25, 0.5, 0.75))
        fault |= {"path": rng.choice(TORN_PATHS[shape.system]), "keep": keep}
    fault, again = _labelled(shape, fault, label)
    if op == "torn-write":
        # The power loss tears the writes (and starts the node again); then the disk is mended.
        return fault, [{"op": "power-loss", **again}, {"op": "disk-ok", **again}]
    return fault, [{"op": "disk-ok", **again}, {"op": "restart", **again}]


def _labelled(shape: ClusterShape, fault: Step, label: str) -> tuple[Step, Step]:
    """The fault with its label, and the label as its heals' target: a fault healed by several
    steps names them all by it, nodes named or not, so that the shrinker removes the fault
    with every one of its heals (it pairs a fault with one heal by op alone)."""
    if shape.system == "kafka":
        return {**fault, "label": label}, {"target": f"@{label}"}
    return {**fault, "label": label}, {"nodes": [f"@{label}"]}


# ---- membership ----------------------------------------------------------------------------------

# Kafka's membership changes, by weight (a bag: see Draws.deal): partitions moved, a broker
# decommissioned and started again, a spare broker added (a one-off: the cluster keeps it, so
# at most as many as it has spares). A decommission needs a broker more than the replication
# factor and min ISR (its replicas must go somewhere), an add a spare left: an op the cluster
# cannot take now is passed over.
KAFKA_MEMBERSHIP_OPS: dict[str, int] = {"reassign": 2, "remove-broker": 2, "add-broker": 1}
# The roles a decommission aims at: one broker each (the schema takes no other), most often a
# partition's leader, whose leadership must move off it.
REMOVABLE_ROLES = ("leader", "leader", "follower", "non-controller")


def _kafka_membership(rng: Draws, shape: ClusterShape, label: str) -> tuple[Step, Heal]:
    """Replicas moved while the workload produces (a one-off: the end of the run clears what a
    reassignment leaves), a broker decommissioned and started again when the fault ends (it
    comes back with no replicas: what moved stays moved), or a spare broker started, half the
    time with a replica of each partition moved onto it."""

    def allowed(op: str) -> bool:
        if op == "add-broker":
            return rng.brokers_added < shape.spares
        if op == "remove-broker":
            return len(shape.brokers) + rng.brokers_added - 1 >= shape.keep_brokers
        return True

    op = rng.deal("kafka-membership", KAFKA_MEMBERSHIP_OPS, allowed)
    if op == "reassign":
        return {"op": "reassign", **_target(rng, shape)}, None
    if op == "add-broker":
        rng.brokers_added += 1
        return {"op": "add-broker", "move_onto": rng.random() < 0.5}, None
    if rng.random() < BY_NAME:
        target: Step = {"target": [rng.choice(shape.brokers)]}
    else:
        role = rng.choice(REMOVABLE_ROLES + shape.coordinators)
        target = {"target": role}
        if role not in shape.coordinators:
            target["partition"] = rng.randrange(shape.partitions)
    return {"op": "remove-broker", **target, "label": label}, {"op": "start", "target": f"@{label}"}


# RabbitMQ's membership changes, by weight (a bag: see Draws.deal): a node forgotten (out of the
# cluster, its queue members with it), or one node's members of the quorum queues removed.
RABBITMQ_MEMBERSHIP_OPS: dict[str, int] = {"forget-node": 2, "shrink-queue": 1}


def _rabbitmq_membership(rng: Draws, shape: ClusterShape, label: str) -> tuple[Step, Heal]:
    """A node taken out of the cluster (its quorum queue members go with it), then added back
    and its members grown back, as an operator replacing a node would; or a node's members of
    the quorum queues removed, then grown back. Either way the next fault meets a cluster whose
    queues have all their members again. One node at a time (the queue's leader, or a node by
    name), never the followers: the schema counts what a forget (a shrink) took out by its
    target and what an add-node (a grow-queue) of its label puts back as one node."""
    op = rng.deal("rabbitmq-membership", RABBITMQ_MEMBERSHIP_OPS)
    one = "leader" if shape.roles and rng.random() >= BY_NAME else rng.choice(shape.brokers)
    fault, again = _labelled(shape, {"op": op, "nodes": [one]}, label)
    if op == "shrink-queue":
        return fault, [{"op": "grow-queue", **again}]
    return fault, [{"op": "add-node", **again}, {"op": "grow-queue", **again}]


# Kafka's controller quorum (KIP-853), by weight (a bag): a voter removed (the active controller,
# or a dedicated one by name) and added back when the fault ends, or a spare controller added (a
# one-off: at most once per spare). A removal only while the voters left are a majority of the
# voters before it (three voters or more): one voter is out at a time, the family being a
# process fault, so the quorum never drops below a majority of its voters.
QUORUM_OPS: dict[str, int] = {"remove-controller": 2, "add-controller": 1}
# How long a quorum step waits for the voters to change (the scenarios' own bounds).
REMOVE_CONTROLLER_WITHIN = 60.0
ADD_CONTROLLER_WITHIN = 90.0


def _controllers(rng: Draws, shape: ClusterShape, label: str) -> tuple[Step, Heal]:
    """A voter removed from the KRaft quorum (and stopped), then started and added back by its
    label; or a spare controller started and added to the voters."""

    def allowed(op: str) -> bool:
        if op == "add-controller":
            return rng.controllers_added < shape.spare_controllers
        voters = len(shape.voters) + rng.controllers_added
        return voters - 1 > voters // 2

    op = rng.deal("controllers", QUORUM_OPS, allowed)
    if op == "add-controller":
        rng.controllers_added += 1
        return {"op": "add-controller", "within": ADD_CONTROLLER_WITHIN}, None
    target: str | list[str] = "controller"  # the active one: its removal makes it resign
    if rng.random() < BY_NAME:
        target = [rng.choice(shape.voters)]
    fault = {
        "op": "remove-controller",
        "target": target,
        "label": label,
        "within": REMOVE_CONTROLLER_WITHIN,
    }
    return fault, {"op": "add-controller", "target": f"@{label}", "within": ADD_CONTROLLER_WITHIN}


def _has_dynamic_quorum(shape: ClusterShape) -> bool:
    return len(shape.voters) + shape.spare_controllers >= 3


# ---- one-way paths: upgrades, a migration -------------------------------------------------------

# How long the nemesis is busy with a one-way step, rounded up from the first runs on this
# machine (docs/claims-findings.md): a Kafka node upgraded and back in the ISR in 8-21 s, a
# RabbitMQ node recreated and back in 21 s, a migrating Kafka node back in 5.5-8.7 s, a feature
# raised or RabbitMQ's metadata store migrated in 9.3 s, a controller added in 17.6 s and one
# removed in 4.7 s, a minority's declare refused after Khepri's own 30 s.
NODE_UPGRADE_S: dict[str, float] = {"kafka": 20.0, "rabbitmq": 25.0}
MIGRATE_NODE_S = 12.0
FINALIZE_S = 10.0
QUORUM_STEP_S: dict[str, float] = {"remove-controller": 10.0, "add-controller": 20.0}
DECLARE_S = 30.0
# Each node's bound of a drawn migrate step (M1's).
MIGRATE_WITHIN = 120.0


def upgrade_steps(shape: ClusterShape) -> list[Step]:
    """The base's upgrade path as drawn: an upgrade that names no node is one step per node, in
    the order the op takes them, so that faults come between the nodes (the cluster on two
    releases at once); one that names its nodes, and a finalize, as the base wrote it."""
    key = "nodes" if shape.system == "rabbitmq" else "target"
    steps: list[Step] = []
    for step in shape.upgrade_path:
        if step["op"] == "upgrade" and not (step.get("target") or step.get("nodes")):
            steps += [{**step, key: [node]} for node in shape.upgradable]
        else:
            steps.append(dict(step))
    return steps


def migration_steps(shape: ClusterShape) -> list[Step]:
    """Kafka 3.9's ZooKeeper-to-KRaft migration, its phases in their one order."""
    return [{"op": "migrate", "phase": phase, "within": MIGRATE_WITHIN} for phase in PHASES]


def _along(
    name: str, path: Callable[[ClusterShape], list[Step]]
) -> Callable[..., tuple[Step, Heal]]:
    """The next step of a path (Family.left says whether one is left): a one-off."""

    def draw(rng: Draws, shape: ClusterShape, label: str) -> tuple[Step, Heal]:
        taken = rng.path_taken.get(name, 0)
        rng.path_taken[name] = taken + 1
        return dict(path(shape)[taken]), None

    return draw


def _moved(shape: ClusterShape, step: Step) -> int:
    """How many nodes a one-way step moves, one after another."""
    if step["op"] == "migrate":
        moves_controllers = step["phase"] in ("controllers", "finalize")
        return shape.migration_controllers if moves_controllers else len(shape.brokers)
    named = step.get("target") or step.get("nodes")
    if isinstance(named, list):
        return len(named)
    return 1 if named else len(shape.upgradable)


def _one_way_lasts(shape: ClusterShape, step: Step) -> float:
    if step["op"] == "finalize-feature":
        return FINALIZE_S
    if step["op"] == "migrate":
        return MIGRATE_NODE_S * _moved(shape, step)
    return NODE_UPGRADE_S[shape.system] * _moved(shape, step)


def _quorum_lasts(shape: ClusterShape, step: Step) -> float:
    return QUORUM_STEP_S[step["op"]]


def _has_upgrade_path(shape: ClusterShape) -> bool:
    return bool(shape.upgrade_path)


def _migrates(shape: ClusterShape) -> bool:
    return shape.migration_controllers > 0


# ---- probes ------------------------------------------------------------------------------------

# Each target's answer is waited for this long: more than Khepri's own 30 s, after which it
# refuses a minority's declare (RK1's).
DECLARE_WITHIN = 35.0


def _declare(rng: Draws, shape: ClusterShape, label: str) -> tuple[Step, Heal]:
    """A metadata probe: every node asked at once to declare a throwaway queue, so that both
    sides of whatever the network fault cut answer (a majority accepts; a minority refuses,
    times out or is paused), and the end of the run says where each queue is after the heal."""
    return {"op": "declare", "nodes": list(shape.brokers), "within": DECLARE_WITHIN}, None


def _declare_lasts(shape: ClusterShape, step: Step) -> float:
    return DECLARE_S


# ---- clocks --------------------------------------------------------------------------------------

# How far a skewed clock is set off true time, by weight, each as often ahead as behind: half a
# minute (inside most timeouts), five minutes (past heartbeats and sessions), an hour (past
# retention checks and transaction timeouts) and, rarer, a day.
CLOCK_OFFSETS: dict[int, int] = {30: 2, 300: 2, 3600: 2, 86400: 1}


def _clock(rng: Draws, shape: ClusterShape, label: str) -> tuple[Step, Heal]:
    """A node's clock (or a role's: the queue's leader) set off true time, and set true again
    when the fault ends (clock-ok of the same nodes)."""
    magnitude = rng.choices(list(CLOCK_OFFSETS), list(CLOCK_OFFSETS.values()))[0]
    fault: Step = {"op": "clock", **_target(rng, shape)}
    fault["offset"] = magnitude if rng.random() < 0.5 else -magnitude
    if shape.system == "kafka" or _aims_at_a_role(shape, fault):
        fault["label"] = label
    return fault, {"op": "clock-ok", **_again(shape, fault, label)}


def _has_fake_clock(shape: ClusterShape) -> bool:
    return shape.fake_clock


def _has_quorum_queues(shape: ClusterShape) -> bool:
    return shape.quorum_queues


def _has_lazy_disks(shape: ClusterShape) -> bool:
    return shape.lazy_disks


def _has_quorum_apart(shape: ClusterShape) -> bool:
    return shape.quorum_apart


# Either system's upgrade path (chaos.upgrade_path), one way and in order; by name only.
UPGRADE = Family(
    "upgrade",
    "process",
    _along("upgrade", upgrade_steps),
    _has_upgrade_path,
    default=False,
    path=upgrade_steps,
    lasts=_one_way_lasts,
)

FAMILIES: dict[str, tuple[Family, ...]] = {
    "kafka": (
        Family("partition", "network", _partition),
        Family("slow", "network", _slow),
        Family("quorum", "network", _quorum, _has_quorum_apart),
        Family("kill", "process", _down_up("kill", "start")),
        Family("pause", "process", _down_up("pause", "resume")),
        Family("stop", "process", _down_up("stop", "start")),
        Family("restart", "process", _once("restart")),
        Family("power-loss", "process", _once("power-loss"), _has_lazy_disks),
        # Asked for by name, on a base with lazy disks (see DISK_OPS).
        Family("disk", "process", _disk, _has_lazy_disks, default=False),
        # A preferred election the nemesis cannot get (the preferred replica down) fails its
        # step: asked for by name only.
        Family("elect", "process", _elect, default=False),
        # Asked for by name: a base drawn without them draws the schedule it always drew.
        Family("client-path", "network", _client_path, default=False),
        Family("clients", "client", _client_bounce, _has_restartable_clients, default=False),
        # Replicas moved, a broker decommissioned, a spare added (KAFKA_MEMBERSHIP_OPS); by
        # name only.
        Family("membership", "process", _kafka_membership, default=False),
        # A dynamic quorum's voters removed and added back, a spare added (QUORUM_OPS).
        Family(
            "controllers",
            "process",
            _controllers,
            _has_dynamic_quorum,
            default=False,
            lasts=_quorum_lasts,
        ),
        # Paths (one-way, in order): the base's upgrade path (chaos.upgrade_path), a zk
        # cluster's migration to KRaft (cluster.migration_controllers). By name only.
        UPGRADE,
        Family(
            "migrate",
            "process",
            _along("migrate", migration_steps),
            _migrates,
            default=False,
            path=migration_steps,
            lasts=_one_way_lasts,
        ),
        # A node's clock off true time (the clock agent): by name, on a cluster with fake_clock.
        Family("clock", "clock", _clock, _has_fake_clock, default=False),
    ),
    "rabbitmq": (
        Family("partition", "network", _partition),
        Family("kill", "process", _down_up("kill", "start")),
        Family("pause", "process", _down_up("pause", "resume")),
        Family("stop", "process", _down_up("stop", "start")),
        Family("restart", "process", _once("restart")),
        Family("power-loss", "process", _once("power-loss"), _has_lazy_disks),
        Family("disk", "process", _disk, _has_lazy_disks, default=False),
        Family("client-path", "network", _client_path, _has_client_paths, default=False),
        # A node out of the cluster (forgotten) or its queue members removed, and put back
        # (RABBITMQ_MEMBERSHIP_OPS); by name only.
        Family("membership", "process", _rabbitmq_membership, _has_quorum_queues, default=False),
        # A node's clock off true time (CLOCK_OFFSETS), its own kind: it overlaps a network and
        # a process fault, never another skew. By name only, on a cluster with fake_clock.
        Family("clock", "clock", _clock, _has_fake_clock, default=False),
        # The base's upgrade path (chaos.upgrade_path), one way and in order; by name only.
        UPGRADE,
        # A metadata probe inside a network fault (the generator draws it there); by name only.
        Family("declare", "probe", _declare, default=False, rides="network", lasts=_declare_lasts),
    ),
    "kafka-mock": (
        # The mock's heal ends every fault at once: one of them at a time.
        Family("kill", "process", _mock_down),
        Family("slow", "process", _mock_rtt),
        Family("errors", "process", _mock_errors),
        Family("elect", "process", _move_leader),
    ),
}


def families(shape: ClusterShape, wanted: frozenset[str] | None = None) -> tuple[Family, ...]:
    """The families a cluster of this shape can take, narrowed to `wanted` when given; a
    wanted family the system lacks is a ValueError naming the ones it has."""
    menu = FAMILIES[shape.system]
    if wanted is not None:
        known = {f.name for f in menu}
        if unknown := sorted(wanted - known):
            raise ValueError(
                f"no fault family {unknown[0]!r} for {shape.system} "
                f"(families: {', '.join(f.name for f in menu)})"
            )
    chosen = tuple(
        f for f in menu if (f.name in wanted if wanted is not None else f.default) and f.fits(shape)
    )
    if not chosen:
        raise ValueError(f"none of the fault families asked for fits this {shape.system} cluster")
    if all(f.rides is not None for f in chosen):
        probes = ", ".join(f"{f.name} rides a {f.rides} fault" for f in chosen)
        raise ValueError(f"{probes}: name a family of that kind too (e.g. partition)")
    return chosen
