"""The report's Releases section: a rolling upgrade's periods as a table, its node upgrades,
each anomalous message with the releases it ran on, and the period boundaries on the timeline;
a run that did not upgrade shows no such section."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from checkers.releases import Start, release_section, span_counts, spans
from reports.figures import RELEASE_LINE_PREFIX, timeline_figure
from reports.run_data import load
from reports.write import write_run_reports
from tests.checkers.histories import NEW, OLD, finalize, nemesis_of, upgrade
from tests.reports.pages import safe_verdict_run, section

RUN_START = 1000.0
NODES = ("kafka1", "kafka2", "kafka3")


def upgraded(fail_kafka3: bool = False) -> dict[str, Any]:
    """verdict.json's releases for kafka1..3 upgraded at +10, +30, +50 s (10 s each), then
    metadata.version finalized, with a message lost while kafka1 alone ran 4.4.0."""
    events = [
        *upgrade("kafka1", RUN_START + 10, 10),
        *upgrade("kafka2", RUN_START + 30, 10),
        *upgrade("kafka3", RUN_START + 50, 10, "fail" if fail_kafka3 else "ok"),
        *finalize("metadata.version", "4.4-IV0", RUN_START + 70, {"metadata.version": "4.4-IV0"}),
    ]
    nemesis = nemesis_of(events)
    cut = spans(nemesis, RUN_START, RUN_START + 100)
    mixed = cut.index((RUN_START + 20, RUN_START + 30))
    placed = [{"metric": "lost", "group": "g", "step": str(mixed), "node": "kafka2", "count": 1}]
    listed = [
        {"metric": "lost", "group": "g", "msg_id": "P:250", "invoke_time": RUN_START + 25.0}
        | {"ack_time": RUN_START + 25.1, "node": "kafka2"}
    ]
    traffic = [{"w_start": a, "w_end": b, "sends": 7, "acked": 5, "delivered": 9} for a, b in cut]
    start = Start("kafka", OLD, NODES, {"metadata.version": "3.9-IV0"})
    counted = span_counts(cut, traffic, placed, listed)
    got = release_section(nemesis, start, counted, RUN_START, RUN_START + 100)
    assert got is not None
    return got


def report_of(run_dir: Path) -> str:
    return write_run_reports(run_dir)[0].read_text()


def test_an_upgraded_run_shows_its_periods_upgrades_and_the_releases_each_loss_ran_on(
    tmp_path: Path,
) -> None:
    run_dir = safe_verdict_run(
        tmp_path / "upgrade" / "r1",
        releases=upgraded(),
        history_span={"first": RUN_START, "last": RUN_START + 100},
    )
    html = report_of(run_dir)
    said = section(html, "p", "releases-summary")
    assert "started on 3.9.2 (kafka1, kafka2, kafka3)" in said
    assert "ended with kafka1, kafka2, kafka3 on 4.4.0: 3 of 3 node upgrades ok" in said
    periods = section(html, "table", "release-periods")
    assert periods.count("<tr") == 1 + 8  # the header, then all on 3.9.2 ... finalized
    # The period of the loss: kafka1 on 4.4.0, the others on 3.9.2, marked.
    assert (
        '<tr class="anomalous"><td class="n">3</td><td class="n">+20.0 s</td>'
        '<td class="n">+30.0 s</td><td>mixed</td><td>3.9.2: kafka2, kafka3; 4.4.0: kafka1</td>'
    ) in periods
    assert '<td class="n">1 in g</td>' in periods
    assert "<td>3.9.2: kafka2, kafka3; restarting onto 4.4.0: kafka1</td>" in periods
    assert "<td>metadata.version 4.4-IV0 finalized</td>" in periods
    assert "<td>metadata.version 3.9-IV0</td>" in periods  # the level before it
    upgrades = section(html, "table", "release-upgrades")
    assert "<td>kafka1</td><td>3.9.2</td><td>4.4.0</td>" in upgrades
    assert "in_sync true; waited_s 10" in upgrades
    lost = section(html, "table", "release-anomalies")
    assert (
        '<td>lost</td><td>g</td><td><code>P:250</code></td><td class="n">+25.0 s</td>'
        '<td class="n">+25.1 s</td><td>kafka2 (3.9.2)</td><td class="n">3</td>'
        "<td>3.9.2, 4.4.0</td>"
    ) in lost


def test_a_failed_upgrade_is_said_and_its_node_stays_on_the_old_release(tmp_path: Path) -> None:
    run_dir = safe_verdict_run(tmp_path / "upgrade" / "r2", releases=upgraded(fail_kafka3=True))
    html = report_of(run_dir)
    assert "kafka3 on 3.9.2; kafka1, kafka2 on 4.4.0: 2 of 3 node upgrades ok" in section(
        html, "p", "releases-summary"
    )
    upgrades = section(html, "table", "release-upgrades")
    assert "<td>fail</td><td>the broker did not come back</td>" in upgrades
    assert "<td>all on 4.4.0</td>" not in section(html, "table", "release-periods")


def test_a_run_without_an_upgrade_shows_no_releases(tmp_path: Path) -> None:
    html = report_of(safe_verdict_run(tmp_path / "plain" / "r1"))
    assert "<h2>Releases</h2>" not in html and "release-periods" not in html


def test_the_timeline_marks_where_each_release_period_begins(tmp_path: Path) -> None:
    run = load(safe_verdict_run(tmp_path / "upgrade" / "r3", releases=upgraded()))
    row = {"ok": 5, "fail": 0, "info": 0, "aborted": 0, "p50_ms": 3.0, "p99_ms": 9.0}
    run.timeline = {"run_start": RUN_START, "sends": [{"second": s} | row for s in range(100)]}
    figure = timeline_figure(run)
    lines = [s for s in figure.layout.shapes if (s.name or "").startswith(RELEASE_LINE_PREFIX)]
    assert [s.x0 for s in lines] == [10, 20, 30, 40, 50, 60, 71]  # the first period has none
    labels = [a.text for a in figure.layout.annotations if (a.text or "").startswith("R")]
    assert labels[0] == "R2 mixed" and labels[-1] == "R8 all on 4.4.0"
    assert NEW in labels[-1]
