"""The RabbitMQ nodes' own views, read side by side from a run's evidence: a split that outlived
the heal, partitions still reported, two leaders of one queue, and the report's section."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import zstandard

from checkers.cluster_views import cluster_views, summary_lines
from contract.rundir import RunDir
from reports.write import write_run_reports
from tests.reports.pages import safe_verdict_run, section

pytestmark = pytest.mark.unit

NODES = ("rabbit1", "rabbit2", "rabbit3")
FIXTURES = Path(__file__).parent / "fixtures" / "evidence"


def status(running: list[str], partitions: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """cluster_status --formatter json as 4.0.5 answers it (the keys the views read)."""
    full = [f"rabbit@{n}" for n in NODES]
    return {
        "alarms": [],
        "cluster_name": "rabbit@rabbit1",
        "disk_nodes": full,
        "running_nodes": [f"rabbit@{n}" for n in running],
        "partitions": {
            f"rabbit@{k}": [f"rabbit@{p}" for p in v] for k, v in (partitions or {}).items()
        },
        "maintenance_status": {n: "not under maintenance" for n in full},
    }


def member(node: str, state: str, term: int, commit: int) -> dict[str, Any]:
    """A row of quorum_status --formatter json (4.0.5's columns)."""
    return {
        "Node Name": f"rabbit@{node}",
        "Raft State": state,
        "Membership": "voter",
        "Last Log Index": commit,
        "Last Written": commit,
        "Last Applied": commit,
        "Commit Index": commit,
        "Snapshot Index": -1,
        "Term": term,
        "Machine Version": 5,
    }


def evidence(run_dir: Path, answers: dict[str, dict[str, Any]], silent: list[str]) -> RunDir:
    run = RunDir(run_dir)
    nodes = []
    for node, said in answers.items():
        kept = {}
        for question, value in said.items():
            relative = f"{node}/{question}.json.zst"
            (run.evidence / node).mkdir(parents=True, exist_ok=True)
            data = zstandard.ZstdCompressor().compress(json.dumps(value).encode())
            (run.evidence / relative).write_bytes(data)
            kept[question] = relative
        nodes.append({"node": node, "answers": kept, "missing": [], "seconds": 1.0})
    nodes += [{"node": n, "answers": {}, "missing": ["not running"]} for n in silent]
    run.evidence.mkdir(parents=True, exist_ok=True)
    (run.evidence / "evidence.json").write_text(json.dumps({"seconds": 3.0, "nodes": nodes}))
    return run


def split_run(run_dir: Path) -> RunDir:
    """rabbit1 alone after the heal, believing itself the queue's leader in term 3; rabbit2 and
    rabbit3 together, rabbit2 leading in term 4."""
    alone = [member("rabbit1", "leader", 3, 900), member("rabbit2", "timeout", 3, 880)]
    together = [
        member("rabbit2", "leader", 4, 1400),
        member("rabbit3", "follower", 4, 1400),
        member("rabbit1", "unknown", 4, 0),
    ]
    queue = {"name": "jepsen.primary", "type": "quorum", "messages": 0, "state": "running"}
    return evidence(
        run_dir,
        {
            "rabbit1": {
                "cluster-status": status(["rabbit1"], {"rabbit1": ["rabbit2", "rabbit3"]}),
                "quorum-status-jepsen.primary": alone,
                "queues": [queue | {"leader": "rabbit@rabbit1"}],
            },
            "rabbit2": {
                "cluster-status": status(["rabbit2", "rabbit3"]),
                "quorum-status-jepsen.primary": together,
                "queues": [queue | {"leader": "rabbit@rabbit2"}],
            },
            "rabbit3": {
                "cluster-status": status(["rabbit2", "rabbit3"]),
                "quorum-status-jepsen.primary": together,
                "queues": [queue | {"leader": "rabbit@rabbit2"}],
            },
        },
        [],
    )


def test_a_split_that_outlived_the_heal_is_two_views(tmp_path: Path) -> None:
    views = cluster_views(split_run(tmp_path))
    assert views is not None and views["split"]
    assert views["views"] == [
        {"nodes": ["rabbit2", "rabbit3"], "running": ["rabbit2", "rabbit3"]},
        {"nodes": ["rabbit1"], "running": ["rabbit1"]},
    ]
    assert views["partitions"] == {"rabbit1": {"rabbit1": ["rabbit2", "rabbit3"]}}
    q = views["queues"]["jepsen.primary"]
    assert q["leaders"] == {"rabbit1": "rabbit1", "rabbit2": "rabbit2", "rabbit3": "rabbit2"}
    assert q["leaders_claimed"] == [["rabbit1", 3], ["rabbit2", 4]]
    assert summary_lines(views) == [
        "cluster views at the end: split: rabbit2 and rabbit3 see rabbit2 and rabbit3; "
        "rabbit1 sees rabbit1",
        "cluster views at the end: rabbit1 still reports a partition: rabbit1 from rabbit2 and "
        "rabbit3",
        "cluster views at the end: queue jepsen.primary has leaders rabbit1 (term 3), "
        "rabbit2 (term 4)",
    ]


def test_a_whole_cluster_says_nothing_and_a_silent_node_is_named(tmp_path: Path) -> None:
    whole = status(list(NODES))
    run = evidence(tmp_path, {"rabbit1": {"cluster-status": whole}}, ["rabbit3"])
    views = cluster_views(run)
    assert views is not None and not views["split"]
    assert views["nodes_silent"] == {"rabbit3": "not running"}
    assert summary_lines(views) == []


def test_a_table_answer_is_said_unread_not_guessed(tmp_path: Path) -> None:
    run = evidence(tmp_path, {"rabbit1": {"cluster-status": status(list(NODES))}}, [])
    index = json.loads((run.evidence / "evidence.json").read_text())
    index["nodes"][0]["answers"]["queues"] = "rabbit1/queues.txt.zst"
    (run.evidence / "evidence.json").write_text(json.dumps(index))
    views = cluster_views(run)
    assert views is not None and views["unread"] == {"rabbit1": ["queues"]}


def keep_flags(run: RunDir, node: str, text: str) -> None:
    """The node's feature flags file in the evidence, as systems.rabbitmq.evidence keeps it."""
    relative = f"{node}/feature-flags.txt.zst"
    (run.evidence / node).mkdir(parents=True, exist_ok=True)
    (run.evidence / relative).write_bytes(zstandard.ZstdCompressor().compress(text.encode()))
    index = json.loads((run.evidence / "evidence.json").read_text())
    for n in index["nodes"]:
        if n["node"] == node:
            n.setdefault("answers", {})["feature-flags"] = relative
    (run.evidence / "evidence.json").write_text(json.dumps(index))


def test_flags_a_node_persisted_and_the_others_not_are_named(tmp_path: Path) -> None:
    """What a 4.3.6 node that refused to boot on 4.0.5's data left in its flags file."""
    whole = status(["rabbit2", "rabbit3"])
    answers = {"rabbit2": {"cluster-status": whole}, "rabbit3": {"cluster-status": whole}}
    run = evidence(tmp_path, answers, ["rabbit1"])
    common = "[classic_mirrored_queue_version,\n quorum_queue,\n 'rabbitmq_4.0.0',\n"
    keep_flags(run, "rabbit2", common + " stream_queue].\n")
    keep_flags(run, "rabbit3", common + " stream_queue].\n")
    keep_flags(run, "rabbit1", common + " khepri_db,\n 'rabbitmq_4.1.0',\n stream_queue].\n")
    views = cluster_views(run)
    assert views is not None and views["unread"] == {}
    assert views["feature_flags"]["rabbit2"] == [
        "classic_mirrored_queue_version",
        "quorum_queue",
        "rabbitmq_4.0.0",
        "stream_queue",
    ]
    assert views["feature_flags_differ"] == {
        "khepri_db": ["rabbit1"],
        "rabbitmq_4.1.0": ["rabbit1"],
    }
    assert "cluster views at the end: feature flags khepri_db, rabbitmq_4.1.0 on rabbit1 only" in (
        summary_lines(views)
    )


@pytest.mark.parametrize(("text", "said"), [("", "0 bytes"), ("[quorum_queue,\n r", "17 bytes")])
def test_a_flags_file_cut_short_or_empty_is_said_unreadable(
    tmp_path: Path, text: str, said: str
) -> None:
    """What a torn write at a power loss left of rabbit2's file (4.3.6 no longer boots)."""
    whole = status(["rabbit1", "rabbit3"])
    run = evidence(tmp_path, {"rabbit1": {"cluster-status": whole}}, ["rabbit2"])
    keep_flags(run, "rabbit1", "[quorum_queue,\n stream_queue].\n")
    keep_flags(run, "rabbit2", text)
    views = cluster_views(run)
    assert views is not None and views["feature_flags_differ"] == {}
    assert views["feature_flags_unreadable"] == {"rabbit2": f"{said}, not a whole list"}
    assert summary_lines(views) == [
        f"cluster views at the end: rabbit2's feature flags file is unreadable ({said}, not a "
        "whole list): the node cannot boot from it"
    ]


def test_flags_are_compared_when_no_node_could_say_its_cluster(tmp_path: Path) -> None:
    """RabbitMQ 4.0.5 after a refused 4.3.6 boot and a rollback: rabbit2 and rabbit3 answer
    cluster_status with an aborted Mnesia read, rabbit1 does not run."""
    run = evidence(tmp_path, {}, ["rabbit1", "rabbit2", "rabbit3"])
    keep_flags(run, "rabbit1", "[khepri_db,\n quorum_queue].\n")
    keep_flags(run, "rabbit2", "[quorum_queue].\n")
    keep_flags(run, "rabbit3", "[quorum_queue].\n")
    views = cluster_views(run)
    assert views is not None and views["feature_flags_differ"] == {"khepri_db": ["rabbit1"]}
    assert set(views["nodes_silent"]) == {"rabbit1", "rabbit2", "rabbit3"}


def test_a_kafka_run_has_no_cluster_views(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.evidence.mkdir(parents=True)
    index = {"seconds": 8.0, "nodes": [{"node": "kafka1", "dumps": {}, "missing": []}]}
    (run.evidence / "evidence.json").write_text(json.dumps(index))
    assert cluster_views(run) is None


def test_the_report_shows_the_split(tmp_path: Path) -> None:
    evidence_dir = tmp_path / "evidence-of-the-split"
    run_dir = safe_verdict_run(
        tmp_path / "R9" / "r1", cluster_views=cluster_views(split_run(evidence_dir))
    )
    report, _ = write_run_reports(run_dir)
    html = report.read_text()
    said = section(html, "p", "cluster-views-summary")
    assert said.startswith("<strong>Split:</strong> the nodes that answered disagree")
    views = section(html, "table", "cluster-views")
    assert "<td>rabbit2, rabbit3</td><td>rabbit2, rabbit3</td>" in views
    assert "rabbit1 (3), rabbit2 (4)" in section(html, "table", "queue-views")


def test_rabbitmq_4_0_split_for_good_from_its_own_evidence(tmp_path: Path) -> None:
    """R40-split on 4.0.5 (2026-11-29): rabbit3 isolated and healed 6 s later. At the end
    Mnesia is split (rabbit1 and rabbit2 together, rabbit3 alone, each side reporting the
    partition) while the quorum queue's Raft members agree: rabbit1 leads in term 1, every
    member at commit index 22699."""
    run = RunDir(tmp_path)
    shutil.copytree(FIXTURES / "r40-split-4.0.5", run.evidence)
    views = cluster_views(run)
    assert views is not None and views["split"]
    assert views["views"] == [
        {"nodes": ["rabbit1", "rabbit2"], "running": ["rabbit1", "rabbit2"]},
        {"nodes": ["rabbit3"], "running": ["rabbit3"]},
    ]
    assert views["partitions"]["rabbit3"] == {"rabbit3": ["rabbit1", "rabbit2"]}
    q = views["queues"]["jepsen.primary"]
    assert q["leaders_claimed"] == [["rabbit1", 1]]
    assert {m["commit_index"] for members in q["raft"].values() for m in members} == {22699}
    assert views["metadata_store"]["rabbit3"] == [{"Metadata Store": "mnesia"}]


@pytest.mark.parametrize(
    ("release", "store"),
    [("3.10.8", None), ("4.3.6", ["rabbit1", "rabbit2", "rabbit3"])],
)
def test_the_same_heal_reunites_3_10_and_4_3_by_their_own_evidence(
    tmp_path: Path, release: str, store: list[str] | None
) -> None:
    """R40-split's steps on 3.10.8 (pause_minority paused rabbit3) and 4.3.6 (Khepri, which no
    longer reads cluster_partition_handling): one view, no partition, one queue leader; 4.3's
    metadata store answers with Khepri's Raft members, 3.10 is not asked."""
    run = RunDir(tmp_path)
    shutil.copytree(FIXTURES / f"r40-split-{release}", run.evidence)
    views = cluster_views(run)
    assert views is not None and not views["split"] and views["partitions"] == {}
    assert views["views"] == [{"nodes": list(NODES), "running": list(NODES)}]
    assert views["queues"]["jepsen.primary"]["leaders_claimed"] == [["rabbit1", 1]]
    members = views["metadata_store"].get("rabbit1")
    assert (sorted(m["member"] for m in members) if members else None) == store
    assert summary_lines(views) == []
