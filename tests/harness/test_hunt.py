"""`harness hunt`: the rate of a rare anomaly over fresh runs, with planted runs in place of
`harness run` (no cluster), the evidence it keeps, and its bad input."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import hunt as hunting
from harness.hunt import (
    CLEAN,
    FAILED,
    INCONCLUSIVE,
    KEPT_OF_A_CLEAN_RUN,
    VIOLATION,
    Hunt,
    Target,
    kind_of,
    on_client,
    run_hunt,
    shrink_first_violation,
    targets_of,
    transaction_clients,
    wilson_interval,
)
from harness.nightly import Night, hunt_night, summary_markdown
from harness.sequence import Job, Trial
from systems.registry import find_scenario, load_scenario
from systems.scenario import ScenarioError
from tests.harness.test_shrink import run_dir_of
from tests.helpers import ROOT, harness, one_job_at_a_time

pytestmark = pytest.mark.unit

SCENARIOS = ROOT / "scenarios"
SAFE = {"outcome": "safe", "matched": True, "reason": "nothing lost", "kafka_version": "3.9.2"}
LOSS = {"outcome": "loss", "matched": False, "reason": "12 lost", "kafka_version": "3.9.2"}
UNSURE = {"outcome": "inconclusive", "matched": False, "reason": "no fault met traffic"}


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [(0, 20, 0.0, 0.161), (1, 8, 0.022, 0.471), (20, 20, 0.839, 1.0), (5, 20, 0.112, 0.469)],
)
def test_the_wilson_interval_has_its_known_values(k: int, n: int, low: float, high: float) -> None:
    assert wilson_interval(k, n) == pytest.approx((low, high), abs=5e-4)


def test_no_runs_know_nothing_of_the_rate() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)


@pytest.mark.parametrize(
    ("verdict", "kind"),
    [
        (SAFE, CLEAN),
        (LOSS, VIOLATION),
        (UNSURE, INCONCLUSIVE),
        (None, FAILED),
        ({"outcome": "duplicates+reordered", "matched": False}, VIOLATION),
        # A loss expected and not shown misses the expectation without an anomaly.
        ({"outcome": "safe", "matched": False}, CLEAN),
        # An expected anomaly is what the scenario says, not a violation of it.
        ({"outcome": "loss", "matched": True}, CLEAN),
    ],
)
def test_a_run_is_a_violation_only_when_it_misses_with_an_anomaly(
    verdict: dict[str, Any] | None, kind: str
) -> None:
    assert kind_of(Trial(None, 1.0, None if verdict else "error: no broker", verdict)) == kind


def planted_runs(
    results: Path, verdicts: Callable[[int], dict[str, Any] | None]
) -> tuple[Callable[..., Trial], list[list[str]]]:
    """A stand-in for run_once: the i-th run (from 1) leaves a whole run directory under
    RESULTS/<scenario>/ with verdicts(i), or no verdict when that is None; and the extra
    arguments each run was given."""
    given: list[list[str]] = []

    def run_once(
        scenario: Path, scenario_id: str, root: Path, timeout: float, extra: list[str]
    ) -> Trial:
        given.append(extra)
        i = len(given)
        run = root / scenario_id / f"run-{i:03}"
        for part in ("history", "logs", "ids", "cluster"):
            (run / part).mkdir(parents=True)
            (run / part / "big.bin").write_bytes(b"x" * 1000)
        (run / "history.parquet").write_bytes(b"x")
        (run / "manifest.json").write_text(json.dumps({"pick_seed": 1000 + i}))
        (run / "report.html").write_text("<html></html>")
        (run / "junit.xml").write_text("<testsuite/>")
        verdict = verdicts(i)
        if verdict is None:
            return Trial(run, 2.0, "error: the cluster never formed", None)
        verdict = verdict | {"pick_seed": 1000 + i}
        (run / "verdict.json").write_text(json.dumps(verdict))
        return Trial(run, 60.0, None, verdict)

    return run_once, given


def plant(monkeypatch: pytest.MonkeyPatch, planted: Callable[..., Trial]) -> None:
    """The hunt's runs made by `planted` (run_once's arguments), one at a time."""

    def run(job: Job) -> Trial:
        return planted(job.scenario, job.scenario_id, job.results, job.timeout, list(job.extra))

    monkeypatch.setattr(hunting, "run_jobs", one_job_at_a_time(run))


@pytest.fixture
def quiet_heal(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    healed: list[str] = []
    monkeypatch.setattr(hunting, "heal", lambda: healed.append("heal"))
    yield healed


def a_hunt(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    verdicts: Callable[[int], dict[str, Any] | None],
    runs: int = 20,
    until_violation: bool = False,
    seed: int | None = None,
    lines: tuple[str | None, ...] = (None,),
) -> tuple[Hunt, list[list[str]]]:
    planted, given = planted_runs(tmp_path, verdicts)
    plant(monkeypatch, planted)
    record = Hunt("K4", runs, until_violation, seed, [], tmp_path / "hunt" / "K4-now")
    targets = [Target(line, None, SCENARIOS / "K4.yaml") for line in lines]
    run_hunt(record, targets, "--kafka", [], tmp_path, 600, 3600, lambda _s: None)
    return record, given


def every_fourth(i: int) -> dict[str, Any]:
    return LOSS if i % 4 == 0 else SAFE


def test_a_known_violation_rate_comes_back_with_its_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record, given = a_hunt(tmp_path, monkeypatch, every_fourth)
    (row,) = record.rows
    assert (len(row.runs), row.count(VIOLATION), row.judged) == (20, 5, 20)
    assert [r.trial.run_dir.name for r in row.violating() if r.trial.run_dir] == [
        "run-004", "run-008", "run-012", "run-016", "run-020",
    ]  # fmt: skip
    table = json.loads((record.folder / "hunt.json").read_text())
    (saved,) = table["rows"]
    assert saved["violations"] == 5 and saved["rate"] == 0.25
    assert saved["interval_95"] == pytest.approx([0.112, 0.469], abs=5e-4)
    assert [v["pick_seed"] for v in saved["violating"]] == [1004, 1008, 1012, 1016, 1020]
    md = (record.folder / "hunt.md").read_text()
    assert "| default | - | 3.9.2 | 20 | 5 | 0 | 0 | 5 of 20 | [0.112, 0.469] |" in md
    assert "run-004` (1004)" in md
    assert given == [[]] * 20  # no line, no seed: each run draws its own


def test_clean_runs_keep_their_verdict_and_report_and_violating_ones_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record, _ = a_hunt(tmp_path, monkeypatch, every_fourth, runs=4)
    runs = tmp_path / "K4"
    for clean in ("run-001", "run-002", "run-003"):
        assert {p.name for p in (runs / clean).iterdir()} == KEPT_OF_A_CLEAN_RUN
    kept = {p.name for p in (runs / "run-004").iterdir()}
    assert {"history", "logs", "ids", "cluster", "history.parquet"} <= kept
    assert (runs / "run-004" / "history" / "big.bin").stat().st_size == 1000


def test_inconclusive_and_failed_runs_are_counted_apart_from_the_rate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pattern = [SAFE, UNSURE, None, LOSS, SAFE, None, UNSURE, SAFE]
    record, _ = a_hunt(tmp_path, monkeypatch, lambda i: pattern[i - 1], runs=len(pattern))
    (row,) = record.rows
    counts = {kind: row.count(kind) for kind in (VIOLATION, CLEAN, INCONCLUSIVE, FAILED)}
    assert counts == {VIOLATION: 1, CLEAN: 3, INCONCLUSIVE: 2, FAILED: 2}
    assert row.rate_words() == "1 of 4, 95 % [0.046, 0.699]"
    # A run without a verdict keeps its logs: they are all that says why.
    assert (tmp_path / "K4" / "run-003" / "logs").is_dir()
    assert not (tmp_path / "K4" / "run-002" / "logs").exists()


def test_until_violation_stops_each_line_at_its_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record, given = a_hunt(
        tmp_path, monkeypatch, every_fourth, until_violation=True, seed=7, lines=("3.9", "4.4")
    )
    assert [len(row.runs) for row in record.rows] == [4, 4]
    assert [row.stopped for row in record.rows] == ["first violation"] * 2
    assert given[0] == ["--kafka", "3.9", "--seed", "7"]
    assert given[-1] == ["--kafka", "4.4", "--seed", "7"]


def test_a_row_stops_after_two_runs_in_a_row_without_a_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record, _ = a_hunt(tmp_path, monkeypatch, lambda i: SAFE if i == 1 else None)
    (row,) = record.rows
    assert len(row.runs) == 3 and row.stopped == "2 runs in a row gave no verdict"


def test_ctrl_c_stops_between_runs_heals_and_still_writes_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, quiet_heal: list[str]
) -> None:
    def third_interrupted(i: int) -> dict[str, Any]:
        if i == 3:
            raise KeyboardInterrupt
        return every_fourth(i)

    record, _ = a_hunt(tmp_path, monkeypatch, third_interrupted, lines=("3.9", "4.4"))
    assert record.interrupted and quiet_heal == ["heal"]
    assert [len(row.runs) for row in record.rows] == [2]  # the second line never started
    saved = json.loads((record.folder / "hunt.json").read_text())
    assert saved["interrupted"] and saved["rows"][0]["runs"] == 2
    assert "interrupted" in (record.folder / "hunt.md").read_text()


def test_no_run_starts_once_the_budget_is_spent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    planted, given = planted_runs(tmp_path, every_fourth)
    plant(monkeypatch, planted)
    record = Hunt("K4", 20, False, None, [], tmp_path / "hunt")
    target = Target(None, None, SCENARIOS / "K4.yaml")
    run_hunt(record, [target], "--kafka", [], tmp_path, 600, 0, lambda _s: None)
    assert given == [] and record.rows[0].stopped == "budget spent"


def test_a_client_rewrites_every_transactional_producer_and_copier(tmp_path: Path) -> None:
    spec = load_scenario(find_scenario("T1", SCENARIOS))
    assert transaction_clients(spec) == ["confluent-kafka"]
    assert transaction_clients(on_client(spec, "java")) == ["java"]
    targets = targets_of(spec, SCENARIOS / "T1.yaml", ["3.9", "4.4"], ["java"], tmp_path)
    assert [(t.line, t.client) for t in targets] == [("3.9", "java"), ("4.4", "java")]
    assert transaction_clients(load_scenario(targets[0].scenario)) == ["java"]
    own = targets_of(spec, SCENARIOS / "T1.yaml", [None], [], tmp_path / "none")
    assert [(t.client, t.scenario) for t in own] == [("confluent-kafka", SCENARIOS / "T1.yaml")]
    assert not (tmp_path / "none").exists()  # nothing rewritten, nothing written


@pytest.mark.parametrize(
    ("scenario", "client", "said"),
    [
        ("K4", "java", "has no transactional producer or copier"),
        ("T1", "jvm", "--client takes confluent-kafka or java"),
        ("kafka-mock-transactions", "java", "on the java client: .*the java client needs"),
    ],
)
def test_a_client_that_does_not_fit_is_refused(scenario: str, client: str, said: str) -> None:
    with pytest.raises(ScenarioError, match=said):
        on_client(load_scenario(find_scenario(scenario, SCENARIOS)), client)


def test_a_flaky_violation_shrinks_when_each_candidate_gets_tries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The restart loses, but only on every second run of a schedule: one try a candidate
    throws the restart away as not reproducing; two keep it."""
    violating = run_dir_of(tmp_path, "loss")
    seen: dict[str, int] = {}

    def flaky(scenario: Any, results: Path, kafka_line: str | None) -> Trial:
        steps = json.dumps([s.model_dump(mode="json") for s in scenario.nemesis])
        seen[steps] = seen.get(steps, 0) + 1
        shows = any(s.op == "restart" for s in scenario.nemesis) and seen[steps] % 2 == 0
        return Trial(tmp_path, 60.0, None, LOSS if shows else SAFE)

    monkeypatch.setattr("harness.shrink.run_scenario", flaky)
    minimal: dict[int, int] = {}
    for tries in (1, 2):
        record = Hunt("chaos-kafka-acks1-s9", 1, False, None, [], tmp_path / f"hunt-{tries}")
        record.rows = [hunting.Row(Target(None, None, tmp_path), [hunting.HuntRun(
            Trial(violating, 60.0, None, LOSS)
        )])]  # fmt: skip
        seen.clear()
        found = shrink_first_violation(record, tries, tmp_path, tmp_path / f"found-{tries}", print)
        assert found is not None
        minimal[tries] = len(yaml.safe_load(found.read_text())["nemesis"])
    assert minimal == {1: 5, 2: 1}


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["nosuch"], "no scenario 'nosuch'"),
        (["kafka-mock-eos", "--runs", "0"], "'0' is not a count"),
        (["K4", "--kafka", "3.9", "--rabbitmq", "4.3"], "not both"),
        (["K4", "--client", "java"], "has no transactional producer or copier"),
        (["kafka-mock-eos", "--kafka", "4.4"], "--kafka is for Kafka scenarios"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_any_run(
    tmp_path: Path, args: list[str], said: str
) -> None:
    done = harness("hunt", *args, "--results", str(tmp_path), timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and said in lines[0], done.stderr
    assert not (tmp_path / "hunt").exists()  # nothing started, nothing written


def test_nightly_hunts_its_scenarios_in_what_is_left_of_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    planted, given = planted_runs(tmp_path, every_fourth)
    plant(monkeypatch, planted)
    k4 = SCENARIOS / "K4.yaml"
    night, said = Night("2026-01-01"), []
    hunt_night(night, [(load_scenario(k4), k4)], time.monotonic() + 3600, 4, tmp_path, print)
    assert len(given) == 4 and night.hunts[0].rows[0].count(VIOLATION) == 1
    assert "| K4 | - | 4 | 1 of 4, 95 % [0.046, 0.699] |" in summary_markdown(night, ())
    late = Night("2026-01-02")
    hunt_night(late, [(load_scenario(k4), k4)], time.monotonic() - 1, 4, tmp_path, said.append)
    assert late.hunts == [] and said == ["budget spent: K4 not hunted"] and len(given) == 4
