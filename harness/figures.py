"""The figures the documentation quotes that change with the code or with a new measurement,
each from one source and written into every page that shows it: the release lines and images
(compose/images/releases.txt), the claims matrix's default lines (harness.claims), the fast
tier's CI time (docs/figures.yaml) and the table of shipped scenarios (scenarios/, as
`harness list` shows them).

A page shows a figure between `<!-- figure:NAME -->` and `<!-- /figure -->`; `make docs-figures`
(`python -m harness.figures`) rewrites what is between them, and a test fails while a page
shows something else there.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from compose.releases import setup_releases
from contract.versions import line_of
from systems.schema import REPOSITORY

DOCS = REPOSITORY / "docs"
FIGURES_FILE = DOCS / "figures.yaml"
SCENARIOS_DIR = REPOSITORY / "scenarios"
# The pages that may show figures: the README and every page of docs/ but the generated ones.
PAGES = [
    REPOSITORY / "README.md",
    *sorted(p for p in DOCS.rglob("*.md") if "reference" not in p.parts),
]
MARKER = re.compile(r"<!-- figure:(?P<name>[a-z-]+) -->(?P<body>.*?)<!-- /figure -->", re.S)


class FigureError(Exception):
    """A page names a figure there is none of, or the figures file lacks one."""


def _named(items: list[str]) -> str:
    """4.1 / 4.1 and 4.4 / 3.9, 4.1 and 4.4."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _lines(kind: str) -> list[str]:
    return [line_of(r) for r in setup_releases(kind)]


def kafka_lines() -> str:
    return _named(_lines("kafka"))


def rabbitmq_lines() -> str:
    return _named(_lines("rabbitmq"))


def claims_lines() -> str:
    from harness.claims import DEFAULT_KAFKA_LINES, DEFAULT_RABBITMQ_LINES

    return (
        f"Kafka {_named(list(DEFAULT_KAFKA_LINES))} and "
        f"RabbitMQ {_named(list(DEFAULT_RABBITMQ_LINES))}"
    )


def kafka_images() -> str:
    from systems.kafka.configdefs import IMAGE

    first, *others = (IMAGE.format(release=r) for r in setup_releases("kafka"))
    return _named([f"`{first}`", *(f"`{image.partition(':')[2]}`" for image in others)])


def rabbitmq_images() -> str:
    from systems.rabbitmq.confschema import LOCAL_IMAGE

    return _named([f"`{LOCAL_IMAGE.format(release=r)}`" for r in setup_releases("rabbitmq")])


def ci_time(figures_file: Path = FIGURES_FILE) -> str:
    try:
        ci: dict[str, Any] = yaml.safe_load(figures_file.read_text())["ci"]
        return (
            f"{ci['total_min']} min on 2 cores (`make setup` and `make test` on a clean clone, "
            f"{ci['date']}: pytest {ci['pytest_min']} min, {ci['passed']} tests passed)"
        )
    except (OSError, TypeError, KeyError, yaml.YAMLError) as e:
        raise FigureError(f"{figures_file}: no ci figure ({e})") from None


def scenarios_table() -> str:
    """Every shipped scenario as `harness list` shows it, one row each."""
    from harness.scenario_options import scenario_row, scenarios_in_order

    rows = ["| scenario | claim | runs on | expect | description |", "|---|---|---|---|---|"]
    for path in scenarios_in_order(SCENARIOS_DIR):
        cells = [" ".join(c.split()).replace("|", "\\|") for c in scenario_row(path, SCENARIOS_DIR)]
        cells[0] = f"`{cells[0]}`"
        rows.append("| " + " | ".join(cells) + " |")
    return "\n" + "\n".join(rows) + "\n"


FIGURES: dict[str, Callable[[], str]] = {
    "kafka-lines": kafka_lines,
    "rabbitmq-lines": rabbitmq_lines,
    "claims-lines": claims_lines,
    "kafka-images": kafka_images,
    "rabbitmq-images": rabbitmq_images,
    "ci-time": ci_time,
    "scenarios": scenarios_table,
}


def filled(text: str, values: dict[str, str] | None = None) -> str:
    """The page with each figure's current value between its markers."""
    cache = dict(values or {})

    def value(m: re.Match[str]) -> str:
        name = m["name"]
        if name not in FIGURES:
            raise FigureError(f"no figure {name!r} (figures: {', '.join(FIGURES)})")
        if name not in cache:
            cache[name] = FIGURES[name]()
        return f"<!-- figure:{name} -->{cache[name]}<!-- /figure -->"

    return MARKER.sub(value, text)


def stale_pages(pages: list[Path] = PAGES) -> list[Path]:
    """The pages that show a figure other than its current value."""
    values = {name: figure() for name, figure in FIGURES.items()}
    return [p for p in pages if filled(p.read_text(), values) != p.read_text()]


def write_figures(pages: list[Path] = PAGES) -> list[Path]:
    """Writes the current figures into every page that shows one; the pages it changed."""
    values = {name: figure() for name, figure in FIGURES.items()}
    changed = []
    for page in pages:
        text = page.read_text()
        if (new := filled(text, values)) != text:
            page.write_text(new)
            changed.append(page)
    return changed


def main() -> int:
    try:
        changed = write_figures()
    except FigureError as e:
        print(f"docs-figures: {e}", file=sys.stderr)
        return 2
    for page in changed:
        print(f"wrote {page.relative_to(REPOSITORY)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
