"""A real ZooKeeper-mode Kafka 3.9 cluster migrated to KRaft, phase by phase, with no workload:
each phase's nodes come back and say what Kafka's guide says they say, and at the end the
metadata quorum is the controllers' (`kafka-metadata-quorum describe --status`) and every broker
is a KRaft broker registered with it (an observer of the quorum, its server a KRaft one), its
replicas in sync. Minutes of containers recreated one at a time: the nightly tier's."""

from __future__ import annotations

import os
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from compose.cli import ComposeError
from contract.wait import wait_until
from nemesis.containers import Nemesis
from systems.kafka.admin import KafkaAdmin
from systems.kafka.cluster import (
    INTERNAL_PORT,
    KafkaCluster,
    KafkaUnavailable,
    choose_kafka_image,
    choose_zookeeper_image,
    replication_row,
)
from systems.kafka.config import KafkaClusterConfig
from systems.kafka.migration import NODE_SIGNALS, PHASES
from systems.kafka.nemesis import KafkaNemesis
from systems.rabbitmq.cluster import LOCAL_IMAGE as TOOLS_IMAGE
from tests.conftest import missing

pytestmark = [pytest.mark.cluster, pytest.mark.nightly]
BROKERS = {1: "kafka1", 2: "kafka2", 3: "kafka3"}
CONTROLLERS = {101: "controller1", 102: "controller2", 103: "controller3"}


class Events:
    """The nemesis's history, kept in memory."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []

    def write(self, type: str, f: str, **fields: Any) -> dict[str, Any]:
        self.events.append((type, f, fields.get("value") or {}))
        return fields

    def oks(self, phase: str) -> list[dict[str, Any]]:
        return [
            v for t, f, v in self.events if t == "ok" and f == "migrate" and v["phase"] == phase
        ]


def images_or_missing(docker_client: Any) -> None:
    try:
        choose_kafka_image(None, "zk", docker_client, "3.9")
        choose_zookeeper_image(None, docker_client)
    except KafkaUnavailable as e:
        missing(f"a ZooKeeper-to-KRaft migration not run: {e}")


def voter_ids(status: str) -> set[int]:
    """The voters `describe --status` lists: 3.9 writes each as {"id": 101, "directoryId": ...,
    "endpoints": [...]}, releases before it a bare list of ids."""
    line = next((ln for ln in status.splitlines() if ln.startswith("CurrentVoters:")), "")
    if '"id"' in line:
        return {int(i) for i in re.findall(r'"id":\s*(\d+)', line)}
    return {int(i) for i in re.findall(r"\d+", line)}


def quorum_tool(cluster: KafkaCluster, via: str, what: str) -> str:
    return cluster.exec(
        via,
        f"kafka-metadata-quorum.sh --bootstrap-server localhost:{INTERNAL_PORT} describe {what}",
        timeout=60,
    )


def test_a_zookeeper_cluster_migrates_to_kraft_phase_by_phase(
    docker_client: Any, tmp_path: Path
) -> None:
    images_or_missing(docker_client)
    cfg = KafkaClusterConfig(mode="zk", kafka_line="3.9", migration_controllers=3)
    cluster = KafkaCluster(cfg, tmp_path / "cluster", f"migrate-{os.getpid()}")
    admin = KafkaAdmin(cluster, "migrated")
    events = Events()
    try:
        cluster.up(240, lambda: admin.registered_brokers() >= set(BROKERS))
        admin.create_topic(1, 3, None, {"min.insync.replicas": "2"}, 60)
        assert wait_until(admin.fully_in_sync, 60, interval=1)
        net = Nemesis(cluster.topology(), TOOLS_IMAGE, history=events)  # type: ignore[arg-type]
        kafka = KafkaNemesis(net, admin, "migrated", 1, migrations=cluster)
        for phase in PHASES:
            step = SimpleNamespace(op="migrate", phase=phase, within=180)
            kafka.apply(step)
            oks = events.oks(phase)
            assert len(oks) == 3, (phase, events.events[-6:])
            waited = [o for o in oks if o["in_sync"] is not None]
            assert waited and all(o["in_sync"] for o in waited), (phase, oks)
            assert all(o.get("signal", "") is not None for o in oks), (phase, oks)
            assert oks[-1].get("phase_signal", "") is not None, (phase, oks[-1])
        # The metadata quorum is the controllers', and it leads.
        status = quorum_tool(cluster, "kafka1", "--status")
        leader = re.search(r"LeaderId:\s*(\d+)", status)
        assert leader and int(leader.group(1)) in CONTROLLERS, status
        assert voter_ids(status) == set(CONTROLLERS), status
        # Every broker is a KRaft broker registered with it: an observer of the metadata log,
        # whose server is KRaft's (BrokerServer), with no ZooKeeper in its configuration.
        replication = quorum_tool(cluster, "kafka2", "--replication")
        for broker, name in BROKERS.items():
            row = replication_row(replication, broker)
            assert row is not None and row.get("Status") == "Observer", replication
            assert cluster.logged_line([name], NODE_SIGNALS["kraft"], 0), name
            env = cluster.exec(name, "cat /opt/kafka/config/brokerjepsen.properties")
            assert "process.roles=broker" in env and "zookeeper.connect" not in env, env
        for name in CONTROLLERS.values():
            props = cluster.exec(name, "cat /opt/kafka/config/brokerjepsen.properties")
            assert "zookeeper" not in props, props
        assert cluster.kraft_brokers and cluster.quorum == tuple(CONTROLLERS.values())
        assert admin.registered_brokers() == set(BROKERS)
        assert wait_until(admin.fully_in_sync, 90, interval=1)
    except ComposeError as e:
        pytest.fail(f"{e} (logs: {tmp_path / 'logs'})")
    finally:
        cluster.save_logs(tmp_path / "logs")
        cluster.down()
