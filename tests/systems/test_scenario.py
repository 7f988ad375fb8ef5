"""What every scenario may say whatever its system: here, a chaos base's `chaos:` block."""

from __future__ import annotations

import pytest

from systems.registry import parse_scenario
from systems.scenario import ScenarioError, scenario_data
from tests.helpers import ROOT

EOS = (ROOT / "scenarios" / "chaos" / "kafka-txn-eos.yaml").read_text()


def test_a_bases_warmup_is_read_and_written_back_as_the_file_said_it() -> None:
    scenario = parse_scenario(EOS, "eos.yaml")
    assert scenario.chaos is not None and scenario.chaos.warmup == 25
    assert scenario_data(scenario)["chaos"] == {"warmup": 25.0}
    without = parse_scenario(EOS.replace("chaos: {warmup: 25}\n", ""), "eos.yaml")
    assert without.chaos is None and "chaos" not in scenario_data(without)


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ("chaos: {warmup: -1}", "chaos.warmup: Input should be greater than or equal to 0"),
        (
            "chaos: {warmup: 25, start: 3}",
            "chaos.start: Extra inputs are not permitted (keys here: warmup, faults)",
        ),
        (
            "chaos: {}",
            "chaos: an empty chaos block: give warmup (seconds before the first fault) or faults "
            "(the families its schedules draw)",
        ),
        (
            "chaos: {faults: []}",
            "chaos.faults: List should have at least 1 item after validation, not 0",
        ),
    ],
)
def test_a_chaos_block_it_cannot_use_is_one_line_naming_the_field(block: str, message: str) -> None:
    with pytest.raises(ScenarioError) as e:
        parse_scenario(EOS.replace("chaos: {warmup: 25}", block), "eos.yaml")
    assert str(e.value) == f"eos.yaml: {message}"
