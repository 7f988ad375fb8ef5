"""Client faults on real Kafka (the nightly tier): T7's copiers killed -9 and restarted with
their transactional ids. Kafka's behaviour is measured by the claims matrix, not asserted here:
the harness's contract is — each kill and restart recorded with the process groups it hit, each
new instance a process of its own that took its copier's transactional id, the coverage saying
so, and the verdict following from its counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import history_events, run_harness
from tests.systems.kafka.test_real_cluster import kafka_image_or_missing

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.e2e]


def test_copiers_killed_and_restarted_keep_their_transactional_ids(
    docker_client: Any, tmp_path: Path
) -> None:
    kafka_image_or_missing(docker_client, "kraft", "4.4")
    result, run_dir = run_harness("T7", tmp_path, "--kafka", "4.4", timeout=1800)
    assert result.returncode in (0, 1), result.stderr
    nemesis = history_events(run_dir / "history", "nemesis")
    done = [(e["f"], e["value"]["clients"]) for e in nemesis if e["type"] == "ok"]
    kills = [c for f, c in done if f == "kill-client"]
    restarts = [c for f, c in done if f == "restart-client"]
    assert kills == restarts == [["C1"], ["C2"], ["C1"], ["C2"], ["C1"], ["C2"]]
    for copier in ("C1", "C2"):
        for instance in (2, 3, 4):
            events = history_events(run_dir / "history", f"{copier}.{instance}")
            opened = next(e for e in events if e["f"] == "open" and e["type"] == "ok")
            assert opened["value"]["transactional_id"] == copier
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["coverage"]["situations"].get("client-ended") == 6
    assert verdict["matched"] == (result.returncode == 0)


def test_a_restarted_producer_goes_on_in_its_id_space_and_a_reader_in_its_group(
    docker_client: Any, tmp_path: Path
) -> None:
    kafka_image_or_missing(docker_client, "kraft", "4.4")
    result, run_dir = run_harness("client-bounce", tmp_path, "--kafka", "4.4")
    assert result.returncode in (0, 1), result.stderr
    history = run_dir / "history"

    def begun(process: str) -> list[int]:
        events = history_events(history, process)
        return [e["seq"] for e in events if e["f"] == "send" and e["type"] == "invoke"]

    first, second, third = begun("P1"), begun("P1.2"), begun("P1.3")
    assert first and second and third
    # One id space: each instance begins where the one before it stopped.
    assert second[0] == max(first) + 1 and third[0] == max(second) + 1
    assert {e["producer"] for e in history_events(history, "P1.2") if e["f"] == "send"} == {"P1"}
    reads = [e for e in history_events(history, "reader.2") if e["f"] == "receive"]
    assert reads and {e["group"] for e in reads} == {"reader"}
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["coverage"]["situations"].get("client-ended") == 3
    assert verdict["matched"] == (result.returncode == 0)
