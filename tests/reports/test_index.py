"""The index of runs: every run newest first with a link to its report, its size, and what the
next prune removes."""

from __future__ import annotations

import json
from pathlib import Path

from reports.index import render_index
from reports.write import write_run_reports


def test_index_lists_every_run_newest_first_and_links_its_report(tmp_path: Path) -> None:
    for i, (scenario, error) in enumerate([("K1", None), ("R1", "no engine"), ("K4", None)]):
        run_dir = tmp_path / scenario / f"run{i}"
        run_dir.mkdir(parents=True)
        manifest = {"scenario": scenario, "run_id": f"run{i}", "started": 100.0 + i, "error": error}
        (run_dir / "manifest.json").write_text(json.dumps(manifest))
        write_run_reports(run_dir)
    (tmp_path / "latest").symlink_to(Path("K4") / "run2")
    index = render_index(tmp_path)
    html = index.read_text()
    positions = [html.index(f">run{i}</a>") for i in (2, 1, 0)]
    assert positions == sorted(positions) and html.count("report.html") == 3
    assert "no verdict: no engine" in html


def test_index_shows_each_runs_size_and_marks_what_the_next_prune_removes(
    tmp_path: Path,
) -> None:
    from tests.contract.test_retention import plant

    old = plant(tmp_path, "K4", 30, size=2 * 1024**2)
    for days in (3, 2, 1):
        plant(tmp_path, "K4", days)
    html = render_index(tmp_path).read_text()
    row = next(r for r in html.split("<tr>") if old.name in r)
    assert '<td class="n">2.0</td>' in row
    assert "removed at the next prune: run 30 days old (keep 14)" in row
    assert html.count("removed at the next prune") == 1
