"""The claims matrix and the words verdicts use for claims: pure, no Docker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from checkers.verdict import claim_word
from harness.claims import (
    Cell,
    RunRecord,
    cell_word,
    cells_of,
    claim_scenarios,
    junit_cases,
    load_measured,
    record_of,
    render_table,
    save_measured,
    select,
)
from tests.helpers import ROOT


def verdict(expect: str, outcome: str, matched: bool, lost: int = 0) -> dict[str, Any]:
    return {
        "expect": expect,
        "outcome": outcome,
        "matched": matched,
        "groups": {"reader": {"lost": lost, "duplicated": 0}},
    }


@pytest.mark.parametrize(
    ("v", "word"),
    [
        (verdict("loss", "loss", True, lost=5), "reproduced"),
        (verdict("loss", "safe", False), "not reproduced"),
        (verdict("safe", "safe", True), "reproduced"),
        (verdict("safe", "loss", False, lost=1), "refuted"),
        (verdict("safe", "safe", False), "not reproduced"),  # the claimed error never seen
        (verdict("unavailable", "loss", False, lost=2), "refuted"),
        (verdict("unavailable", "safe", False), "not reproduced"),
        (verdict("no-duplicates", "duplicates", False), "refuted"),
        (verdict("duplicates", "safe", False), "not reproduced"),
        (verdict("loss", "inconclusive", False, lost=9), "inconclusive"),
    ],
)
def test_claim_words(v: dict[str, Any], word: str) -> None:
    assert claim_word(v) == word


def test_every_claim_scenario_has_cells_and_loss_rows_get_three_runs_on_one_mode() -> None:
    specs = claim_scenarios(ROOT / "scenarios")
    assert {s.id for s in specs} >= {"K1", "K4", "R1", "R6"}
    assert not any(s.id.startswith("kafka-mock") for s in specs)  # the mock tier never counts
    k1 = {c.key: c.runs for s in specs if s.id == "K1" for c in cells_of(s, 1)}
    assert k1 == {"K1/zk/3.9": 3, "K1/kraft/3.9": 1, "K1/kraft/4.1": 1, "K1/kraft/4.4": 1}
    k4 = {c.key: c.runs for s in specs if s.id == "K4" for c in cells_of(s, 2)}
    assert k4 == {
        "K4/kraft-dedicated/3.9": 2,
        "K4/zk/3.9": 2,
        "K4/kraft/3.9": 2,
        "K4/kraft-dedicated/4.1": 2,
        "K4/kraft/4.1": 2,
        "K4/kraft-dedicated/4.4": 2,
        "K4/kraft/4.4": 2,
    }
    # The articles' RabbitMQ scenarios run on 3.10 (mirrored queues, gone in 4.0); a scenario
    # that names a 4.x line runs on it and every newer line setup builds.
    (r1,) = [c for s in specs if s.id == "R1" for c in cells_of(s, 1)]
    assert (r1.key, r1.runs) == ("R1/rabbitmq/3.10", 3)
    r10 = [c.key for s in specs if s.id == "R10" for c in cells_of(s, 1)]
    assert r10 == ["R10/rabbitmq/4.0", "R10/rabbitmq/4.3"]


def test_selection_by_claim_mode_and_line() -> None:
    cells = [c for s in claim_scenarios(ROOT / "scenarios") for c in cells_of(s, 1)]
    chosen = select(cells, {"K4", "R1"}, {"kraft"}, {"4.1"})
    assert [c.key for c in chosen] == ["K4/kraft/4.1"]  # a Kafka filter leaves RabbitMQ out
    assert [c.key for c in select(cells, {"R1"}, None, None)] == [
        "R1-manual-sync/rabbitmq/3.10",
        "R1-promote-always/rabbitmq/3.10",
        "R1/rabbitmq/3.10",
    ]
    assert [c.key for c in select(cells, {"R1", "K4"}, {"rabbitmq"}, None)][
        -1
    ] == "R1/rabbitmq/3.10"
    assert [c.key for c in select(cells, {"R9"}, None, {"4.3"})] == [
        "R9-autoheal/rabbitmq/4.3",
        "R9-clients/rabbitmq/4.3",
        "R9-kill/rabbitmq/4.3",
        "R9/rabbitmq/4.3",
    ]


def run(word: str, lost: int = 0, final_read: bool | None = True) -> RunRecord:
    return RunRecord(
        "results/X/1", "2026-11-22 16:00", 100.0, word, "3.9.2", 1000, lost, final_read=final_read
    )


@pytest.mark.parametrize(
    ("expect", "words", "cell"),
    [
        ("loss", ["reproduced", "reproduced", "not reproduced"], "reproduced (2/3)"),
        ("loss", ["reproduced", "not reproduced", "not reproduced"], "not reproduced (1/3)"),
        ("loss", ["reproduced"], "reproduced (1/1)"),
        ("safe", ["reproduced", "refuted", "reproduced"], "refuted"),
        ("safe", ["reproduced", "reproduced"], "reproduced"),
        ("safe", ["inconclusive", "error"], "inconclusive"),
        ("safe", ["error"], "no verdict (the run failed)"),
        ("safe", [], "not run"),
    ],
)
def test_a_cells_word_over_its_runs(expect: str, words: list[str], cell: str) -> None:
    c = Cell("K1", "K1", expect, "zk", "3.9", len(words) or 1)
    assert cell_word(c, [run(w) for w in words]) == cell


def test_measured_cells_survive_a_round_trip_and_render(tmp_path: Path) -> None:
    measured = {"K1/zk/3.9": [run("reproduced", lost=2820)]}
    path = tmp_path / "claims-results.json"
    save_measured(path, measured)
    assert load_measured(path) == measured
    cells = [Cell("K1", "K1", "loss", "zk", "3.9", 3), Cell("K4", "K4", "safe", "kraft", "4.1", 1)]
    table = render_table(cells, measured, "test machine")
    rows = [ln for ln in table.splitlines() if ln.startswith("| K")]
    assert rows[0].startswith("| K1 | K1 | zk | 3.9.2 | 1 | 1000 | 2820 | 0 |")
    assert "reproduced (1/1)" in rows[0] and "`1`" in rows[0]
    assert rows[1].endswith("| not run | - |")


def test_kafka_runs_from_before_the_final_read_are_marked(tmp_path: Path) -> None:
    path = tmp_path / "claims-results.json"
    save_measured(path, {"K1/zk/3.9": [run("reproduced", lost=2820, final_read=False)]})
    (old,) = load_measured(path)["K1/zk/3.9"]
    assert old.final_read is False
    table = render_table([Cell("K1", "K1", "loss", "zk", "3.9", 3)], {"K1/zk/3.9": [old]}, "m")
    assert "| 2820† |" in table and "†: a Kafka run from before the final read" in table


def test_a_run_without_a_verdict_is_recorded_as_an_error(tmp_path: Path) -> None:
    rec = record_of(tmp_path, 12.0, "error: no Kafka 4.1 image")
    assert rec.word == "error" and rec.reason == "error: no Kafka 4.1 image"
    (tmp_path / "verdict.json").write_text(
        json.dumps(
            {
                **verdict("safe", "safe", True),
                "claim_verdict": "reproduced",
                "sends": {"ok": 7},
                "errors": {"send": {"NOT_ENOUGH_REPLICAS": 3}, "commit": {"X": 1}},
                "refused_window": {"seconds": 4.5},
                "kafka_version": "4.1.2",
            }
        )
    )
    rec = record_of(tmp_path, 12.0, None)
    assert (rec.word, rec.acked, rec.errors, rec.unavailable_s) == (
        "reproduced",
        7,
        {"NOT_ENOUGH_REPLICAS": 3, "X": 1},
        4.5,
    )


def test_the_matrix_resumes_and_stops_at_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import harness.claims as claims

    ran: list[str] = []

    def fake_run(cell: Cell, results: Path, timeout: float) -> RunRecord:
        ran.append(cell.key)
        return run("reproduced")

    monkeypatch.setattr(claims, "run_cell_once", fake_run)
    measured_file = tmp_path / "m.json"
    cells = [Cell("K1", "K1", "loss", "zk", "3.9", 3), Cell("K4", "K4", "safe", "kraft", "3.9", 1)]
    save_measured(measured_file, {"K1/zk/3.9": [run("reproduced")]})
    said: list[str] = []
    claims.run_matrix(cells, measured_file, tmp_path, False, 60, 100, said.append)
    assert ran == ["K1/zk/3.9", "K1/zk/3.9", "K4/kraft/3.9"]  # the measured run is kept
    assert {k: len(v) for k, v in load_measured(measured_file).items()} == {
        "K1/zk/3.9": 3,
        "K4/kraft/3.9": 1,
    }
    ran.clear()
    claims.run_matrix(cells, measured_file, tmp_path, False, 60, 100, said.append)
    assert ran == []  # nothing left to measure
    claims.run_matrix(cells[1:], measured_file, tmp_path, True, 0, 100, said.append)
    assert ran == [] and "budget spent" in said[-1]  # asked again, but no budget left


def test_cells_measured_in_a_mode_the_scenario_left_stay_in_the_table() -> None:
    measured = {"K2/kraft/4.1": [run("not reproduced")], "K4/kraft/3.9": [run("reproduced")]}
    table = render_table([Cell("K4", "K4", "safe", "kraft", "3.9", 1)], measured, "m")
    current, retired = table.split("no longer runs in")
    assert "| K4 | K4 | kraft |" in current and "K2" not in current
    assert "| K2 | K2 | kraft | 3.9.2 | 1 |" in retired and "| not reproduced |" in retired


def test_the_matrix_as_junit_one_case_per_cell_judged_like_the_table() -> None:
    measured = {
        "K1/zk/3.9": [run("reproduced", lost=5), run("reproduced", lost=9), run("not reproduced")],
        "K4/kraft/3.9": [run("not reproduced")],
    }
    cells = [
        Cell("K1", "K1", "loss", "zk", "3.9", 3),
        Cell("K4", "K4", "safe", "kraft", "3.9", 1),
        Cell("K9", "K9", "loss", "zk", "3.9", 3),
    ]
    cases = {c.name: c for c in junit_cases(cells, measured)}
    assert cases["K1/zk/3.9"].failure is None and cases["K1/zk/3.9"].seconds == 300.0
    assert (cases["K4/kraft/3.9"].failure or "").startswith("not reproduced (0/1)")
    assert cases["K9/zk/3.9"].skipped and cases["K9/zk/3.9"].classname == "claims.K9"
