"""The JSON Schema of a scenario file, from the same pydantic models that validate it, so that
an editor completes and checks a scenario as `harness validate` would (the fields' types,
defaults, ranges and the comments that describe them). One file serves every system: a
scenario is read with its `cluster.system`'s schema, RabbitMQ's when it names none.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic.json_schema import models_json_schema

from systems.registry import DEFAULT_SYSTEM, SYSTEMS

SCHEMA_ID = "https://brokerjepsen.invalid/scenario.schema.json"
# Where the repository keeps it, and the line each shipped scenario starts with so that an
# editor with the YAML language server finds it.
REPOSITORY = Path(__file__).resolve().parent.parent
SCHEMA_FILE = REPOSITORY / "docs" / "scenario.schema.json"
MODELINE = "yaml-language-server: $schema="


def scenario_schema() -> dict[str, Any]:
    """One schema: each system's scenario under $defs, chosen by `cluster.system`."""
    refs, top = models_json_schema(
        [(s.scenario, "validation") for s in SYSTEMS.values()], ref_template="#/$defs/{model}"
    )
    by_system = {name: refs[(s.scenario, "validation")] for name, s in SYSTEMS.items()}
    choice: dict[str, Any] = by_system[DEFAULT_SYSTEM]
    for name, ref in by_system.items():
        if name == DEFAULT_SYSTEM:
            continue
        choice = {
            "if": {
                "properties": {
                    "cluster": {"properties": {"system": {"const": name}}, "required": ["system"]}
                },
                "required": ["cluster"],
            },
            "then": ref,
            "else": choice,
        }
    return _plain_descriptions(
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": SCHEMA_ID,
            "title": "brokerjepsen scenario",
            "description": "A scenario: a cluster, a workload, the faults and what it promises.",
            **choice,
            "$defs": top["$defs"],
        }
    )


def _plain_descriptions(node: Any) -> Any:
    """Descriptions on one line: they come from docstrings wrapped to the code's width."""
    if isinstance(node, dict):
        return {
            k: " ".join(v.split())
            if k == "description" and isinstance(v, str)
            else _plain_descriptions(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_plain_descriptions(v) for v in node]
    return node


def schema_text() -> str:
    return json.dumps(scenario_schema(), indent=2, sort_keys=True) + "\n"


def modeline(scenario_file: Path, schema: Path = SCHEMA_FILE) -> str:
    """The comment (without its `# `) that points an editor at the schema from a scenario at
    `scenario_file`: the schema's path relative to it."""
    here = scenario_file.resolve().parent
    if not here.is_relative_to(REPOSITORY):
        return f"{MODELINE}{schema.resolve()}"  # a user's own folder: the schema where it is
    return f"{MODELINE}{os.path.relpath(schema.resolve(), here)}"
