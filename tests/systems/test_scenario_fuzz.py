"""Fuzzing the scenario loader: whatever a file holds, a scenario or one line naming the file
(and the field), never another exception."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from systems.registry import load_scenario, parse_scenario
from systems.scenario import ScenarioError, scenario_data
from tests.helpers import ROOT

pytestmark = pytest.mark.unit

EXAMPLES = int(os.environ.get("BJ_FUZZ_EXAMPLES") or 400)  # more for a long fuzz by hand
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
TRIED: dict[str, int] = {}  # inputs tried per fuzzer, printed for the closing figures


def _count(name: str) -> None:
    TRIED[name] = TRIED.get(name, 0) + 1


leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from(["kafka", "rabbitmq", "kafka-mock", "leader", "all", "kill", "heal", "1M"])
)
values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)


def _one_line_naming(error: ScenarioError, source: str) -> None:
    text = str(error)
    assert "\n" not in text, text
    assert text.startswith(source), text


def _load(text: str | bytes, tmp_path: Path) -> None:
    path = tmp_path / "fuzzed.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    try:
        load_scenario(path)
    except ScenarioError as e:
        _one_line_naming(e, str(path))


@settings(max_examples=EXAMPLES, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=300))
def test_random_bytes(tmp_path: Path, data: bytes) -> None:
    _count("random bytes")
    _load(data, tmp_path)


@settings(max_examples=EXAMPLES, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=300))
def test_random_text(tmp_path: Path, text: str) -> None:
    _count("random text")
    _load(text, tmp_path)


@settings(max_examples=EXAMPLES, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values)
def test_random_yaml_documents(tmp_path: Path, doc: Any) -> None:
    _count("random YAML")
    _load(yaml.safe_dump(doc), tmp_path)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a parsed scenario a value can be changed."""
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            found += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            found += _paths(v, (*prefix, i))
    return found


def _mutate(doc: Any, path: tuple[Any, ...], how: str, value: Any) -> Any:
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    if how == "delete":
        del parent[last]
    elif how == "add" and isinstance(parent, dict):
        parent[f"{last}_unknown"] = value
    else:
        parent[last] = value
    return doc


@settings(max_examples=EXAMPLES * 3, deadline=None)
@given(
    st.sampled_from(SCENARIOS),
    st.data(),
    st.sampled_from(["replace", "delete", "add"]),
    values,
)
def test_real_scenarios_with_one_field_broken(
    scenario: Path, data: st.DataObject, how: str, value: Any
) -> None:
    _count("one field of a real scenario")
    doc = yaml.safe_load(scenario.read_text())
    path = data.draw(st.sampled_from(_paths(doc)))
    text = yaml.safe_dump(_mutate(doc, path, how, value))
    try:
        parsed = parse_scenario(text, scenario.name)
    except ScenarioError as e:
        _one_line_naming(e, scenario.name)
        return
    # What loads is a scenario that writes back and loads again as itself.
    again = parse_scenario(yaml.safe_dump(scenario_data(parsed)), scenario.name)
    assert again == parsed


def test_numbers_a_yaml_parser_makes_of_odd_words() -> None:
    for word in (".nan", ".inf", "-.inf", "1e400", "0x10", "1_000", "2001-12-14", "~", "yes"):
        text = f"id: x\nworkload: {{publishers: [{{id: A, count: {word}}}]}}\n"
        try:
            parse_scenario(text, "odd.yaml")
        except ScenarioError as e:
            _one_line_naming(e, "odd.yaml")
    assert math.isnan(yaml.safe_load("x: .nan")["x"])


def teardown_module() -> None:
    print(f"\nscenario fuzzers, inputs tried: {TRIED}", file=sys.stderr)
