"""The judges: one per expectation word, over the counts of a checked history."""

from __future__ import annotations

from typing import Any

from checkers.summary import summary_lines
from checkers.verdict import (
    Counts,
    Judgement,
    judge,
    missing_errors,
    placement_mismatches,
    with_client_expectations,
)


def judged(
    groups: dict[str, dict[str, int]], sends: dict[str, int], expect: str | None, **counted: Any
) -> Judgement:
    return judge(Counts.of(groups, sends, **counted), expect)


G = {"acked": 10, "received": 10, "lost": 0, "duplicated": 0, "reordered": 0, "unexpected": 0}


def test_duplicate_expectations() -> None:
    dup = {"g": G | {"duplicated": 3}}
    assert judged(dup, {"ok": 10}, "duplicates").matched
    assert not judged({"g": G}, {"ok": 10}, "duplicates").matched
    assert not judged(dup, {"ok": 10}, "no-duplicates").matched
    assert judged({"g": G}, {"ok": 10}, "no-duplicates").matched
    lost = {"g": G | {"lost": 1, "duplicated": 3}}
    assert judged(lost, {"ok": 10}, "duplicates").outcome == "loss"


def test_reordered_and_several_words_each_must_hold() -> None:
    both = {"g": G | {"duplicated": 3, "reordered": 2}}
    assert judged({"g": G | {"reordered": 2}}, {"ok": 10}, "reordered").matched
    assert not judged({"g": G}, {"ok": 10}, "reordered").matched
    j = judged(both, {"ok": 10}, "duplicates+reordered")
    assert j.matched and j.outcome == "duplicates+reordered" and "2 messages first" in j.reason
    only_dup = judged({"g": G | {"duplicated": 3}}, {"ok": 10}, "duplicates+reordered")
    assert (
        not only_dup.matched and "every producer's messages came first in order" in only_dup.reason
    )
    lost = judged(
        {"g": G | {"lost": 1, "duplicated": 3, "reordered": 2}}, {"ok": 10}, "duplicates+reordered"
    )
    assert lost.outcome == "loss" and not lost.matched


def test_on_a_kafka_log_a_duplicate_is_a_message_written_at_two_offsets() -> None:
    # Redelivered offsets (a consumer reading one offset twice) are not K24's duplicates.
    redelivered = {"g": G | {"duplicated": 3}}
    log = {"positions": 10, "inconsistent_offsets": 0, "duplicate_offsets": 0}
    j = judged(redelivered, {"ok": 10}, "duplicates", log=log)
    assert not j.matched and "no message written at two offsets" in j.reason
    assert judged(redelivered, {"ok": 10}, "no-duplicates", log=log).matched
    twice = log | {"duplicate_offsets": 2}
    j = judged({"g": G}, {"ok": 10}, "duplicates", log=twice)
    assert j.matched and "2 messages written at two offsets" in j.reason
    # Without offsets (RabbitMQ), deliveries decide, as before.
    assert judged(redelivered, {"ok": 10}, "duplicates", log={"positions": 0}).matched


def test_an_offset_holding_two_messages_refutes_a_safe_claim() -> None:
    log = {"positions": 10, "inconsistent_offsets": 3, "duplicate_offsets": 0}
    j = judged({"g": G}, {"ok": 10}, "safe", log=log)
    assert (j.outcome, j.matched) == ("anomalies", False) and "3 offsets" in j.reason
    assert judged({"g": G}, {"ok": 10}, "safe", log=log | {"inconsistent_offsets": 0}).matched
    # A loss claim is about loss: truncation there is what the loss looks like.
    assert not judged({"g": G}, {"ok": 10}, "loss", log=log).matched


def test_expected_client_errors_and_placement() -> None:
    errors = {"send": {"NOT_ENOUGH_REPLICAS": 4, "_MSG_TIMED_OUT": 1}}
    want = [{"f": "send", "error": "NOT_ENOUGH_REPLICAS"}, {"f": "commit", "error": ""}]
    assert missing_errors(want, errors) == ["no commit failed"]
    assert missing_errors(want[:1], errors) == []
    snaps = [{"label": "after", "expect_balanced": True, "balanced": False, "per_broker": {}}]
    problems = placement_mismatches(snaps)
    assert problems and "after" in problems[0]
    refused_in_fault = {"P1": {"in_fault_sends": 4}}
    j = judged({"g": G}, {"ok": 10, "fail": 4}, "unavailable", unavailability=refused_in_fault)
    assert j.matched
    # Refused, but none while a fault was in effect: not the claimed unavailability.
    outside = judged(
        {"g": G}, {"ok": 10, "fail": 4}, "unavailable", unavailability={"P1": {"in_fault_sends": 0}}
    )
    assert not outside.matched and outside.reason.startswith("not reproduced")
    assert not with_client_expectations(j, ["no commit failed"], []).matched
    assert with_client_expectations(j, [], []).matched


def test_a_message_lost_in_two_groups_is_counted_once() -> None:
    """K13 on dedicated controllers: the live reader read the isolated leader's acknowledged
    writes before the heal truncated them; only the final read shows them gone."""
    live, final = G | {"acked": 10}, G | {"acked": 10, "received": 7, "lost": 3}
    j = judged({"reader": live, "final": final}, {"ok": 10}, "loss")
    assert j.matched and j.reason == "reproduced: 3 acknowledged messages lost in final"
    j = judged({"reader": final, "final": final | {"lost": 4}}, {"ok": 10}, "safe")
    assert not j.matched and j.reason == "refuted: 4 acknowledged messages lost (final 4, reader 3)"


def test_a_producer_that_crashed_makes_a_pass_inconclusive() -> None:
    from checkers.verdict import Judgement, with_producers_ended

    safe = Judgement("safe", True, "no acknowledged message lost (300 acknowledged)")
    j = with_producers_ended(safe, {"P1": 1, "P2": 0})
    assert (j.outcome, j.matched) == ("inconclusive", False)
    assert j.reason.startswith("P1 exited 1 (see logs/): it would have been safe")
    # killed by the harness at its deadline (a signal), or all well: the pass stands
    assert with_producers_ended(safe, {"P1": -9, "P2": 0}) == safe
    assert with_producers_ended(safe, None) == safe
    loss = Judgement("loss", False, "refuted: 3 acknowledged messages lost")
    assert with_producers_ended(loss, {"P1": 1}) == loss


def test_a_zombie_commit_refutes_any_expectation_and_is_said_in_the_summary() -> None:
    section = {
        "transactions": 40,
        "committed": 30,
        "aborted": 8,
        "planned_aborts": 4,
        "unknown": 2,
        "unknown_seen_committed": 1,
        "fenced_commits": 3,
        "zombie_commits": 1,
        "groups": {},
    }
    for expect in ("safe", "unavailable", "no-duplicates", None):
        j = judged({"g": G}, {"ok": 10}, expect, transactions=section)
        assert (j.outcome, j.matched) == ("anomalies", False), expect
    both = judged(
        {"g": G},
        {"ok": 10},
        "safe",
        transactions=section | {"groups": {"g": {"aborted_reads": 2, "torn": 0}}},
    )
    assert both.reason == (
        "read_committed broken: 2 records of aborted transactions read (aborted read); "
        "fencing broken: 1 commits of fenced instances took effect (zombie commit)"
    )
    clean = judged({"g": G}, {"ok": 10}, "safe", transactions=section | {"zombie_commits": 0})
    assert clean.matched
    verdict = {
        "outcome": "anomalies",
        "matched": False,
        "reason": "fencing broken",
        "sends": {"ok": 10},
        "groups": {},
        "transactions": section,
    }
    assert (
        "fencing: 0 transactions open when a newer instance initialised (0 of them paused); "
        "3 commits asked by instances a newer one had fenced, 1 of them took effect "
        "(zombie commits)"
    ) in summary_lines(verdict)


def test_queues_left_after_the_drain_are_named() -> None:
    from checkers.run import queues_left

    depths = {"q": {"messages": 0, "state": "running"}, "dlq": {"messages": 4, "state": "running"}}
    assert queues_left(depths) == {"dlq": 4}
    assert queues_left({"error": "no node answered"}) is None and queues_left(None) is None
