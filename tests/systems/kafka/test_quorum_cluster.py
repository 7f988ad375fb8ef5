"""A real KRaft cluster formed with a dynamic controller quorum (KIP-853) on Kafka 4.4, dedicated
controllers and a spare: it forms with kraft.version 1 and the directory ids the harness drew
for its first voters, an add-controller makes the spare a fourth voter, and a remove-controller
takes the active controller out of the voters (it resigns) and stops it, as Kafka's own
`kafka-metadata-quorum describe --status` says."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from contract.history import HistoryWriter
from nemesis.containers import Nemesis
from systems.kafka.admin import KafkaAdmin
from systems.kafka.cluster import DATA_DIR, KafkaCluster
from systems.kafka.config import KafkaClusterConfig
from systems.kafka.nemesis import KafkaNemesis
from systems.kafka.quorum import parse_status
from systems.kafka.run import KafkaRun
from systems.kafka.scenario import KafkaStep
from systems.rabbitmq.cluster import LOCAL_IMAGE as TOOLS_IMAGE
from tests.helpers import history_events
from tests.systems.kafka.test_real_cluster import kafka_image_or_missing

pytestmark = pytest.mark.cluster


def _voters(cluster: KafkaCluster, via: str) -> dict[int, str | None]:
    """Each voter's node id and directory id, as describe --status lists them."""
    run = cluster.describe_quorum(via, list(cluster.voters))
    assert run.ok, run.said
    return {v.node_id: v.directory_id for v in parse_status(run.out).voters}


def _directory_id(cluster: KafkaCluster, node: str) -> str:
    meta = cluster.exec(node, f"cat {DATA_DIR}/meta.properties", timeout=30)
    return dict(ln.split("=", 1) for ln in meta.splitlines() if "=" in ln)["directory.id"]


def test_a_dynamic_quorum_forms_grows_by_a_spare_and_loses_its_active_controller(
    docker_client: Any, tmp_path: Path
) -> None:
    kafka_image_or_missing(docker_client, "kraft-dedicated", "4.4")
    cfg = KafkaClusterConfig(
        mode="kraft-dedicated", kafka_line="4.4", controller_quorum="dynamic", spare_controllers=1
    )
    cluster = KafkaCluster(cfg, tmp_path / "cluster", f"quorum-44-{os.getpid()}")
    admin = KafkaAdmin(cluster, "quorum")
    try:
        cluster.up(240, lambda: admin.registered_brokers() >= set(cluster.node_of))
        # Formatted as a dynamic quorum: kraft.version 1, each first voter with the directory
        # id the harness chose for it (a static quorum's voters have none).
        assert cluster.feature_levels().get("kraft.version") == "1"
        drawn = cluster.directory_ids
        first = {n.node_id: drawn[n.name] for n in cluster.nodes if n.name in drawn}
        assert sorted(first) == [101, 102, 103]
        assert _voters(cluster, "controller1") == first
        admin.create_topic(1, 3, None, {}, 60)
        history = HistoryWriter(tmp_path / "history", "nemesis", "kafka")
        net = Nemesis(cluster.topology(), TOOLS_IMAGE, history)
        kafka = KafkaNemesis(net, admin, "quorum", 1, quorum=KafkaRun._quorum(cluster))

        kafka.apply(KafkaStep(at=0, op="add-controller", within=120))
        assert cluster.voters == ["controller1", "controller2", "controller3", "controller4"]
        four = _voters(cluster, "controller1")
        assert four[104] == _directory_id(cluster, "controller4")  # its own, drawn at format
        assert set(four) == {101, 102, 103, 104}

        leader = admin.metadata(need_controller=True).controller
        kafka.apply(KafkaStep(at=0, op="remove-controller", target="controller", within=90))
        gone = next(n.name for n in cluster.nodes if n.node_id == leader)
        assert gone not in cluster.voters and len(cluster.voters) == 3
        left = _voters(cluster, cluster.voters[0])
        assert leader not in left and len(left) == 3
        assert cluster.containers()[gone].status == "exited"
        assert gone not in cluster.topology().names  # out of the nemesis's reach
        history.close()
        events = history_events(tmp_path / "history", "nemesis")
        (added,) = [e["value"] for e in events if e["f"] == "add-controller" and e["type"] == "ok"]
        assert added["said"].startswith("Added controller 104") and added["settled"] is True
        (removed,) = [
            e["value"] for e in events if e["f"] == "remove-controller" and e["type"] == "ok"
        ]
        assert removed["order"] == "removed, then stopped"  # 4.4 has pre-vote
        assert removed["leader_before"] == gone != removed["leader_after"]
        assert gone in removed["voters_before"] and gone not in removed["voters_after"]
    finally:
        cluster.save_logs(tmp_path / "logs")
        cluster.down()
