"""The figures the pages quote (harness.figures): each page shows the current one, and a figure
changes with its source."""

from __future__ import annotations

from pathlib import Path

import pytest

from compose.releases import setup_releases
from harness.figures import (
    FIGURES,
    PAGES,
    SCENARIOS_DIR,
    FigureError,
    ci_time,
    filled,
    kafka_images,
    scenarios_table,
    stale_pages,
)
from systems.schema import REPOSITORY

pytestmark = pytest.mark.unit


def test_every_page_shows_the_current_figures() -> None:
    stale = [str(p.relative_to(REPOSITORY)) for p in stale_pages()]
    assert stale == [], "stale: run make docs-figures"


def test_every_figure_is_shown_somewhere() -> None:
    text = "".join(p.read_text() for p in PAGES)
    assert [name for name in FIGURES if f"<!-- figure:{name} -->" not in text] == []


def test_a_stale_figure_is_replaced_and_the_rest_of_the_page_kept() -> None:
    page = "Lines <!-- figure:kafka-lines -->3.9 and 4.1<!-- /figure --> today.\n"
    new = filled(page, {"kafka-lines": "3.9, 4.1 and 4.4"})
    assert new == "Lines <!-- figure:kafka-lines -->3.9, 4.1 and 4.4<!-- /figure --> today.\n"
    assert filled(new, {"kafka-lines": "3.9, 4.1 and 4.4"}) == new


def test_a_figure_there_is_none_of_is_refused() -> None:
    with pytest.raises(FigureError, match="no figure 'kafka-line'"):
        filled("<!-- figure:kafka-line -->x<!-- /figure -->")


def test_the_ci_time_comes_from_the_figures_file(tmp_path: Path) -> None:
    figures = tmp_path / "figures.yaml"
    figures.write_text("ci: {date: 2027-01-02, total_min: 20.5, pytest_min: 19.0, passed: 9}\n")
    assert ci_time(figures).startswith("20.5 min on 2 cores")
    assert "2027-01-02: pytest 19.0 min, 9 tests passed" in ci_time(figures)
    figures.write_text("other: 1\n")
    with pytest.raises(FigureError, match="no ci figure"):
        ci_time(figures)


def test_the_images_are_those_setup_builds() -> None:
    images = kafka_images()
    assert all(f"{release}-debian" in images for release in setup_releases("kafka"))


def test_the_scenario_table_has_a_row_for_every_shipped_scenario() -> None:
    rows = scenarios_table().strip().splitlines()[2:]
    names = {row.split(" | ")[0].removeprefix("| ").strip("`") for row in rows}
    shipped = {
        p.relative_to(SCENARIOS_DIR).with_suffix("").as_posix()
        for p in SCENARIOS_DIR.rglob("*.yaml")
    }
    assert names == shipped
    assert {"T1", "T5", "rabbitmq-jepsen/RJ14", "chaos/kafka-safe"} <= names
