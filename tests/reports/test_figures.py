"""The report's figures drawn from a run's timeline."""

from __future__ import annotations

from pathlib import Path

from reports.figures import timeline_figure
from reports.run_data import load
from tests.reports.pages import checked_run


def test_the_timeline_draws_aborted_sends_only_when_there_are_some(tmp_path: Path) -> None:
    run = load(checked_run(tmp_path / "T2" / "t1", None))
    row = {"ok": 5, "fail": 0, "info": 0, "aborted": 0, "p50_ms": 3.0, "p99_ms": 9.0}
    sends = [{"second": s} | row for s in range(3)]
    run.timeline = {"run_start": 0.0, "sends": sends}
    assert "aborted sends/s" not in {t.name for t in timeline_figure(run).data}
    sends[1]["aborted"] = 4
    drawn = {t.name: t for t in timeline_figure(run).data}
    assert list(drawn["aborted sends/s"].y) == [0, 4, 0]
