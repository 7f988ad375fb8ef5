"""Which release each event ran on: a rolling upgrade's release periods from the nemesis's
events, the workload counted in each, and the anomalous messages with the releases they ran
on."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from checkers.attribution import NEVER_ACKED
from checkers.releases import (
    Start,
    release_section,
    span_counts,
    spans,
    summary_lines,
)
from checkers.run import check_run, with_releases
from contract.manifest import Manifest
from tests.checkers.histories import (
    NEW,
    OLD,
    event,
    finalize,
    nemesis_of,
    recv,
    send,
    upgrade,
    write,
)

NODES = ("kafka1", "kafka2", "kafka3")
START = Start(system="kafka", release=OLD, nodes=NODES, features={"metadata.version": "3.9-IV0"})
RUN_START, RUN_END = 1.0, 100.0


def rolling_upgrade() -> list[dict[str, Any]]:
    """kafka1, kafka2, kafka3 onto 4.4.0 (each down 10 s), then metadata.version and
    transaction.version finalized."""
    return nemesis_of(
        [
            *upgrade("kafka1", 10, 10),
            *upgrade("kafka2", 30, 10),
            *upgrade("kafka3", 50, 10),
            *finalize(
                "metadata.version", "4.4-IV0", 70, {"metadata.version": "4.4-IV0", "kraft": "1"}
            ),
            *finalize(
                "transaction.version",
                "2",
                80,
                {"metadata.version": "4.4-IV0", "transaction.version": "2"},
            ),
        ]
    )


def traffic(cut: list[tuple[float, float]]) -> list[dict[str, Any]]:
    """window_traffic's rows for the spans: 10 sends and acks a second, 20 deliveries."""
    return [
        {"w_start": a, "w_end": b, "sends": 10 * (b - a), "acked": 10 * (b - a)}
        | {"delivered": 20 * (b - a), "exposed": 0, "first_exposed": 0}
        for a, b in cut
    ]


def test_a_rolling_upgrade_is_cut_into_periods_with_a_loss_in_the_mixed_one() -> None:
    nemesis = rolling_upgrade()
    cut = spans(nemesis, RUN_START, RUN_END)
    assert cut[0] == (RUN_START, 10) and cut[-1] == (81, RUN_END) and len(cut) == 11
    mixed = cut.index((20, 30))  # kafka1 on 4.4.0, kafka2 and kafka3 on 3.9.2
    placed = [
        {"metric": "lost", "group": "g", "step": str(mixed), "node": "kafka2", "count": 3},
        {"metric": "lost", "group": "g2", "step": str(mixed), "node": "kafka2", "count": 1},
        {"metric": "duplicated", "group": "g", "step": str(len(cut) - 1), "node": "x", "count": 2},
        {"metric": "reordered", "group": "g", "step": NEVER_ACKED, "node": None, "count": 1},
    ]
    listed = [
        # Sent while kafka1 was restarting, acknowledged by kafka2 once kafka1 ran 4.4.0.
        {"metric": "lost", "group": "g", "msg_id": "P:190", "invoke_time": 19.5}
        | {"ack_time": 20.5, "node": "kafka2"},
        {"metric": "lost", "group": "g", "msg_id": "P:250", "invoke_time": 25.0}
        | {"ack_time": 25.1, "node": "kafka1"},
    ]
    counted = span_counts(cut, traffic(cut), placed, listed)
    section = release_section(nemesis, START, counted, RUN_START, RUN_END)
    assert section is not None
    periods = section["periods"]
    assert [(p["start"], p["end"], p["kind"]) for p in periods] == [
        (RUN_START, 10, "all on 3.9.2"),
        (10, 20, "mixed"),
        (20, 30, "mixed"),
        (30, 40, "mixed"),
        (40, 50, "mixed"),
        (50, 60, "mixed"),
        (60, 71, "all on 4.4.0"),  # the finalize's invoke at 70 changes nothing yet
        (71, 81, "all on 4.4.0"),
        (81, RUN_END, "all on 4.4.0"),
    ]
    assert periods[1]["on"] == {OLD: ["kafka2", "kafka3"]}
    assert periods[1]["restarting"] == {"kafka1": NEW}
    assert periods[2]["on"] == {OLD: ["kafka2", "kafka3"], NEW: ["kafka1"]}
    assert periods[4]["on"] == {OLD: ["kafka3"], NEW: ["kafka1", "kafka2"]}
    assert periods[6]["on"] == {NEW: list(NODES)}
    # Each period's traffic is the sum of its spans'.
    assert [p["acked"] for p in periods] == [10 * (p["end"] - p["start"]) for p in periods]
    assert sum(p["delivered"] for p in periods) == 20 * (RUN_END - RUN_START)
    assert periods[2]["lost"] == {"g": 3, "g2": 1}
    assert all(not p["lost"] for p in periods if p["number"] != 3)
    assert periods[-1]["duplicated"] == {"g": 2}
    assert section["never_acknowledged"] == {"reordered": {"g": 1}}
    # The features: what the manifest said, then what each finalize's ok reported.
    assert [p["features"] for p in periods[5:]] == [
        {"metadata.version": "3.9-IV0"},
        {"metadata.version": "3.9-IV0"},
        {"metadata.version": "4.4-IV0"},
        {"metadata.version": "4.4-IV0", "transaction.version": "2"},
    ]
    assert [f["feature"] for f in periods[7]["finalized"]] == ["metadata.version"]
    assert periods[7]["finalized"][0] | {"time": 0} == {
        "feature": "metadata.version",
        "level": "4.4-IV0",
        "time": 0,
        "outcome": "ok",
    }
    assert section["started_on"] == OLD and section["ended_on"] == {NEW: list(NODES)}
    first = section["upgrades"][0]
    assert first["nodes"] == ["kafka1"] and (first["start"], first["end"]) == (10, 20)
    assert first["outcome"] == "ok" and first["in_sync"] is True and first["waited_s"] == 10
    assert "scheduled" not in first
    assert [u["outcome"] for u in section["upgrades"]] == ["ok", "ok", "ok"]
    assert section["finalized"][1]["levels"]["transaction.version"] == "2"
    across, inside = section["anomalies"]
    assert (across["period"], across["releases"], across["node_release"]) == (3, [OLD, NEW], OLD)
    assert (inside["period"], inside["releases"], inside["node_release"]) == (3, [OLD, NEW], NEW)


def test_a_failed_upgrade_keeps_its_node_on_the_old_release() -> None:
    nemesis = nemesis_of([*upgrade("kafka1", 10, 5, "fail"), *upgrade("kafka2", 30, 5, "info")])
    section = release_section(nemesis, START, None, RUN_START, RUN_END)
    assert section is not None
    periods = section["periods"]
    assert [(p["start"], p["kind"]) for p in periods] == [
        (RUN_START, "all on 3.9.2"),
        (10, "mixed"),  # kafka1 restarting
        (15, "all on 3.9.2"),  # the failed upgrade left it on 3.9.2
        (30, "mixed"),
        (35, "mixed"),  # kafka2's upgrade of unknown outcome: either release
    ]
    assert periods[2]["on"] == {OLD: list(NODES)}
    assert periods[4]["on"] == {OLD: ["kafka1", "kafka3"], f"{OLD} or {NEW}": ["kafka2"]}
    failed = section["upgrades"][0]
    assert failed["outcome"] == "fail" and failed["error"] == "the broker did not come back"
    assert [p["acked"] for p in periods] == [0] * 5  # no counts given: none counted


def test_a_run_without_an_upgrade_has_no_releases_key() -> None:
    plain = nemesis_of(
        [
            event("nemesis", "invoke", "restart", 10, value={"nodes": ["kafka1"]}),
            event("nemesis", "ok", "restart", 12, value={"nodes": ["kafka1"]}),
        ]
    )
    assert spans(plain, RUN_START, RUN_END) == []
    assert release_section(plain, START, None, RUN_START, RUN_END) is None
    verdict: dict[str, Any] = {}
    result = SimpleNamespace(
        nemesis=plain, release_counts=None, history_span={"first": RUN_START, "last": RUN_END}
    )
    with_releases(verdict, result, Manifest())
    assert "releases" not in verdict
    with_releases(
        verdict, SimpleNamespace(**vars(result) | {"nemesis": rolling_upgrade()}), Manifest()
    )
    # No manifest: the nodes the upgrades name, on the release they were upgraded from.
    releases = verdict["releases"]
    assert releases["started_on"] == OLD and releases["periods"][0]["on"] == {OLD: list(NODES)}
    assert summary_lines(None) == []


def test_the_start_is_read_from_the_manifest() -> None:
    kafka = Manifest(
        system="kafka",
        images={"kafka": {"name": "brokerjepsen/kafka:3.9.2", "version": "3.9.2"}},
        topology={
            "nodes": [
                {"name": "kafka1", "role": "combined"},
                {"name": "zk1", "role": "zookeeper"},
                {"name": "kafka4", "role": "broker", "spare": True},
                {"name": "kafka2", "role": "broker"},
            ]
        },
        kafka_features={"metadata.version": "3.9-IV0", "kraft.version": 0},
    )
    assert Start.of(kafka) == Start(
        "kafka",
        "3.9.2",
        ("kafka1", "kafka2"),
        {"metadata.version": "3.9-IV0", "kraft.version": "0"},
    )
    rabbit = Manifest(
        images={"rabbitmq": {"version": "3.10.25"}, "nemesis_tools": {"name": "tools"}},
        topology={"nodes": [{"name": "rabbit1", "container": "c1", "address": "a"}]},
    )
    assert Start.of(rabbit) == Start("rabbitmq", "3.10.25", ("rabbit1",), {})
    assert Start.of(Manifest()) == Start()


def test_a_rabbitmq_feature_flag_and_a_node_the_manifest_does_not_name() -> None:
    nemesis = nemesis_of(
        [
            *upgrade("rabbit1", 10, 5, old="3.13.7", new="4.0.9"),
            event("nemesis", "invoke", "finalize-feature", 30, value={"feature": "khepri_db"}),
            event("nemesis", "ok", "finalize-feature", 31, value={"feature": "khepri_db"}),
        ]
    )
    section = release_section(nemesis, Start(system="rabbitmq"), None, RUN_START, RUN_END)
    assert section is not None
    periods = section["periods"]
    assert [p["on"] for p in periods] == [
        {"3.13.7": ["rabbit1"]},  # known from its upgrade's `from`
        {},
        {"4.0.9": ["rabbit1"]},
        {"4.0.9": ["rabbit1"]},
    ]
    assert periods[-1]["features"] == {"khepri_db": "enabled"}
    assert periods[-1]["finalized"][0]["feature"] == "khepri_db"
    lines = summary_lines(section, RUN_START)
    assert lines[0] == (
        "releases: started on 3.13.7; upgrades ok 1 of 1; features finalized 1 of 1"
    )
    assert lines[2].startswith("release period 2 +9.0 to +14.0 s, mixed (restarting onto 4.0.9:")
    assert "khepri_db finalized" in lines[4]


@pytest.mark.spark
def test_a_checked_upgrade_run_counts_each_period_and_a_plain_run_has_none(
    spark: Any, tmp_path: Path
) -> None:
    """The whole check: 60 messages a second apart, kafka1..3 upgraded at 10, 25 and 40 (each
    down 5 s), 3 of those acknowledged in the mixed period from 15 to 25 never read."""
    ev: list[dict[str, Any]] = []
    for seq in range(1, 61):
        ev += send("P", seq, float(seq), None)
        ev.append(event("P", "ok", "send", seq + 0.5, producer="P", seq=seq, stream="x", node="n"))
    lost = {17, 18, 22}
    ev += [recv("g", "P", seq, 100.0 + seq) for seq in range(1, 61) if seq not in lost]
    plain = tmp_path / "plain"
    write(plain / "history", ev)
    verdict = check_run(plain, spark=spark)
    assert "releases" not in verdict
    for node, at in (("kafka1", 10.2), ("kafka2", 25.2), ("kafka3", 40.2)):
        ev += upgrade(node, at, 5)
    run = tmp_path / "upgraded"
    write(run / "history", ev)
    manifest = {
        "system": "kafka",
        "images": {"kafka": {"version": OLD}},
        "topology": {"nodes": [{"name": n, "role": "combined"} for n in NODES]},
    }
    (run / "manifest.json").write_text(json.dumps(manifest))
    verdict = check_run(run, spark=spark)
    periods = verdict["releases"]["periods"]
    assert [p["kind"] for p in periods] == ["all on 3.9.2"] + ["mixed"] * 5 + ["all on 4.4.0"]
    # Acknowledged at seq + 0.5: before 10.2 seq 1..9, in kafka1's restart 10..14, ...
    assert [p["acked"] for p in periods] == [9, 5, 10, 5, 10, 5, 16]
    assert [p["lost"] for p in periods] == [{}, {}, {"g": 3}, {}, {}, {}, {}]
    listed = verdict["releases"]["anomalies"]
    assert [a["msg_id"] for a in listed] == ["P:17", "P:18", "P:22"]
    assert all(a["releases"] == [OLD, NEW] and a["period"] == 3 for a in listed)
    summary = (run / "summary.txt").read_text()
    assert "release period 3 " in summary and "lost 3 in g" in summary


def test_a_node_that_refused_to_boot_is_on_the_release_it_was_put_back_on() -> None:
    refused = upgrade("kafka1", 10, 5)
    refused[1]["value"] |= {
        "booted": False,
        "in_sync": False,
        "rolled_back": {"to": OLD, "booted": False},
    }
    kept = upgrade("kafka2", 30, 5)
    kept[1]["value"] |= {"booted": False, "in_sync": False, "rolled_back": {"to": OLD}}
    section = release_section(nemesis_of([*refused, *kept]), START, None, RUN_START, RUN_END)
    assert section is not None
    periods = section["periods"]
    # kafka1 neither runs the new release nor, its rollback having failed too, the old one.
    assert periods[2]["on"] == {OLD: ["kafka2", "kafka3"], f"{OLD} (not running)": ["kafka1"]}
    assert periods[-1]["on"] == {OLD: ["kafka2", "kafka3"], f"{OLD} (not running)": ["kafka1"]}
    assert [u["outcome"] for u in section["upgrades"]] == ["refused", "refused"]
