"""Against a real five-node RabbitMQ 4.3 cluster, the RabbitMQ team's Jepsen shape: it forms, a
quorum queue of three members on five nodes has its leader, followers and non-members told
apart, and a majorities ring leaves each node its two ring neighbours and no other."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from compose.cli import ComposeError
from contract.history import HistoryWriter
from contract.wait import wait_until
from nemesis.containers import Nemesis
from nemesis.picks import draw_groups, neighbours
from systems.rabbitmq.cluster import NODE_NAMES, RabbitMQCluster, choose_image
from systems.rabbitmq.nemesis import StepTargets
from systems.rabbitmq.scenario import NemesisStep
from tests.conftest import missing
from tests.systems.rabbitmq.clusters import running_cluster
from tests.systems.rabbitmq.test_cluster import tcp_reachable
from workloads.rabbitmq.topology import declare_topology

# Five Erlang VMs booting on two cores: over the fast tier's 90 s a test.
pytestmark = [pytest.mark.cluster, pytest.mark.nightly]
NODES = NODE_NAMES[:5]


@pytest.fixture(scope="module")
def cluster(
    docker_client: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RabbitMQCluster]:
    try:
        image = choose_image(None, docker_client, "4.3")
    except ComposeError as e:
        missing(str(e))
        raise
    with running_cluster(image, tmp_path_factory.mktemp("cluster5"), NODES, timeout=300) as c:
        yield c


def test_five_nodes_form_and_a_queue_of_three_members_has_two_non_members(
    cluster: RabbitMQCluster,
) -> None:
    everyone = {f"rabbit@{n}" for n in NODES}
    assert all(set(cluster.running_nodes(n)) == everyone for n in NODES)
    declare_topology(
        cluster.endpoints(),
        "five.x",
        ["five.q"],
        "quorum",
        {"five.q": {"x-quorum-initial-group-size": 3}},
    )
    leader, members = cluster.queue_leader("five.q")
    assert len(members) == 3 and leader in members
    targets = StepTargets("five.q", nodes=list(NODES))
    net = SimpleNamespace(history=None)

    def resolved(role: str) -> list[str]:
        step = NemesisStep.model_validate({"at": 1, "op": "kill", "nodes": [role]})
        return targets.resolve(net, cluster, step).nodes  # type: ignore[arg-type]

    assert resolved("leader") == [leader]
    assert sorted(resolved("followers")) == sorted(m for m in members if m != leader)
    assert sorted(resolved("non-members")) == sorted(set(NODES) - set(members))


def test_a_majorities_ring_leaves_each_node_its_ring_neighbours(
    cluster: RabbitMQCluster, tmp_path: Path
) -> None:
    from systems.rabbitmq.cluster import LOCAL_IMAGE

    ring = draw_groups("majorities-ring", list(NODES), random.Random(11))
    nemesis = Nemesis(
        cluster.topology(), LOCAL_IMAGE, HistoryWriter(tmp_path / "history", "nemesis", "rabbitmq")
    )
    try:
        nemesis.partition(ring)
        for node in NODES:
            sees = neighbours(ring, node) - {node}
            assert len(sees) == 2
            for other in NODES:
                if other != node:
                    assert tcp_reachable(cluster, node, other) == (other in sees), (node, other)
    finally:
        nemesis.heal_all()
    everyone = {f"rabbit@{n}" for n in NODES}
    assert wait_until(lambda: _running(cluster, NODES[0]) == everyone, 180, interval=2), (
        "the cluster did not reunite"
    )


def _running(cluster: RabbitMQCluster, node: str) -> set[str]:
    try:
        return set(cluster.running_nodes(node))
    except ComposeError:
        return set()
