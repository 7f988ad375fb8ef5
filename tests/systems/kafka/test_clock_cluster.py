"""A fake clock on a real Kafka cluster (cluster.fake_clock): a clock step moves the time of day
inside the skewed node's container, and only there: not in another node's, not on the host
(whose clock the containers share and the harness must never set), and the broker runs on
through a jump ahead and one back. Without a Kafka image it skips with the reason, and fails in
CI."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from contract.wait import wait_until
from nemesis.containers import Nemesis
from systems.kafka.admin import KafkaAdmin
from systems.kafka.cluster import KafkaCluster
from systems.kafka.config import KafkaClusterConfig
from systems.rabbitmq.cluster import LOCAL_IMAGE as TOOLS_IMAGE
from tests.systems.kafka.test_real_cluster import kafka_image_or_missing

pytestmark = pytest.mark.cluster


def skew(cluster: KafkaCluster, node: str) -> float:
    """The node's time of day less the host's, in seconds (a docker exec takes well under one)."""
    inside = int(cluster.exec(node, "date +%s"))
    return inside - time.time()


def test_a_clock_step_moves_the_nodes_date_and_not_the_hosts(
    docker_client: Any, tmp_path: Path
) -> None:
    kafka_image_or_missing(docker_client, "kraft", "4.4")
    cfg = KafkaClusterConfig(mode="kraft", kafka_line="4.4", fake_clock=True)
    cluster = KafkaCluster(cfg, tmp_path / "cluster", f"clock-{os.getpid()}")
    admin = KafkaAdmin(cluster, "clock")
    assert cluster.clocks is not None
    try:
        cluster.up(240, lambda: admin.registered_brokers() >= set(cluster.node_of))
        net = Nemesis(cluster.topology(), TOOLS_IMAGE, clocks=cluster.clocks)
        assert abs(skew(cluster, "kafka1")) < 3  # started on true time
        host_wall, host_mono = time.time(), time.monotonic()

        net.clock(["kafka1"], 3600)
        assert 3596 < skew(cluster, "kafka1") < 3604
        assert abs(skew(cluster, "kafka2")) < 3  # another node's clock untouched
        net.clock(["kafka1"], -3600)  # from true time: two hours back in one jump
        assert -3604 < skew(cluster, "kafka1") < -3596
        # The host's clock kept pace with its monotonic clock: nothing set it.
        assert abs((time.time() - host_wall) - (time.monotonic() - host_mono)) < 1

        # The broker's JVM ran on through both jumps: still registered, still answering.
        assert cluster.containers()["kafka1"].status == "running"
        assert wait_until(lambda: 1 in admin.registered_brokers(), 60, interval=2)
        net.clock_ok()
        assert abs(skew(cluster, "kafka1")) < 3
        assert net.clock_skewed == set()
    finally:
        cluster.down()
