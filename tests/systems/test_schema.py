"""The scenario JSON Schema: generated from the models that validate a scenario, kept current in
docs/, named by every shipped scenario's first line, and in agreement with the models: what
they take it takes, and a few things they refuse it refuses too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from harness.new import SYSTEMS as TEMPLATE_SYSTEMS
from harness.new import template_text
from systems.schema import SCHEMA_FILE, modeline, schema_text
from tests.helpers import ROOT

SHIPPED = sorted((ROOT / "scenarios").rglob("*.y*ml"))
VALIDATOR = Draft202012Validator(json.loads(schema_text()))


def _errors(data: Any) -> list[str]:
    return [e.message for e in VALIDATOR.iter_errors(data)]


def test_the_schema_in_docs_is_the_one_the_models_give() -> None:
    assert SCHEMA_FILE.read_text() == schema_text(), "stale: run make reference"
    Draft202012Validator.check_schema(json.loads(schema_text()))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT / "scenarios")))
def test_every_shipped_scenario_points_at_the_schema_and_meets_it(path: Path) -> None:
    text = path.read_text()
    assert text.splitlines()[0] == f"# {modeline(path)}"
    assert (path.parent / modeline(path).split("=", 1)[1]).resolve() == SCHEMA_FILE
    assert _errors(yaml.safe_load(text)) == []


@pytest.mark.parametrize("system", TEMPLATE_SYSTEMS)
def test_harness_news_template_meets_the_schema(system: str, tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    text = template_text("mine", system, path)
    assert text.splitlines()[0] == f"# yaml-language-server: $schema={SCHEMA_FILE}"
    assert _errors(yaml.safe_load(text)) == []


def _k4() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "scenarios" / "K4.yaml").read_text())
    return data


def test_the_schema_takes_the_readmes_spellings() -> None:
    data = _k4()
    data["workload"]["producers"][0]["count"] = "20k"
    data["workload"]["producers"][0]["acks"] = 1
    assert _errors(data) == []


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda d: d["cluster"].update({"min.insync.replicas": 2}), "min.insync.replicas"),
        (lambda d: d["nemesis"][0].update({"op": "kil"}), "'kil' is not one of"),
        (lambda d: d["workload"]["producers"][0].update({"count": "lots"}), "'lots'"),
        (lambda d: d["cluster"].update({"modes": ["zookeeper"]}), "'zookeeper'"),
    ],
)
def test_the_schema_refuses_what_the_models_refuse(change: Any, words: str) -> None:
    data = _k4()
    change(data)
    assert any(words in e for e in _errors(data)), _errors(data)


def test_a_rabbitmq_scenario_is_read_with_rabbitmqs_schema() -> None:
    data: dict[str, Any] = yaml.safe_load((ROOT / "scenarios" / "R3.yaml").read_text())
    assert _errors(data) == []
    data["cluster"]["min_insync_replicas"] = 2  # a Kafka key
    assert any("min_insync_replicas" in e for e in _errors(data))
