"""Membership faults on real RabbitMQ (the nightly tier): forget-leader-rabbitmq takes the
quorum queue leader's node out of the cluster while a publisher with confirms goes on, adds it
back and grows its member again. The node is forgotten only once its RabbitMQ is stopped, the
forget also removes its queue member, adding it back leaves the queue short until the grow,
the run ends whole, and nothing confirmed is lost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import history_events, run_harness

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.e2e]

QUEUE = "jepsen.primary"


def test_the_forgotten_leaders_node_comes_back_and_nothing_confirmed_is_lost(
    docker_client: Any, rabbitmq_image: str, tmp_path: Path
) -> None:
    result, run_dir = run_harness("forget-leader-rabbitmq", tmp_path)
    assert result.returncode in (0, 1), result.stderr[-3000:]
    nemesis = history_events(run_dir / "history", "nemesis")

    def ok(f: str) -> dict[str, Any]:
        return next(e for e in nemesis if e["f"] == f and e["type"] == "ok")

    resolve = next(e for e in nemesis if e["f"] == "resolve" and e["value"]["op"] == "forget-node")
    (leader,) = resolve["value"]["nodes"]["target"]
    forget, add, grow = ok("forget-node"), ok("add-node"), ok("grow-queue")
    assert forget["value"]["nodes"] == [leader] and forget["value"]["via"] != leader
    # forget_cluster_node removed its member of the queue; add-node put the node back alone.
    assert forget["value"]["out"] == [leader, f"{QUEUE}@{leader}"]
    assert add["value"]["out"] == [f"{QUEUE}@{leader}"]
    assert grow["value"]["added"] == {QUEUE: [leader]} and grow["value"]["out"] == []
    assert not [e for e in nemesis if e["f"] == "membership"]  # nothing left to restore
    failed = [e for e in nemesis if e["type"] == "fail"]
    assert not failed, failed
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["cluster_recovered"] is True
    verdict = json.loads((run_dir / "verdict.json").read_text())
    situations = verdict["coverage"]["situations"]
    assert situations.get("membership-changed") == 1 and situations.get("leader-faulted") == 1
    assert verdict["matched"] == (result.returncode == 0)
