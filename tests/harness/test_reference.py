"""docs/reference/ is generated from the code and kept current: a page that differs from what
the code gives, a model left out of it, or an op without a word on what it does fails here."""

from __future__ import annotations

import pytest

from contract.expectations import COMBINABLE, known_expectation
from contract.situations import SITUATIONS
from faults.registry import OPS
from harness.reference import reference_files
from harness.reference_pages import (
    REFERENCE_DIR,
    SECTIONS,
    expectations_page,
    ops_named,
    step_options,
)
from systems.schema import scenario_schema

# Models a scenario file does not write itself, or the mock tier's own (it proves the harness).
NOT_IN_SECTIONS = {"Generated", "ChaosSettings", "JsonValue"}


@pytest.mark.parametrize("name", sorted(reference_files()))
def test_each_reference_page_is_the_one_the_code_gives(name: str) -> None:
    assert (REFERENCE_DIR / name).read_text() == reference_files()[name], (
        "stale: run make reference"
    )


def test_every_model_a_kafka_or_rabbitmq_scenario_writes_has_a_section() -> None:
    listed = {model for sections in SECTIONS.values() for model, _ in sections}
    defs = set(scenario_schema()["$defs"])
    assert listed <= defs
    mock = {d for d in defs if d.startswith("KafkaMock")}
    assert defs - listed - mock - NOT_IN_SECTIONS == set()


def test_every_op_says_what_it_does() -> None:
    assert [op.name for op in OPS if not op.does.strip()] == []


def test_a_typed_knob_names_the_properties_it_sets() -> None:
    page = reference_files()["scenario.md"]
    row = next(ln for ln in page.splitlines() if ln.startswith("| `min_insync_replicas` |"))
    assert "`min.insync.replicas`" in row
    acks = next(ln for ln in page.splitlines() if ln.startswith("| `acks` |"))
    assert "`request.required.acks`" in acks and "`all`" in acks


def test_the_expectations_page_says_what_the_validator_accepts() -> None:
    page = expectations_page()
    together = "+".join(sorted(COMBINABLE))
    assert f"`expect: {together}`" in page
    assert known_expectation(together) == together
    with pytest.raises(ValueError):
        known_expectation("loss+duplicates")


def test_every_situation_a_scenario_may_require_has_a_line() -> None:
    page = expectations_page()
    assert [s for s in SITUATIONS if f"| `{s}` |" not in page] == []
    scenario = reference_files()["scenario.md"]
    row = next(ln for ln in scenario.splitlines() if ln.startswith("| `requires` |"))
    assert "expectations.md#situations" in row


def test_a_step_field_names_ops_before_its_colon() -> None:
    assert ops_named("elect / rolling-restart: time bound.") == ["elect", "rolling-restart"]
    assert ops_named("partition, instead of groups: sides drawn") == ["partition"]
    assert ops_named("Whom it hits: a role") == []


def test_every_op_a_step_field_names_is_an_op_of_that_system() -> None:
    systems = {op.name: op.systems for op in OPS}
    wrong = [
        (system, op)
        for system, by_op in step_options().items()
        for op in by_op
        if system not in systems.get(op, set())
    ]
    assert wrong == []


def test_the_faults_page_gives_each_ops_options() -> None:
    page = reference_files()["faults.md"]
    cut = next(ln for ln in page.splitlines() if ln.startswith("| `cut` |"))
    assert "`both_ways` (kafka)" in cut
    degrade = next(ln for ln in page.splitlines() if ln.startswith("| `degrade` |"))
    assert "`loss_pct`" in degrade and "`rate_kbit`" in degrade
