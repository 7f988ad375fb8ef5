"""What every cluster under Docker Compose shares: its project, containers, topology, logs."""

from __future__ import annotations

import re
import socket
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import docker
import docker.errors

from compose.cli import ComposeError
from compose.clocks import LIBRARY
from compose.subnet import SUBNET_TAKEN, free_net_prefix
from contract.topology import NodeHandle, Topology

PROJECT_PREFIX = "brokerjepsen-"  # every project we start; `harness heal` looks for it
SUBNET_ATTEMPTS = 3


def free_ports(count: int) -> list[int]:
    """Ports free on 127.0.0.1 now: a node keeps its published port across restarts (Docker
    gives an ephemeral one anew at each start), and Kafka advertises it up front."""
    socks, ports = [], []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


# Where a cluster keeps the logs of containers it replaced (under its workdir): Docker's logs go
# with a container, and an upgrade recreates a node's container on another image.
RETIRED_LOGS = "retired-logs"


# Seconds a node gets to stop when the cluster is removed: none. The run is over and the nodes'
# logs and data files were copied out before; nothing a graceful stop writes is read, and a stop
# that waits (Kafka's controlled shutdown moves leaders) costs every run seconds of CPU.
STOP_GRACE = "0"


class ComposeCluster:
    def __init__(
        self,
        workdir: Path,
        project: str,
        net_prefix: str | None = None,
        client: docker.DockerClient | None = None,
    ) -> None:
        """`net_prefix`: the cluster network's /24 (three octets); None: a free one."""
        self.workdir = workdir
        self.project = project if project.startswith(PROJECT_PREFIX) else PROJECT_PREFIX + project
        self.docker = client or docker.from_env()
        self._net_given = net_prefix is not None
        self.net_prefix = net_prefix or free_net_prefix(self.docker)

    def start_on_free_subnet(self, start: Callable[[], None]) -> None:
        """Runs `start` (compose up); when another process took the chosen subnet in between,
        chooses another and starts again. A subnet the user gave is theirs: no other is tried."""
        tried: set[str] = set()
        for attempt in range(1, SUBNET_ATTEMPTS + 1):
            try:
                start()
                return
            except ComposeError as e:
                if SUBNET_TAKEN not in str(e):
                    raise
                if self._net_given:
                    raise ComposeError(
                        f"the cluster network {self.net_prefix}.0/24 overlaps a Docker network "
                        "that exists already: give another prefix, or none to have one chosen"
                    ) from None
                if attempt == SUBNET_ATTEMPTS:
                    raise
                tried.add(self.net_prefix)
                self.net_prefix = free_net_prefix(self.docker, avoid=frozenset(tried))

    def containers(self) -> dict[str, Any]:
        """The project's containers by compose service name."""
        found = self.docker.containers.list(
            all=True, filters={"label": f"com.docker.compose.project={self.project}"}
        )
        return {c.labels.get("com.docker.compose.service"): c for c in found}

    def run_in(self, node: str, argv: list[str], what: str, timeout: float, line: int = -1) -> str:
        """`docker exec` in a node; a failure is one ComposeError line naming `what`, with the
        error output's line `line` (its first or its last)."""
        container = self.containers()[node]
        try:
            result = subprocess.run(
                ["docker", "exec", container.id, *argv],
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            raise ComposeError(f"{what} on {node} timed out") from None
        if result.returncode != 0:
            # A line that only says "Error:" (rabbitmqctl's first) names nothing: the next does.
            text = (result.stderr or result.stdout).strip().splitlines()
            lines = [ln for ln in text if ln.strip() and ln.strip() != "Error:"]
            raise ComposeError(f"{what} on {node}: {lines[line] if lines else '?'}")
        return result.stdout

    # What a fake clock needs in a node's container, and how to get it when it is missing: the
    # loader only warns of a library it cannot preload, and the node would then run on true
    # time through every clock step.
    fake_clock_needs: tuple[str, str] = (
        LIBRARY,
        "images built before clock faults lack it: "
        "FORCE=1 bash compose/images/build_local_images.sh",
    )

    def check_fake_clocks(self, nodes: Iterable[str]) -> None:
        """That each node's container has what its fake clock runs on (fake_clock_needs)."""
        path, remedy = self.fake_clock_needs
        for node in nodes:
            try:
                self.run_in(node, ["test", "-e", path], "fake clock", timeout=30)
            except ComposeError:
                raise ComposeError(f"cluster.fake_clock: {node} has no {path} ({remedy})") from None

    def topology_of(self, names: Iterable[str]) -> Topology:
        """Where the named nodes are on the cluster network, and where clients come from."""
        containers = self.containers()
        handles, gateway = [], ""
        for name in names:
            c = containers[name]
            (net,) = c.attrs["NetworkSettings"]["Networks"].values()
            handles.append(NodeHandle(name, c.id, net["IPAddress"]))
            gateway = net["Gateway"] or gateway
        return Topology(tuple(handles), client_address=gateway)

    def retire_logs(self, node: str, tag: str) -> Path | None:
        """Keeps the logs of the node's container before the container is removed (recreated
        on another image), as `<node>.<n>.<tag>.log` in the workdir; `tag` says what it ran (a
        release). save_logs puts them before the node's last container's log, oldest first.
        None: the node has no container."""
        container = self.containers().get(node)
        if container is None:
            return None
        folder = self.workdir / RETIRED_LOGS
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{node}.{len(self.retired_logs(node)):03d}.{_file_word(tag)}.log"
        path.write_bytes(container.logs(timestamps=True))
        return path

    def retired_logs(self, node: str) -> list[Path]:
        """The node's retired logs, oldest first."""
        return sorted((self.workdir / RETIRED_LOGS).glob(f"{node}.[0-9][0-9][0-9].*.log"))

    def save_logs(self, dest: Path) -> None:
        """Each node's log: its retired containers' logs, oldest first, each under a line naming
        what it ran, then its container's."""
        dest.mkdir(parents=True, exist_ok=True)
        for name, c in self.containers().items():
            try:
                current = c.logs(timestamps=True)
            except docker.errors.APIError:
                continue
            (dest / f"{name}.log").write_bytes(self._retired_part(name) + current)

    def _retired_part(self, node: str) -> bytes:
        parts = []
        for path in self.retired_logs(node):
            tag = path.name.split(".", 2)[2].removesuffix(".log")
            parts.append(f"=== {node}: a retired container's log ({tag}) ===\n".encode())
            parts.append(path.read_bytes())
        if parts:
            parts.append(f"=== {node}: its last container's log ===\n".encode())
        return b"".join(parts)


def _file_word(tag: str) -> str:
    """A tag as part of a file name: letters, digits, dots and dashes."""
    return re.sub(r"[^A-Za-z0-9.-]+", "-", tag).strip("-") or "unknown"
