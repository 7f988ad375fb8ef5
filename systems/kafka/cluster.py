"""Real Kafka clusters under Docker Compose, in three shapes:

  zk               3 ZooKeeper nodes + N brokers (Kafka 3.x; 4.0 removed ZooKeeper)
  kraft            N nodes, the first three broker+controller (combined)
  kraft-dedicated  3 dedicated controllers + N brokers (the quorum apart from the data path)

Either KRaft shape forms a static quorum (controller.quorum.voters, kraft.version 0) or, with
`controller_quorum: dynamic`, KIP-853's dynamic one: every node bootstraps from the first voters
(controller.quorum.bootstrap.servers), the first voters are formatted with the directory ids the
harness chose for them, every other node without initial controllers (kraft.version 1), and the
voters change as add-controller and remove-controller change them (systems.kafka.quorum).

The compose file is rendered per run into the run directory (`cluster/docker-compose.yml`,
usable on its own with `docker compose -f ... up`), with every setting a scenario depends on
explicit: never an image's single-node default. Environment variables follow the convention
of the official images (KAFKA_FOO_BAR -> foo.bar, ZOOKEEPER_*), which our local images
implement too, so the same file runs official images and images built here from a Kafka
release tarball.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import secrets
import subprocess
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors
import yaml

from compose import clock_agent, clocks
from compose.cli import ComposeError, compose
from compose.clocks import FakeClocks
from compose.cluster import STOP_GRACE, ComposeCluster, free_ports
from compose.disks import LazyDisks
from contract.topology import Topology
from systems.kafka.config import (
    KafkaClusterConfig,
    Mode,
    Node,
    NodeStage,
    nodes_of,
    on_line,
    supports_mode,
    version_tuple,
)
from systems.kafka.quorum import ToolRun
from systems.kafka.releases import build_image, maven_releases, resolve
from systems.kafka.settings import broker_properties, env_name, env_value

INTERNAL_PORT, CONTROLLER_PORT, EXTERNAL_PORT, ZK_CLIENT_PORT = 9092, 9093, 19092, 2181
# The harness's own listener on a run whose clients go through the proxy: its admin requests
# (roles, metadata, elections) must not be delayed or dropped with the clients'.
HARNESS_PORT = 19093
# Seconds between two asks whether the cluster has formed: each is one cheap Admin request,
# and every second of a run's start is a second no schedule runs.
POLL = 0.5

log = logging.getLogger("systems.kafka.cluster")


@dataclass(frozen=True)
class BrokerPorts:
    """Where one broker is reached from this machine. `published`: the host port Docker maps to
    its EXTERNAL listener; `advertised`: the port it tells clients (the proxy's, on a proxied
    run; else `published`); `harness`: the host port of its HARNESS listener (proxied runs)."""

    published: int
    advertised: int
    harness: int | None = None

    @property
    def proxied(self) -> bool:
        return self.advertised != self.published


def broker_ports(broker_ids: list[int], proxied: bool) -> dict[int, BrokerPorts]:
    """Free host ports for each broker: one, or three on a proxied run."""
    per = 3 if proxied else 1
    ports = free_ports(per * len(broker_ids))
    out = {}
    for i, broker in enumerate(broker_ids):
        mine = ports[per * i : per * (i + 1)]
        out[broker] = (
            BrokerPorts(mine[0], mine[1], mine[2]) if proxied else BrokerPorts(mine[0], mine[0])
        )
    return out


DATA_DIR = "/var/lib/kafka/data"
# The compose profile of the spare nodes (brokers, controllers): rendered with the cluster,
# started one by one.
SPARE_PROFILE = "spare"
# The local images' entrypoint (compose/images/build_kafka_image.sh copies it in), and where the
# images run it from. A dynamic quorum's nodes mount this one over it: the images built before
# KIP-853's formatting was added to it need no rebuild.
ENTRYPOINT = Path(__file__).resolve().parents[2] / "compose" / "images" / "kafka-entrypoint.sh"
IMAGE_ENTRYPOINT = "/usr/local/bin/docker-entrypoint.sh"
# The server properties the entrypoint writes from the environment (add-controller reads the
# new controller's own: its node id, metadata directory and controller listener).
SERVER_PROPERTIES = "/opt/kafka/config/brokerjepsen.properties"
LOCAL_ZOOKEEPER_IMAGE = "brokerjepsen/zookeeper:3.8.0-debian"
LOCAL_KAFKA_REPO = "brokerjepsen/kafka"
KAFKA_VERSION_LABEL = "org.brokerjepsen.kafka-version"
# Official images, in the order they are preferred when present (none can be pulled here).
OFFICIAL_KAFKA = {
    "zk": ("confluentinc/cp-kafka",),
    "kraft": ("apache/kafka", "confluentinc/cp-kafka"),
}
OFFICIAL_ZOOKEEPER = ("confluentinc/cp-zookeeper",)
HOW_TO_GET_KAFKA = (
    "run make setup (builds brokerjepsen/kafka 3.9.2, 4.1.2 and 4.4.0 from Maven Central; "
    "--kafka X.Y[.Z] builds any other release from 3.7 on), or supply a "
    "release tarball (KAFKA_TARBALL=/path/kafka_2.13-3.9.2.tgz make kafka-image), or docker pull "
    "apache/kafka (KRaft) / confluentinc/cp-kafka + cp-zookeeper (ZooKeeper mode)"
)


class KafkaUnavailable(ComposeError):
    """No Kafka image for the mode: one line saying what is missing and how to supply it."""


def _wiring(cfg: KafkaClusterConfig) -> dict[str, str]:
    """What every Kafka node gets that is the harness's, not the scenario's to set."""
    return {
        "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "false",
        "KAFKA_LOG_DIRS": DATA_DIR,
        # Explicit heaps: three brokers and their quorum fit in 4 GiB.
        "KAFKA_HEAP_OPTS": "-Xms512m -Xmx512m",
    }


def node_environment(
    cfg: KafkaClusterConfig,
    node: Node,
    ports: BrokerPorts | None,
    cluster_id: str,
    stage: NodeStage | None = None,
    directory_ids: dict[str, str] | None = None,
) -> dict[str, str]:
    """The environment of one container, in the official images' convention. `stage`: how the
    node runs now, when a migration moved it (by default: as the cluster's mode says, a zk
    cluster's migration controllers in migration mode, the way they start); `directory_ids`:
    a dynamic quorum's first voters' metadata directory ids, by node name."""
    if node.role == "zookeeper":
        servers = ";".join(f"zk{i}:2888:3888" for i in (1, 2, 3))
        return {
            "ZOOKEEPER_SERVER_ID": str(node.node_id),
            "ZOOKEEPER_CLIENT_PORT": str(ZK_CLIENT_PORT),
            "ZOOKEEPER_TICK_TIME": "500",
            "ZOOKEEPER_INIT_LIMIT": "20",
            "ZOOKEEPER_SYNC_LIMIT": "4",
            "ZOOKEEPER_SERVERS": servers,
            "KAFKA_OPTS": "-Dzookeeper.4lw.commands.whitelist=*",
            "KAFKA_HEAP_OPTS": "-Xms128m -Xmx256m",
        }
    stage = stage or initial_stage(cfg, node)
    env = _wiring(cfg)
    properties = broker_properties(
        cfg, node.node_id, zookeeper=stage != "kraft", kraft=stage != "zk"
    )
    env |= {env_name(k): env_value(v) for k, v in properties.items()}
    env |= _listeners(cfg, node, ports)
    if stage != "kraft":
        env["KAFKA_ZOOKEEPER_CONNECT"] = ",".join(f"zk{i}:{ZK_CLIENT_PORT}" for i in (1, 2, 3))
    if stage == "migrating":
        env["KAFKA_ZOOKEEPER_METADATA_MIGRATION_ENABLE"] = "true"
    if stage != "zk":
        env |= _quorum_environment(cfg, node, directory_ids)
        env["KAFKA_CONTROLLER_LISTENER_NAMES"] = "CONTROLLER"
    if stage != "kraft" and node.role == "broker":
        # A ZooKeeper-mode broker: its id is broker.id, and in a migration its inter-broker
        # protocol is the release's own, as Kafka's migration guide asks (a scenario's
        # broker_config may say otherwise, to see what the brokers make of it).
        env["KAFKA_BROKER_ID"] = str(node.node_id)
        if stage == "migrating":
            env.setdefault("KAFKA_INTER_BROKER_PROTOCOL_VERSION", _line_of(cfg.kafka_line))
        return env
    if stage == "migrating":
        # A controller in migration mode sends ZooKeeper-mode brokers their metadata and
        # leadership (UpdateMetadata, LeaderAndIsr) over the brokers' own listener.
        env["KAFKA_INTER_BROKER_LISTENER_NAME"] = "INTERNAL"
    env["CLUSTER_ID"] = cluster_id
    env["KAFKA_NODE_ID"] = str(node.node_id)
    env["KAFKA_PROCESS_ROLES"] = {
        "broker": "broker",
        "controller": "controller",
        "combined": "broker,controller",
    }[node.role]
    return env


def initial_stage(cfg: KafkaClusterConfig, node: Node) -> NodeStage:
    """How a node starts: as its cluster's mode says; a zk cluster's controllers (declared for
    a migration) in migration mode, the only way a controller runs beside ZooKeeper brokers."""
    if cfg.mode != "zk":
        return "kraft"
    return "migrating" if node.role == "controller" else "zk"


def _listeners(cfg: KafkaClusterConfig, node: Node, ports: BrokerPorts | None) -> dict[str, str]:
    """The node's listeners: a broker's INTERNAL and EXTERNAL (and HARNESS, proxied), a voter's
    CONTROLLER; every node maps them all to PLAINTEXT."""
    env: dict[str, str] = {}
    protocols = "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"
    listeners: list[str] = []
    if node.role in ("broker", "combined"):
        assert ports is not None
        listeners += [f"INTERNAL://0.0.0.0:{INTERNAL_PORT}", f"EXTERNAL://0.0.0.0:{EXTERNAL_PORT}"]
        advertised = (
            f"INTERNAL://{node.name}:{INTERNAL_PORT},EXTERNAL://127.0.0.1:{ports.advertised}"
        )
        if ports.harness is not None:
            listeners.append(f"HARNESS://0.0.0.0:{HARNESS_PORT}")
            advertised += f",HARNESS://127.0.0.1:{ports.harness}"
            protocols += ",HARNESS:PLAINTEXT"
        env["KAFKA_ADVERTISED_LISTENERS"] = advertised
        env["KAFKA_INTER_BROKER_LISTENER_NAME"] = "INTERNAL"
        if rack := cfg.racks.get(node.node_id):
            env["KAFKA_BROKER_RACK"] = rack
    if node.role in ("controller", "combined"):
        listeners.append(f"CONTROLLER://0.0.0.0:{CONTROLLER_PORT}")
        if cfg.controller_quorum == "dynamic":
            # A dynamic quorum's voters are known by the endpoints they advertise (the listener's
            # 0.0.0.0 routes nowhere): add-controller reads them from this node's properties.
            mine = f"CONTROLLER://{node.name}:{CONTROLLER_PORT}"
            brokers = env.get("KAFKA_ADVERTISED_LISTENERS")
            env["KAFKA_ADVERTISED_LISTENERS"] = f"{brokers},{mine}" if brokers else mine
    env["KAFKA_LISTENERS"] = ",".join(listeners)
    env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"] = protocols
    return env


def _line_of(release: str) -> str:
    """A release's line as Kafka's inter.broker.protocol.version takes it ("3.9.2" -> "3.9")."""
    return ".".join(str(p) for p in version_tuple(release)[:2])


def _quorum_environment(
    cfg: KafkaClusterConfig, node: Node, directory_ids: dict[str, str] | None
) -> dict[str, str]:
    """How a node that talks to the KRaft quorum finds it: a static quorum's voters, or a
    dynamic one's bootstrap servers and how the entrypoint formats the node."""
    voters = first_voters(cfg)
    if cfg.controller_quorum == "static":
        return {
            "KAFKA_CONTROLLER_QUORUM_VOTERS": ",".join(
                f"{v.node_id}@{v.name}:{CONTROLLER_PORT}" for v in voters
            )
        }
    env = {
        "KAFKA_CONTROLLER_QUORUM_BOOTSTRAP_SERVERS": ",".join(
            f"{v.name}:{CONTROLLER_PORT}" for v in voters
        )
    }
    # How the entrypoint formats the node (not KAFKA_*: no server property): a first voter with
    # the initial voters and their directory ids, every other node (brokers, spare controllers)
    # without initial controllers, as Kafka's operations guide formats them.
    if any(v.name == node.name for v in voters):
        env["BROKERJEPSEN_INITIAL_CONTROLLERS"] = initial_controllers(voters, directory_ids or {})
    else:
        env["BROKERJEPSEN_NO_INITIAL_CONTROLLERS"] = "1"
    return env


def metadata_quorum_arguments(bootstrap: list[str], arguments: str) -> str:
    """kafka-metadata-quorum's arguments, bootstrapped on the named controllers' listeners
    (inside the cluster's network: the controllers publish no port)."""
    if not bootstrap:
        raise ComposeError("kafka-metadata-quorum needs a controller to bootstrap on")
    servers = ",".join(f"{name}:{CONTROLLER_PORT}" for name in bootstrap)
    return f"--bootstrap-controller {servers} {arguments}"


def first_voters(cfg: KafkaClusterConfig) -> list[Node]:
    """The KRaft voters the cluster forms with (a spare controller is none); a zk cluster's:
    the controllers its migration starts, which form the quorum it moves to."""
    controllers = [n for n in nodes_of(cfg, "0.0.0") if n.role in ("controller", "combined")]
    if cfg.mode == "zk":
        return controllers
    return [n for n in controllers if not n.spare]


def initial_controllers(voters: list[Node], directory_ids: dict[str, str]) -> str:
    """kafka-storage format --initial-controllers: id@host:port:directory-id of each first
    voter, the same on every one of them."""
    missing = [v.name for v in voters if v.name not in directory_ids]
    if missing:
        raise ValueError(f"no directory id for the voters {', '.join(missing)}")
    return ",".join(
        f"{v.node_id}@{v.name}:{CONTROLLER_PORT}:{directory_ids[v.name]}" for v in voters
    )


def with_clock_agent(environment: dict[str, str]) -> dict[str, str]:
    """A node's environment with its JVM (and every Kafka tool run in its container) under the
    clock agent, after whatever JVM options it had."""
    agent = clock_agent.java_option(clocks.clock_file())
    options = f"{environment.get('KAFKA_OPTS', '')} {agent}".strip()
    return {**environment, "KAFKA_OPTS": options}


def render_compose(
    cfg: KafkaClusterConfig,
    project: str,
    images: dict[str, str],
    ports: dict[int, BrokerPorts],
    net_prefix: str,
    cluster_id: str,
    data_mounts: dict[str, Path] | None = None,
    clock_mounts: dict[str, list[str]] | None = None,
    node_images: dict[str, str] | None = None,
    kept_data: bool = False,
    directory_ids: dict[str, str] | None = None,
    node_stages: dict[str, NodeStage] | None = None,
) -> dict[str, Any]:
    """The compose file (as data) for one cluster; `data_mounts`: host directories (lazy disks)
    to mount as the named nodes' log directories; `clock_mounts`: the mounts of the
    named nodes' fake clocks (compose.clocks), whose JVMs then run the clock agent;
    `node_images`: the image of a node an upgrade moved; `kept_data`: every Kafka node's log
    directory in a volume of its own, which outlives its container (an upgrade recreates it);
    `directory_ids`: a dynamic quorum's first voters' directory ids; `node_stages`: how a node
    a migration moved runs now (its environment follows)."""
    services: dict[str, Any] = {}
    volumes: dict[str, Any] = {}
    nodes = nodes_of(cfg, net_prefix)
    # A spare (a migration's controllers too) is started later, by name: no service may wait
    # for it.
    first_up = [n.name for n in nodes if n.role in ("zookeeper", "controller") and not n.spare]
    for node in nodes:
        role_image = images["zookeeper" if node.role == "zookeeper" else "kafka"]
        stage = (node_stages or {}).get(node.name)
        environment = node_environment(
            cfg, node, ports.get(node.node_id), cluster_id, stage, directory_ids
        )
        service: dict[str, Any] = {
            "image": (node_images or {}).get(node.name, role_image),
            "hostname": node.name,
            "environment": environment,
            "networks": {"cluster": {"ipv4_address": node.address}},
            "labels": {"org.brokerjepsen.role": f"kafka-{node.role}"},
            "stop_grace_period": "30s",
        }
        if data_mounts and node.name in data_mounts:
            service["volumes"] = [f"{data_mounts[node.name]}:{DATA_DIR}"]
        elif kept_data and node.role != "zookeeper":
            volumes[f"{node.name}-data"] = {}
            service["volumes"] = [f"{node.name}-data:{DATA_DIR}"]
        # The repository's entrypoint over the image's: the one that formats a dynamic quorum
        # and takes a cluster id that begins with "-" (images built before lack both).
        formats_anew = cfg.controller_quorum == "dynamic" or cfg.migration_controllers > 0
        if formats_anew and node.role != "zookeeper":
            service.setdefault("volumes", []).append(f"{ENTRYPOINT}:{IMAGE_ENTRYPOINT}:ro")
        if node.spare:
            # Declared, not started by `up`: a service of a profile starts only when named
            # (KafkaCluster.start_spare).
            service["profiles"] = [SPARE_PROFILE]
        if clock_mounts and node.name in clock_mounts:
            service["environment"] = with_clock_agent(service["environment"])
            service.setdefault("volumes", []).extend(clock_mounts[node.name])
        if node.role in ("broker", "combined"):
            mine = ports[node.node_id]
            service["ports"] = [f"127.0.0.1:{mine.published}:{EXTERNAL_PORT}"]
            if mine.harness is not None:
                service["ports"].append(f"127.0.0.1:{mine.harness}:{HARNESS_PORT}")
            if first_up:
                service["depends_on"] = {n: {"condition": "service_started"} for n in first_up}
        services[node.name] = service
    rendered: dict[str, Any] = {
        "name": project,
        "services": services,
        "networks": {"cluster": {"ipam": {"config": [{"subnet": f"{net_prefix}.0/24"}]}}},
    }
    if volumes:
        rendered["volumes"] = volumes
    return rendered


# ---- images ----------------------------------------------------------------------------------


def kafka_version_of_image(image: Any) -> str | None:
    """Kafka's version as the image says it: our label, or an official image's tag."""
    labels = (image.attrs.get("Config") or {}).get("Labels") or {}
    if version := labels.get(KAFKA_VERSION_LABEL):
        return str(version)
    for tag in image.tags:
        repo, _, ver = tag.rpartition(":")
        if repo.endswith("apache/kafka") and re.match(r"^\d+\.\d+", ver):
            return ver
        if repo.endswith("confluentinc/cp-kafka") and (m := re.match(r"^(\d+)\.(\d+)", ver)):
            # Confluent Platform 7.x carries Kafka 3.(x): 7.9 -> 3.9, 7.4 -> 3.4.
            major, minor = int(m.group(1)), int(m.group(2))
            if major == 7:
                return f"3.{minor}"
            if major == 8:
                return f"4.{minor}"
    return None


def choose_kafka_image(
    requested: str | None, mode: Mode, client: docker.DockerClient, line: str | None = None
) -> str:
    """The scenario's image, else the newest local build of `line` that runs `mode`, else an
    official one of that line."""
    if requested:
        try:
            client.images.get(requested)
        except docker.errors.ImageNotFound:
            raise KafkaUnavailable(
                f"Kafka image {requested!r} is not present: {HOW_TO_GET_KAFKA}"
            ) from None
        return requested
    candidates: list[tuple[tuple[int, ...], int, str]] = []
    official = OFFICIAL_KAFKA["zk" if mode == "zk" else "kraft"]
    for image in client.images.list():
        version = kafka_version_of_image(image)
        for tag in image.tags:
            repo = tag.rpartition(":")[0]
            if repo == LOCAL_KAFKA_REPO:
                rank = 2
            elif repo in official:
                rank = 1 if official.index(repo) == 0 else 0
            else:
                continue
            if supports_mode(version, mode) and on_line(version, line):
                candidates.append((version_tuple(version or "0"), rank, tag))
    if not candidates:
        which = f"Kafka {line} image" if line else "Kafka image"
        raise KafkaUnavailable(f"no {which} that runs mode {mode}: {HOW_TO_GET_KAFKA}")
    # Local builds first (they carry iptables and our entrypoint), then the newest version.
    return max(candidates, key=lambda c: (c[1], c[0]))[2]


def logged_metadata_version(log: str) -> str | None:
    """The last metadata version a controller's log says it loaded: 3.x and 4.1 write
    `FinalizedFeatures[metadataVersion=4.1-IV1, ...`, 4.4 `FinalizedFeatures(metadataVersion=
    Optional[4.4-IV2], ...`."""
    found = re.findall(r"FinalizedFeatures[\[(]metadataVersion=(?:Optional\[)?([\w.-]+)", log)
    return str(found[-1]) if found else None


def local_kafka_releases(client: docker.DockerClient) -> list[str]:
    """The Kafka releases of the local and official images present."""
    found: set[str] = set()
    for image in client.images.list():
        repos = {t.rpartition(":")[0] for t in image.tags}
        if repos & {LOCAL_KAFKA_REPO, *OFFICIAL_KAFKA["zk"], *OFFICIAL_KAFKA["kraft"]}:
            if version := kafka_version_of_image(image):
                found.add(version)
    return sorted(found, key=version_tuple)


def ensure_kafka_release(
    spec: str, client: docker.DockerClient, progress: bool | None = None
) -> str:
    """The release a line or release means, its image built from Maven Central first when no
    image present carries it."""
    local = local_kafka_releases(client)
    maven = None if any(on_line(v, spec) for v in local) else maven_releases()
    release = resolve(spec, local, maven)
    if release not in local:
        build_image(release, progress)
    return release


def choose_zookeeper_image(requested: str | None, client: docker.DockerClient) -> str:
    names = [requested] if requested else [LOCAL_ZOOKEEPER_IMAGE]
    if not requested:
        names += [
            t for i in client.images.list() for t in i.tags if t.startswith(OFFICIAL_ZOOKEEPER)
        ]
    for name in names:
        try:
            client.images.get(name)
            return name
        except docker.errors.ImageNotFound:
            continue
    raise KafkaUnavailable(
        f"no ZooKeeper image: run make setup (builds {LOCAL_ZOOKEEPER_IMAGE} from Debian's "
        "zookeeper package) or docker pull confluentinc/cp-zookeeper:7.9.1"
    )


# ---- a running cluster -----------------------------------------------------------------------


class KafkaCluster(ComposeCluster):
    """Brings a Kafka cluster up and down and tells where its nodes are."""

    def check_fake_clocks(self, nodes: Iterable[str]) -> None:
        """That each node's JVM started the clock agent (its log says so: a mount alone proves
        nothing of the JVM that runs), and a warning for any class the agent left on true time.
        A spare no one has started yet has no JVM to ask."""
        started = self.containers()
        for node in nodes:
            if node not in started:
                continue
            if self.logged_line([node], clock_agent.STARTED, 0) is None:
                raise ComposeError(
                    f"cluster.fake_clock: {node}'s JVM did not start the clock agent (its log has "
                    f"no {clock_agent.STARTED!r})"
                )
            if left := self.logged_line([node], clock_agent.LEFT_ON_TRUE_TIME, 0):
                log.warning("%s: the clock agent %s", node, left.strip())

    # A KRaft cluster's voters as the quorum ops left them (`voters`); None until first read,
    # when they are the ones it formed with.
    _kraft_voters: list[str] | None = None

    def __init__(
        self,
        config: KafkaClusterConfig,
        workdir: Path,
        project: str,
        net_prefix: str | None = None,
        client: docker.DockerClient | None = None,
        proxied: bool = False,
        upgrades: Sequence[str] = (),
    ) -> None:
        """`proxied`: the brokers advertise ports of a proxy (compose.proxy) to the clients, and
        a HARNESS listener of their own to the harness; `upgrades`: the releases (lines or
        releases) upgrade steps move nodes to."""
        super().__init__(workdir, project, net_prefix, client)
        self.config = config
        self.images = {
            "kafka": choose_kafka_image(config.image, config.mode, self.docker, config.kafka_line)
        }
        # Chosen before any container starts: no image is built in the middle of a run.
        self.upgrade_images = {
            spec: choose_kafka_image(None, config.mode, self.docker, spec) for spec in upgrades
        }
        self.node_images: dict[str, str] = {}  # the nodes an upgrade moved: their image now
        # The nodes a ZooKeeper-to-KRaft migration moved: how each runs now (the others run as
        # initial_stage says).
        self.node_stages: dict[str, NodeStage] = {}
        if config.controller_quorum == "dynamic" or config.migration_controllers > 0:
            _check_formats_dynamic_quorums(self.images["kafka"], self.docker)
        if config.mode == "zk":
            self.images["zookeeper"] = choose_zookeeper_image(config.zookeeper_image, self.docker)
        brokers = [n for n in self.nodes if n.role in ("broker", "combined")]
        self.ports = broker_ports([b.node_id for b in brokers], proxied)
        self.node_of = {b.node_id: b.name for b in brokers}
        # The brokers in the cluster now: those it started with, then as add-broker and
        # remove-broker change it (what the recovery waits for, systems.kafka.run).
        self.members: set[int] = {b.node_id for b in brokers if not b.spare}
        self.started_spares: set[str] = set()
        self.compose_file = workdir / "docker-compose.yml"
        # KRaft cluster ids: 16 random bytes, base64url unpadded (as kafka-storage random-uuid).
        self.cluster_id = _kraft_cluster_id()
        # Controllers a remove-controller took out of the voters and stopped: out of the
        # nemesis's reach (its topology) until an add-controller starts and adds them again.
        self.removed_controllers: set[str] = set()
        # A dynamic quorum's first voters' metadata directory ids, chosen here as the cluster id
        # is: each is formatted with all of them (kafka-storage format --initial-controllers).
        self.directory_ids: dict[str, str] = (
            {n.name: _kraft_cluster_id() for n in first_voters(config)}
            if config.controller_quorum == "dynamic"
            else {}
        )
        self.disks = LazyDisks(workdir, [b.name for b in brokers]) if config.lazy_disks else None
        # Every node's clock, ZooKeeper's and the controllers' too: a step may aim at any role.
        self.clocks = (
            FakeClocks(workdir, [n.name for n in self.nodes]) if config.fake_clock else None
        )

    @property
    def nodes(self) -> list[Node]:
        """Every container, at its address on the network the cluster has now."""
        return nodes_of(self.config, self.net_prefix)

    @property
    def spares(self) -> list[str]:
        """The nodes add-broker and add-controller start: the spare brokers then a dynamic
        quorum's spare controllers (started or not); never a migration's controllers, which
        migrate starts (migration_controllers)."""
        return [n.name for n in self.nodes if n.spare and not self._migrates(n)]

    def _migrates(self, node: Node) -> bool:
        """Whether a node is a migration's controller: in a zk cluster, every controller is."""
        return self.config.mode == "zk" and node.role == "controller"

    def _first_ports(self) -> list[BrokerPorts]:
        # A spare that never started answers nothing: no client bootstraps from it.
        spare_ids = {n.node_id for n in self.nodes if n.spare}
        return [p for b, p in sorted(self.ports.items()) if b not in spare_ids]

    @property
    def bootstrap_servers(self) -> str:
        """Where the workload's clients bootstrap (the proxy, on a proxied run)."""
        return ",".join(f"127.0.0.1:{p.advertised}" for p in self._first_ports())

    @property
    def admin_servers(self) -> str:
        """Where the harness's own admin bootstraps: never through the proxy."""
        return ",".join(
            f"127.0.0.1:{p.harness if p.harness is not None else p.published}"
            for p in self._first_ports()
        )

    def proxy_routes(self) -> dict[str, tuple[int, str]]:
        """Per broker name, the port its proxy listens on and what it forwards to (a proxied
        run's); empty otherwise."""
        return {
            self.node_of[b]: (p.advertised, f"127.0.0.1:{p.published}")
            for b, p in self.ports.items()
            if p.proxied
        }

    @property
    def quorum(self) -> tuple[str, ...]:
        """The control plane's quorum now: the KRaft voters; a zk cluster's ensemble, and in a
        migration the ensemble and the KRaft controllers from when the controllers start (the
        brokers depend on both) until the migration is finalized, then the controllers alone."""
        voters = tuple(self.voters)
        if self.config.mode != "zk" or (
            voters and all(self.stage_of(c) == "kraft" for c in voters)
        ):
            return voters
        return tuple(n.name for n in self.nodes if n.role == "zookeeper") + voters

    @property
    def voters(self) -> list[str]:
        """The KRaft voters now (what `quorum` targets, cut-from-quorum and the active
        controller's lookup read): a KRaft cluster's as it formed them, which add-controller and
        remove-controller change in place (systems.kafka.quorum); a zk cluster's, the
        controllers its migration has started (none before)."""
        if self.config.mode == "zk":
            return self.migration_controllers()
        if self._kraft_voters is None:
            self._kraft_voters = [n.name for n in first_voters(self.config)]
        return self._kraft_voters

    @voters.setter
    def voters(self, names: list[str]) -> None:
        self._kraft_voters = names

    def migration_controllers(self) -> list[str]:
        """A zk cluster's controllers that a migration has started (none before; none in a
        KRaft cluster, whose started spare controllers are add-controller's)."""
        return [n.name for n in self.nodes if self._migrates(n) and n.name in self.started_spares]

    def stage_of(self, node: str) -> NodeStage:
        """How a Kafka node runs now (systems.kafka.config.NodeStage)."""
        if node in self.node_stages:
            return self.node_stages[node]
        return initial_stage(self.config, next(n for n in self.nodes if n.name == node))

    def started(self, node: str) -> bool:
        """Whether a node has run: every node but those declared and not started yet."""
        return any(
            n.name == node and (not n.spare or node in self.started_spares) for n in self.nodes
        )

    @property
    def kraft_controller(self) -> bool:
        """Whether the active controller is a KRaft controller (read from the quorum, not from
        a broker's metadata): in KRaft modes, and in a migration once its controllers run and
        every broker runs with the migration's settings, which is when the controllers copy
        ZooKeeper's metadata and take over from the ZooKeeper-mode controller."""
        if self.config.mode != "zk":
            return True
        brokers = [n.name for n in self.nodes if n.role == "broker" and not n.spare]
        return bool(self.migration_controllers()) and all(self.stage_of(b) != "zk" for b in brokers)

    @property
    def kraft_brokers(self) -> bool:
        """Whether every broker is a KRaft broker: in KRaft modes, and once a migration has
        restarted them all in KRaft mode (a broker's registration is then KRaft's to remove)."""
        if self.config.mode != "zk":
            return True
        brokers = [n.name for n in self.nodes if n.role == "broker" and not n.spare]
        return all(self.stage_of(b) == "kraft" for b in brokers)

    def clock_volumes(self, node: str) -> list[str]:
        """A fake-clock node's mounts: its clock's directory and the agent's (built if it is not:
        ClockAgentError says why it cannot be)."""
        assert self.clocks is not None
        agent = clock_agent.ensure().resolve()
        return [self.clocks.clock_volume(node), f"{agent}:{clock_agent.CONTAINER_DIR}:ro"]

    def render(self) -> dict[str, Any]:
        return render_compose(
            self.config,
            self.project,
            self.images,
            self.ports,
            self.net_prefix,
            self.cluster_id,
            {n: self.disks.mountpoint(n) for n in self.disks.disks} if self.disks else None,
            ({n: self.clock_volumes(n) for n in self.clocks.offsets} if self.clocks else None),
            self.node_images,
            # A node an upgrade or a migration recreates keeps its log directory.
            kept_data=bool(self.upgrade_images) or self.config.migration_controllers > 0,
            directory_ids=self.directory_ids or None,
            node_stages=self.node_stages,
        )

    def up(
        self, timeout: float, registered: Any, mark: Callable[[str], None] = lambda _s: None
    ) -> None:
        """Starts every container, then waits until `registered()` (every broker known);
        `mark` hears the end of each of the two."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.disks is not None:
            self.disks.mount_all()
        if self.clocks is not None:
            self.clocks.prepare()

        def start() -> None:
            self.compose_file.write_text(yaml.safe_dump(self.render(), sort_keys=False))
            compose(self.compose_file, ["up", "-d"], {}, timeout=timeout)

        self.start_on_free_subnet(start)
        mark("containers started")
        from contract.wait import wait_until

        exited: dict[str, str] = {}

        def registered_or_exited() -> bool:
            if registered():
                return True
            exited.update(self._exited())
            return bool(exited)

        if not wait_until(registered_or_exited, timeout, interval=POLL):
            stopped = [n for n, c in self.containers().items() if c.status != "running"]
            detail = f"; containers not running: {', '.join(sorted(stopped))}" if stopped else ""
            raise ComposeError(
                f"Kafka brokers did not all register within {timeout:.0f} s{detail} "
                f"(see {self.workdir.parent / 'logs'})"
            )
        if exited:  # a node that exits while the cluster forms will not come back by itself
            node, last = sorted(exited.items())[0]
            raise ComposeError(f"{node} exited while the cluster formed: {last}")
        if self.clocks is not None:
            self.check_fake_clocks(self.clocks.offsets)
        mark("brokers registered")

    def _exited(self) -> dict[str, str]:
        """Nodes whose container has exited, with the last line each wrote."""
        out = {}
        for name, c in self.containers().items():
            if c.status == "exited":
                lines = c.logs(tail=5).decode(errors="replace").strip().splitlines()
                out[name] = lines[-1] if lines else f"exit code {c.attrs['State']['ExitCode']}"
        return out

    def start_spare(self, name: str, timeout: float = 120) -> None:
        """Starts one spare node's container (its profile's service, named). --no-deps: a
        controller a fault stopped stays stopped."""
        if name not in self.spares:
            raise ComposeError(f"{name} is not a spare node of this cluster")
        compose(self.compose_file, ["up", "-d", "--no-deps", name], {}, timeout=timeout)
        self.started_spares.add(name)

    # ---- the controller quorum (systems.kafka.quorum.QuorumControl) -------------------------

    def describe_quorum(self, via: str, bootstrap: list[str], replication: bool = False) -> ToolRun:
        what = "--replication" if replication else "--status"
        return self._metadata_quorum(via, metadata_quorum_arguments(bootstrap, f"describe {what}"))

    def add_controller(self, node: str, bootstrap: list[str]) -> ToolRun:
        """Run inside the new controller: the tool reads its node id, controller endpoint and
        metadata directory (its directory id) from the properties the entrypoint wrote."""
        arguments = f"--command-config {SERVER_PROPERTIES} add-controller"
        return self._metadata_quorum(node, metadata_quorum_arguments(bootstrap, arguments))

    def remove_controller(
        self, via: str, bootstrap: list[str], node_id: int, directory_id: str
    ) -> ToolRun:
        arguments = (
            f"remove-controller --controller-id {node_id} --controller-directory-id {directory_id}"
        )
        return self._metadata_quorum(via, metadata_quorum_arguments(bootstrap, arguments))

    def _metadata_quorum(self, node: str, arguments: str, timeout: float = 90) -> ToolRun:
        """kafka-metadata-quorum inside `node` with `arguments`: its exit code and what it wrote
        to each stream, never raised (its refusal is what a step records)."""
        container = self.containers()[node]
        command = f"kafka-metadata-quorum.sh {arguments}"
        try:
            done = subprocess.run(
                ["docker", "exec", container.id, "sh", "-c", command],
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return ToolRun(124, "", f"kafka-metadata-quorum on {node} timed out ({timeout:g} s)")
        return ToolRun(done.returncode, done.stdout, done.stderr)

    def start_controller(self, name: str) -> Topology:
        """Starts a spare controller, or a removed one again (its container, stopped by
        stop_controller, keeps its data); the topology with it."""
        if name in self.removed_controllers:
            self.containers()[name].start()
            self.removed_controllers.discard(name)
        else:
            self.start_spare(name)
        return self.topology()

    def stop_controller(self, name: str) -> Topology:
        """A graceful stop of a controller the quorum no longer has; the topology without it."""
        self.containers()[name].stop(timeout=30)
        self.removed_controllers.add(name)
        return self.topology()

    def down(self, timeout: float = 180) -> None:
        # The spares' profile named, so that a spare an add-broker (or a migration's controller
        # a migrate step) started comes down too.
        profile = ["--profile", SPARE_PROFILE] if any(n.spare for n in self.nodes) else []
        try:
            if self.compose_file.exists():
                compose(
                    self.compose_file,
                    [*profile, "down", "-v", "--remove-orphans", "-t", STOP_GRACE],
                    {},
                    timeout,
                )
        finally:
            if self.disks is not None:
                self.disks.unmount_all()

    def topology(self) -> Topology:
        """Where the nodes are: every node but a spare not started (it has no container) and a
        controller removed from the quorum (stopped, out of the faults' reach)."""
        return self.topology_of(
            n.name
            for n in self.nodes
            if (not n.spare or n.name in self.started_spares)
            and n.name not in self.removed_controllers
        )

    def unregister(self, broker_id: int, via: str) -> str:
        """KRaft: the broker's registration removed from the cluster's metadata (it must be
        down: a running broker registers again), by Kafka's own tool inside `via`."""
        command = (
            f"kafka-cluster.sh unregister --bootstrap-server localhost:{INTERNAL_PORT} "
            f"--id {broker_id} 2>&1"
        )
        return self.exec(via, command, timeout=90)

    def exec(self, node: str, command: str, timeout: float = 60) -> str:
        return self.run_in(node, ["sh", "-c", command], "command", timeout)

    def active_controller(self, candidates: list[str]) -> str | None:
        """KRaft's active controller (brokers' metadata names a random broker there): what the
        quorum's voters last persisted of its leader, read in a fraction of a second so that a
        step aimed at the controller starts when scheduled; the quorum tool (a JVM started in
        a node, seconds) only when no voter's state can be read."""
        states = self._quorum_states()
        if states:
            return self._leader_of(states)
        return self._active_controller_by_tool(candidates)

    def _quorum_states(self) -> list[dict[str, Any]]:
        """Each voter's quorum-state file (leaderId, leaderEpoch), asked of all at once; a voter
        that is down or paused says nothing."""
        path = f"{DATA_DIR}/__cluster_metadata-0/quorum-state"

        def read(node: str) -> dict[str, Any] | None:
            try:
                state = json.loads(self.run_in(node, ["cat", path], "quorum state", timeout=5))
            except (ComposeError, ValueError):
                return None
            return state if isinstance(state, dict) else None

        with ThreadPoolExecutor(max_workers=max(len(self.voters), 1)) as pool:
            return [s for s in pool.map(read, self.voters) if s is not None]

    def _leader_of(self, states: list[dict[str, Any]]) -> str | None:
        """The leader of the newest epoch a voter knows a leader of: an isolated old leader
        still names itself, of an older epoch, and an isolated voter raising its epoch in vain
        (Kafka 3.x has no pre-vote) names none. None while a majority of the voters are past
        that epoch with no leader: an election under way."""
        led = [s for s in states if _whole(s.get("leaderId")) >= 0]
        if not led:
            return None
        newest = max(led, key=lambda s: _whole(s.get("leaderEpoch")))
        epoch = _whole(newest.get("leaderEpoch"))
        electing = [s for s in states if _whole(s.get("leaderEpoch")) > epoch]
        if len(electing) > len(self.voters) // 2:
            return None
        leader = _whole(newest.get("leaderId"))
        return next((n.name for n in self.nodes if n.node_id == leader), None)

    def _active_controller_by_tool(self, candidates: list[str]) -> str | None:
        """Kafka's quorum tool in each candidate broker, then in each voter (bootstrapped on
        its controller listener: a ZooKeeper-mode broker of a migration cannot answer)."""

        def tool(bootstrap: str) -> str:
            return (
                "for t in kafka-metadata-quorum.sh /opt/kafka/bin/kafka-metadata-quorum.sh "
                "kafka-metadata-quorum; do if command -v $t >/dev/null 2>&1; then "
                f"exec $t {bootstrap} describe --status; fi; done; "
                "echo 'no kafka-metadata-quorum tool in the image' >&2; exit 127"
            )

        asks = [(b, tool(f"--bootstrap-server localhost:{INTERNAL_PORT}")) for b in candidates]
        asks += [
            (v, tool(f"--bootstrap-controller localhost:{CONTROLLER_PORT}")) for v in self.voters
        ]
        for node, command in asks:
            try:
                out = self.exec(node, command, timeout=30)
            except ComposeError:
                continue
            if m := re.search(r"LeaderId:\s*(-?\d+)", out):
                leader = int(m.group(1))
                return next((n.name for n in self.nodes if n.node_id == leader), None)
        return None

    def kafka_version(self) -> str:
        """The version of the Kafka jar the brokers run (whatever the image's tag says)."""
        probe = (
            "ls /opt/kafka/libs /usr/share/java/kafka 2>/dev/null "
            "| grep -m1 -E '^kafka_[0-9.]+-[0-9][0-9A-Za-z.-]*\\.jar$'"
        )
        try:
            jar = self.exec("kafka1", probe, timeout=30).strip()
        except ComposeError:
            return "unknown"
        m = re.match(r"kafka_[0-9.]+-(.+)\.jar$", jar)
        return m.group(1) if m else "unknown"

    def set_feature(self, feature: str, level: int) -> None:
        """Finalizes a feature at `level` (kafka-features upgrade, else downgrade: one of them
        is a no-op refusal depending on where the level stands)."""
        said = []
        for how in ("upgrade", "downgrade"):
            command = (
                f"kafka-features.sh --bootstrap-server localhost:{INTERNAL_PORT} {how} "
                f"--feature {feature}={level}"
            )
            try:
                self.exec("kafka1", command, timeout=60)
            except ComposeError as e:
                said.append(str(e).strip().splitlines()[-1] if str(e).strip() else how)
                continue
            if self.feature_levels().get(feature) == str(level):
                return
        raise ComposeError(f"could not set {feature} to {level}: {'; '.join(said)}")

    def feature_levels(self, via: str | None = None) -> dict[str, str]:
        """The finalized feature levels (metadata.version; on 4.x also kraft.version,
        eligible.leader.replicas.version, ...), as `kafka-features describe` reports them: what
        the cluster was formatted with decides what min ISR and unclean election mean (KIP-966)."""
        command = f"kafka-features.sh --bootstrap-server localhost:{INTERNAL_PORT} describe"
        try:
            out = self.exec(via or "kafka1", command, timeout=60)
        except ComposeError:
            return {}
        levels = dict(re.findall(r"Feature:\s*(\S+).*?FinalizedVersionLevel:\s*(\S+)", out))
        if levels.get("metadata.version") == "UNKNOWN":
            # Tools older than the brokers (an image whose release Maven Central has no
            # kafka-tools for) cannot name a newer metadata version: the controller's log does.
            levels["metadata.version"] = self._logged_metadata_version() or "UNKNOWN"
        return levels

    def _logged_metadata_version(self) -> str | None:
        """The metadata version a controller last logged loading (KRaft)."""
        controllers = [n.name for n in self.nodes if n.role in ("controller", "combined")]
        containers = self.containers()
        for name in controllers:
            if name not in containers:
                continue
            log = containers[name].logs(tail=20000).decode(errors="replace")
            if version := logged_metadata_version(log):
                return version
        return None

    def image_info(self) -> dict[str, dict[str, Any]]:
        """Each image the run uses: by role, and an upgrade's as `kafka@<release>`."""
        info = {}
        for role, name in self.images.items():
            image = self.docker.images.get(name)
            info[role] = {"name": name, "id": image.id}
            if role == "kafka":
                info[role]["image_version"] = kafka_version_of_image(image)
        for name in self.upgrade_images.values():
            image = self.docker.images.get(name)
            version = kafka_version_of_image(image)
            info[f"kafka@{version}"] = {"name": name, "id": image.id, "image_version": version}
        return info

    # ---- upgrades (systems.kafka.upgrade.UpgradeControl, through the admin) ------------------

    def release_of(self, node: str) -> str:
        """The Kafka release a node's image carries now."""
        name = self.node_images.get(node, self.images["kafka"])
        return kafka_version_of_image(self.docker.images.get(name)) or "unknown"

    def release_of_spec(self, spec: str) -> str:
        """The release an upgrade step's line or release resolved to."""
        image = self.docker.images.get(self.upgrade_images[spec])
        return kafka_version_of_image(image) or spec

    def upgrade_node(self, node: str, spec: str, timeout: float = 180) -> Topology:
        """The node's container stopped (gracefully) and recreated on the image of `spec`, its
        log directory kept (a volume of its own); its former container's log kept for
        `save_logs`. The topology with its new container."""
        self.retire_logs(node, self.release_of(node))
        self.node_images[node] = self.upgrade_images[spec]
        self.compose_file.write_text(yaml.safe_dump(self.render(), sort_keys=False))
        compose(self.compose_file, ["up", "-d", "--no-deps", node], {}, timeout=timeout)
        return self.topology()

    def newest_image(self) -> str:
        """The image of the newest release a node runs (what decodes the evidence: it reads
        what every release before it wrote)."""
        running = {self.images["kafka"], *self.node_images.values()}

        def version(name: str) -> tuple[int, ...]:
            return version_tuple(kafka_version_of_image(self.docker.images.get(name)) or "0")

        return max(running, key=version)

    def finalize(self, feature: str, level: str, via: str) -> str:
        """Kafka's own tool, in `via`, raises a feature to a level: metadata.version by release
        or level, `all` to a release's defaults, any other by number. Its answer."""
        if feature == "metadata.version":
            what = f"--metadata {level}"
        elif feature == "all":
            what = f"--release-version {level}"
        else:
            what = f"--feature {feature}={level}"
        command = (
            f"kafka-features.sh --bootstrap-server localhost:{INTERNAL_PORT} upgrade {what} 2>&1"
        )
        return self.exec(via, command, timeout=90)

    def controller_caught_up(self, controller: str, since_ms: int, via: str) -> bool:
        """Whether the quorum's leader has seen the controller caught up since `since_ms` (epoch
        ms): the metadata quorum's replication as Kafka's tool in `via` describes it."""
        command = (
            f"kafka-metadata-quorum.sh --bootstrap-server localhost:{INTERNAL_PORT} "
            "describe --replication 2>&1"
        )
        try:
            out = self.exec(via, command, timeout=60)
        except ComposeError:
            return False
        node_id = next(n.node_id for n in self.nodes if n.name == controller)
        row = replication_row(out, node_id)
        return row is not None and _whole_text(row.get("LastCaughtUpTimestamp")) >= since_ms

    # ---- a ZooKeeper-to-KRaft migration (systems.kafka.migration.MigrationControl) ---------

    def zookeeper_cluster_id(self, via: str) -> str:
        """The cluster id ZooKeeper holds (/cluster/id, which the first broker wrote), read with
        Kafka's own ZooKeeper shell inside `via` as Kafka's migration guide reads it: the
        controllers are formatted with it. The images built from Maven Central's jars have no
        zookeeper-shell.sh: its class, run as the script runs it, is in their Kafka jar."""
        ensemble = ",".join(
            f"{n.name}:{ZK_CLIENT_PORT}" for n in self.nodes if n.role == "zookeeper"
        )
        shell = (
            f"if command -v zookeeper-shell.sh >/dev/null 2>&1; then zookeeper-shell.sh "
            f"{ensemble} get /cluster/id; else kafka-run-class.sh "
            f"org.apache.zookeeper.ZooKeeperMainWithTlsSupportForKafka -server {ensemble} "
            "get /cluster/id; fi 2>&1"
        )
        said = self.exec(via, shell, timeout=60)
        found = zookeeper_cluster_id(said)
        if found is None:
            lines = [ln for ln in said.strip().splitlines() if ln.strip()]
            raise ComposeError(
                f"no cluster id in ZooKeeper's /cluster/id: {lines[-1] if lines else 'no answer'}"
            )
        return found

    def adopt_cluster_id(self, cluster_id: str) -> None:
        """The id the KRaft nodes are formatted with from now on (ZooKeeper's, in a migration:
        the controllers must join the cluster the brokers already form)."""
        self.cluster_id = cluster_id

    def migrate_node(self, node: str, stage: NodeStage, timeout: float = 180) -> Topology:
        """The node's container stopped (gracefully) and recreated to run as `stage`, its log
        directory kept; a migration's controller, declared but never started, started. Its
        former container's log kept for `save_logs`. The topology with its new container."""
        self.retire_logs(node, f"{self.release_of(node)}-{self.stage_of(node)}")
        self.node_stages[node] = stage
        self.compose_file.write_text(yaml.safe_dump(self.render(), sort_keys=False))
        compose(self.compose_file, ["up", "-d", "--no-deps", node], {}, timeout=timeout)
        if any(n.name == node and n.spare for n in self.nodes):
            self.started_spares.add(node)
        return self.topology()

    def logged_line(self, nodes: Sequence[str], text: str, since: float) -> str | None:
        """The last line holding `text` that any of the nodes' current containers logged since
        `since` (epoch seconds): how a migration says where it stands (the active controller's
        log), where no tool or metric here can (ZkMigrationState is a JMX metric, and the
        images expose no JMX)."""
        containers = self.containers()
        for name in nodes:
            if name not in containers:
                continue
            # docker-py takes a positive `since` only: 0 (the whole log) is no argument at all.
            window = {"since": int(since) - 1} if since > 1 else {}
            try:
                log = containers[name].logs(**window)
            except docker.errors.APIError:
                continue
            if found := last_line_with(log.decode(errors="replace"), text):
                return found
        return None


def _check_formats_dynamic_quorums(image: str, client: docker.DockerClient) -> None:
    """A dynamic quorum is formatted by the local images' entrypoint (mounted from this
    repository): an image of another make runs an entrypoint of its own, which does not."""
    labels = (client.images.get(image).attrs.get("Config") or {}).get("Labels") or {}
    if KAFKA_VERSION_LABEL not in labels:
        raise KafkaUnavailable(
            f"controller_quorum: dynamic needs a local Kafka image (make setup's "
            f"{LOCAL_KAFKA_REPO}), whose entrypoint formats the quorum: {image} is not one"
        )


def _kraft_cluster_id() -> str:
    """16 random bytes, base64url as Kafka writes ids; never starting with "-", which Kafka's
    command-line tools read as an option (`kafka-storage format -t -zmg…`: "expected one
    argument": a K5 run's brokers all exited). Kafka's own Uuid.randomUuid() skips those too."""
    while True:
        cluster_id = base64.urlsafe_b64encode(secrets.token_bytes(16)).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def replication_row(described: str, node_id: int) -> dict[str, str] | None:
    """One replica's row of `kafka-metadata-quorum describe --replication` (columns by their
    header: NodeId, LogEndOffset, Lag, LastCaughtUpTimestamp, Status, ...), None when absent."""
    lines = [ln.split() for ln in described.splitlines() if ln.strip()]
    header = next((ln for ln in lines if ln and ln[0] == "NodeId"), None)
    if header is None:
        return None
    for cells in lines:
        if cells and cells[0] == str(node_id):
            return dict(zip(header, cells, strict=False))
    return None


def _whole_text(value: str | None) -> int:
    return int(value) if value is not None and value.isdigit() else -1


def _whole(value: Any) -> int:
    """A number a persisted quorum state holds; -1 for anything else (a field null or gone)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def zookeeper_cluster_id(said: str) -> str | None:
    """The id in what `zookeeper-shell get /cluster/id` printed ({"version":"1","id":"..."}),
    None when it printed none (no broker has registered yet, or no answer)."""
    found = re.findall(r'"id"\s*:\s*"([^"]+)"', said)
    return str(found[-1]) if found else None


# A line of a node's log as an event's value carries it: long lines (a migration's manifest)
# cut here.
LINE_CHARS = 300


def last_line_with(log: str, text: str) -> str | None:
    """The last line of a log that holds `text`, cut at LINE_CHARS; None when none does."""
    for line in reversed(log.splitlines()):
        if text in line:
            return line.strip()[:LINE_CHARS]
    return None
