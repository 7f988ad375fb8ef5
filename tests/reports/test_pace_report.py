"""The report's producers table: each producer's rate asked beside the rate it reached, the
slow ones marked."""

from __future__ import annotations

from pathlib import Path

from reports.write import write_run_reports
from tests.reports.pages import safe_verdict_run, section


def test_the_producers_table_marks_a_producer_far_below_its_rate(tmp_path: Path) -> None:
    figures = {"nonmonotonic_sends": 0, "sends_begun": 4060, "sending_seconds": 70.0}
    run_dir = safe_verdict_run(
        tmp_path / "T2" / "t1",
        sends={"ok": 4060, "fail": 0, "info": 0},
        producers={
            "P1": figures
            | {
                "rate_asked": 500.0,
                "rate_reached": 58.0,
                "slow": True,
                "why_slow": "its transactions commit one at a time",
            },
            "P2": figures | {"rate_asked": 60.0, "rate_reached": 58.0, "slow": False},
            "P3": figures | {"rate_asked": 0.0, "rate_reached": 58.0, "slow": False},
        },
    )
    report, _ = write_run_reports(run_dir)
    table = section(report.read_text(), "table", "producers")
    assert "<th>rate asked / reached</th>" in table
    rows = {row.split("</td>")[0]: row for row in table.split("<tr><td>")[1:]}
    assert (
        '<td class="n slow">500/s / 58/s: <b>slow</b>, its transactions commit one at a '
        in rows["P1"]
    )
    assert '<td class="n">60/s / 58/s</td>' in rows["P2"]
    assert '<td class="n">unthrottled / 58/s</td>' in rows["P3"]
    assert "slow" not in rows["P2"] + rows["P3"]
