"""`harness heal`: undo what a killed run left behind."""

from __future__ import annotations

from collections.abc import Callable

import docker
import docker.errors

from compose.cli import ComposeError, compose
from compose.cluster import PROJECT_PREFIX
from compose.disks import leftover_mounts, unmount
from harness.orphans import (
    STOP_TIMEOUT,
    CheckerJvm,
    Client,
    orphan_checker_jvms,
    orphan_clients,
    stop,
)
from nemesis.containers import HELPER_LABEL, clean_container
from systems.rabbitmq.cluster import COMPOSE_FILE, LOCAL_IMAGE


def heal_everything(
    tools_image: str = LOCAL_IMAGE,
    remove: bool = True,
    say: Callable[[str], None] = print,
    only_project: str | None = None,
) -> int:
    """Heals every node of every brokerjepsen cluster (RabbitMQ or Kafka), then removes them;
    with `only_project`, of that compose project alone.

    The clients and checker JVMs of runs whose harness is gone are stopped first, so that
    nothing writes into a dead run's history. Returns the number of clusters found. Idempotent.
    """
    stop_orphans(say)
    client = docker.from_env()
    containers = client.containers.list(all=True, filters={"label": "org.brokerjepsen.role"})
    projects: set[str] = set()
    for c in containers:
        project = c.labels.get("com.docker.compose.project", "")
        if not project.startswith(PROJECT_PREFIX) or only_project not in (None, project):
            continue
        projects.add(project)
        try:
            clean_container(client, c, tools_image)
            say(f"healed {c.name}")
        except docker.errors.DockerException as e:
            say(f"could not heal {c.name}: {e}")
    if remove:
        projects |= _projects_of_volumes(client, only_project)
        for project in sorted(projects):
            # Any project's containers are orphans of this file: --remove-orphans takes them.
            compose(
                COMPOSE_FILE,
                ["down", "-v", "--remove-orphans", "-t", "5"],
                {"BJ_PROJECT": project, "COMPOSE_PROFILES": "lb"},
                timeout=180,
            )
            # A Kafka cluster's network has another name than the RabbitMQ file's.
            label = f"com.docker.compose.project={project}"
            for net in client.networks.list(filters={"label": label}):
                net.remove()
            # Its nodes' data volumes (kept across an upgrade's recreations) are declared in a
            # compose file of the run's own, which this down did not read.
            for volume in client.volumes.list(filters={"label": label}):
                volume.remove(force=True)
            say(f"removed {project}")
    for helper in client.containers.list(all=True, sparse=True, filters={"label": HELPER_LABEL}):
        helper.remove(force=True)
        say(f"removed nemesis helper container {helper.id[:12]}")
    for mountpoint in leftover_mounts():  # after the containers: nothing holds them now
        try:
            unmount(mountpoint)
            say(f"unmounted lazy disk {mountpoint}")
        except ComposeError as e:
            say(str(e))
    return len(projects)


def _projects_of_volumes(client: docker.DockerClient, only_project: str | None) -> set[str]:
    """The projects whose volumes outlived their containers (a run killed mid-teardown)."""
    found = set()
    for volume in client.volumes.list(filters={"label": "com.docker.compose.project"}):
        project = (volume.attrs.get("Labels") or {}).get("com.docker.compose.project", "")
        if project.startswith(PROJECT_PREFIX) and only_project in (None, project):
            found.add(project)
    return found


def stop_orphans(say: Callable[[str], None] = print, timeout: float = STOP_TIMEOUT) -> int:
    """Stops every client and checker JVM whose harness is gone; returns how many."""
    found: list[Client | CheckerJvm] = [*orphan_clients(), *orphan_checker_jvms()]
    for orphan in found:
        say(f"{orphan}: {stop(orphan.pid, timeout)}")
    return len(found)
