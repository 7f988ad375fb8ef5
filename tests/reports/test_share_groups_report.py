"""The report's share groups section: each group's fates and anomalies with their id files, per
consumer, partition and fault step, and each sampled anomaly's story; none without a share
group."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from checkers.share_groups import ANOMALIES
from reports.write import write_run_reports
from tests.reports.pages import safe_verdict_run, section

ZERO = dict.fromkeys(ANOMALIES, 0)


def _group(**counts: Any) -> dict[str, Any]:
    fates = {"accepted": 40, "rejected": 2, "archived": 1, "unknown": 1}
    fates |= {"unsettled": 1, "never_delivered": 2}
    return (
        {
            "topics": ["orders"],
            "delivery_count_limit": 5,
            "lock_duration_ms": 30000,
            "settings_from": "the manifest",
            "acked": 47,
            "records": 45,
            "acquisitions": 60,
            "unexpected": 0,
            "fates": fates,
            "never_delivered": 2,
            "unsettled": 1,
            "redelivered": {"released": 6, "lock_expired": 4, "dropped": 1, "after_unknown_ack": 1},
            "left_at_end": {"acquired": 0, "available": 1, "unknown": 1},
            "consumers": {
                "c1": {"client": "java", "acquired": 30, "accepted": 20, "released": 3}
                | {"rejected": 1, "refused": 2, "unknown": 1, "unacknowledged": 3}
                | ZERO
                | {"duplicated": 1},
                "never delivered": {"client": None} | ZERO | {"lost": 2},
            },
            "partitions": {"orders/0": {"records": 20, "acquisitions": 30} | ZERO | {"lost": 3}},
            "by_step": {"duplicated": {"2. kill kill kafka1 at +30.0 s": 1}},
            "samples": {
                "duplicated": [
                    {
                        "id": "orders/0@7 P:8",
                        "at": 1031.0,
                        "deliveries": [
                            {"record": "orders/0@7 P:8", "n": 1, "consumer": "c1", "at": 1029.0}
                            | {"delivery_count": 1, "ack": "accept", "status": "ok"}
                            | {"error": None, "redelivery": None},
                            {"record": "orders/0@7 P:8", "n": 2, "consumer": "c2", "at": 1031.0}
                            | {"delivery_count": 2, "ack": "accept", "status": "ok"}
                            | {"error": None, "redelivery": None},
                        ],
                    }
                ]
            },
        }
        | ZERO
        | counts
    )


def test_report_shows_what_each_share_group_did_with_its_records(tmp_path: Path) -> None:
    shares = {
        "groups": {"sg": _group(lost=3, duplicated=1)},
        "anomalies": ZERO | {"lost": 3, "duplicated": 1},
        "released_redelivered": 6,
        "lock_expired_redelivered": 4,
    }
    run = safe_verdict_run(
        tmp_path / "S2" / "s1", share_groups=shares, history_span={"first": 1000.0}
    )
    report, _ = write_run_reports(run)
    html = report.read_text()
    assert "<h2>Share groups</h2>" in html
    summary = section(html, "p", "share-groups-summary")
    assert "6 after a release, 4 after a lock's expiry" in summary
    table = section(html, "table", "share-groups")
    assert '<tr class="anomalous"><td>sg</td><td>orders</td><td>5, 30.0 s (the manifest)</td>' in (
        table
    )
    # acknowledged, then the fates: accepted ... never delivered, then the record anomalies.
    cells = '<td class="n">47</td><td class="n">40</td><td class="n">2</td><td class="n">1</td>'
    assert cells in table
    assert '<td class="n">6, 4, 1 (1)</td><td class="n">0, 1, 1</td>' in table
    assert 'href="ids/sg/share_lost.txt"' in table and 'href="ids/sg/share_duplicated.txt"' in table
    assert "share_over_limit" not in table
    consumers = section(html, "table", "share-consumers")
    assert "<td>sg</td><td>c1</td><td>java</td>" in consumers
    assert "<td>never delivered</td><td>-</td>" in consumers
    assert "<td>orders/0</td>" in section(html, "table", "share-partitions")
    steps = section(html, "table", "share-steps")
    assert "<td>2. kill kill kafka1 at +30.0 s</td>" in steps
    samples = section(html, "ul", "share-samples")
    assert (
        "orders/0@7 P:8: 1. c1 +29.0 s (count 1) accept ok; 2. c2 +31.0 s (count 2) accept ok"
        in samples
    )


def test_report_of_a_run_without_share_groups_has_no_such_section(tmp_path: Path) -> None:
    report, _ = write_run_reports(safe_verdict_run(tmp_path / "K4" / "k1"))
    html = report.read_text()
    assert "Share groups" not in html and 'id="share-groups"' not in html
