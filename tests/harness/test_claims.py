"""The claims matrix and the words verdicts use for claims: pure, no Docker."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from checkers.verdict import claim_word
from harness.claims import (
    DEFAULT_KAFKA_LINES,
    DEFAULT_RABBITMQ_LINES,
    LOSS_RUNS,
    Cell,
    RunRecord,
    cell_word,
    cells_of,
    claim_scenarios,
    junit_cases,
    load_measured,
    record_of,
    render_docs,
    render_table,
    save_measured,
    select,
    still_to_run,
)
from harness.sequence import Trial
from tests.helpers import ROOT, one_job_at_a_time


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


def test_the_default_lines_are_the_oldest_and_newest_setup_builds() -> None:
    assert DEFAULT_KAFKA_LINES == ("3.9", "4.4")
    assert DEFAULT_RABBITMQ_LINES == ("3.10", "4.3")
    assert Cell("K1", "K1", "loss", "kraft", "4.4", 3).on_default_line
    assert not Cell("K1", "K1", "loss", "kraft", "4.1", 3).on_default_line
    assert not Cell("R9", "R9", "safe", "rabbitmq", "4.0", 1).on_default_line
    # A Kafka line is not a RabbitMQ one: 3.10 is RabbitMQ's default, no Kafka line at all.
    assert not Cell("K1", "K1", "loss", "kraft", "3.10", 3).on_default_line


def cells_by_key(spec_id: str, runs: int) -> dict[str, Cell]:
    specs = [s for s in claim_scenarios(ROOT / "scenarios") if s.id == spec_id]
    return {c.key: c for s in specs for c in cells_of(s, runs)}


def test_every_claim_scenario_has_cells_and_loss_cells_get_three_runs_everywhere() -> None:
    specs = claim_scenarios(ROOT / "scenarios")
    assert {s.id for s in specs} >= {"K1", "K4", "R1", "R6"}
    assert not any(s.id.startswith("kafka-mock") for s in specs)  # the mock tier never counts
    k1 = cells_by_key("K1", 1)
    assert {k: c.runs for k, c in k1.items()} == {
        "K1/zk/3.9": LOSS_RUNS,
        "K1/kraft/3.9": LOSS_RUNS,
        "K1/kraft/4.1": LOSS_RUNS,
        "K1/zk/4.4": 0,  # 4.4 has no ZooKeeper: shown, never run
        "K1/kraft/4.4": LOSS_RUNS,
    }
    assert "no zk mode" in k1["K1/zk/4.4"].refusal
    assert not any(c.refusal for k, c in k1.items() if k != "K1/zk/4.4")
    assert cells_by_key("K1", 5)["K1/kraft/4.4"].runs == 5  # more asked than 3: more given
    k4 = cells_by_key("K4", 2)
    assert {k: c.runs for k, c in k4.items()} == {
        "K4/kraft-dedicated/3.9": 2,
        "K4/zk/3.9": 2,
        "K4/kraft/3.9": 2,
        "K4/kraft-dedicated/4.1": 2,
        "K4/kraft/4.1": 2,  # 4.1's refused zk cell is not listed: 4.1 is no default line
        "K4/kraft-dedicated/4.4": 2,
        "K4/zk/4.4": 0,
        "K4/kraft/4.4": 2,
    }
    k25 = cells_by_key("K25-consumer-protocol", 1)
    assert list(k25) == [
        "K25-consumer-protocol/kraft/3.9",
        "K25-consumer-protocol/kraft/4.1",
        "K25-consumer-protocol/kraft/4.4",
    ]
    assert "KIP-848" in k25["K25-consumer-protocol/kraft/3.9"].refusal
    # The articles' RabbitMQ scenarios run on 3.10 (mirrored queues, gone in 4.0: a row says so
    # on 4.3); a scenario that names a 4.x line runs on it and every newer line setup builds.
    r1 = cells_by_key("R1", 1)
    assert {k: c.runs for k, c in r1.items()} == {"R1/rabbitmq/3.10": 3, "R1/rabbitmq/4.3": 0}
    assert "no mirrored queues" in r1["R1/rabbitmq/4.3"].refusal
    assert list(cells_by_key("R6", 1)) == ["R6/rabbitmq/3.10"]  # quorum: R9 covers 4.x
    r10 = cells_by_key("R10", 1)
    assert list(r10) == ["R10/rabbitmq/4.0", "R10/rabbitmq/4.3"]
    assert not any(c.refusal for c in r10.values())


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


def test_without_a_line_filter_the_matrix_runs_the_default_lines_only() -> None:
    cells = [c for s in claim_scenarios(ROOT / "scenarios") for c in cells_of(s, 1)]
    assert [c.key for c in select(cells, {"K1"}, None, None)] == [
        "K1/zk/3.9",
        "K1/kraft/3.9",
        "K1/kraft/4.4",
    ]
    assert [c.key for c in select(cells, {"R9-kill"}, None, None)] == ["R9-kill/rabbitmq/4.3"]
    every = select(cells, None, None, None)
    assert every and all(c.on_default_line for c in every)
    # Named, a line between the defaults runs as before.
    assert [c.key for c in select(cells, {"K1"}, None, {"4.1"})] == ["K1/kraft/4.1"]
    assert [c.key for c in select(cells, {"R9-kill"}, None, {"4.0"})] == ["R9-kill/rabbitmq/4.0"]


def test_a_cell_its_line_refuses_is_never_selected() -> None:
    cells = [c for s in claim_scenarios(ROOT / "scenarios") for c in cells_of(s, 1)]
    assert select(cells, {"K1"}, {"zk"}, {"4.4"}) == []
    assert select(cells, {"K25-consumer-protocol"}, None, {"3.9"}) == []
    assert select(cells, {"R1"}, None, {"4.3"}) == []
    assert not any(c.refusal for c in select(cells, None, None, None))


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
        ("loss", [], "not run"),
    ],
)
def test_a_cells_word_over_its_runs(expect: str, words: list[str], cell: str) -> None:
    c = Cell("K1", "K1", expect, "zk", "3.9", len(words) or 1)
    assert cell_word(c, [run(w) for w in words]) == cell


def test_a_cell_never_run_says_why() -> None:
    assert cell_word(Cell("K4", "K4", "safe", "kraft", "4.4", 1), []) == "not run"
    assert cell_word(Cell("K4", "K4", "safe", "kraft", "4.1", 1), []) == (
        "outside the default lines"
    )
    assert cell_word(Cell("R9", "R9", "safe", "rabbitmq", "4.0", 1), []) == (
        "outside the default lines"
    )
    refused = Cell("K1", "K1", "loss", "zk", "4.4", 0, "Kafka 4.4 has no zk mode")
    assert cell_word(refused, []) == "cannot run: Kafka 4.4 has no zk mode"
    # A line between the defaults, once run, is judged like any other.
    assert cell_word(Cell("K4", "K4", "safe", "kraft", "4.1", 1), [run("reproduced")]) == (
        "reproduced"
    )


def test_measured_cells_survive_a_round_trip_and_render(tmp_path: Path) -> None:
    measured = {"K1/zk/3.9": [run("reproduced", lost=2820)]}
    path = tmp_path / "claims-results.json"
    save_measured(path, measured)
    assert load_measured(path) == measured
    cells = [
        Cell("K1", "K1", "loss", "zk", "3.9", 3),
        Cell("K4", "K4", "safe", "kraft", "4.4", 1),
        Cell("K4", "K4", "safe", "kraft", "4.1", 1),
        Cell("K4", "K4", "safe", "zk", "4.4", 0, "Kafka 4.4 has no zk mode"),
    ]
    table = render_table(cells, measured, "test machine")
    rows = [ln for ln in table.splitlines() if ln.startswith("| K")]
    assert rows[0].startswith("| K1 | K1 | zk | 3.9.2 | 1 | 1000 | 2820 | 0 |")
    assert "reproduced (1/1)" in rows[0] and "`1`" in rows[0]
    assert rows[1].startswith("| K4 | K4 | kraft | 4.4 | 0 |")
    assert rows[1].endswith("| not run | - |")
    assert rows[2].endswith("| outside the default lines | - |")
    assert rows[3].startswith("| K4 | K4 | zk | 4.4 | 0 |")
    assert rows[3].endswith("| cannot run: Kafka 4.4 has no zk mode | - |")
    # The explanatory paragraph defines every word an empty cell may say.
    head = table.split("| claim |")[0]
    for word in ("not run:", "outside the default lines:", "cannot run:", "†:"):
        assert word in head
    assert "Kafka 3.9 and 4.4 and RabbitMQ 3.10 and 4.3" in head
    # K1 needs 2 more runs, K4 on 4.4 one; 4.1 is no default line, the refused cell no cell.
    assert "Left on the default lines: 1 cells not run; 3 runs to make" in head


def test_kafka_runs_from_before_the_final_read_are_marked(tmp_path: Path) -> None:
    path = tmp_path / "claims-results.json"
    save_measured(path, {"K1/zk/3.9": [run("reproduced", lost=2820, final_read=False)]})
    (old,) = load_measured(path)["K1/zk/3.9"]
    assert old.final_read is False
    table = render_table([Cell("K1", "K1", "loss", "zk", "3.9", 3)], {"K1/zk/3.9": [old]}, "m")
    assert "| 2820† |" in table and "†: a Kafka run from before the final read" in table


def test_runs_from_before_the_final_read_leave_a_cell_undone() -> None:
    cells = [
        Cell("K6", "K6", "safe", "kraft", "3.9", 1),
        Cell("R3", "R3", "safe", "rabbitmq", "3.10", 1),
    ]
    old = run("reproduced", final_read=False)
    rabbit = run("reproduced", final_read=None)  # RabbitMQ runs have no final read to lack
    assert still_to_run(cells, {"K6/kraft/3.9": [old], "R3/rabbitmq/3.10": [rabbit]}) == (0, 1)
    assert still_to_run(cells, {"K6/kraft/3.9": [old, run("reproduced")]}) == (1, 1)
    assert still_to_run(cells, {}) == (2, 2)


def test_a_cell_measured_again_is_judged_by_its_new_runs_and_lists_the_old_apart() -> None:
    cell = Cell("K6", "K6", "safe", "kraft", "3.9", 1)
    measured = {
        "K6/kraft/3.9": [run("reproduced", final_read=False), run("refuted", lost=7)],
    }
    table = render_table([cell], measured, "m")
    current, superseded = table.split("that newer runs of the same cell replaced")
    (row,) = [ln for ln in current.splitlines() if ln.startswith("| K6")]
    assert "| 1 | 1000 | 7 |" in row and "| refuted |" in row and "†" not in row
    (old_row,) = [ln for ln in superseded.splitlines() if ln.startswith("| K6")]
    assert "| 1 | 1000 | 0† |" in old_row and "| reproduced |" in old_row
    (case,) = junit_cases([cell], measured)
    assert (case.failure or "").startswith("refuted")  # the junit judges the new run alone
    # With no newer run, the old one is what the row shows (marked), and no section follows.
    only_old = render_table([cell], {"K6/kraft/3.9": measured["K6/kraft/3.9"][:1]}, "m")
    assert "| 0† |" in only_old and "newer runs of the same cell" not in only_old


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

    run_cells_with(monkeypatch, fake_run)
    measured_file = tmp_path / "m.json"
    cells = [Cell("K1", "K1", "loss", "zk", "3.9", 3), Cell("K4", "K4", "safe", "kraft", "3.9", 1)]
    save_measured(measured_file, {"K1/zk/3.9": [run("reproduced")]})
    said: list[str] = []
    claims.run_matrix(cells, measured_file, tmp_path, False, 60, 100, said.append)
    # breadth first: K4's first run before K1's second; K1's measured run is kept
    assert ran == ["K4/kraft/3.9", "K1/zk/3.9", "K1/zk/3.9"]
    assert {k: len(v) for k, v in load_measured(measured_file).items()} == {
        "K1/zk/3.9": 3,
        "K4/kraft/3.9": 1,
    }
    ran.clear()
    claims.run_matrix(cells, measured_file, tmp_path, False, 60, 100, said.append)
    assert ran == []  # nothing left to measure
    claims.run_matrix(cells[1:], measured_file, tmp_path, True, 0, 100, said.append)
    assert ran == [] and "budget spent" in said[-1]  # asked again, but no budget left


def test_the_matrix_runs_again_a_cell_whose_runs_lack_the_final_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import harness.claims as claims

    ran: list[str] = []

    def fake_run(cell: Cell, results: Path, timeout: float) -> RunRecord:
        ran.append(cell.key)
        return run("reproduced", lost=4)

    run_cells_with(monkeypatch, fake_run)
    measured_file = tmp_path / "m.json"
    old = run("reproduced", lost=2820, final_read=False)
    cells = [
        Cell("K1", "K1", "loss", "zk", "3.9", 3),  # three runs, all from before the final read
        Cell("K6", "K6", "safe", "kraft", "3.9", 1),  # one old run, one current: done
        Cell("K1", "K1", "loss", "zk", "4.4", 0, "Kafka 4.4 has no zk mode"),
    ]
    save_measured(measured_file, {"K1/zk/3.9": [old] * 3, "K6/kraft/3.9": [old, run("reproduced")]})
    said: list[str] = []
    claims.run_matrix(cells, measured_file, tmp_path, False, 60, 100, said.append)
    assert ran == ["K1/zk/3.9"] * 3
    assert said[0] == "K1/zk/3.9: run 1 of 3"
    kept = load_measured(measured_file)
    assert [r.final_read for r in kept["K1/zk/3.9"]] == [False] * 3 + [True] * 3  # none dropped
    assert len(kept["K6/kraft/3.9"]) == 2 and "K1/zk/4.4" not in kept
    ran.clear()
    claims.run_matrix(cells, measured_file, tmp_path, False, 60, 100, said.append)
    assert ran == []


def test_the_table_renders_again_from_the_json_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:

    def no_run(cell: Cell, results: Path, timeout: float) -> RunRecord:
        raise AssertionError(f"rendering ran {cell.key}")

    run_cells_with(monkeypatch, no_run)
    on_44 = RunRecord("results/K1/2", "2026-11-24 05:20", 150.0, "reproduced", "4.4.0", 900, 2839)
    save_measured(tmp_path / "claims-results.json", {"K1/kraft/4.4": [on_44]})
    before = (tmp_path / "claims-results.json").read_text()
    written = render_docs(ROOT / "scenarios", tmp_path)
    assert written == tmp_path / "claims-results.md"
    k1 = [ln for ln in written.read_text().splitlines() if ln.startswith("| K1 | K1 |")]
    assert [ln.split(" | ")[2:5] for ln in k1] == [
        ["zk", "3.9", "0"],
        ["kraft", "3.9", "0"],
        ["kraft", "4.1", "0"],
        ["zk", "4.4", "0"],
        ["kraft", "4.4.0", "1"],
    ]
    assert [ln.split(" | ")[-2] for ln in k1[:4]] == [
        "not run",
        "not run",
        "outside the default lines",
        "cannot run: Kafka 4.4 has no zk mode (4.0 removed ZooKeeper): use kraft or "
        "kraft-dedicated",
    ]
    assert "| 900 | 2839 |" in k1[4] and "reproduced (1/1)" in k1[4]
    assert (tmp_path / "claims-results.json").read_text() == before


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
        Cell("K9", "K9", "loss", "kraft-dedicated", "4.1", 3),
        Cell("K9", "K9", "loss", "zk", "4.4", 0, "Kafka 4.4 has no zk mode"),
    ]
    cases = {c.name: c for c in junit_cases(cells, measured)}
    assert cases["K1/zk/3.9"].failure is None and cases["K1/zk/3.9"].seconds == 300.0
    assert (cases["K4/kraft/3.9"].failure or "").startswith("not reproduced (0/1)")
    assert cases["K9/zk/3.9"].skipped and cases["K9/zk/3.9"].classname == "claims.K9"
    outside, refused = cases["K9/kraft-dedicated/4.1"], cases["K9/zk/4.4"]
    assert (outside.skipped, outside.failure) == ("outside the default lines", None)
    assert (refused.skipped, refused.failure) == ("cannot run: Kafka 4.4 has no zk mode", None)


def test_a_cell_whose_runs_never_count_does_not_spend_the_sitting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scenario without the final read makes runs that never count: it gets a run a pass,
    not every run the budget allows, and the cells after it still run."""
    import harness.claims as claims

    ran: list[str] = []

    def fake_run(cell: Cell, results: Path, timeout: float) -> RunRecord:
        ran.append(cell.key)
        return run("reproduced", final_read=False if cell.claim == "K1" else True)

    run_cells_with(monkeypatch, fake_run)
    cells = [Cell("K1", "K1", "loss", "zk", "3.9", 3), Cell("K4", "K4", "safe", "kraft", "3.9", 1)]
    claims.run_matrix(cells, tmp_path / "m.json", tmp_path, False, 60, 100, lambda _: None)
    assert ran == ["K1/zk/3.9", "K4/kraft/3.9", "K1/zk/3.9", "K1/zk/3.9"]


def test_a_run_without_a_verdict_is_made_again_next_sitting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import harness.claims as claims

    ran: list[str] = []
    run_cells_with(monkeypatch, lambda c, r, t: ran.append(c.key) or run("error"))
    cells = [Cell("K24", "K24", "safe", "kraft", "4.4", 1)]
    claims.run_matrix(cells, tmp_path / "m.json", tmp_path, False, 60, 100, lambda _: None)
    assert ran == ["K24/kraft/4.4"]  # once this sitting, though it measured nothing
    claims.run_matrix(cells, tmp_path / "m.json", tmp_path, False, 60, 100, lambda _: None)
    assert (
        ran == ["K24/kraft/4.4"] * 2
        and len(load_measured(tmp_path / "m.json")["K24/kraft/4.4"]) == 2
    )


def run_cells_with(
    monkeypatch: pytest.MonkeyPatch, fake_run: Callable[[Cell, Path, float], RunRecord]
) -> None:
    """The matrix's runs made by `fake_run(cell, results, timeout)`, one at a time."""
    import harness.claims as claims

    no_trial = Trial(None, 0.0, None, None)
    monkeypatch.setattr(claims, "run_jobs", one_job_at_a_time(lambda _job: no_trial))
    monkeypatch.setattr(
        claims, "record_of_trial", lambda cell, _trial, results: fake_run(cell, results, 0.0)
    )


def test_a_runs_metadata_probes_are_recorded_and_shown_beside_its_verdict(tmp_path: Path) -> None:
    base = {**verdict("safe", "safe", True), "claim_verdict": "reproduced", "sends": {"ok": 7}}
    words = []
    for section in (None, {"held": None}, {"held": True}, {"held": False}):
        (tmp_path / "verdict.json").write_text(json.dumps({**base, "declares": section}))
        words.append(record_of(tmp_path, 1.0, None).declares)
    assert words == [None, None, "held", "did not hold"]
    held, broken = run("reproduced"), run("not reproduced")
    held.declares, broken.declares = "held", "did not hold"
    cell = Cell("RK1", "RK1", "safe", "rabbitmq", "4.3", 2)
    table = render_table([cell], {"RK1/rabbitmq/4.3": [held, broken]}, "m")
    row = next(ln for ln in table.splitlines() if ln.startswith("| RK1 |"))
    assert "| not reproduced (1/2); declares held / did not hold |" in row
    # A row whose runs expect nothing of probes reads as before.
    plain = render_table([cell], {"RK1/rabbitmq/4.3": [run("reproduced")]}, "m")
    assert next(ln for ln in plain.splitlines() if ln.startswith("| RK1 |")).endswith(
        "| - | - | reproduced | `1` |"
    )
    # Runs saved before the field existed load as expecting nothing.
    path = tmp_path / "claims-results.json"
    save_measured(path, {"RK1/rabbitmq/4.3": [held]})
    data = json.loads(path.read_text())
    del data["cells"]["RK1/rabbitmq/4.3"][0]["declares"]
    path.write_text(json.dumps(data))
    assert load_measured(path)["RK1/rabbitmq/4.3"][0].declares is None


def test_the_metadata_store_rows_run_on_the_lines_that_keep_their_store() -> None:
    """RK1 is Khepri's (4.3 alone); RK2 is Mnesia's: run on 4.0, and shown on 4.3 as a line
    that cannot run it (4.3 removed Mnesia), so the table says what changed."""
    assert {k: c.runs for k, c in cells_by_key("RK1", 1).items()} == {"RK1/rabbitmq/4.3": 1}
    for spec_id in ("RK2", "RK2-autoheal"):
        cells = cells_by_key(spec_id, 1)
        assert {k: c.runs for k, c in cells.items()} == {
            f"{spec_id}/rabbitmq/4.0": 1,
            f"{spec_id}/rabbitmq/4.3": 0,
        }
        assert "keeps its metadata in Khepri" in cells[f"{spec_id}/rabbitmq/4.3"].refusal
    every = [c for s in claim_scenarios(ROOT / "scenarios") for c in cells_of(s, 1)]
    picked = select(every, {"RK1", "RK2"}, None, {"4.0", "4.3"})
    assert sorted(c.key for c in picked) == [
        "RK1/rabbitmq/4.3",
        "RK2-autoheal/rabbitmq/4.0",
        "RK2/rabbitmq/4.0",
    ]
