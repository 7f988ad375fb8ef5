"""The documentation as a user follows it: the README and every page of docs/.

- Its scenarios, as a user copies them: each ```yaml block with a top-level `id:` is a whole
  scenario that `harness validate` takes as written (a fragment, with no `id:`, shows only part
  of one and is skipped).
- Its command lines: every `harness ...` line of a code block names a command and options the
  CLI has, and every `make ...` line a target the Makefile has.
- The site: `make docs` builds it strictly (a broken link, a page left out of the nav)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from systems.kafka.scenario import KafkaScenario
from systems.registry import load_scenario
from tests.helpers import ROOT

README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
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


SCENARIOS = [
    (f"{page.relative_to(ROOT)}:{line}", body)
    for page in PAGES
    for line, body in scenarios(page.read_text())
]


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


def test_the_docs_show_whole_scenarios() -> None:
    assert len(SCENARIOS) >= 3  # the README's, the transactional producer's and the copy's


@pytest.mark.parametrize(("line", "body"), SCENARIOS, ids=[where for where, _ in SCENARIOS])
def test_each_scenario_of_the_docs_validates_as_written(
    line: str, body: str, tmp_path: Path
) -> None:
    path = tmp_path / "shown.yaml"
    path.write_text(body)
    spec = load_scenario(path)  # what `harness validate` does with a file
    assert spec.id


def test_every_transactional_example_is_a_whole_scenario() -> None:
    """A transactional example is one a user copies to try transactions: none is a fragment."""
    for page in PAGES:
        for line, body in yaml_blocks(page.read_text()):
            where = f"{page.relative_to(ROOT)}:{line}"
            if re.search(r"^\s*(copiers:|- \{.*transaction: )", body, re.M):
                assert (where, body) in SCENARIOS, f"{where} is a fragment"


def test_a_copy_example_faults_nothing_before_its_copiers_begin(tmp_path: Path) -> None:
    """On a fresh cluster the copiers' first transaction comes 20 s or more in (T1, T5): a fault
    before +25 s tests nothing of the copy, and a shrink keeps the warmup."""
    copies = []
    for where, body in SCENARIOS:
        path = tmp_path / "shown.yaml"
        path.write_text(body)
        spec = load_scenario(path)
        if isinstance(spec, KafkaScenario) and spec.workload.copiers:
            copies.append(spec)
            assert spec.nemesis and spec.nemesis[0].at >= 25, where
            assert spec.chaos is not None and spec.chaos.warmup >= 25, where
    assert copies


# Command lines as the docs show them: in a code block, or an inline `code` span.
BLOCK = re.compile(r"^[ \t]*```[a-z]*\n(?P<body>.*?)^[ \t]*```", re.M | re.S)
SPAN = re.compile(r"`(?P<body>(?:\.venv/bin/)?(?:harness|make) [^`]+)`")


def command_lines(text: str) -> list[str]:
    """Every `harness ...` and `make ...` line a page shows, its comment and prompt left off."""
    lines = [ln for m in BLOCK.finditer(text) for ln in m["body"].splitlines()]
    lines += [m["body"] for m in SPAN.finditer(text)]
    out = []
    for line in lines:
        line = re.sub(r"\s+#\s.*$", "", line.strip()).removeprefix("$ ")
        line = line.removeprefix(".venv/bin/")
        if re.match(r"^(harness|make) [a-z]", line):
            out.append(line)
    return out


COMMANDS = sorted(
    {
        (str(page.relative_to(ROOT)), line)
        for page in PAGES
        for line in command_lines(page.read_text())
    }
)


def _cli() -> Any:
    import typer

    from harness.cli import app

    return typer.main.get_command(app)


def _make_targets() -> set[str]:
    makefile = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([a-z][a-z0-9-]*):", makefile, re.M))


def test_the_docs_show_command_lines() -> None:
    assert len(COMMANDS) > 20


@pytest.mark.parametrize(("page", "line"), COMMANDS, ids=[f"{p}: {ln}" for p, ln in COMMANDS])
def test_each_command_line_names_what_the_cli_and_the_makefile_have(page: str, line: str) -> None:
    words = [w.strip("[]") for w in line.split()]
    if words[0] == "make":
        target = next((w for w in words[1:] if "=" not in w), "")
        assert target in _make_targets(), f"{page}: make has no target {target!r}: {line}"
        return
    command = _cli()
    path = []
    for word in words[1:]:
        if not hasattr(command, "commands") or word.startswith("-"):
            break
        assert word in command.commands, f"{page}: harness has no command {word!r}: {line}"
        command, path = command.commands[word], [*path, word]
    assert path, f"{page}: {line}"
    known = {opt for p in command.params for opt in (*p.opts, *getattr(p, "secondary_opts", ()))}
    for word in words:
        option = word.split("=", 1)[0]
        if option.startswith("--") and option != "--help":
            assert option in known, f"{page}: harness {' '.join(path)} has no {option}: {line}"


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env=os.environ | {"NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "scenario" / "index.html").exists()
