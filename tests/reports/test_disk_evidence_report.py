"""The report's disk fault evidence: each sign a broker logged of the run's disk faults, named,
with its node, when and the line itself; a run without a disk fault shows no such section."""

from __future__ import annotations

from pathlib import Path

from reports.write import write_run_reports
from tests.reports.pages import safe_verdict_run, section

SHUTDOWN = (
    "[2026-11-29 13:08:37,834] ERROR Shutdown broker because all log dirs in /var/lib/kafka/data "
    "have failed (org.apache.kafka.storage.internals.log.LogManager)"
)


def test_a_disk_faulted_run_names_the_brokers_lines_that_show_it(tmp_path: Path) -> None:
    evidence = {
        "faults": ["disk-full"],
        "logs": ["kafka1", "kafka2", "kafka3"],
        "signs": [
            {
                "name": "all log dirs failed: broker shut down",
                "node": "kafka2",
                "count": 1,
                "first": 1795957717.8,
                "line": SHUTDOWN,
            }
        ],
    }
    run_dir = safe_verdict_run(tmp_path / "disk-full-leader" / "r1", disk_evidence=evidence)
    report, _ = write_run_reports(run_dir)
    html = report.read_text()
    assert "The run's disk faults (disk-full), and what the brokers logged" in section(
        html, "p", "disk-evidence-summary"
    )
    table = section(html, "table", "disk-evidence")
    assert "<td>all log dirs failed: broker shut down</td><td>kafka2</td>" in table
    assert "Shutdown broker because all log dirs" in table


def test_a_disk_fault_without_signs_says_so_and_a_run_without_one_shows_nothing(
    tmp_path: Path,
) -> None:
    quiet = {"faults": ["disk-error"], "logs": ["rabbit1"], "signs": []}
    run_dir = safe_verdict_run(tmp_path / "x" / "r1", disk_evidence=quiet)
    html = write_run_reports(run_dir)[0].read_text()
    said = section(html, "p", "disk-evidence-summary")
    assert "no broker's log (rabbit1) shows a known sign of them" in said
    assert 'id="disk-evidence"' not in html
    plain = safe_verdict_run(tmp_path / "y" / "r1", disk_evidence=None)
    assert "Disk fault evidence" not in write_run_reports(plain)[0].read_text()
