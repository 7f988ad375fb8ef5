"""Share groups (KIP-932) end to end on a real Kafka 4.4 cluster (the nightly tier): the claims
rows S1-S4 on each client, and what the share consumers wrote against the history contract
(contract.history: share-acquire, share-ack), whatever Kafka did. Kafka's behaviour is the
checker's and the claims matrix's to judge; here, the clients' side of the contract: every
acknowledgement asked after its record was acquired, each answered at most once, each
completion repeating its record and outcome, the group configured as the scenario says."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT, history_events
from tests.systems.kafka.test_real_cluster import kafka_image_or_missing

pytestmark = [pytest.mark.cluster, pytest.mark.e2e, pytest.mark.spark]

SCENARIOS = [f"S{i}{client}" for i in range(1, 5) for client in ("", "-java")]


def _run(scenario: str, results: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    command = [".venv/bin/harness", "run", f"scenarios/{scenario}.yaml", "--kafka", "4.4"]
    result = subprocess.run(
        [*command, "--results", str(results)],
        capture_output=True,
        text=True,
        timeout=1500,
        cwd=ROOT,
    )
    return result, (results / "latest").resolve()


def _consumers(run_dir: Path, manifest: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    (share,) = manifest["share_groups"].values()
    return {p: history_events(run_dir / "history", p) for p in share["consumers"]}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_share_consumers_write_the_whole_contract(
    scenario: str, docker_client: Any, spark: object, tmp_path: Path
) -> None:
    kafka_image_or_missing(docker_client, "kraft", "4.4")
    result, run_dir = _run(scenario, tmp_path)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["error"] is None, result.stderr[-3000:]
    share = manifest["share_groups"]["share"]
    assert share["config"]["share.record.lock.duration.ms"] == "15000"
    # Asked and applied apart: the checker judges by the applied (lock_duration_ms).
    assert share["requested"]["lock_duration_ms"] == share["lock_duration_ms"] == 15000
    assert share["config"]["share.auto.offset.reset"] == "earliest"
    client = "java" if scenario.endswith("-java") else "python"
    for process, evs in _consumers(run_dir, manifest).items():
        held: set[tuple[int, int]] = set()
        asked: Counter[tuple[int, int]] = Counter()
        answered: Counter[tuple[int, int]] = Counter()
        for e in evs:
            key = (e["partition"], e["offset"])
            if e["f"] == "share-acquire":
                assert e["type"] == "ok" and e["value"]["client"] == client, e
                assert e["group"] == "share" and e["msg_id"], e
                held.add(key)
            elif e["f"] == "share-ack" and e["type"] == "invoke":
                assert key in held, f"{process}: acknowledged before acquired: {e}"
                assert e["value"]["outcome"] in ("accept", "release", "reject"), e
                asked[key] += 1
            elif e["f"] == "share-ack":
                answered[key] += 1
                assert answered[key] <= asked[key], f"{process}: answered twice: {e}"
                assert e["type"] in ("ok", "fail", "info") and e["msg_id"], e
        assert sum(asked.values()) > 0, f"{process} acknowledged nothing"
    if scenario.startswith("S3"):
        watch = history_events(run_dir / "history", "partition-watch")
        roles = {e["value"]["role"] for e in watch if e["f"] == "coordinator-state"}
        assert "share-coordinator" in roles
    if scenario.startswith("S4"):
        # A lock expired in a paused consumer: its records delivered again, its late
        # acknowledgements refused.
        evs = [e for es in _consumers(run_dir, manifest).values() for e in es]
        assert any(
            e["f"] == "share-acquire" and (e["value"]["delivery_count"] or 0) >= 2 for e in evs
        )
        assert any(e["f"] == "share-ack" and e["type"] == "fail" for e in evs)
