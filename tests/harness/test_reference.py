"""docs/reference/ is generated from the code and kept current: a page that differs from what
the code gives, a model left out of it, or an op without a word on what it does fails here."""

from __future__ import annotations

import pytest

from faults.registry import OPS
from harness.reference import REFERENCE_DIR, SECTIONS, reference_files
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
