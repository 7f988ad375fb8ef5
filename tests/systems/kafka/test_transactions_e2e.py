"""Transactions end to end on real Kafka (the nightly tier): a transactional producer of each
client and the exactly-once copy run under their claim scenarios' faults, and what the harness
says of them agrees with their histories, whatever Kafka did.

Kafka's behaviour is not asserted here (the claims matrix measures it, and T2 on 3.9 once lost
committed records): a run's verdict must follow from its counts, and the history must hold
every part of the contract a transactional run promises (which client wrote it, each commit
asked, the coordinators followed).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.browser import assert_report_shows_the_run
from tests.helpers import ROOT, history_events
from tests.systems.kafka.test_real_cluster import kafka_image_or_missing

pytestmark = [pytest.mark.spark, pytest.mark.e2e]


def _events(path: Path) -> list[dict[str, Any]]:
    """The events of `history/<process>.jsonl`, packed or not."""
    return history_events(path.parent, path.name.removesuffix(".jsonl"))


def _run(scenario: str, line: str, results: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    command = [".venv/bin/harness", "run", scenario, "--mode", "kraft", "--kafka", line]
    result = subprocess.run(
        [*command, "--results", str(results)],
        capture_output=True,
        text=True,
        timeout=1500,
        cwd=ROOT,
    )
    return result, (results / "latest").resolve()


def _agrees(verdict: dict[str, Any], returncode: int) -> None:
    """The claim's word and the exit code follow from the verdict's own counts."""
    txns = verdict["transactions"]
    broken = txns.get("zombie_commits", 0) + sum(
        g.get("aborted_reads", 0) + g.get("torn", 0) for g in txns["groups"].values()
    )
    lost = max(g["lost"] for g in verdict["groups"].values())
    if broken or lost:
        assert verdict["claim_verdict"] == "refuted", verdict["reason"]
    elif verdict["coverage"]["vacuous"]:
        assert verdict["claim_verdict"] == "inconclusive", verdict["reason"]
    else:
        assert verdict["claim_verdict"] == "reproduced", verdict["reason"]
    assert returncode == (0 if verdict["matched"] else 1)


@pytest.mark.parametrize(
    ("scenario", "line", "client"),
    [
        ("T4", "3.9", "confluent-kafka"),  # TV1, the only protocol librdkafka speaks
        ("T4-java", "4.4", "java kafka-clients 4.4"),  # TV2: Kafka's own client on a 4.x cluster
    ],
)
def test_a_transactional_producer_under_faults_writes_the_whole_contract(
    scenario: str, line: str, client: str, docker_client: Any, spark: object, tmp_path: Path
) -> None:
    kafka_image_or_missing(docker_client, "kraft", line)
    result, run_dir = _run(scenario, line, tmp_path)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["error"] is None, result.stderr[-3000:]
    verdict = json.loads((run_dir / "verdict.json").read_text())
    txns = verdict["transactions"]
    assert txns["committed"] > 10 and txns["planned_aborts"] > 0, txns
    assert all(c.startswith(client) for c in txns["clients"].values()), txns["clients"]
    history = run_dir / "history"
    producer = _events(history / "P1.jsonl")
    asked = {e["value"]["txn"] for e in producer if e["f"] == "end-txn"}
    committed = {e["value"]["txn"] for e in producer if e["f"] == "txn" and e["type"] == "ok"}
    assert committed and committed <= asked  # every commit was asked before it ended
    coordinators = [
        e for e in _events(history / "partition-watch.jsonl") if e["f"] == "coordinator-state"
    ]
    assert {e["value"]["key"] for e in coordinators} == {"P1"}, coordinators[:3]
    assert txns["commits_in_faults"] <= txns["open_in_faults"]
    assert (
        verdict["coverage"]["situations"].get("transaction-open-in-fault", 0)
        == txns["open_in_faults"]
    )
    _agrees(verdict, result.returncode)
    assert_report_shows_the_run(run_dir, f"report-{scenario}-{line}.png")


def test_the_exactly_once_copy_under_coordinator_kills_writes_the_whole_contract(
    docker_client: Any, spark: object, tmp_path: Path
) -> None:
    kafka_image_or_missing(docker_client, "kraft", "4.4")
    result, run_dir = _run("T1", "4.4", tmp_path)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["error"] is None, result.stderr[-3000:]
    verdict = json.loads((run_dir / "verdict.json").read_text())
    copy = verdict["transactions"]["copy"]
    assert copy["copies"]["committed"] > 1000, copy
    history = run_dir / "history"
    watched = {
        (e["value"]["role"], e["value"]["key"])
        for e in _events(history / "partition-watch.jsonl")
        if e["f"] == "coordinator-state"
    }
    assert watched == {
        ("transaction-coordinator", "C1"),
        ("transaction-coordinator", "C2"),
        ("group-coordinator", "copy"),
    }
    for copier in ("C1", "C2"):
        events = _events(history / f"{copier}.jsonl")
        committed = {e["value"]["txn"] for e in events if e["f"] == "txn" and e["type"] == "ok"}
        asked = {e["value"]["txn"] for e in events if e["f"] == "end-txn"}
        assert committed <= asked
    # no-duplicates: a record copied twice into committed output refutes it, as a loss does.
    doubled = copy["copied_twice"]
    if doubled:
        assert verdict["claim_verdict"] == "refuted", verdict["reason"]
    else:
        _agrees(verdict, result.returncode)
    assert_report_shows_the_run(run_dir, "report-T1-4.4.png")


def test_a_paused_zombie_and_its_replacement_write_the_whole_contract(
    docker_client: Any, spark: object, tmp_path: Path
) -> None:
    """T3-zombie-java: Kafka's own client paused (its JVM stopped with its Python parent) while a
    replacement of its transactional id starts and fences it, then resumed."""
    kafka_image_or_missing(docker_client, "kraft", "4.4")
    result, run_dir = _run("T3-zombie-java", "4.4", tmp_path)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["error"] is None, result.stderr[-3000:]
    verdict = json.loads((run_dir / "verdict.json").read_text())
    nemesis = _events(run_dir / "history" / "nemesis.jsonl")
    assert [(e["f"], e["type"]) for e in nemesis if "client" in e["f"]] == [
        ("pause-client", "invoke"),
        ("pause-client", "ok"),
        ("resume-client", "invoke"),
        ("resume-client", "ok"),
    ]
    inits = {
        p: [e for e in _events(run_dir / "history" / f"{p}.jsonl") if e["f"] == "init-txn"]
        for p in ("P1", "P2")
    }
    assert all(any(e["type"] == "ok" for e in marks) for marks in inits.values()), inits
    # P2 waited for its start_at before its first init.
    first_p2 = min(e["time"] for e in inits["P2"])
    assert first_p2 - verdict["history_span"]["first"] > 20
    txns = verdict["transactions"]
    assert verdict["coverage"]["situations"].get("client-paused") == 1
    assert (
        verdict["coverage"]["situations"].get("fenced-transaction-open", 0) == txns["fenced_open"]
    )
    _agrees(verdict, result.returncode)
    # No client of the run is left stopped or running.
    for pid in manifest["client_pids"].values():
        assert (
            not Path(f"/proc/{pid}").exists()
            or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
        )
