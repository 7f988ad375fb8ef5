"""Shipped scenarios end to end through the CLI, on a real RabbitMQ cluster.

These are the product's own runs: scenario -> cluster -> workload + nemesis -> history ->
PySpark checker -> verdict. They assert what the run must show whatever RabbitMQ does (the
pipeline completed, faults healed, nothing left running) and, for "safe" claims, the claim.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.browser import assert_report_shows_the_run
from tests.helpers import history_events, run_harness

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.e2e]


def common_checks(run_dir: Path, docker_client: Any) -> tuple[dict, dict]:
    manifest = json.loads((run_dir / "manifest.json").read_text())
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert manifest["error"] is None
    assert manifest["ended"] and manifest["ended"] >= manifest["started"]
    assert manifest["images"]["rabbitmq"]["name"] and manifest["images"]["rabbitmq"]["version"]
    assert manifest["nemesis_steps_done"] == len(manifest["scenario_spec"]["nemesis"])
    # Whether the cluster reunited and the queues drained is RabbitMQ's doing, not ours (a
    # paused node can hang in Erlang's global sync): recorded and carried into the verdict.
    assert isinstance(manifest["cluster_recovered"], bool)
    assert isinstance(manifest["drain_complete"], bool)
    assert verdict["cluster_recovered"] == manifest["cluster_recovered"]
    assert verdict["drain_complete"] == manifest["drain_complete"]
    assert set(verdict["groups"]) == set(manifest["groups"])
    for g, counts in verdict["groups"].items():
        assert counts["acked"] == verdict["sends"]["ok"] > 0
        lost_ids = (run_dir / "ids" / g / "lost.txt").read_text().split()
        assert len(lost_ids) == counts["lost"]
        assert counts["received"] >= counts["acked"] - counts["lost"]
    for name in ("summary.txt", "logs/rabbit1.log", "history/nemesis.jsonl.zst"):
        assert (run_dir / name).exists(), name
    # The run removed its cluster.
    project = manifest["compose_project"]
    left = docker_client.containers.list(
        all=True, filters={"label": f"com.docker.compose.project={project}"}
    )
    assert left == []
    return manifest, verdict


@pytest.mark.smoke("rabbitmq", "3.10")
def test_baseline_is_safe(docker_client: Any, rabbitmq_image: str, tmp_path: Path) -> None:
    result, run_dir = run_harness("baseline", tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    manifest, verdict = common_checks(run_dir, docker_client)
    assert manifest["cluster_recovered"] is True and manifest["drain_complete"] is True
    assert verdict["outcome"] == "safe" and verdict["matched"]
    assert verdict["sends"]["ok"] == 6000  # no fault: every send confirmed
    for counts in verdict["groups"].values():
        assert counts["lost"] == 0 and counts["unexpected"] == 0
    assert "results:" in result.stdout
    assert_report_shows_the_run(run_dir, "report-baseline.png")


def test_R1_runs_002s_sequence_and_gives_a_verdict(
    docker_client: Any, rabbitmq_image: str, tmp_path: Path
) -> None:
    """R1's outcome is the experiment (loss, or "not reproduced"); the run itself must be sound."""
    result, run_dir = run_harness("R1", tmp_path)
    assert result.returncode in (0, 1), result.stderr[-3000:]
    manifest, verdict = common_checks(run_dir, docker_client)
    lost = sum(g["lost"] for g in verdict["groups"].values())
    if lost and not manifest["drain_complete"]:
        # Unread messages are not lost messages: never a "loss" verdict then.
        assert verdict["outcome"] == "inconclusive" and result.returncode == 1
    else:
        assert verdict["matched"] == (lost > 0)
        assert result.returncode == (0 if lost else 1)
    nemesis = history_events(run_dir / "history", "nemesis")
    ops = [(e["value"]["op"], e["value"]["nodes"]) for e in nemesis if e["type"] == "ok"]
    assert ops[:5] == [
        ("isolate", ["rabbit3"]),
        ("isolate", ["rabbit1"]),
        ("isolate", ["rabbit2"]),
        ("heal", ["rabbit3"]),
        ("heal", ["rabbit2"]),
    ]
    assert ops[-1] == ("heal", "all")  # the final heal before the drain


def test_R6_quorum_queues_lose_nothing(
    docker_client: Any, rabbitmq_image: str, tmp_path: Path
) -> None:
    result, run_dir = run_harness("R6", tmp_path)
    manifest, verdict = common_checks(run_dir, docker_client)
    assert verdict["matched"], verdict["reason"]
    assert result.returncode == 0


def nemesis_oks(run_dir: Path) -> list[dict[str, Any]]:
    return [e for e in history_events(run_dir / "history", "nemesis") if e["type"] == "ok"]


def test_R4_002s_manual_procedure_behind_the_load_balancer_loses_nothing(
    docker_client: Any, rabbitmq_image: str, tmp_path: Path
) -> None:
    """Two nodes in ignore mode, every client through HAProxy; the RabbitMQ reliability
    article's procedure as steps."""
    result, run_dir = run_harness("R4", tmp_path)
    manifest, verdict = common_checks(run_dir, docker_client)
    done = {e["f"]: e["value"] for e in nemesis_oks(run_dir)}
    assert done["block-publishers"]["nodes"] == ["rabbit1"]
    assert done["wait-drained"]["drained"] is True, done["wait-drained"]
    assert manifest["topology"]["nodes"][-1]["name"] == "rabbit2"  # two nodes, no rabbit3
    assert verdict["matched"], verdict["reason"]
    assert result.returncode == 0


def test_R8_quorum_queues_survive_every_node_losing_power(
    docker_client: Any, rabbitmq_image: str, tmp_path: Path
) -> None:
    result, run_dir = run_harness("R8-quorum", tmp_path)
    manifest, verdict = common_checks(run_dir, docker_client)
    (power_loss,) = [e for e in nemesis_oks(run_dir) if e["f"] == "power-loss"]
    assert set(power_loss["value"]["dropped"]) == {"rabbit1", "rabbit2", "rabbit3"}
    assert verdict["matched"], verdict["reason"]
    assert result.returncode == 0


def test_R5_a_restarted_mirror_rejoins_empty_and_its_sync_blocks_the_queue(
    docker_client: Any, rabbitmq_image: str, tmp_path: Path
) -> None:
    """The broker's log says the mechanism (the mirror recovered nothing and was refilled by a
    sync); the history says what clients saw. A sync the log times at 1.5 s or more must show
    as a blocked queue in the verdict: two witnesses of one event that must agree."""
    result, run_dir = run_harness("R5", tmp_path)
    manifest, verdict = common_checks(run_dir, docker_client)
    assert sum(g["lost"] for g in verdict["groups"].values()) == 0, verdict["reason"]
    story = manifest["mirrored_queues"]
    (restart,) = [e for e in nemesis_oks(run_dir) if e["f"] == "restart"]
    back = [r for r in story["recoveries"] if r["node"] == "rabbit3" and r["at"] > restart["time"]]
    assert back and back[0]["classic_queues"] == 0, story["recoveries"]
    thrown = [
        d for d in story["discarded"] if d["node"] == "rabbit3" and d["back_at"] == back[0]["at"]
    ]
    assert thrown and thrown[0]["messages"] > 0, story["discarded"]
    refills = [s for s in story["syncs"] if s["mirrors"] == ["rabbit3"] and s["messages"] > 0]
    assert refills, story["syncs"]
    if (refills[0]["seconds"] or 0) >= 1.5:
        assert verdict["matched"], verdict["reason"]
        assert "synchronised a mirror" in verdict["reason"]
        assert result.returncode == 0


def test_R7_a_master_failing_with_unacknowledged_deliveries_replays_them_flagged(
    docker_client: Any, rabbitmq_image: str, tmp_path: Path
) -> None:
    """Consumers hold 50 unacknowledged deliveries each on rabbit1 when it is killed: the
    promoted masters requeue them, and each replay must carry the redelivered flag."""
    result, run_dir = run_harness("R7", tmp_path)
    manifest, verdict = common_checks(run_dir, docker_client)
    assert verdict["matched"], verdict["reason"]
    assert result.returncode == 0
    groups = verdict["groups"].values()
    assert all(g["duplicated"] > 0 for g in groups), verdict["groups"]
    assert sum(g["unflagged"] for g in groups) == 0, "a replay without the redelivered flag"
    assert "every replay flagged redelivered" in verdict["reason"]


def test_R9_kill_quorum_queues_on_rabbitmq_4_lose_nothing_when_their_leader_dies(
    docker_client: Any, rabbitmq_image: str, tmp_path: Path
) -> None:
    result, run_dir = run_harness("R9-kill", tmp_path)
    manifest, verdict = common_checks(run_dir, docker_client)
    assert manifest["images"]["rabbitmq"]["version"].startswith("4.0.")
    assert [e["f"] for e in nemesis_oks(run_dir)] == ["kill", "start"]
    assert verdict["matched"], verdict["reason"]
    assert result.returncode == 0


@pytest.mark.parametrize("line", ["4.0", "4.3"])
def test_R10_a_stream_on_rabbitmq_4_is_read_by_offset_and_loses_nothing_confirmed(
    line: str, docker_client: Any, rabbitmq_image: str, tmp_path: Path
) -> None:
    result, run_dir = run_harness("R10", tmp_path, "--rabbitmq", line)
    manifest, verdict = common_checks(run_dir, docker_client)
    assert manifest["images"]["rabbitmq"]["version"].startswith(line + ".")
    queues = manifest["scenario_spec"]["workload"]["queues"]
    # Each stream read live and once more from its first offset after the faults.
    assert set(manifest["groups"]) == {*queues, *(f"{q}.final" for q in queues)}
    # Every delivery named its offset: the observed log covers each stream, one copy per stream.
    log = verdict["log"]
    assert log["positions"] >= 2 * verdict["sends"]["ok"]
    assert log["duplicate_offsets"] == 0 and log["inconsistent_offsets"] == 0
    assert verdict["matched"], verdict["reason"]
    assert result.returncode == 0


def test_a_policy_from_the_scenario_reaches_the_queues_and_its_settings_the_report(
    docker_client: Any, rabbitmq_image: str, tmp_path: Path
) -> None:
    """R9-kill's cluster and load without its fault, and a user's policy: the queues hold at
    most 300 messages and refuse the rest. The publishers' nacks are the policy at work (a
    refused message was never confirmed, so the run stays safe), and the report lists it."""
    import yaml

    from tests.helpers import ROOT

    spec = yaml.safe_load((ROOT / "scenarios/R9-kill.yaml").read_text())
    spec["id"] = "R9-policy"
    spec["nemesis"] = []
    spec["cluster"]["policies"] = [
        {
            "name": "bounded",
            "pattern": "^jepsen\\.",
            "definition": {"max-length": 300, "overflow": "reject-publish"},
            "apply_to": "quorum_queues",
        }
    ]
    spec["cluster"]["rabbitmq_conf"] = {"vm_memory_high_watermark.relative": 0.5}
    for consumer in spec["workload"]["consumers"]:
        consumer["delay"] = 0.05  # 20 a second: the queues fill up to the policy's bound
    scenario = tmp_path / "R9-policy.yaml"
    scenario.write_text(yaml.safe_dump(spec))
    result, run_dir = run_harness(str(scenario), tmp_path / "results")
    manifest, verdict = common_checks(run_dir, docker_client)
    assert manifest["settings"]["policies"]["bounded"]
    assert manifest["settings"]["rabbitmq_conf"]["vm_memory_high_watermark.relative"] == "0.5"
    assert "bounded" in manifest["settings_from_scenario"]["policies"]
    assert verdict["errors"]["send"].get("nack", 0) > 0, verdict["errors"]
    assert verdict["matched"], verdict["reason"]
    assert result.returncode == 0
    report = (run_dir / "report.html").read_text()
    assert 'id="settings"' in report and "reject-publish" in report
