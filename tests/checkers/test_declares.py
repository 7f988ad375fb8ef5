"""The verdict's `declares` section: each probe's answer beside the side of the partition its
node was on when asked (from the nemesis's own cuts and downs), the look after the heal, and a
scenario's expect_declares held or not; read from nemesis histories the RabbitMQ nemesis itself
writes (its network rules and the brokers faked), as the checker reads them (values as JSON)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from checkers.declares import declares_section, summary_lines
from checkers.run import judgement_of
from checkers.verdict import claim_word
from nemesis.containers import Nemesis
from tests.systems.rabbitmq.test_declares import ANSWERS, NODES, FakeCluster, declare, nemesis
from workloads.rabbitmq.declare import DeclareAnswer

KHEPRI = {
    "minority": {"answers": ["refused", "timed-out"], "after_heal": "nowhere"},
    "majority": {"answers": ["accepted"], "after_heal": "everywhere"},
}
MNESIA_AUTOHEAL = {
    "minority": {"answers": ["accepted"], "after_heal": "nowhere"},
    "majority": {"answers": ["accepted"], "after_heal": "everywhere"},
}


def history(tmp_path: Path) -> list[dict[str, Any]]:
    """The nemesis's events as the checker gets them: time, type, f, and value as JSON text."""
    rows = [json.loads(line) for line in (tmp_path / "nemesis.jsonl").read_text().splitlines()]
    keys = ("time", "type", "f")
    return [{**{k: r[k] for k in keys}, "value": json.dumps(r["value"])} for r in rows]


def khepri_run(tmp_path: Path, answers: dict[str, DeclareAnswer] = ANSWERS) -> Nemesis:
    """RK1's steps: rabbit3 isolated, rabbit1 and rabbit3 asked, healed, looked for; rabbit1's
    queue on every node after the heal, rabbit3's on none."""
    net, cluster = nemesis(tmp_path), FakeCluster(answers)
    net.isolate(["rabbit3"])
    declare(net, cluster, "rabbit1", "rabbit3")
    net.heal()
    cluster.lists = [{n: ["bj-declare-1-rabbit1"] for n in NODES}]
    cluster.declares.after_heal(net)
    return net


def section(tmp_path: Path, expected: dict[str, Any] | None) -> dict[str, Any]:
    found = declares_section(history(tmp_path), list(NODES), expected, 0.0)
    assert found is not None
    return found


def test_each_probe_is_said_with_the_side_its_node_was_on_when_asked(tmp_path: Path) -> None:
    khepri_run(tmp_path)
    s = section(tmp_path, None)
    by_node = {p["node"]: p for p in s["probes"]}
    assert by_node["rabbit3"]["side"] == ["rabbit3"]
    assert by_node["rabbit3"]["side_kind"] == "minority"
    assert by_node["rabbit1"]["side"] == ["rabbit1", "rabbit2"]
    assert by_node["rabbit1"]["side_kind"] == "majority"
    assert (
        by_node["rabbit3"]["answer"] == "refused"
        and "metadata store" in by_node["rabbit3"]["error"]
    )
    assert by_node["rabbit3"]["found_after_heal"] == []
    assert by_node["rabbit1"]["found_after_heal"] == list(NODES)
    assert s["by_side"] == {"majority": {"accepted": 1}, "minority": {"refused": 1}}
    assert s["by_node"]["rabbit3"] == {"minority": {"refused": 1}}
    assert s["looked_after_heal"] == {"asked": list(NODES), "unanswered": {}}
    # No expectation: nothing judged, nothing held or broken.
    assert (s["held"], s["mismatches"]) == (None, [])


def test_khepris_expectation_holds_on_its_history_and_mnesias_does_not(tmp_path: Path) -> None:
    khepri_run(tmp_path)
    assert section(tmp_path, KHEPRI)["held"] is True
    broken = section(tmp_path, MNESIA_AUTOHEAL)
    assert broken["held"] is False
    assert len(broken["mismatches"]) == 1
    assert broken["mismatches"][0].startswith(
        "rabbit3 (minority) refused bj-declare-1-rabbit3 at +"
    )
    assert "metadata store operation timed out" in broken["mismatches"][0]


def test_a_minority_declare_accepted_and_kept_after_the_heal_breaks_khepris(
    tmp_path: Path,
) -> None:
    net, cluster = (
        nemesis(tmp_path),
        FakeCluster({**ANSWERS, "rabbit3": DeclareAnswer("accepted", 0.01)}),
    )
    net.isolate(["rabbit3"])
    declare(net, cluster, "rabbit1", "rabbit3")
    net.heal()
    # A split that stayed: rabbit3 lists its own queue, the others theirs.
    cluster.lists = [
        {
            "rabbit1": ["bj-declare-1-rabbit1"],
            "rabbit2": ["bj-declare-1-rabbit1"],
            "rabbit3": ["bj-declare-1-rabbit3"],
        }
    ]
    cluster.declares.after_heal(net)
    s = section(tmp_path, KHEPRI)
    assert s["held"] is False
    assert s["mismatches"] == [
        s["mismatches"][0],
        "bj-declare-1-rabbit3 (rabbit3, minority) found after the heal on rabbit3",
        "bj-declare-1-rabbit1 (rabbit1, majority) found after the heal on rabbit1, rabbit2, "
        "of rabbit1, rabbit2, rabbit3",
    ]
    assert s["mismatches"][0].startswith("rabbit3 (minority) accepted bj-declare-1-rabbit3")


def test_nodes_down_are_out_of_reach_and_a_partitions_larger_side_is_the_majority(
    tmp_path: Path,
) -> None:
    net, cluster = nemesis(tmp_path), FakeCluster(ANSWERS)
    net.partition([["rabbit1", "rabbit2"], ["rabbit3"]])
    declare(net, cluster, "rabbit2")
    # Writing as kill and start do (no Docker here): rabbit2 and rabbit3 down, rabbit1 alone.
    net.logged("kill", {"nodes": ["rabbit2", "rabbit3"]}, lambda: None)
    declare(net, cluster, "rabbit1")
    net.logged("start", {"nodes": ["rabbit2", "rabbit3"]}, lambda: None)
    net.heal()
    declare(net, cluster, "rabbit1")
    sides = [(p["node"], p["side"], p["side_kind"]) for p in section(tmp_path, None)["probes"]]
    assert sides == [
        ("rabbit2", ["rabbit1", "rabbit2"], "majority"),
        ("rabbit1", ["rabbit1"], "minority"),
        ("rabbit1", ["rabbit1", "rabbit2", "rabbit3"], "majority"),
    ]


def test_an_expected_side_never_probed_and_queues_never_looked_for_are_said(
    tmp_path: Path,
) -> None:
    net, cluster = nemesis(tmp_path), FakeCluster(ANSWERS)
    declare(net, cluster, "rabbit1")  # no partition: every node on the majority side
    s = section(tmp_path, KHEPRI)
    assert s["held"] is False
    assert s["mismatches"] == [
        "no declare was asked of a node on the minority side",
        "the declare steps' queues were not looked for after the heal",
    ]


def test_no_declare_step_and_no_expectation_is_no_section(tmp_path: Path) -> None:
    net = nemesis(tmp_path)
    net.isolate(["rabbit3"])
    net.heal()
    assert declares_section(history(tmp_path), list(NODES), None, 0.0) is None
    # Expected but never asked: the section says so, and does not hold.
    expected = section(tmp_path, {"minority": KHEPRI["minority"]})
    assert expected["probes"] == [] and expected["held"] is False


def test_the_summary_says_each_probe_and_whether_the_expectation_held(tmp_path: Path) -> None:
    khepri_run(tmp_path)
    lines = summary_lines(section(tmp_path, KHEPRI))
    assert lines[0].startswith("declare bj-declare-1-rabbit1 via rabbit1 (majority, reaching ")
    assert "accepted in 0.021 s; after the heal on rabbit1, rabbit2, rabbit3" in lines[0]
    assert lines[1].startswith(
        "declare bj-declare-1-rabbit3 via rabbit3 (minority, reaching rabbit3)"
    )
    assert "refused in 30.004 s (541 INTERNAL_ERROR" in lines[1] and "on no node" in lines[1]
    assert lines[2:] == ["declares: held"]
    assert summary_lines(None) == []


@pytest.mark.parametrize(
    ("expected", "word"), [(KHEPRI, "reproduced"), (MNESIA_AUTOHEAL, "not reproduced")]
)
def test_a_safe_run_whose_probes_did_not_hold_is_not_reproduced(
    tmp_path: Path, expected: dict[str, Any], word: str
) -> None:
    khepri_run(tmp_path)
    declares = section(tmp_path, expected)
    group = {
        m: 0 for m in ("lost", "unexpected", "duplicated", "reordered", "aborted_reads", "torn")
    }
    result = SimpleNamespace(
        groups={"jepsen.primary": group},
        sends={"ok": 9000},
        log={},
        stalls={},
        unavailability={},
        transactions=None,
        errors={},
        placement=[],
    )
    manifest = SimpleNamespace(
        drain_complete=True,
        producer_exit_codes={"A": 0},
        scenario_spec={"expect_declares": expected},
    )
    j = judgement_of(result, manifest, "safe", declares)  # type: ignore[arg-type]
    verdict = {"outcome": j.outcome, "matched": j.matched, "expect": "safe", "groups": {"q": group}}
    assert claim_word(verdict) == word
    if word == "not reproduced":
        assert "but declares: rabbit3 (minority) refused" in j.reason
