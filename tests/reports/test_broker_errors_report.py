"""The report's broker errors: what the allow-list does not explain shown first, even in a safe
run; what it does folded away with the reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from checkers.run import check_run
from reports.write import write_run_reports
from tests.checkers.histories import event, recv, send, write
from tests.reports.pages import safe_verdict_run, section

PLANTED = (
    "2026-11-29T05:10:03.000000001Z 2026-11-29 05:10:03.000003+00:00 [error] <0.2100.0> "
    "Discarding message {'$gen_call',{<0.2101.0>,#Ref<0.1.2.3>},sync} from <0.2101.0> to "
    "<0.2100.0> in an old incarnation (3) of this node (2)\n"
)
BENIGN = (
    "2026-11-29T05:10:04.000000001Z 2026-11-29 05:10:04.000004+00:00 [error] <0.2001.0> ** Node "
    "rabbit@rabbit2 not responding **\n"
    "2026-11-29T05:10:04.000000002Z 2026-11-29 05:10:04.000004+00:00 [error] <0.2001.0> ** "
    "Removing (timedout) connection **\n"
)
INFO = "2026-11-29 05:10:00.123456+00:00 [info] <0.222.0> Server startup complete\n"


def safe_run(run_dir: Path, logs: dict[str, str]) -> None:
    """Producer A sends 1..20, each acknowledged; a partition from 5.5 s to 12.5 s; the reader
    receives every message once, in order: nothing for the checker to find."""
    ev: list[dict[str, Any]] = []
    for seq in range(1, 21):
        ev += send("A", seq, float(seq), "ok")
    ev.append(event("nemesis", "invoke", "start-partition", 5.5, value={"op": "isolate"}))
    ev.append(event("nemesis", "ok", "start-partition", 5.6, value={"op": "isolate"}))
    ev.append(event("nemesis", "invoke", "stop-partition", 12.5, value={"op": "heal"}))
    ev.append(event("nemesis", "ok", "stop-partition", 12.6, value={"op": "heal"}))
    ev += [recv("g", "A", seq, 30.0 + seq / 10) for seq in range(1, 21)]
    write(run_dir / "history", ev)
    manifest = {
        "scenario": "synthetic",
        "expect": "safe",
        "run_id": "safe-1",
        "system": "rabbitmq",
        "tier": "real-cluster",
        "images": {"rabbitmq": {"name": "test", "version": "3.10.8"}},
        "topology": {"nodes": [{"name": f"rabbit{i}"} for i in (1, 2, 3)]},
    }
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    (run_dir / "logs").mkdir()
    for name, text in logs.items():
        (run_dir / "logs" / f"{name}.log").write_text(text)


@pytest.mark.spark
def test_an_unknown_broker_error_surfaces_in_a_safe_runs_verdict_and_report(
    spark: Any, tmp_path: Path
) -> None:
    run_dir = tmp_path / "synthetic" / "safe-1"
    run_dir.mkdir(parents=True)
    safe_run(run_dir, {"rabbit1": INFO + PLANTED + BENIGN, "rabbit2": INFO + BENIGN})
    verdict = check_run(run_dir, spark=spark)
    assert verdict["outcome"] == "safe" and verdict["matched"] is True  # it stays safe
    errors = verdict["broker_errors"]
    assert (errors["lines"], errors["unexplained"]) == (3, 1)
    planted = errors["templates"][0]
    assert planted["template"] == (
        "ERROR Discarding message {'<v>',{<pid>,#Ref<id>},sync} from <pid> to <pid> in an old "
        "incarnation (<n>) of this node (<n>)"
    )
    assert (planted["count"], planted["nodes"], planted["allowed"]) == (1, ["rabbit1"], False)
    assert json.loads((run_dir / "verdict.json").read_text())["broker_errors"] == errors
    summary = (run_dir / "summary.txt").read_text()
    assert "1 broker error lines of 1 templates not known to be benign: see report" in summary
    report, _ = write_run_reports(run_dir)
    html = report.read_text()
    shown = section(html, "table", "broker-errors")
    assert "Discarding message" in shown and "<td>rabbit1</td>" in shown
    assert "not responding" not in shown
    benign = section(html, "details", "broker-errors-benign")
    assert "2 entries of 1 templates known to be benign" in benign
    assert "<td>rabbit1, rabbit2</td>" in benign and "Erlang distribution losing a peer" in benign


def test_a_run_whose_broker_logged_only_benign_errors_shows_no_table(tmp_path: Path) -> None:
    benign = {
        "template": "ERROR [RaftManager id=<n>] Graceful shutdown of RaftClient failed",
        "count": 2,
        "nodes": ["kafka2"],
        "first": 100.0,
        "sample": "[RaftManager id=2] Graceful shutdown of RaftClient failed",
        "allowed": True,
        "why": "a voter stopped while it cannot reach the quorum",
    }
    broker_errors = {
        "system": "kafka",
        "release_line": "4.1",
        "logs": ["kafka1", "kafka2", "kafka3"],
        "lines": 2,
        "templates": [benign],
        "unexplained": 0,
    }
    run_dir = safe_verdict_run(tmp_path / "K1" / "r1", broker_errors=broker_errors)
    report, _ = write_run_reports(run_dir)
    html = report.read_text()
    said = section(html, "p", "broker-errors-summary")
    assert said == "2 error entries in the logs of kafka1, kafka2, kafka3 (kafka 4.1)."
    assert 'id="broker-errors"' not in html
    assert "cannot reach the quorum" in section(html, "details", "broker-errors-benign")
