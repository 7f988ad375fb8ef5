"""`harness new`: a commented scenario of the user's own that loads as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.new import SYSTEMS, template_text, write_template
from systems.kafka.scenario import KafkaScenario
from systems.registry import load_scenario, parse_scenario
from systems.scenario import ScenarioError
from tests.helpers import ROOT


@pytest.mark.parametrize("system", SYSTEMS)
def test_each_template_loads_as_written_and_lists_the_knobs(system: str, tmp_path: Path) -> None:
    path = write_template("mine", system, tmp_path / "mine.yaml")
    spec = load_scenario(path)
    assert spec.id == "mine" and spec.cluster.system == system
    text = path.read_text()
    assert text.count("\n#") + text.count("  #") > 10  # commented, knob by knob


def test_kafka_template_names_the_passthrough_maps() -> None:
    assert "kafka" in SYSTEMS
    text = (ROOT / "harness/templates/kafka.yaml").read_text()
    for field in ("broker_config", "broker_overrides", "topic_config", "config:"):
        assert field in text


def uncommented(text: str, first: str) -> str:
    """The text with the commented block that begins `# <first>` uncommented: that line and the
    commented lines after it that continue it (indented deeper, as YAML continues a block)."""
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith(f"# {first}"))
    indent = lines[start].index("#")
    lines[start] = lines[start].replace("# ", "", 1)
    for i in range(start + 1, len(lines)):
        if not lines[i].startswith(" " * indent + "#   "):
            break
        lines[i] = lines[i].replace("# ", "", 1)
    return "".join(lines)


def test_kafka_templates_transactional_lines_load_uncommented(tmp_path: Path) -> None:
    """The commented transactional producer, read_committed reader, copiers, output reader and
    transaction_version are the schema's: uncommented, the scenario loads."""
    text = template_text("mine", "kafka", tmp_path / "mine.yaml")
    for first in ("transaction_version:", "- id: T1", "isolation:", "- {id: copied", "copiers:"):
        text = uncommented(text, first)
    spec = parse_scenario(text)
    assert isinstance(spec, KafkaScenario)
    assert spec.cluster.transaction_version == 2
    txn = spec.workload.producers[1].transaction
    assert txn is not None and txn.client == "java" and txn.transactional_id == "T1"
    assert {r.id: (r.isolation, r.topic) for r in spec.workload.readers} == {
        "reader": ("read_committed", "input"),
        "copied": ("read_committed", "output"),
    }
    assert [c.id for c in spec.workload.copiers] == ["C1", "C2"]
    assert dict(spec.workload.coordinated()) == {
        "transaction-coordinator": "T1",
        "group-coordinator": "copy",
    }


def test_an_existing_file_an_unknown_system_and_a_bad_id_are_refused(tmp_path: Path) -> None:
    taken = tmp_path / "taken.yaml"
    taken.write_text("x")
    with pytest.raises(ScenarioError, match="exists"):
        write_template("taken", "kafka", taken)
    with pytest.raises(ScenarioError, match="--system takes"):
        write_template("x", "pulsar", tmp_path / "x.yaml")
    with pytest.raises(ScenarioError, match="scenario id"):
        write_template("a b", "kafka", tmp_path / "y.yaml")


def test_the_cli_writes_it_and_says_how_to_run_it(tmp_path: Path) -> None:
    out = tmp_path / "team.yaml"
    result = subprocess.run(
        [sys.executable, "-m", "harness.cli", "new", "team", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert out.exists() and f"make test-scenario SCENARIO={out}" in result.stdout


# A template's commented line of one knob: `# name: value` (a comment may follow its value).
KNOB_LINE = re.compile(r"^(?P<indent> *)# (?P<knob>[a-z_]+: .*)$")
# The commented lines that show an example rather than the default (uncommented, the scenario
# changes); every other commented knob line must leave the scenario as it was.
EXAMPLES = {
    "kafka": {
        "release",
        "flush_messages",
        "lazy_disks",
        "transaction_version",
        "broker_config",
        "broker_overrides",
        "topic_config",
        "config",
        "expect_errors",
    },
    "rabbitmq": {
        "lazy_disks",
        "fake_clock",
        "rabbitmq_conf",
        "advanced_config",
        "queue_arguments",
        "dead_letter",
        "expect_errors",
        "connection",
    },
}


def knob_lines(text: str) -> list[tuple[int, str]]:
    """(line index, knob name) of each single commented knob line of a template (its header,
    before `id:`, is prose)."""
    found = []
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("id:"))
    for i, line in enumerate(lines[start:], start):
        if m := KNOB_LINE.match(line):
            found.append((i, m["knob"].split(":")[0]))
    return found


@pytest.mark.parametrize("system", SYSTEMS)
def test_each_commented_knob_loads_uncommented_and_shows_its_default(
    system: str, tmp_path: Path
) -> None:
    """A template says its commented knobs are the defaults: each, uncommented alone, loads and
    changes nothing, but for the examples it names as such."""
    from systems.scenario import scenario_data

    text = template_text("mine", system, tmp_path / "mine.yaml")
    plain = parse_scenario(text).model_dump(mode="json")
    lines = text.splitlines(keepends=True)
    changed = set()
    knobs = knob_lines(text)
    assert len(knobs) > 10
    for i, knob in knobs:
        edited = [*lines]
        edited[i] = lines[i].replace("# ", "", 1)
        try:
            spec = parse_scenario("".join(edited))
        except ScenarioError as e:
            raise AssertionError(f"{system} template line {i + 1} ({knob}): {e}") from None
        assert scenario_data(spec)["id"] == "mine"
        if spec.model_dump(mode="json") != plain:
            changed.add(knob)
    assert changed == EXAMPLES[system]
