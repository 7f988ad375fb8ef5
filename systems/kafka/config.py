"""The Kafka cluster's shape: its modes, the release lines the harness runs, and the one
configuration a cluster is started from (a scenario's settings plus the run's mode and line).

  zk               3 ZooKeeper nodes + N brokers (Kafka 3.x; 4.0 removed ZooKeeper)
  kraft            N nodes, the first three broker+controller (combined)
  kraft-dedicated  3 dedicated controllers + N brokers (the quorum apart from the data path)

A zk cluster on 3.9 may also declare KRaft controllers it does not start (`migration_controllers`):
the `migrate` op's phases start them and move the cluster to KRaft (systems.kafka.migration).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field, model_validator

from compose.releases import setup_releases
from contract.versions import line_of, on_spec
from systems.scenario import Strict

Mode = Literal["zk", "kraft", "kraft-dedicated"]
MODES: tuple[Mode, ...] = ("zk", "kraft", "kraft-dedicated")

# The release lines make setup builds and the claims matrix covers: 3.9 (the last with ZooKeeper
# mode), 4.1 and 4.4 (KRaft only). A run may ask for any other line or release from 3.7 on.
KAFKA_LINES = tuple(line_of(r) for r in setup_releases("kafka"))
DEFAULT_KAFKA_LINE = "3.9"
CONTROLLER_ID_BASE = 100  # dedicated controller i has node id 100 + i
VOTERS = 3  # the quorum a cluster forms with: three dedicated controllers, or three combined nodes
# static: controller.quorum.voters, fixed when the cluster forms (kraft.version 0); dynamic:
# KIP-853's (Kafka 3.9 on), formatted with the first voters' directory ids (kraft.version 1),
# whose voters add-controller and remove-controller change.
ControllerQuorum = Literal["static", "dynamic"]
DYNAMIC_QUORUM_SINCE = (3, 9)
NodeRole = Literal["zookeeper", "controller", "broker", "combined"]
# How a Kafka node runs now, which its environment follows: in ZooKeeper mode, in ZooKeeper mode
# with the migration's settings (a broker writing to ZooKeeper while registered with the KRaft
# controllers; a controller copying ZooKeeper's metadata and writing it back), or in KRaft mode.
NodeStage = Literal["zk", "migrating", "kraft"]
# The line whose ZooKeeper-mode clusters migrate to KRaft here: the last with ZooKeeper, the one
# Kafka's documentation says a cluster must run before the migration, and the one make setup builds.
MIGRATION_LINE = "3.9"
# A property's value as YAML gives it; a list is written comma-joined.
PropertyValue = str | int | float | bool | list[str]


class KafkaSettings(Strict):
    """What a scenario sets of the brokers (each one explicit in the rendered compose file)."""

    brokers: Annotated[int, Field(ge=3, le=6)] = 3
    """Kafka brokers in the cluster."""
    spare_brokers: Annotated[int, Field(ge=0, le=3)] = 0
    """Brokers declared in the compose file but not started: an add-broker step starts one
    (ids after the brokers': kafka4 on a cluster of 3)."""
    controller_quorum: ControllerQuorum = "static"
    """KRaft's controller quorum: static (controller.quorum.voters, fixed when the cluster forms)
    or dynamic (KIP-853, Kafka 3.9 on: controller.quorum.bootstrap.servers, kraft.version 1), whose
    voters add-controller and remove-controller change."""
    spare_controllers: Annotated[int, Field(ge=0, le=2)] = 0
    """Dedicated controllers declared in the compose file but not started (a dynamic quorum's):
    an add-controller step starts one and adds it to the voters (controller4, controller5, in
    either KRaft mode)."""
    racks: dict[int, str] = Field(default_factory=dict)
    """Broker id to rack (a data centre): broker.rack."""
    min_insync_replicas: Annotated[int, Field(ge=1, le=6)] = 2
    """Replicas that must have a write before acks=all acknowledges it."""
    unclean_leader_election: bool = False
    """Whether a replica outside the ISR may become leader (and lose what it lacks)."""
    replica_lag_time_max_ms: Annotated[int, Field(ge=500, le=60_000)] = 5000
    """How long a follower may lag before it leaves the ISR."""
    session_timeout_ms: Annotated[int, Field(ge=2000, le=60_000)] = 6000
    """zookeeper.session.timeout.ms / broker.session.timeout.ms."""
    auto_leader_rebalance: bool = False
    """Whether the controller moves leadership back to preferred replicas."""
    leader_imbalance_check_interval_seconds: Annotated[int, Field(ge=1, le=3600)] = 300
    """How often the controller checks leadership balance."""
    flush_messages: Annotated[int, Field(ge=1)] | None = None
    """log.flush.interval.messages; None: the OS decides."""
    lazy_disks: bool = False
    """Every broker's log directory on the power-loss filesystem (lazyfs): needed by power-loss."""
    fake_clock: bool = False
    """Every node's JVM under the clock agent, its clock set by the harness: needed by clock and
    clock-ok (docs/clock-faults.md; make setup builds the agent)."""
    image: str | None = None
    """A local image of your own for the Kafka nodes (default: the release's, built by make
    setup)."""
    zookeeper_image: str | None = None
    """A local image of your own for ZooKeeper (zk mode)."""
    broker_config: dict[str, PropertyValue] = Field(default_factory=dict)
    """Any server.properties key, on every Kafka node (brokers and KRaft controllers), and per node
    id (systems.kafka.settings says how they meet the typed knobs above)."""
    broker_overrides: dict[int, dict[str, PropertyValue]] = Field(default_factory=dict)
    """Server properties for one node id only, over broker_config."""
    migration_controllers: Annotated[int, Field(ge=0, le=5)] = 0
    """ZooKeeper mode on 3.9 only: KRaft controllers declared but not started (controller1.., node
    ids 101..), which `migrate` steps start in migration mode and move the cluster to KRaft with
    (docs/upgrade-faults.md, "ZooKeeper to KRaft")."""


class KafkaClusterConfig(KafkaSettings):
    """One cluster to start: the settings, in one mode, on one release line."""

    mode: Mode
    kafka_line: str = DEFAULT_KAFKA_LINE  # the release line ("4.4") or release ("4.4.0") to run

    @model_validator(mode="after")
    def _migrates_from_zookeeper_on_its_line(self) -> KafkaClusterConfig:
        if refusal := migration_refusal(self.mode, self.kafka_line, self.migration_controllers):
            raise ValueError(refusal)
        return self


@dataclass(frozen=True)
class Node:
    name: str
    role: NodeRole
    node_id: int
    """broker / KRaft node id; ZooKeeper myid."""
    address: str
    spare: bool = False
    """Declared but not started with the cluster: a spare broker (add-broker starts it), a
    spare controller of a dynamic quorum (add-controller) or a zk cluster's migration
    controller (migrate's controllers phase)."""


def nodes_of(cfg: KafkaClusterConfig, net_prefix: str) -> list[Node]:
    """Every container of the cluster, with its fixed address on the cluster network; the
    spare brokers then the spare controllers last (a spare broker is never combined: it joins a
    quorum it is no voter of). A zk cluster's migration controllers are declared spare: none
    runs until a migration starts it (in zk mode every controller is one)."""
    out: list[Node] = []
    if cfg.mode == "zk":
        out += [Node(f"zk{i}", "zookeeper", i, f"{net_prefix}.{30 + i}") for i in (1, 2, 3)]
        out += [
            _controller(i, net_prefix, spare=True) for i in range(1, cfg.migration_controllers + 1)
        ]
    if cfg.mode == "kraft-dedicated":
        out += [_controller(i, net_prefix) for i in range(1, VOTERS + 1)]
    for i in range(1, cfg.brokers + 1):
        role: Literal["broker", "combined"] = (
            "combined" if cfg.mode == "kraft" and i <= 3 else "broker"
        )
        out.append(Node(f"kafka{i}", role, i, f"{net_prefix}.{20 + i}"))
    for i in range(cfg.brokers + 1, cfg.brokers + cfg.spare_brokers + 1):
        # At most 6 + 3 brokers: .21 to .29, below ZooKeeper's .31.
        out.append(Node(f"kafka{i}", "broker", i, f"{net_prefix}.{20 + i}", spare=True))
    # Numbered after the three dedicated controllers, in combined mode too (a scenario names
    # them alike in both KRaft modes): .44 and .45.
    first = VOTERS + 1
    out += [
        _controller(i, net_prefix, spare=True) for i in range(first, first + cfg.spare_controllers)
    ]
    return out


def _controller(i: int, net_prefix: str, spare: bool = False) -> Node:
    return Node(
        f"controller{i}", "controller", CONTROLLER_ID_BASE + i, f"{net_prefix}.{40 + i}", spare
    )


def quorum_nodes(cfg: KafkaClusterConfig) -> tuple[str, ...]:
    """The control plane's quorum as the cluster forms: the ZooKeeper ensemble or the KRaft
    voters (a spare controller is none until an add-controller adds it; a migration's
    controllers join it when they start: KafkaCluster.quorum)."""
    return tuple(n.name for n in nodes_of(cfg, "0.0.0") if n.role != "broker" and not n.spare)


def dynamic_quorum_refusal(line: str) -> str | None:
    """One line when a release line predates KIP-853's dynamic quorum, else None."""
    if version_tuple(line) < DYNAMIC_QUORUM_SINCE:
        return f"controller_quorum: dynamic needs Kafka 3.9 or later (KIP-853), not {line}"
    return None


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:3])


def supports_mode(kafka_version: str | None, mode: Mode) -> bool:
    v = version_tuple(kafka_version or "0")
    if mode == "zk":
        return v < (4,)  # 4.0 removed ZooKeeper mode
    return v >= (3, 3) or kafka_version is None  # KRaft production-ready from 3.3


def on_line(kafka_version: str | None, line: str | None) -> bool:
    """Whether an image's Kafka version is what a line or release asks for ("3.9" holds 3.9.2)."""
    if line is None:
        return True
    return kafka_version is not None and on_spec(
        ".".join(map(str, version_tuple(kafka_version))), line
    )


def mode_refusal(line: str, mode: str) -> str | None:
    """One line when a release line cannot run a mode (4.x has no ZooKeeper mode), else None."""
    if not supports_mode(line, mode):  # type: ignore[arg-type]
        return (
            f"Kafka {line} has no {mode} mode (4.0 removed ZooKeeper): use kraft or kraft-dedicated"
        )
    return None


def migration_refusal(mode: str, line: str, controllers: int) -> str | None:
    """One line when a cluster cannot declare migration controllers: ZooKeeper mode on 3.9 only
    (the migration starts from ZooKeeper; 4.0 removed it, and 3.9 is the line that migrates)."""
    if controllers == 0:
        return None
    if mode != "zk":
        return (
            f"migration_controllers: a ZooKeeper-to-KRaft migration starts in ZooKeeper mode, "
            f"not {mode} (modes: [zk])"
        )
    if not on_spec(line, MIGRATION_LINE):
        return (
            f"migration_controllers: ZooKeeper-to-KRaft migrations run on Kafka {MIGRATION_LINE} "
            f"(the last line with ZooKeeper), not {line}"
        )
    return None
