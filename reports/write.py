"""Every file a finished run gets for people and dashboards: report.html and junit.xml."""

from __future__ import annotations

from pathlib import Path

from reports.html import render_report
from reports.junit import write_run_junit
from reports.run_data import load


def write_run_reports(run_dir: Path) -> list[Path]:
    """RUN_DIR/report.html and RUN_DIR/junit.xml, from the run's manifest and verdict."""
    run = load(run_dir)
    return [render_report(run), write_run_junit(run_dir, run.manifest, run.verdict)]
