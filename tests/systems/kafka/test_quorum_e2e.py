"""The KRaft controller quorum's ops on a real cluster, end to end (the nightly tier): a spare
controller added under load, and the active controller removed and added back, each on Kafka
4.4 with a dynamic quorum; the history says what Kafka's tool said and the voters before and
after, the coverage counts the quorum's changes, and nothing acknowledged is lost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import history_events, run_harness
from tests.systems.kafka.test_real_cluster import kafka_image_or_missing

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.e2e]
FIRST = ["controller1", "controller2", "controller3"]


def _ok(nemesis: list[dict[str, Any]], f: str) -> list[dict[str, Any]]:
    return [e["value"] for e in nemesis if e["f"] == f and e["type"] == "ok"]


def _verdict(run_dir: Path) -> dict[str, Any]:
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["cluster_recovered"] is True
    assert manifest["kafka_features"].get("kraft.version") == "1"
    assert manifest["topology"]["controller_quorum"] == "dynamic"
    return dict(json.loads((run_dir / "verdict.json").read_text()))


def test_a_spare_controller_joins_the_voters_under_load_and_nothing_is_lost(
    docker_client: Any, tmp_path: Path
) -> None:
    kafka_image_or_missing(docker_client, "kraft-dedicated", "4.4")
    result, run_dir = run_harness("add-controller-under-load", tmp_path, "--kafka", "4.4")
    assert result.returncode in (0, 1), result.stderr
    (added,) = _ok(history_events(run_dir / "history", "nemesis"), "add-controller")
    assert added["nodes"] == ["controller4"] and added["settled"] is True
    assert added["voters_before"] == FIRST and added["voters_after"] == [*FIRST, "controller4"]
    assert added["said"].startswith("Added controller 104 with directory id")
    assert all(added["directory_ids"].values())  # kraft.version 1: every voter has one
    verdict = _verdict(run_dir)
    assert verdict["coverage"]["situations"].get("quorum-changed") == 1
    assert verdict["matched"] is True and result.returncode == 0, verdict


def test_the_active_controller_removed_and_added_back_under_load_loses_nothing(
    docker_client: Any, tmp_path: Path
) -> None:
    kafka_image_or_missing(docker_client, "kraft-dedicated", "4.4")
    result, run_dir = run_harness("remove-active-controller", tmp_path, "--kafka", "4.4")
    assert result.returncode in (0, 1), result.stderr
    nemesis = history_events(run_dir / "history", "nemesis")
    (removed,) = _ok(nemesis, "remove-controller")
    (gone,) = removed["nodes"]
    assert removed["order"] == "removed, then stopped"  # 4.4 has pre-vote (KIP-996)
    assert removed["leader_before"] == gone != removed["leader_after"]  # it resigned
    assert removed["voters_after"] == sorted(set(FIRST) - {gone})
    assert removed["said"].startswith("Removed KRaft controller")
    (back,) = _ok(nemesis, "add-controller")
    assert back["nodes"] == [gone] and back["voters_after"] == FIRST and back["out"] == []
    # The same directory: the controller came back with its own data.
    assert back["directory_ids"][gone] == removed["directory_ids"][gone]
    verdict = _verdict(run_dir)
    situations = verdict["coverage"]["situations"]
    assert situations.get("quorum-changed") == 2 and situations.get("controller-faulted") == 1
    assert verdict["matched"] is True and result.returncode == 0, verdict
