"""Kafka's membership ops on a real cluster (the nightly tier): reassign-under-load moves every
partition to another replica set under a throttle while an acks=all producer writes, the
history says what moved where and that the moves completed, the heal clears the throttle, and
nothing acknowledged is lost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import history_events, run_harness
from tests.systems.kafka.test_real_cluster import kafka_image_or_missing

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.e2e]


def test_a_throttled_reassignment_under_load_moves_every_partition_and_loses_nothing(
    docker_client: Any, tmp_path: Path
) -> None:
    kafka_image_or_missing(docker_client, "kraft-dedicated", "4.4")
    result, run_dir = run_harness("reassign-under-load", tmp_path, "--kafka", "4.4")
    assert result.returncode in (0, 1), result.stderr
    nemesis = history_events(run_dir / "history", "nemesis")
    (moved,) = [e for e in nemesis if e["f"] == "reassign" and e["type"] == "ok"]
    value = moved["value"]
    assert value["throttle"] == 1_000_000 and value["settled"] is False  # throttled till heal
    assert sorted(value["moved"]) == ["jepsen/0", "jepsen/1", "jepsen/2"]
    # Four brokers, three replicas: each partition gained a broker it did not have.
    assert all(set(m["to"]) - set(m["from"]) for m in value["moved"].values())
    assert value["completed"] is True, value  # 60 s is ample for 10 s of writes at 1 MB/s
    (ended,) = [e for e in nemesis if e["f"] == "end-reassign" and e["type"] == "ok"]
    assert ended["value"]["topics"] == ["jepsen"] and len(ended["value"]["brokers"]) == 4
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["cluster_recovered"] is True
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["coverage"]["situations"].get("reassigned") == 1
    assert verdict["matched"] is True and result.returncode == 0, verdict
