"""The README's scenarios, as a user copies them: each ```yaml block with a top-level `id:` is a
whole scenario that `harness validate` takes as written (a fragment, with no `id:`, shows only
part of one and is skipped)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
import yaml

from systems.kafka.scenario import KafkaScenario
from systems.registry import load_scenario
from tests.helpers import ROOT

README = ROOT / "README.md"
# A fence may be indented (a block inside a numbered list); its body is as indented as the fence.
FENCE = re.compile(r"^(?P<indent>[ \t]*)```yaml\n(?P<body>.*?)^(?P=indent)```", re.M | re.S)


def yaml_blocks(text: str) -> list[tuple[int, str]]:
    """(line, text) of every ```yaml block, dedented to its fence."""
    return [
        (text.count("\n", 0, m.start()) + 2, textwrap.dedent(m["body"]))
        for m in FENCE.finditer(text)
    ]


def scenarios(text: str) -> list[tuple[int, str]]:
    return [
        (line, body)
        for line, body in yaml_blocks(text)
        if isinstance(data := yaml.safe_load(body), dict) and "id" in data
    ]


SCENARIOS = scenarios(README.read_text())


def test_the_extraction_finds_blocks_and_skips_fragments() -> None:
    text = (
        "intro\n```yaml\nworkload: {producers: []}\n```\n"
        "1. a list\n   ```yaml\n   id: x\n   expect: safe\n   ```\n"
        "```\nid: not yaml-fenced\n```\n"
    )
    assert [body for _, body in yaml_blocks(text)] == [
        "workload: {producers: []}\n",
        "id: x\nexpect: safe\n",
    ]
    assert [line for line, _ in scenarios(text)] == [7]


def test_the_readme_shows_whole_scenarios() -> None:
    assert len(SCENARIOS) >= 2  # the transactional producer's and the copy's, at least


@pytest.mark.parametrize(("line", "body"), SCENARIOS, ids=[f"line{n}" for n, _ in SCENARIOS])
def test_each_readme_scenario_validates_as_written(line: int, body: str, tmp_path: Path) -> None:
    path = tmp_path / f"readme-{line}.yaml"
    path.write_text(body)
    spec = load_scenario(path)  # what `harness validate` does with a file
    assert spec.id


def test_every_transactional_example_is_a_whole_scenario() -> None:
    """A transactional example is one a user copies to try transactions: none is a fragment."""
    for line, body in yaml_blocks(README.read_text()):
        if re.search(r"^\s*(copiers:|- \{.*transaction: )", body, re.M):
            assert (line, body) in SCENARIOS, f"README.md:{line} is a fragment"


def test_a_copy_example_faults_nothing_before_its_copiers_begin(tmp_path: Path) -> None:
    """On a fresh cluster the copiers' first transaction comes 20 s or more in (T1, T5): a fault
    before +25 s tests nothing of the copy, and a shrink keeps the warmup."""
    copies = []
    for line, body in SCENARIOS:
        path = tmp_path / f"readme-{line}.yaml"
        path.write_text(body)
        spec = load_scenario(path)
        if isinstance(spec, KafkaScenario) and spec.workload.copiers:
            copies.append(spec)
            assert spec.nemesis and spec.nemesis[0].at >= 25, f"README.md:{line}"
            assert spec.chaos is not None and spec.chaos.warmup >= 25, f"README.md:{line}"
    assert copies
