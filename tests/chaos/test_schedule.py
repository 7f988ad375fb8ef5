"""A base with a drawn schedule: a base's own warmup (`chaos: {warmup: S}`) holds the first fault
back, and the exactly-once copy's base keeps its copiers, readers and promise in the generated
scenario and in the schedule.yaml a run replays."""

from __future__ import annotations

from dataclasses import replace

import pytest

from chaos.generator import ChaosError, ChaosOptions
from chaos.schedule import chaos_scenario, options_for
from systems.kafka.scenario import KafkaScenario
from systems.registry import load_scenario, parse_scenario
from systems.scenario import scenario_data, to_yaml
from tests.helpers import ROOT

EOS = ROOT / "scenarios" / "chaos" / "kafka-txn-eos.yaml"
SAFE = ROOT / "scenarios" / "chaos" / "kafka-safe.yaml"


def eos() -> KafkaScenario:
    base = load_scenario(EOS)
    assert isinstance(base, KafkaScenario)
    return base


def test_the_eos_base_is_t1s_copy_with_the_promise_and_the_situations_it_is_about() -> None:
    base = eos()
    assert base.expect == "no-duplicates"
    assert {"transaction-open-in-fault", "leader-faulted"} <= set(base.requires)
    assert base.chaos is not None and base.chaos.warmup == 25
    w = base.workload
    assert [p.enable_idempotence for p in w.producers] == [True]
    assert all(p.transaction is None and p.rate > 0 for p in w.producers)
    assert [c.id for c in w.copiers] == ["C1", "C2"]
    assert {c.group for c in w.copiers} == {"copy"}  # one group: they share the input
    assert [r.topic for r in w.readers] == ["output"]


@pytest.mark.parametrize("seed", range(40))
def test_no_fault_comes_before_the_bases_warmup(seed: int) -> None:
    scenario, steps = chaos_scenario(eos(), ChaosOptions(seed=seed, seconds=120))
    assert steps and steps[0]["at"] >= 25
    assert all(step.at <= 100 for step in scenario.nemesis)  # still healed before the quiet
    assert scenario.generated is not None
    assert scenario.generated.options["warmup"] == 25  # a replay draws it the same way


def test_the_same_seed_draws_the_same_schedule_for_a_base_with_a_warmup() -> None:
    opts = ChaosOptions(seed=3, seconds=150)
    assert chaos_scenario(eos(), opts)[1] == chaos_scenario(eos(), opts)[1]


def test_a_base_warmup_is_a_floor_never_a_cut() -> None:
    base = eos()
    opts = ChaosOptions(seed=1, seconds=120)
    assert options_for(base, opts).warmup == 25
    longer = replace(opts, warmup=40.0)
    assert options_for(base, longer) is longer
    plain = load_scenario(SAFE)  # no chaos: block
    assert plain.chaos is None and options_for(plain, opts) is opts


def test_a_workload_too_short_for_the_bases_warmup_says_whose_warmup() -> None:
    with pytest.raises(ChaosError, match="no room for a fault after 25 s of warmup.*chaos.warmup"):
        chaos_scenario(eos(), ChaosOptions(seed=1, seconds=30))
    # the generator's own refusals stay its own
    with pytest.raises(ChaosError, match="--interval") as e:
        chaos_scenario(eos(), ChaosOptions(seed=1, seconds=120, interval=(5.0, 1.0)))
    assert "chaos.warmup" not in str(e.value)


def test_the_generated_copy_keeps_its_copiers_and_replays_from_its_schedule_file() -> None:
    base = eos()
    scenario, _ = chaos_scenario(base, ChaosOptions(seed=7, seconds=180))
    assert isinstance(scenario, KafkaScenario)
    assert scenario.workload.copiers == base.workload.copiers
    assert scenario.workload.readers == base.workload.readers
    assert scenario.expect == base.expect and scenario.requires == base.requires
    assert scenario.chaos == base.chaos
    producer = scenario.workload.producers[0]
    assert producer.enable_idempotence and producer.count == producer.rate * 180
    # RUN_DIR/schedule.yaml is the scenario as its file holds it: `harness run` of it is the same
    schedule = to_yaml(scenario_data(scenario))
    assert "copiers:" in schedule and "topic: output" in schedule
    assert parse_scenario(schedule) == scenario
