"""The upgrade steps on a real RabbitMQ 4.0 cluster (nightly): a node recreated on the same
release finds its data (a classic queue's messages live on its node alone), its new container
is the one the nemesis aims at, and the node's saved log holds both containers'; then khepri_db
enabled on the running cluster moves every node's metadata store to Khepri, the queues kept.

Needs a Docker engine and the local 4.0 image (make setup builds it)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pika
import pytest

from compose.cli import ComposeError
from contract.history import HistoryWriter
from nemesis.containers import Nemesis
from systems.rabbitmq.cluster import LOCAL_IMAGE, ClusterConfig, RabbitMQCluster, choose_image
from systems.rabbitmq.scenario import NemesisStep
from systems.rabbitmq.upgrade import finalize_feature, upgrade
from tests.conftest import missing
from tests.helpers import history_events

pytestmark = [pytest.mark.cluster, pytest.mark.nightly]
NODES = ("rabbit1", "rabbit2", "rabbit3")
KEPT = "kept.on.rabbit1"  # a classic queue: its messages are on rabbit1's disk alone
QUORUM = "quorum.q"
BEFORE_KHEPRI = "declared.on.mnesia"
MESSAGES = 50


@pytest.fixture(scope="module")
def cluster(
    docker_client: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RabbitMQCluster]:
    try:
        choose_image(None, docker_client, "4.0")
    except ComposeError as e:
        missing(str(e))
    c = RabbitMQCluster(
        ClusterConfig(
            partition_handling="pause_minority", net_ticktime=4, version="4.0", upgrades=("4.0",)
        ),
        workdir=tmp_path_factory.mktemp("upgrade-cluster"),
        project=f"pytest-upgrade-{os.getpid()}-{int(time.time())}",
    )
    try:
        c.up(timeout=240)
        yield c
    finally:
        c.down()


@pytest.fixture
def nemesis(cluster: RabbitMQCluster, tmp_path: Path) -> Nemesis:
    history = HistoryWriter(tmp_path / "history", "nemesis", "rabbitmq")
    return Nemesis(cluster.topology(), LOCAL_IMAGE, history)


def publish_confirmed(
    cluster: RabbitMQCluster, node: str, queue: str, arguments: dict[str, Any]
) -> None:
    """MESSAGES persistent messages into `queue` (declared through `node`), each confirmed."""
    endpoint = next(e for e in cluster.endpoints() if e.node == node)
    conn = pika.BlockingConnection(pika.ConnectionParameters(endpoint.host, endpoint.port))
    try:
        channel = conn.channel()
        channel.queue_declare(queue, durable=True, arguments=arguments)
        channel.confirm_delivery()
        for i in range(MESSAGES):
            props = pika.BasicProperties(delivery_mode=2)
            channel.basic_publish("", queue, f"m{i}".encode(), props, mandatory=True)
    finally:
        conn.close()


def test_a_node_recreated_on_its_release_finds_its_data(
    cluster: RabbitMQCluster, nemesis: Nemesis, tmp_path: Path
) -> None:
    publish_confirmed(cluster, "rabbit1", KEPT, {"x-queue-type": "classic"})
    publish_confirmed(cluster, "rabbit2", QUORUM, {"x-queue-type": "quorum"})
    before = cluster.containers()["rabbit1"].id
    step = NemesisStep.model_validate(
        {"at": 1, "op": "upgrade", "target": "rabbit1", "release": "4.0", "within": 180}
    )
    upgrade(nemesis, cluster, step)
    events = history_events(tmp_path / "history", "nemesis")
    ok = next(e["value"] for e in events if (e["type"], e["f"]) == ("ok", "upgrade"))
    assert ok["from"] == ok["to"] == cluster.node_release("rabbit1")
    assert ok["booted"] and ok["back"] and ok["in_sync"], ok
    assert ok["queues"] == [QUORUM]
    after = cluster.containers()["rabbit1"].id
    assert after != before and nemesis.topology.node("rabbit1").container == after
    depths = cluster.queue_depths()
    assert depths[KEPT]["messages"] == MESSAGES and depths[QUORUM]["messages"] == MESSAGES
    cluster.save_logs(tmp_path / "logs")
    log = (tmp_path / "logs" / "rabbit1.log").read_text(errors="replace")
    assert "a retired container's log" in log and "its last container's log" in log


def test_khepri_db_moves_every_nodes_metadata_store_to_khepri(
    cluster: RabbitMQCluster, nemesis: Nemesis, tmp_path: Path
) -> None:
    publish_confirmed(cluster, "rabbit3", BEFORE_KHEPRI, {"x-queue-type": "classic"})
    step = NemesisStep.model_validate({"at": 1, "op": "finalize-feature", "feature": "khepri_db"})
    finalize_feature(nemesis, cluster, step)
    events = history_events(tmp_path / "history", "nemesis")
    ok = next(e["value"] for e in events if (e["type"], e["f"]) == ("ok", "finalize-feature"))
    assert ok["opted_in"] is True and ok["flags"]["khepri_db"] == "enabled"
    assert ok["metadata_store"] == dict.fromkeys(NODES, "khepri")
    # The topology went over with it: the queue (and what it holds) is still there.
    assert cluster.queue_depths()[BEFORE_KHEPRI]["messages"] == MESSAGES
