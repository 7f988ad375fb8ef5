"""A RabbitMQ cluster under Docker Compose: three nodes, or the first two; optionally with a
load balancer (HAProxy) that sends every client to the same node and fails over (R4)."""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import docker
import docker.errors

from compose import clocks
from compose.cli import ComposeError, compose
from compose.clocks import FakeClocks
from compose.cluster import STOP_GRACE, ComposeCluster, free_ports
from compose.disks import LazyDisks
from compose.releases import RELEASE_PATTERN, setup_releases
from contract.topology import Endpoint, Topology
from contract.versions import on_spec, version_key
from contract.wait import wait_until
from systems.rabbitmq.broker_log import boot_errors
from systems.rabbitmq.declares import Declares
from systems.rabbitmq.membership import Membership
from systems.rabbitmq.settings import typed_conf

COMPOSE_FILE = Path(__file__).parent / "compose" / "docker-compose.yml"
# The compose file's node services; a cluster of N is the first N.
NODE_NAMES = tuple(f"rabbit{i}" for i in range(1, 8))
LOAD_BALANCER = "lb"  # the compose service; clients then reach the cluster through it alone
HAPROXY_IMAGE = "brokerjepsen/haproxy:2.6-debian"
OFFICIAL_IMAGE = "rabbitmq:3.13-management"
LOCAL_REPO = "brokerjepsen/rabbitmq"
LOCAL_IMAGE = f"{LOCAL_REPO}:{setup_releases('rabbitmq')[0]}-debian"  # the oldest: 3.10.8
AMQP_PORT = 5672
VERSION_LABEL = "org.brokerjepsen.rabbitmq-version"
DATA_DIR = "/var/lib/rabbitmq"
NODE_IMAGES = "node-images.yml"  # the compose override an upgrade writes (in the workdir)


@dataclass(frozen=True)
class ClusterConfig:
    partition_handling: str | None  # None: the passthrough keys set it
    net_ticktime: int = 5
    pause_if_all_down_nodes: tuple[str, ...] = ()
    pause_if_all_down_recover: str = "autoheal"
    image: str | None = None
    lazy_disks: bool = False  # each node's /var/lib/rabbitmq on the power-loss filesystem
    fake_clock: bool = False  # each node's processes under libfaketime (compose.clocks)
    nodes: tuple[str, ...] = NODE_NAMES[:3]  # the first N of NODE_NAMES
    load_balancer: bool = False
    version: str | None = None  # a line or release of the local images; None: see choose_image
    # The scenario's own rabbitmq.conf keys, rendered, in its order; they follow the typed
    # knobs' (systems.rabbitmq.settings).
    rabbitmq_conf: tuple[tuple[str, str], ...] = ()
    advanced_config: str | None = None  # Erlang terms; None: an empty list
    # The releases (lines or releases of the local images) the scenario's upgrade steps move
    # nodes to: their images are found before anything starts, and each node's data lives in a
    # volume of its own, which outlives its container.
    upgrades: tuple[str, ...] = ()


def render_config(cfg: ClusterConfig) -> str:
    wiring = {
        "cluster_formation.peer_discovery_backend": "rabbit_peer_discovery_classic_config",
        **{
            f"cluster_formation.classic_config.nodes.{i}": f"rabbit@{name}"
            for i, name in enumerate(cfg.nodes, 1)
        },
        # Clients reach the nodes from the host through published ports, not from localhost.
        "loopback_users.guest": "false",
    }
    conf = typed_conf(
        cfg.partition_handling,
        cfg.net_ticktime,
        cfg.pause_if_all_down_nodes,
        cfg.pause_if_all_down_recover,
        dict(cfg.rabbitmq_conf),
    )
    return "".join(f"{key} = {value}\n" for key, value in {**wiring, **conf}.items())


def render_advanced_config(cfg: ClusterConfig) -> str:
    """The nodes' advanced.config: the scenario's terms, else an empty list (which the broker
    reads as no file at all)."""
    if cfg.advanced_config is None:
        return "%% No advanced settings: the scenario gave none.\n[].\n"
    return cfg.advanced_config.rstrip() + "\n"


def node_address(net_prefix: str, node: str) -> str:
    """The node's fixed address on the cluster network (the compose file's ipv4_address)."""
    return f"{net_prefix}.{11 + NODE_NAMES.index(node)}"


def render_haproxy(nodes: tuple[str, ...], net_prefix: str) -> str:
    """The RabbitMQ reliability article's assumption 4: every client on the first node while it
    answers its port, else on the next; when the first is back, clients on a backup are cut so
    that they return to it."""
    address = {n: node_address(net_prefix, n) for n in nodes}
    servers = [
        f"  server {n} {address[n]}:{AMQP_PORT} check" + ("" if i == 0 else " backup")
        for i, n in enumerate(nodes)
    ]
    return (
        "\n".join(
            [
                "defaults",
                "  mode tcp",
                "  timeout connect 5s",
                "  timeout client 3h",
                "  timeout server 3h",
                "frontend amqp",
                f"  bind *:{AMQP_PORT}",
                "  default_backend rabbit",
                "backend rabbit",
                "  default-server inter 1s fall 2 rise 2 on-marked-down shutdown-sessions"
                " on-marked-up shutdown-backup-sessions",
                *servers,
            ]
        )
        + "\n"
    )


def choose_image(
    requested: str | None, client: docker.DockerClient, version: str | None = None
) -> str:
    """The scenario's image; else, for a version, the newest local build of it; else the
    official image if present, else the local build of 3.10."""
    if requested:
        return requested
    if version is not None:
        return _local_image_of(version, client)
    for image in (OFFICIAL_IMAGE, LOCAL_IMAGE):
        try:
            client.images.get(image)
            return image
        except docker.errors.ImageNotFound:
            continue
    raise ComposeError(
        f"no RabbitMQ image: run `make setup` (builds {LOCAL_IMAGE} from Debian packages) "
        f"or `docker pull {OFFICIAL_IMAGE}`"
    )


def _local_image_of(version: str, client: docker.DockerClient) -> str:
    built = []
    for image in client.images.list(name=LOCAL_REPO):
        for tag in image.tags:
            release = tag.rpartition(":")[2].removesuffix("-debian")
            if re.fullmatch(RELEASE_PATTERN, release) and on_spec(release, version):
                built.append(release)
    if not built:
        known = ", ".join(setup_releases("rabbitmq"))
        raise ComposeError(
            f"no local RabbitMQ {version} image: make setup builds {known} from Debian packages"
        )
    return f"{LOCAL_REPO}:{max(built, key=version_key)}-debian"


def _node_name(erlang_node: str) -> str:
    """rabbit@rabbit2 -> rabbit2"""
    return erlang_node.rpartition("@")[2]


class RabbitMQCluster(ComposeCluster):
    """Brings a cluster up and down and tells where its nodes are."""

    def __init__(
        self,
        config: ClusterConfig,
        workdir: Path,
        project: str,
        net_prefix: str | None = None,
        client: docker.DockerClient | None = None,
    ) -> None:
        super().__init__(workdir, project, net_prefix, client)
        self.config = config
        self.image = choose_image(config.image, self.docker, config.version)
        self._env: dict[str, str] = {}
        self.nodes = config.nodes
        self.disks = LazyDisks(workdir, list(self.nodes)) if config.lazy_disks else None
        self.clocks = FakeClocks(workdir, list(self.nodes)) if config.fake_clock else None
        self.overrides: tuple[Path, ...] = ()
        # The image each node's container runs: the cluster's, until an upgrade recreates it.
        self.node_images = dict.fromkeys(self.nodes, self.image)
        # Every image an upgrade step needs, by the release it names: one not built is said now,
        # before the run, rather than half-way through its schedule.
        self.upgrade_images = {r: choose_image(None, self.docker, r) for r in config.upgrades}
        # Who is in the cluster as the membership steps leave it (forget-node, shrink-queue).
        self.membership = Membership(self, list(self.nodes))
        # The metadata probes the declare steps make, looked for again after the heal.
        self.declares = Declares(self, list(self.nodes))

    @property
    def boots_together(self) -> bool:
        """Whether the nodes must start at once: RabbitMQ 4's peer discovery waits at boot for
        the nodes it lists (3.x joins whichever answers, so its nodes start one after another)."""
        version = self.docker.images.get(self.image).labels.get(VERSION_LABEL, "3")
        return version_key(version)[0] >= 4

    def release(self) -> str | None:
        """The RabbitMQ release the cluster runs: its image's; once an upgrade moved some nodes,
        the oldest a node runs (a mixed cluster works at its oldest release's level)."""
        releases = [self.release_of(i) for i in dict.fromkeys(self.node_images.values())]
        known = [r for r in releases if r and re.fullmatch(RELEASE_PATTERN, r)]
        if len(releases) == 1 or not known:
            return releases[0]
        return min(known, key=version_key)

    def release_of(self, image: str) -> str | None:
        """The RabbitMQ release an image holds, where it says: our label, or the official
        images' environment."""
        found = self.docker.images.get(image)
        if label := found.labels.get(VERSION_LABEL):
            return str(label)
        env = dict(e.partition("=")[::2] for e in found.attrs["Config"].get("Env") or [])
        return env.get("RABBITMQ_VERSION")

    def node_release(self, node: str) -> str:
        """The release the node's container runs."""
        return self.release_of(self.node_images[node]) or self.node_images[node]

    def image_for(self, release: str) -> str:
        """The local image of a release an upgrade step names (found when the cluster was made)."""
        if release not in self.upgrade_images:
            raise ComposeError(
                f"no image was looked for of RabbitMQ {release} (no upgrade names it)"
            )
        return self.upgrade_images[release]

    def up(self, timeout: float) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        conf = self.workdir / "rabbitmq.conf"
        conf.write_text(render_config(self.config))
        conf.chmod(0o644)
        advanced = self.workdir / "advanced.config"
        advanced.write_text(render_advanced_config(self.config))
        advanced.chmod(0o644)
        ports = free_ports(len(NODE_NAMES) + 1)
        self._env = {
            **{f"BJ_PORT_{n.upper()}": str(p) for n, p in zip(NODE_NAMES, ports[:-1], strict=True)},
            "BJ_PORT_LB": str(ports[-1]),
            "BJ_PROJECT": self.project,
            "RABBITMQ_IMAGE": self.image,
            "BJ_RABBITMQ_CONF": str(conf.resolve()),
            "BJ_ADVANCED_CONFIG": str(advanced.resolve()),
            "BJ_ERLANG_COOKIE": secrets.token_hex(16),
            "BJ_FIRST_NODE": "service_started" if self.boots_together else "service_healthy",
        }
        services = [*self.nodes, *([LOAD_BALANCER] if self.config.load_balancer else [])]
        wait = ["up", "-d", "--wait", "--wait-timeout", str(int(timeout)), *services]
        overrides = []
        if self.disks is not None:
            self.disks.mount_all()
            overrides.append(self._disk_override(self.disks))
        if self.clocks is not None:
            self.clocks.prepare()
            overrides.append(self._clock_override(self.clocks))
        if self.config.upgrades and self.disks is None:  # a lazy disk is a host directory already
            overrides.append(self._data_volume_override())
        self.overrides = tuple(overrides)

        def start() -> None:
            self._env["BJ_NET_PREFIX"] = self.net_prefix
            if self.config.load_balancer:
                haproxy = self.workdir / "haproxy.cfg"
                haproxy.write_text(render_haproxy(self.nodes, self.net_prefix))
                haproxy.chmod(0o644)
                self._env["BJ_HAPROXY_CONF"] = str(haproxy.resolve())
                self._env["BJ_HAPROXY_IMAGE"] = HAPROXY_IMAGE
            compose(COMPOSE_FILE, wait, self._env, timeout=timeout + 30, overrides=self.overrides)

        try:
            self.start_on_free_subnet(start)
        except ComposeError as e:
            if refused := self._refused_configuration():
                raise ComposeError(f"{e}; {refused}") from None
            raise
        self._wait_formed(timeout=60)
        if self.clocks is not None:
            self.check_fake_clocks(self.nodes)

    def _refused_configuration(self) -> str | None:
        """What the first node whose log says it refused its configuration said, in one line
        (the nodes share one configuration: one says it for all)."""
        for name, container in sorted(self.containers().items()):
            if name not in self.nodes:
                continue
            try:
                text = container.logs(tail=500).decode(errors="replace")
            except docker.errors.APIError:
                continue
            if errors := boot_errors(text):
                return f"{name} refused its configuration: {'; '.join(errors)}"
        return None

    def _wait_formed(self, timeout: float) -> None:
        """Every node in the first one's running nodes. Healthy means a node's listener is up,
        which RabbitMQ opens a fraction of a second before it reports the app running."""
        expected = {f"rabbit@{n}" for n in self.nodes}
        seen: list[str] = []

        def formed() -> bool:
            nonlocal seen
            try:
                seen = self.running_nodes(self.nodes[0])
            except ComposeError:
                return False
            return set(seen) == expected

        if not wait_until(formed, timeout, interval=1):
            raise ComposeError(f"cluster did not form: {self.nodes[0]} sees {sorted(seen)}")

    def _disk_override(self, disks: LazyDisks) -> Path:
        """A compose file merged over the shipped one: each node's data on its lazy disk."""
        override = self.workdir / "lazy-disks.yml"
        services = {n: {"volumes": [f"{disks.mountpoint(n)}:{DATA_DIR}"]} for n in self.nodes}
        override.write_text(json.dumps({"services": services}, indent=2))
        return override

    def _clock_override(self, fake: FakeClocks) -> Path:
        """A compose file merged over the shipped one: each node under libfaketime, reading its
        clock's offset from its own directory of the host's."""
        override = self.workdir / "fake-clocks.yml"
        services = {
            n: {
                "environment": clocks.environment(),
                "volumes": fake.volumes(n),
            }
            for n in self.nodes
        }
        override.write_text(json.dumps({"services": services}, indent=2))
        return override

    def _data_volume_override(self) -> Path:
        """A compose file merged over the shipped one: each node's data directory in a named
        volume of its own, so that a container recreated on another image (an upgrade) finds
        the node's data. `down -v` removes the volumes with the cluster."""
        override = self.workdir / "data-volumes.yml"
        services = {n: {"volumes": [f"{n}-data:{DATA_DIR}"]} for n in self.nodes}
        volumes: dict[str, dict[str, str]] = {f"{n}-data": {} for n in self.nodes}
        override.write_text(json.dumps({"services": services, "volumes": volumes}, indent=2))
        return override

    def _node_image_override(self) -> Path:
        """A compose file merged over the others: each node's image, as upgrades left it."""
        override = self.workdir / NODE_IMAGES
        services = {n: {"image": image} for n, image in self.node_images.items()}
        override.write_text(json.dumps({"services": services}, indent=2))
        return override

    def replace_node(self, node: str, image: str, timeout: float) -> None:
        """The node's container replaced by a new one on `image`, with the node's data (its
        volume or lazy disk), address, port and configuration: the old one is stopped (a
        graceful stop, when it still runs) and its logs retired (save_logs joins them to the
        node's log), then compose recreates the node alone. Returns once the node is healthy
        (its AMQP listener up); a node that exits, or is not healthy within `timeout` seconds,
        is a ComposeError (its new container stays, for its logs)."""
        self.containers()[node].stop(timeout=30)
        self.retire_logs(node, self.node_release(node))
        self.node_images[node] = image
        file = self._node_image_override()
        self.overrides = (*(o for o in self.overrides if o != file), file)
        args = ["up", "-d", "--no-deps", "--force-recreate", "--wait"]
        args += ["--wait-timeout", str(int(timeout)), node]
        compose(COMPOSE_FILE, args, self._env, timeout=timeout + 60, overrides=self.overrides)

    def log_tail(self, node: str, lines: int) -> list[str]:
        """The last lines of the node's container's log (what a node that refused to boot
        said), without Docker's timestamps."""
        try:
            text = self.containers()[node].logs(tail=lines).decode(errors="replace")
        except (KeyError, docker.errors.APIError) as e:
            return [f"(no log: {e})"]
        return [line for line in text.splitlines() if line.strip()]

    def down(self, timeout: float = 120) -> None:
        # The load balancer's profile, so that down takes it too when it ran.
        env = {**(self._env or {"BJ_PROJECT": self.project}), "COMPOSE_PROFILES": LOAD_BALANCER}
        try:
            args = ["down", "-v", "--remove-orphans", "-t", STOP_GRACE]
            compose(COMPOSE_FILE, args, env, timeout, overrides=self.overrides)
        finally:
            if self.disks is not None:
                self.disks.unmount_all()

    def topology(self) -> Topology:
        """Where the nodes are. A node whose container is not running (one that refused to boot
        on a new release) has no address from Docker: its fixed one stands."""
        found = self.topology_of(self.nodes)
        handles = tuple(
            h if h.address else replace(h, address=node_address(self.net_prefix, h.name))
            for h in found.nodes
        )
        return replace(found, nodes=handles)

    def endpoints(self) -> list[Endpoint]:
        """Where clients reach each node, and the load balancer (named lb) when it runs."""
        out = []
        for name, c in sorted(self.containers().items()):
            if name not in (*self.nodes, LOAD_BALANCER):
                continue
            binding = c.attrs["NetworkSettings"]["Ports"][f"{AMQP_PORT}/tcp"][0]
            out.append(Endpoint(name, binding["HostIp"] or "127.0.0.1", int(binding["HostPort"])))
        return out

    def rabbitmqctl(self, node: str, *args: str, timeout: float = 60) -> str:
        what = f"rabbitmqctl {args[0]}"
        return self.run_in(node, ["rabbitmqctl", *args], what, timeout, line=0)

    def rabbitmq_queues(self, node: str, *args: str, timeout: float = 60) -> str:
        """rabbitmq-queues in a node; its refusal is its last line."""
        what = f"rabbitmq-queues {args[0]}"
        return self.run_in(node, ["rabbitmq-queues", *args], what, timeout, line=-1)

    def cluster_status(self, node: str) -> dict[str, Any]:
        out = self.rabbitmqctl(node, "cluster_status", "--formatter", "json", timeout=30)
        status: dict[str, Any] = json.loads(out)
        return status

    def running_nodes(self, node: str) -> list[str]:
        return list(self.cluster_status(node).get("running_nodes", []))

    def set_policy(
        self,
        name: str,
        pattern: str,
        definition: Mapping[str, Any],
        apply_to: str = "all",
        priority: int = 0,
    ) -> None:
        """Every policy a run sets goes through here (the harness's mirroring policy and the
        scenario's alike); the broker's refusal is its last line, which names the key."""
        args = [name, pattern, json.dumps(definition), "--apply-to", apply_to]
        args += ["--priority", str(priority)]
        what = f"rabbitmqctl set_policy {name}"
        self.run_in(self.nodes[0], ["rabbitmqctl", "set_policy", *args], what, 60, line=-1)

    def _list_queues(self, *items: str, timeout: float) -> tuple[str, list[dict[str, Any]]]:
        """`list_queues` of the given items from the first node that answers (a paused or stuck
        node does not), and which node that was."""
        last: ComposeError | None = None
        for node in self.nodes:
            try:
                out = self.rabbitmqctl(
                    node, "list_queues", *items, "--formatter", "json", timeout=timeout
                )
            except ComposeError as e:
                last = e
                continue
            return node, list(json.loads(out))
        raise last or ComposeError("no node answered list_queues")

    def queue_depths(self) -> dict[str, dict[str, Any]]:
        """Each queue's message count (ready + unacknowledged) and state."""
        node, queues = self._list_queues("name", "messages", "state", timeout=60)
        return {
            q["name"]: {"messages": q["messages"], "state": q["state"], "asked": node}
            for q in queues
        }

    def queue_leader(self, queue: str) -> tuple[str, list[str]]:
        """A quorum queue's or stream's leader and members (node names)."""
        node, queues = self._list_queues("name", "leader", "members", timeout=30)
        for q in queues:
            if q["name"] == queue and q.get("leader"):
                members = [_node_name(m) for m in q.get("members") or []]
                return _node_name(q["leader"]), members
        raise ComposeError(f"{node} names no leader of {queue}")

    def quorum_members(self) -> dict[str, list[str]]:
        """Each quorum queue's members (node names). 3.10 names the type quorum as 4.x does;
        a module name (rabbit_quorum_queue) is read the same."""
        _, queues = self._list_queues("name", "type", "members", timeout=30)
        return {
            q["name"]: [_node_name(m) for m in q.get("members") or []]
            for q in queues
            if "quorum" in str(q.get("type"))
        }

    def quorum_status(self, queue: str, via: str) -> list[dict[str, Any]]:
        """A quorum queue's members as one node reports them (rabbitmq-queues quorum_status):
        each with its Raft state and its commit index, among others."""
        argv = ["rabbitmq-queues", "-q", "quorum_status", queue, "--formatter", "json"]
        out = self.run_in(via, argv, "rabbitmq-queues quorum_status", timeout=30)
        rows: list[dict[str, Any]] = json.loads(out)
        return rows

    def queue_messages(self, node: str) -> dict[str, int]:
        """Each queue's messages as one node counts them (during a partition, its own side)."""
        out = self.rabbitmqctl(
            node, "list_queues", "--local", "name", "messages", "--formatter", "json", timeout=30
        )
        return {q["name"]: int(q["messages"]) for q in json.loads(out)}

    def queue_names(self, node: str) -> list[str]:
        """The queues one node lists (its own view of the metadata: a node split from the
        others lists what its side declared)."""
        out = self.rabbitmqctl(node, "list_queues", "name", "--formatter", "json", timeout=30)
        return [str(q["name"]) for q in json.loads(out)]

    def delete_queue(self, node: str, queue: str) -> None:
        self.rabbitmqctl(node, "delete_queue", queue, timeout=30)

    def set_memory_high_watermark(self, node: str, fraction: float) -> None:
        """0 blocks every publisher on the node (the RabbitMQ reliability article's way to let
        queues drain)."""
        self.rabbitmqctl(node, "set_vm_memory_high_watermark", str(fraction), timeout=30)

    def server_version(self) -> str:
        out = self.rabbitmqctl("rabbit1", "version").strip()
        return out.splitlines()[-1] if out else "unknown"

    def image_info(self) -> dict[str, str]:
        image = self.docker.images.get(self.image)
        return {"name": self.image, "id": image.id}
