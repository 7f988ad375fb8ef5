"""The shipped kafka-mock scenarios end to end through `harness run` (no Docker needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from systems.kafka_mock.scenario import KafkaMockScenario
from systems.registry import parse_scenario
from systems.scenario import ScenarioError
from tests.helpers import ROOT, history_events, run_harness


def sends(run_dir: Path) -> list[dict]:
    return history_events(run_dir / "history", "P1")


@pytest.mark.spark
def test_leader_down_shows_up_as_info_and_loses_nothing(spark: object, tmp_path: Path) -> None:
    result, run_dir = run_harness("kafka-mock-leader-down", tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    verdict = json.loads((run_dir / "verdict.json").read_text())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert verdict["tier"] == "kafka-mock" and verdict["counts_toward_claim"] is False
    assert manifest["tier"] == "kafka-mock" and manifest["drain_complete"] is True
    assert verdict["groups"]["reader"]["lost"] == 0
    timed_out = [e for e in sends(run_dir) if e["type"] == "info"]
    assert timed_out and all("_MSG_TIMED_OUT" in e["error"] for e in timed_out)
    nemesis = history_events(run_dir / "history", "nemesis")
    down = next(e for e in nemesis if e["f"] == "broker-down" and e["type"] == "ok")
    assert down["value"]["target"] == "leader" and len(down["value"]["brokers"]) == 1
    assert (
        nemesis[-1]["f"] == "heal"
        and nemesis[-1]["value"]["brokers_up"] == down["value"]["brokers"]
    )
    assert "kafka-mock" in result.stdout


@pytest.mark.spark
def test_injected_not_enough_replicas_is_unavailability(spark: object, tmp_path: Path) -> None:
    result, run_dir = run_harness("kafka-mock-not-enough-replicas", tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["outcome"] == "unavailable" and verdict["matched"]
    refused = [e for e in sends(run_dir) if e["type"] == "info"]
    assert len(refused) == 5
    assert all(e["error"].startswith("NOT_ENOUGH_REPLICAS") for e in refused)


def test_kafka_mock_scenarios_validate() -> None:
    s = parse_scenario((ROOT / "scenarios/kafka-mock-leader-down.yaml").read_text())
    assert isinstance(s, KafkaMockScenario) and s.claim is None
    bad = """
id: x
expect: safe
cluster: {system: kafka-mock, brokers: 2, replication_factor: 3}
workload: {producers: [{id: P, count: 1}], readers: [{id: r}]}
"""
    with pytest.raises(ScenarioError, match="replication_factor exceeds"):
        parse_scenario(bad, "x.yaml")
    step = bad.replace("brokers: 2", "brokers: 3") + "nemesis: [{at: 1, op: broker-down}]\n"
    with pytest.raises(ScenarioError, match="nemesis.0: broker-down needs a target role"):
        parse_scenario(step, "x.yaml")
    claim = bad.replace("brokers: 2", "brokers: 3").replace("id: x", "id: x\nclaim: K4")
    with pytest.raises(ScenarioError, match="claim"):
        parse_scenario(claim, "x.yaml")


def _history(run_dir: Path, process: str) -> list[dict]:
    return history_events(run_dir / "history", process)


@pytest.mark.spark
def test_transactions_commit_and_every_record_is_read_once(spark: object, tmp_path: Path) -> None:
    result, run_dir = run_harness("scenarios/kafka-mock-transactions.yaml", tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["outcome"] == "safe" and verdict["matched"], verdict["reason"]
    t = verdict["transactions"]
    assert (t["transactions"], t["committed"], t["aborted"], t["unknown"]) == (60, 60, 0, 0)
    for group in ("committed", "uncommitted", "final"):
        assert verdict["groups"][group]["received"] == 600
        assert verdict["groups"][group]["duplicated"] == 0
    assert t["groups"]["committed"]["isolation"] == "read_committed"
    assert t["groups"]["uncommitted"]["isolation"] == "read_uncommitted"
    # Each record's send ends with its transaction, placed where its delivery report put it.
    ends = [e for e in _history(run_dir, "P1") if e["f"] == "send" and e["type"] != "invoke"]
    assert len(ends) == 600 and all(e["offset"] is not None and e["value"]["txn"] for e in ends)
    partitions = {e["partition"] for e in ends}
    assert partitions == {0, 1, 2}


# Nightly (53 s in a loaded fast tier): tests/checkers/test_transactions plants aborted reads
# in the fast tier.
@pytest.mark.nightly
@pytest.mark.spark
def test_the_mocks_unfiltered_aborted_records_are_aborted_reads(
    spark: object, tmp_path: Path
) -> None:
    """The mock cannot hide aborted records (no last stable offset, no aborted transactions in
    its Fetch answers): what it shows a read_committed reader, the checker must call aborted
    reads, exactly the planned aborts' records, and nothing in the read_uncommitted group."""
    import yaml

    spec = yaml.safe_load((ROOT / "scenarios/kafka-mock-transactions.yaml").read_text())
    spec["workload"]["producers"][0]["transaction"]["abort_ratio"] = 0.25
    scenario = tmp_path / "aborts.yaml"
    scenario.write_text(yaml.safe_dump(spec))
    result, run_dir = run_harness(str(scenario), tmp_path / "results")
    assert result.returncode == 1, result.stdout + result.stderr[-2000:]
    verdict = json.loads((run_dir / "verdict.json").read_text())
    planned = [e for e in _history(run_dir, "P1") if e["f"] == "txn" and e["type"] == "fail"]
    aborted_records = {f"P1:{s}" for e in planned for s in e["value"]["seqs"]}
    assert planned and all(e["value"].get("planned") for e in planned)
    t = verdict["transactions"]
    assert t["aborted"] == t["planned_aborts"] == len(planned)
    for group in ("committed", "final"):
        assert t["groups"][group]["aborted_reads"] == len(aborted_records)
        ids = (run_dir / "ids" / group / "aborted_reads.txt").read_text().split()
        assert set(ids) == aborted_records
    assert t["groups"]["uncommitted"]["aborted_reads"] == 0
    assert verdict["outcome"] == "anomalies" and "aborted read" in verdict["reason"]
    # A planned abort is neither an acknowledgement nor a refusal.
    assert verdict["sends"]["aborted"] == len(aborted_records) and verdict["sends"]["fail"] == 0


# Nightly (53 s in a loaded fast tier): tests/checkers/test_eos checks the copy's contract in the
# fast tier, and the transactions test above runs the mock's transactions end to end.
@pytest.mark.nightly
@pytest.mark.spark
def test_the_exactly_once_copy_puts_every_record_in_the_output_once(
    spark: object, tmp_path: Path
) -> None:
    result, run_dir = run_harness("scenarios/kafka-mock-eos.yaml", tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["outcome"] == "safe" and verdict["matched"], verdict["reason"]
    for group in ("copied", "final"):
        g = verdict["groups"][group]
        assert (g["acked"], g["received"], g["lost"], g["duplicated"]) == (600, 600, 0, 0)
    copy = verdict["transactions"]["copy"]
    assert copy["copies"]["committed"] == 600
    assert (copy["copied_twice"], copy["never_copied"]) == (0, 0)
    assert verdict["log"]["duplicate_offsets"] == 0
    assert verdict["transactions"]["cycles"]["G0"] == 0
    # Each copy from the input partition into the same output partition, where the output
    # readers read it.
    copies = [e for e in _history(run_dir, "C1") if e["f"] == "copy" and e["type"] == "ok"]
    assert len(copies) == 600
    assert all(e["value"]["from"]["partition"] == e["partition"] for e in copies)
    assert {e["stream"] for e in copies} == {"jepsen-copy"}
    reads = [e for e in _history(run_dir, "copied") if e["f"] == "receive"]
    assert {e["stream"] for e in reads} == {"jepsen-copy"}
