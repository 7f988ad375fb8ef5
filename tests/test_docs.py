"""The documentation as a user follows it: the README, results/README.md and every page of
docs/.

- Its scenarios, as a user copies them: each ```yaml block with a top-level `id:` is a whole
  scenario that `harness validate` takes as written (a fragment, with no `id:`, shows only part
  of one and is skipped).
- Its command lines: every `harness ...` line of a code block names a command and options the
  CLI has, and every `make ...` line a target the Makefile has.
- What it points at: each README section, repository file and harness option a page names
  exists.
- The site: `make docs` builds it strictly (a broken link, a page left out of the nav)."""

from __future__ import annotations

import os
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
PAGES = [README, ROOT / "results" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
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
    path: list[str] = []
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


# What the pages point at: the README's sections, the repository's files, the harness's options.
HEADING = re.compile(r"^#+\s+(?P<title>.+?)\s*$", re.M)
# A paragraph that opens with a bold sentence ("**The warm checker.** ...") is a section too.
RUN_IN = re.compile(r"^\*\*(?P<title>[^*]+?)[.:]?\*\*", re.M)
LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")
README_SECTION = re.compile(
    r"README(?:'s)? \"(?P<quoted>[^\"]+)\"|the README's (?P<named>[A-Z][\w -]*?) section"
)
SEE_SECTION = re.compile(r"see \"(?P<title>[^\"]+)\"")
# A repository path as a page writes it in code: a top-level folder and what is under it, or a
# top-level file.
PATH_SPAN = re.compile(r"`(?P<path>\.?[A-Za-z][\w.-]*(?:/[\w.-]*)+|Makefile|pyproject\.toml)`")
# Paths a page names that are not the repository's own: what a run writes (results/ is not
# tracked), what the nightly tier writes, and the files a page tells its reader to create.
NOT_THE_REPOSITORIES = ("results/", "site/", "test-artifacts/", "~/")
READERS_FILES = {"scenarios/orders.yaml", "scenarios/txn-mine.yaml"}
# A source a page cites in another project's tree (Apache Kafka's system tests).
OTHER_TREES = {
    "tests/kafkatest/tests/core/transactions_test.py",
    "tests/kafkatest/tests/client/share_consumer_test.py",
}


def slug(title: str) -> str:
    """The anchor a heading gets (Python-Markdown's toc and GitHub agree on these titles)."""
    words = re.sub(r"[^\w\s-]", "", title.lower()).split()
    return "-".join(words)


def sections(text: str) -> set[str]:
    prose = BLOCK.sub("", text)  # a `# comment` in a code block is no heading
    return {m["title"].strip("`") for m in (*HEADING.finditer(prose), *RUN_IN.finditer(prose))}


def test_sections_are_read_from_headings_and_bold_openings() -> None:
    text = "# Two commands\n\n**The warm checker.** It ...\n## Who runs what\n```\n# no\n```\n"
    assert sections(text) == {"Two commands", "The warm checker", "Who runs what"}
    assert slug("Who runs what") == "who-runs-what" and slug("`make`, then CI") == "make-then-ci"


def test_every_readme_section_a_page_names_exists() -> None:
    titles = sections(README.read_text())
    anchors = {slug(t) for t in titles}
    wrong = []
    for page in PAGES:
        text = page.read_text()
        for m in LINK.finditer(text):
            target, _, anchor = m["target"].partition("#")
            if target.endswith("README.md") and anchor and anchor not in anchors:
                wrong.append(f"{page.relative_to(ROOT)}: {m['target']}")
        for m in README_SECTION.finditer(text):
            if (m["quoted"] or m["named"]) not in titles:
                wrong.append(f"{page.relative_to(ROOT)}: {m[0]}")
    assert wrong == [], f"the README has no such section (it has {sorted(titles)})"


def test_every_section_a_page_sends_its_reader_to_exists() -> None:
    everywhere = {t for page in PAGES for t in sections(page.read_text())}
    wrong = [
        f"{page.relative_to(ROOT)}: {m[0]}"
        for page in PAGES
        for m in SEE_SECTION.finditer(page.read_text())
        if m["title"] not in everywhere
    ]
    assert wrong == []


def repository_paths(text: str) -> list[str]:
    """The repository paths a page names in code spans, placeholders and outputs left out."""
    tops = {p.name for p in ROOT.iterdir()}
    found = []
    for m in PATH_SPAN.finditer(text):
        path = m["path"]
        if path.startswith(NOT_THE_REPOSITORIES) or path.split("/")[0] not in tops:
            continue
        if "..." in path or (ROOT / "scenarios" / f"{path}.yaml").exists():
            continue  # a placeholder, or a scenario by the name `harness run` takes
        found.append(path)
    return found


def test_the_path_extraction_keeps_repository_paths_only() -> None:
    text = (
        "`systems/kafka/configdefs/`, `results/K4/`, `foo/bar`, `docs/<x>.md`, `Makefile`, "
        "`chaos/kafka-safe`, `chaos/...`, `chaos/gone`"
    )
    assert repository_paths(text) == ["systems/kafka/configdefs/", "Makefile", "chaos/gone"]


def test_every_repository_file_a_page_names_exists() -> None:
    checked, missing = 0, []
    for page in PAGES:
        text = page.read_text()
        named = [p for p in repository_paths(text) if p not in READERS_FILES | OTHER_TREES]
        for m in LINK.finditer(text):
            target = m["target"].partition("#")[0]
            if target and not re.match(r"^[a-z]+:", target):
                named.append(os.path.relpath(page.parent / target, ROOT))
        checked += len(named)
        missing += [f"{page.relative_to(ROOT)}: {p}" for p in named if not (ROOT / p).exists()]
    assert missing == []
    assert checked > 100  # the pages name that many: fewer is the extraction broken


def _harness_options() -> set[str]:
    found: set[str] = set()
    groups = [_cli()]
    while groups:
        for command in groups.pop().commands.values():
            if hasattr(command, "commands"):
                groups.append(command)
            for param in command.params:
                found |= {*param.opts, *getattr(param, "secondary_opts", ())}
    return found


def test_every_option_a_page_names_alone_is_the_harness_or_pytest_tiers() -> None:
    """An option named on its own (`--keep-days`), not in a whole command line: some harness
    command has it, or the tiers' pytest options."""
    tiers = set(re.findall(r"addoption\(\s*\"(--[a-z-]+)\"", (ROOT / "tests/tiers.py").read_text()))
    known = _harness_options() | tiers
    unknown = [
        f"{page.relative_to(ROOT)}: {m[0]}"
        for page in PAGES
        for m in re.finditer(r"`(--[a-z][a-z0-9-]*)[^`]*`", page.read_text())
        if m[1] not in known
    ]
    assert unknown == []
