"""harness shrink around the shrinker: which runs it takes, which steps the checker's
attribution points at, and the scenario file it leaves (with a fake runner: no cluster)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from chaos.generator import ChaosOptions
from chaos.schedule import chaos_scenario
from chaos.shrink import ShrinkOptions
from harness.shrink import ShrinkError, hot_steps, shrink_run
from systems.kafka.scenario import KafkaScenario
from systems.registry import load_scenario, parse_scenario
from systems.scenario import scenario_data, to_yaml
from tests.helpers import ROOT

STEPS: list[dict[str, Any]] = [
    {"at": 5.0, "op": "degrade", "from": "followers", "to": "leader", "loss_pct": 25.0},
    {"at": 14.7, "op": "restart", "target": "leader", "partition": 1},
    {"at": 17.1, "op": "heal"},
    {"at": 28.1, "op": "pause", "target": "leader", "label": "f3"},
    {"at": 34.3, "op": "resume", "target": "@f3"},
]


def lost_at(*labels: str) -> dict[str, Any]:
    return {"lost": {"reader": {"by_step": {label: 3 for label in labels}, "by_node": {}}}}


def test_the_checkers_step_numbers_point_at_the_scenarios_steps() -> None:
    assert hot_steps(STEPS, [], lost_at("2. restart kafka2 at +14.7 s")) == {1}
    # a step that was not applied made no invoke: the numbers after it shift
    skipped = [{"step": 1, "op": "restart", "error": "no leader"}]
    assert hot_steps(STEPS, skipped, lost_at("3. pause kafka1 at +28.1 s")) == {3}
    assert hot_steps(STEPS, [], lost_at("before any fault")) == set()
    both_ways = [{"at": 1, "op": "cut", "from": ["a"], "to": ["b"], "both_ways": True}, *STEPS]
    assert hot_steps(both_ways, [], lost_at("3. start-degrade at +5 s")) == {1}


def run_dir_of(tmp_path: Path, outcome: str, matched: bool = False) -> Path:
    spec = load_scenario(ROOT / "scenarios" / "chaos" / "kafka-acks1.yaml")
    data = spec.model_dump(mode="json", by_alias=True)
    data.update(id="chaos-kafka-acks1-s9", nemesis=STEPS)
    data["workload"]["producers"][0]["count"] = 45_000
    run = tmp_path / "run"
    run.mkdir()
    manifest = {"scenario": data["id"], "scenario_spec": data, "kafka_mode": "kraft", "seed": 9}
    (run / "manifest.json").write_text(json.dumps(manifest))
    verdict = {
        "outcome": outcome,
        "matched": matched,
        "attribution": lost_at("2. restart kafka2 at +14.7 s"),
    }
    (run / "verdict.json").write_text(json.dumps(verdict))
    return run


def test_a_shrink_writes_a_scenario_file_that_expects_what_it_found(tmp_path: Path) -> None:
    run = run_dir_of(tmp_path, "loss")
    tried: list[int] = []

    def restart_loses(data: dict[str, Any]) -> bool:
        tried.append(len(data["nemesis"]))
        return any(s["op"] == "restart" for s in data["nemesis"])

    result, found = shrink_run(
        run, ShrinkOptions(tries=2), tmp_path, tmp_path / "found", lambda _s: None, restart_loses
    )
    assert tried[0] == 1  # the tied step alone first
    assert found == tmp_path / "found" / "chaos-kafka-acks1-s9-min.yaml"
    scenario = load_scenario(found)  # a valid scenario file
    assert scenario.expect == "loss" and scenario.id == "chaos-kafka-acks1-s9-min"
    assert [s.op for s in scenario.nemesis] == ["restart"]
    assert scenario.cluster.modes == ["kraft"]
    data = yaml.safe_load(found.read_text())
    assert data["generated"]["seed"] == 9
    assert data["generated"]["shrunk_from"]["original_steps"] == STEPS
    assert "loss_pct: 0.0" not in found.read_text()  # defaults left out
    record = json.loads((run / "shrink.json").read_text())
    assert record["original_steps"] == 5 and record["minimal_steps"] == 1
    assert record["runs_of_minimal"] == 2  # topped up to --tries to say how often
    assert result.runs_spent == len(tried)


@pytest.mark.parametrize(
    ("outcome", "message"),
    [("safe", "nothing to shrink"), ("inconclusive", "nothing to shrink")],
)
def test_a_run_without_a_violation_is_refused(tmp_path: Path, outcome: str, message: str) -> None:
    with pytest.raises(ShrinkError, match=message):
        shrink_run(run_dir_of(tmp_path, outcome), ShrinkOptions(), tmp_path, tmp_path, print)


def test_a_directory_without_a_verdict_is_refused(tmp_path: Path) -> None:
    run = run_dir_of(tmp_path, "loss")
    (run / "verdict.json").unlink()
    with pytest.raises(ShrinkError, match="no readable verdict.json"):
        shrink_run(run, ShrinkOptions(), tmp_path, tmp_path, print)


@pytest.mark.parametrize(
    "path", sorted((ROOT / "scenarios" / "found").glob("*.yaml")), ids=lambda p: p.stem
)
def test_every_found_scenario_is_valid_and_says_where_it_came_from(path: Path) -> None:
    scenario = load_scenario(path)
    assert scenario.id == path.stem
    assert scenario.generated is not None and scenario.generated.shrunk_from is not None
    assert scenario.generated.shrunk_from["original_steps"]


@pytest.mark.parametrize("base", ["kafka-txn-eos", "kafka-txn-isolation"])
def test_a_transactional_run_shrinks_to_a_found_file_with_its_workload_whole(
    tmp_path: Path, base: str
) -> None:
    """The copiers, the transactional producer and the readers of the copy survive the shrink
    into scenarios/found/, as the run had them (only the load is cut to the schedule)."""
    spec = load_scenario(ROOT / "scenarios" / "chaos" / f"{base}.yaml")
    generated, steps = chaos_scenario(spec, ChaosOptions(seed=4, seconds=150))
    data = scenario_data(generated)  # what the run's manifest holds (systems.run)
    run = tmp_path / "run"
    run.mkdir()
    manifest = {"scenario": data["id"], "scenario_spec": data, "kafka_mode": "kraft", "seed": 4}
    (run / "manifest.json").write_text(json.dumps(manifest))
    verdict = {"outcome": "duplicates", "matched": False, "attribution": {}}
    (run / "verdict.json").write_text(json.dumps(verdict))
    cause = next(s for s in steps if s["op"] not in ("heal", "start", "resume"))
    candidates: list[dict[str, Any]] = []

    def duplicates_with_the_cause(candidate: dict[str, Any]) -> bool:
        candidates.append(candidate)
        return any(s["op"] == cause["op"] for s in candidate["nemesis"])

    _result, found = shrink_run(
        run, ShrinkOptions(tries=1), tmp_path, tmp_path / "found", print, duplicates_with_the_cause
    )
    minimal = load_scenario(found)
    assert isinstance(minimal, KafkaScenario) and isinstance(generated, KafkaScenario)
    assert minimal.expect == "duplicates" and minimal.requires == generated.requires
    assert minimal.workload.copiers == generated.workload.copiers
    assert minimal.workload.readers == generated.workload.readers
    assert minimal.chaos == generated.chaos
    (was,), (now,) = generated.workload.producers, minimal.workload.producers
    assert now.transaction == was.transaction
    assert now.enable_idempotence == was.enable_idempotence
    assert now.model_copy(update={"count": was.count}) == was  # only the load was cut
    assert now.count <= was.count
    warmup = spec.chaos.warmup if spec.chaos else 5.0
    assert minimal.nemesis and minimal.nemesis[0].at >= warmup
    for candidate in candidates:  # every run the shrink asked for was the same workload
        run_of = parse_scenario(to_yaml(candidate))
        assert isinstance(run_of, KafkaScenario)
        assert run_of.workload.copiers == generated.workload.copiers
        assert [p.transaction for p in run_of.workload.producers] == [was.transaction]
        assert run_of.nemesis == [] or run_of.nemesis[0].at >= warmup
    text = found.read_text()
    assert ("copiers:" in text) == bool(generated.workload.copiers)
    assert ("transaction:" in text) == (was.transaction is not None)
