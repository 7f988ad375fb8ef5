"""Reports: report.html rendered in a real headless Chromium, timeline.json and the run's JUnit
XML, from synthetic histories with known anomalies and from run directories without a verdict;
the configuration and the explanations the page shows. The transactions section, the index,
the matrix's JUnit and the figures have test files of their own; the real-cluster runs' reports
are opened in test_scenarios and test_kafka_real."""

from __future__ import annotations

import json
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from checkers.run import check_run
from reports.write import write_run_reports
from tests.browser import render
from tests.checkers.histories import event, recv, send, write
from tests.helpers import ROOT
from tests.reports.pages import checked_run, section


def anomalous_run(run_dir: Path) -> list[dict[str, Any]]:
    """Producer A sends 1..20 (one per second), acked 0.5 s later; a partition from 5.5 s to
    12.5 s; the reader loses 7 and 9 (acked inside the partition), gets 3 twice and 11 before
    10. Returns the events."""
    ev: list[dict[str, Any]] = []
    for seq in range(1, 21):
        ev += send("A", seq, float(seq), None)
        ev.append(event("A", "ok", "send", seq + 0.5, producer="A", seq=seq, stream="x"))
    resolve = {"op": "isolate", "roles": {"target": "leader"}, "nodes": {"target": ["rabbit2"]}}
    ev.append(event("nemesis", "info", "resolve", 5.49, value=resolve))
    ev.append(event("nemesis", "invoke", "start-partition", 5.5, value={"op": "isolate"}))
    ev.append(event("nemesis", "ok", "start-partition", 5.6, value={"op": "isolate"}))
    ev.append(event("nemesis", "invoke", "stop-partition", 12.5, value={"op": "heal"}))
    ev.append(event("nemesis", "ok", "stop-partition", 12.6, value={"op": "heal"}))
    state = {"leader": "rabbit1", "isr": ["rabbit1"], "answered_by": "rabbit3"}
    ev.append(event("partition-watch", "info", "partition-state", 6.0, partition=0, value=state))
    order = [s for s in range(1, 21) if s not in (7, 9, 10)] + [10]
    t = 30.0
    for seq in order:
        ev.append(recv("g", "A", seq, t))
        t += 0.1
    ev.append(recv("g", "A", 3, t))  # the duplicate
    write(run_dir / "history", ev)
    manifest = {
        "scenario": "synthetic",
        "claim": None,
        "expect": "safe",
        "run_id": "synthetic-1",
        "tier": "real-cluster",
        "started": 0.0,
        "ended": 40.0,
        "images": {"rabbitmq": {"name": "test", "version": "3.10.8"}},
    }
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    return ev


@pytest.mark.spark
def test_report_of_known_anomalies_renders_in_chromium(spark: Any, tmp_path: Path) -> None:
    run_dir = tmp_path / "synthetic" / "synthetic-1"
    anomalous_run(run_dir)
    verdict = check_run(run_dir, spark=spark)
    assert verdict["groups"]["g"]["lost"] == 2 and verdict["matched"] is False
    timeline = json.loads((run_dir / "timeline.json").read_text())
    # Lost 7 and 9 were acked at 7.5 and 9.5 s: seconds 6 and 8 since the first event (1.0).
    assert timeline["anomalies_at_ack"]["lost"]["g"] == [[6, 1], [8, 1]]
    assert timeline["anomalies_at_ack"]["duplicated"]["g"] == [[2, 1]]
    assert [s["f"] for s in timeline["steps"]] == ["start-partition", "stop-partition"]
    assert timeline["steps"][0]["resolved"] == ["target: leader = rabbit2"]
    assert sum(row["ok"] for row in timeline["sends"]) == 20
    assert timeline["partition_states"] == [
        {
            "at": 5.0,
            "partition": 0,
            "leader": "rabbit1",
            "isr": ["rabbit1"],
            "answered_by": "rabbit3",
        }
    ]
    report, junit = write_run_reports(run_dir)
    html = report.read_text()
    assert re.findall(r'<(?:script|link|img)[^>]+(?:src|href)="https?:', html) == []  # inlined
    assert "ids/g/lost.txt" in html and "A:7" in html
    assert 'id="partition-states"' in html
    # each step's kind in the fault registry's words
    assert "<td>network cut</td>" in html and "<td>heal</td>" in html
    shown = render(report, "report-synthetic.png")
    assert shown.console_errors == [] and shown.external_requests == []
    assert shown.step_bands == len(timeline["steps"]) == 2
    assert "does not match" in shown.verdict_text
    assert shown.screenshot.stat().st_size > 10_000
    case = ET.parse(junit).getroot().find("testsuite/testcase")
    assert case is not None and case.find("failure") is not None


def test_a_run_without_verdict_gets_a_report_and_a_junit_error(tmp_path: Path) -> None:
    run_dir = tmp_path / "K4" / "r1"
    (run_dir / "logs").mkdir(parents=True)
    (run_dir / "logs" / "kafka1.log").write_text("started\n")
    manifest = {"scenario": "K4", "claim": "K4", "run_id": "r1", "error": "cluster never came up"}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    report, junit = write_run_reports(run_dir)
    shown = render(report, "report-no-verdict.png")
    assert shown.console_errors == [] and shown.step_bands is None
    assert shown.verdict_text == "no verdict: cluster never came up"
    error = ET.parse(junit).getroot().find("testsuite/testcase/error")
    assert error is not None and error.get("message") == "cluster never came up"


def test_cli_report_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for args in (["report"], ["report", str(tmp_path / "nothing")], ["report", str(tmp_path)]):
        result = subprocess.run(
            [str(ROOT / ".venv/bin/harness"), *args], capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_report_folds_the_configuration_after_the_findings_and_says_each_file_keys_fate(
    tmp_path: Path,
) -> None:
    run_dir = checked_run(tmp_path / "orders" / "r1", None)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["settings"] = {
        "broker": {"min.insync.replicas": "1", "num.io.threads": "8", "log.segment.bytes": "1"},
        "producer P1": {"acks": "1", "linger.ms": "5"},
    }
    manifest["settings_from_scenario"] = {
        "broker": ["min.insync.replicas"],
        "producer P1": ["acks"],
    }
    default = "the scenario's min_insync_replicas: 2 (its default)"
    manifest["config_files"] = [
        {"file": "server.properties", "scope": "broker", "key": "min.insync.replicas",
         "value": "1", "fate": "replaced", "why": default},
        {"file": "server.properties", "scope": "broker", "key": "node.id", "value": "7",
         "fate": "left out", "why": "the harness sets it"},
        {"file": "p.properties", "scope": "producer P1", "key": "acks", "value": "1",
         "fate": "taken", "why": ""},
    ]  # fmt: skip
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    report, _ = write_run_reports(run_dir)
    html = report.read_text()
    # The findings come first; the configuration is folded below them.
    assert html.index('id="groups"') < html.index('<details id="configuration">')
    summary = section(html, "details", "configuration").split("</summary>")[0]
    assert "5 settings, 2 chosen by the scenario, 2 of them from your own files" in summary
    assert "(1 of the files' keys left out)" in summary
    settings = section(html, "table", "settings")
    row = re.search(r"<tr><td>broker</td><td><b>min.insync.replicas</b>.*?</tr>", settings)
    assert row is not None and "your file" in row.group(0)
    assert re.search(r"<td>num.io.threads</td>.*?<td>harness</td>", settings)
    fates = section(html, "table", "config-files")
    assert "node.id" in fates and "left out" in fates and "replaced" in fates


def test_report_says_why_from_the_brokers_evidence_and_what_it_cannot_explain(
    tmp_path: Path,
) -> None:
    run_dir = checked_run(tmp_path / "K1" / "r1", None)
    verdict = json.loads((run_dir / "verdict.json").read_text())
    cause = (
        "acknowledged by kafka2 (the leader then) in leader epoch 0, truncated on kafka2 at "
        "+33.5 s after kafka3 was elected (leader epoch 1, +16.4 s)"
    )
    verdict["explanations"] = {
        "messages": 2821,
        "explained": 2819,
        "unexplained": 2,
        "file": "explanations.csv",
        "causes": [
            {"anomaly": "lost", "explained": True, "cause": cause, "count": 2819,
             "samples": ["P1:10053", "P1:10054"]},
            {"anomaly": "lost", "explained": False, "count": 2, "samples": ["P1:9"],
             "cause": "no replica holds it and no truncation explains it"},
        ],
    }  # fmt: skip
    (run_dir / "verdict.json").write_text(json.dumps(verdict))
    html = write_run_reports(run_dir)[0].read_text()
    summary = section(html, "p", "explanations-summary")
    assert summary.startswith("2819 of 2821 anomalous messages explained")
    assert "<strong>2 unexplained</strong>" in summary and 'href="explanations.csv"' in summary
    table = section(html, "table", "explanations")
    assert cause in table and '<td class="n">2819</td>' in table
    assert "<strong>unexplained:</strong> no replica holds it" in table
    # A clean run's explanations are empty: no such section.
    verdict["explanations"] = {"messages": 0, "explained": 0, "unexplained": 0, "causes": []}
    (run_dir / "verdict.json").write_text(json.dumps(verdict))
    assert 'id="explanations' not in write_run_reports(run_dir)[0].read_text()
