"""A verdict.json's human summary: what it says of claims, groups and producers, whatever the
verdict's age."""

from __future__ import annotations

from checkers.summary import summary_lines


def test_a_scenario_without_a_claim_says_nothing_about_claims() -> None:
    verdict = {"outcome": "safe", "matched": True, "reason": "ok", "sends": {"ok": 3}}
    mine = summary_lines(verdict | {"groups": {}})
    assert not any(line.startswith("claim") for line in mine)
    claimed = summary_lines(verdict | {"groups": {}, "claim": "K4", "expect": "safe"})
    assert "claim K4: reproduced" in claimed


def test_a_verdict_from_before_dead_lettering_still_reads_and_one_with_it_says_so() -> None:
    base = {"outcome": "safe", "matched": True, "reason": "ok", "sends": {"ok": 3}}
    old = {"acked": 3, "received": 3, "lost": 0, "unseen": 0, "duplicated": 0}
    (line,) = [x for x in summary_lines(base | {"groups": {"q": old}}) if x.startswith("group")]
    assert "recovered 0" in line and "dead_lettered" not in line
    dead = old | {"dead_lettered": 2, "both": 0}
    (line,) = [x for x in summary_lines(base | {"groups": {"q": dead}}) if x.startswith("group")]
    assert line.endswith("dead_lettered 2")
    said = summary_lines(base | {"groups": {}, "pick_seed": 42, "queues_left": {"dlq": 4}})
    assert "drawn targets: seed 42 (harness run SCENARIO --seed 42)" in said
    assert "queues not empty after the drain (messages): dlq 4" in said


def test_a_slow_producer_gets_one_line_and_its_figures_no_line_of_counts() -> None:
    base = {"outcome": "safe", "matched": True, "reason": "ok", "sends": {"ok": 3}, "groups": {}}
    figures = {"sends_begun": 100, "sending_seconds": 10.0, "rate_asked": 500.0}
    slow = figures | {"rate_reached": 10.0, "slow": True, "why_slow": None}
    paced = figures | {"rate_asked": 10.0, "rate_reached": 10.0, "slow": False, "why_slow": None}
    said = summary_lines(
        base | {"producers": {"P1": {"nonmonotonic_sends": 0} | slow, "P2": paced}}
    )
    assert [x for x in said if x.startswith("producer")] == [
        "producer P1 reached 10/s of the 500/s asked (100 sends in 10.0 s)"
    ]
    # A verdict from before the pace: its producers' counts read as they did.
    old = summary_lines(base | {"producers": {"P1": {"nonmonotonic_sends": 2}}})
    assert "producer P1: nonmonotonic_sends 2" in old
