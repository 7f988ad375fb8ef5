"""Each producer's rate reached beside the rate its scenario asked: figures from the checker's
per-producer aggregation, judged slow below SLOW_SHARE of the rate asked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from checkers.pace import (
    COMMITS_ONE_AT_A_TIME,
    SLOW_SHARE,
    Asked,
    asked_of,
    pace,
    per_second,
    slow_lines,
    with_pace,
)
from checkers.run import check_run
from tests.checkers.histories import send, write


@pytest.mark.unit
def test_a_producer_far_below_its_rate_is_slow_and_one_near_it_is_not() -> None:
    asked = Asked(rate=500.0, count=25_000, transactional=False)
    slow = pace(100, 1.0, 11.0, asked)
    assert (slow["rate_reached"], slow["slow"], slow["why_slow"]) == (10.0, True, None)
    # Exactly SLOW_SHARE of the rate asked is not below it.
    at_the_edge = pace(int(SLOW_SHARE * 500 * 10), 1.0, 11.0, asked)
    assert at_the_edge["rate_reached"] == 400.0 and not at_the_edge["slow"]
    assert pace(399 * 10, 1.0, 11.0, asked)["slow"]


@pytest.mark.unit
def test_no_flag_without_a_rate_asked_a_span_or_a_count_left() -> None:
    unthrottled = pace(100, 1.0, 11.0, Asked(rate=0.0, count=1000, transactional=False))
    assert (unthrottled["rate_asked"], unthrottled["slow"]) == (0.0, False)
    unnamed = pace(100, 1.0, 11.0, None)  # a copier: the scenario asked it nothing
    assert (unnamed["rate_asked"], unnamed["rate_reached"], unnamed["slow"]) == (None, 10.0, False)
    one_send = pace(1, 5.0, 5.0, Asked(rate=500.0, count=10, transactional=False))
    assert (one_send["rate_reached"], one_send["slow"]) == (None, False)
    # All 100 of its count sent, however slowly: nothing the scenario promised is missing.
    finished = pace(100, 1.0, 11.0, Asked(rate=500.0, count=100, transactional=False))
    assert not finished["slow"]
    assert pace(99, 1.0, 11.0, Asked(rate=500.0, count=100, transactional=False))["slow"]


@pytest.mark.unit
def test_a_slow_transactional_producer_is_said_to_commit_one_at_a_time() -> None:
    spec = {
        "workload": {"producers": [{"id": "P1", "count": 25000, "rate": 500, "transaction": {}}]}
    }
    sending = {"P1": {"sends_begun": 4060, "first_invoke": 100.0, "last_invoke": 170.0}}
    producers = with_pace({"P1": {"nonmonotonic_sends": 0}}, sending, spec)
    assert producers["P1"]["nonmonotonic_sends"] == 0
    assert producers["P1"]["why_slow"] == COMMITS_ONE_AT_A_TIME
    assert slow_lines(producers) == [
        "producer P1 reached 58/s of the 500/s asked (4 060 sends in 70.0 s): "
        "its transactions commit one at a time"
    ]


@pytest.mark.unit
def test_the_scenario_names_kafka_producers_and_rabbitmq_publishers() -> None:
    kafka = {"workload": {"producers": [{"id": "P", "count": 9, "rate": 5.5}]}}
    assert asked_of(kafka) == {"P": Asked(rate=5.5, count=9, transactional=False)}
    rabbit = {"workload": {"publishers": [{"id": "A", "count": 9}]}}
    assert asked_of(rabbit) == {"A": Asked(rate=0.0, count=9, transactional=False)}
    assert asked_of({}) == {}


@pytest.mark.unit
def test_rates_are_written_as_a_person_reads_them() -> None:
    assert [per_second(r) for r in (500.0, 57.99, 10.0, 2.5, 2.0)] == [
        "500/s",
        "58/s",
        "10/s",
        "2.5/s",
        "2/s",
    ]


def sends_over(producer: str, n: int, first: float, seconds: float) -> list[dict[str, Any]]:
    """`n` acknowledged sends of `producer`, their invokes spread evenly over `seconds`."""
    step = seconds / (n - 1)
    return [e for seq in range(n) for e in send(producer, seq, first + seq * step, "ok")]


def checked(
    spark: Any, run: Path, events: list[dict[str, Any]], workload: dict[str, Any]
) -> tuple[dict[str, Any], str]:
    """The verdict and summary of `events` checked as a run of a scenario with `workload`."""
    write(run / "history", events)
    manifest = {"expect": "safe", "scenario_spec": {"workload": workload}}
    (run / "manifest.json").write_text(json.dumps(manifest))
    return check_run(run, spark=spark), (run / "summary.txt").read_text()


@pytest.mark.spark
def test_the_verdict_and_summary_name_each_producer_far_below_its_rate(
    spark: Any, tmp_path: Path
) -> None:
    events = (
        sends_over("slow", 100, 1.0, 10.0)
        + sends_over("paced", 101, 1.0, 10.0)
        + sends_over("free", 100, 1.0, 10.0)
        + sends_over("txn", 100, 1.0, 10.0)
    )
    producers = [
        {"id": "slow", "count": 25000, "rate": 500},
        {"id": "paced", "count": 25000, "rate": 10},
        {"id": "free", "count": 25000},
        {"id": "txn", "count": 25000, "rate": 500, "transaction": {"size": 10}},
    ]
    verdict, summary = checked(spark, tmp_path / "run", events, {"producers": producers})
    got = verdict["producers"]
    assert got["slow"] | {"nonmonotonic_sends": 0} == {
        "nonmonotonic_sends": 0,
        "sends_begun": 100,
        "sending_seconds": 10.0,
        "rate_asked": 500.0,
        "rate_reached": 10.0,
        "slow": True,
        "why_slow": None,
    }
    assert (got["paced"]["rate_reached"], got["paced"]["slow"]) == (10.1, False)
    assert (got["free"]["rate_asked"], got["free"]["slow"]) == (0.0, False)
    assert got["txn"]["slow"] and got["txn"]["why_slow"] == COMMITS_ONE_AT_A_TIME
    assert "producer slow reached 10/s of the 500/s asked (100 sends in 10.0 s)\n" in summary
    assert "producer txn reached 10/s of the 500/s asked (100 sends in 10.0 s): its " in summary
    assert "producer paced reached" not in summary and "producer free reached" not in summary
    # The pace is no anomaly: no producer gets a line of counts for it.
    assert "producer slow: " not in summary


@pytest.mark.spark
def test_a_rabbitmq_publisher_below_its_rate_is_named_and_the_verdict_stays(
    spark: Any, tmp_path: Path
) -> None:
    events = sends_over("A", 100, 1.0, 10.0)
    asked = [{"id": "A", "count": 1000, "rate": 500}]
    verdict, summary = checked(spark, tmp_path / "asked", events, {"publishers": asked})
    assert verdict["producers"]["A"]["slow"]
    assert "producer A reached 10/s of the 500/s asked (100 sends in 10.0 s)\n" in summary
    unthrottled = [{"id": "A", "count": 1000}]
    plain, _ = checked(spark, tmp_path / "unthrottled", events, {"publishers": unthrottled})
    assert not plain["producers"]["A"]["slow"]
    judged = ("outcome", "matched", "reason", "claim_verdict")
    assert {k: verdict[k] for k in judged} == {k: plain[k] for k in judged}
