"""A campaign's runs overlap only what can overlap: run N+1's cluster comes up while run N is
checked, and no workload starts before the run before it has ended (harness.sequence). The runs
here stand for `harness run`: a script that keeps the sequence's contract (contract.sequence)
and writes down when each of its phases began and ended."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from harness import sequence
from harness.sequence import Job, Trial, run_jobs

# Stands for `harness run SCENARIO --results R --in-sequence SLOT`; SCENARIO is a JSON file of
# the seconds each phase takes. Every phase's start and end go to R/events.jsonl.
FAKE_RUN = """
import json, sys, time
from pathlib import Path
from contract.sequence import SequenceSlot

scenario, results, slot = sys.argv[1], Path(sys.argv[3]), SequenceSlot(Path(sys.argv[5]))
plan = json.loads(Path(scenario).read_text())
name = Path(scenario).stem
run_dir = results / name / "run"
run_dir.mkdir(parents=True)
phases = {}
(run_dir / "manifest.json").write_text(json.dumps({"phases": phases}))
slot.say_run_dir(run_dir)

def phase(what, seconds, act=None):
    began = time.time()
    if act:
        act()
    time.sleep(seconds)
    phases[what] = {"start": began, "end": time.time()}
    (run_dir / "manifest.json").write_text(json.dumps({"phases": phases}))
    event = {"run": name, "phase": what, "start": began, "end": time.time()}
    with open(results / "events.jsonl", "a") as out:
        out.write(json.dumps(event) + "\\n")

phase("cluster_up", plan["cluster_up"])
phase("turn", 0, lambda: slot.take_turn(60))
phase("workload", plan["workload"])
slot.say_drained()
phase("check", plan["check"])
(run_dir / "verdict.json").write_text(json.dumps({"matched": True, "run": name}))
"""


@pytest.fixture
def fake_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    def argv(job: Job, slot: Any) -> list[str]:
        return [
            sys.executable, "-c", FAKE_RUN, str(job.scenario),
            "--results", str(job.results), "--in-sequence", str(slot.folder),
        ]  # fmt: skip

    monkeypatch.setattr(Job, "argv", argv)


def jobs_of(tmp_path: Path, plans: dict[str, dict[str, float]], timeout: float = 60) -> list[Job]:
    made = []
    for name, plan in plans.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(plan))
        made.append(Job(path, name, tmp_path, timeout, tag=name))
    return made


def events(tmp_path: Path) -> dict[tuple[str, str], dict[str, float]]:
    lines = (tmp_path / "events.jsonl").read_text().splitlines()
    return {(e["run"], e["phase"]): e for e in map(json.loads, lines)}


PLAN = {"cluster_up": 1.0, "workload": 1.0, "check": 1.5}


def test_the_next_cluster_comes_up_while_a_run_is_checked(tmp_path: Path, fake_runs: None) -> None:
    trials: list[tuple[str, Trial]] = []
    jobs = jobs_of(tmp_path, {"a": PLAN, "b": PLAN, "c": PLAN})
    run_jobs(jobs, lambda job, trial: trials.append((job.tag, trial)) is None)
    assert [name for name, _ in trials] == ["a", "b", "c"]
    assert all(t.verdict == {"matched": True, "run": n} for n, t in trials), trials
    assert all(t.run_dir == tmp_path / n / "run" for n, t in trials)
    seen = events(tmp_path)
    for before, after in (("a", "b"), ("b", "c")):
        # the cluster came up during the check of the run before ...
        assert seen[(after, "cluster_up")]["start"] < seen[(before, "check")]["end"]
        # ... and its workload began only once that check had ended
        assert seen[(after, "workload")]["start"] >= seen[(before, "check")]["end"]


def test_one_at_a_time_a_run_starts_when_the_one_before_has_ended(
    tmp_path: Path, fake_runs: None
) -> None:
    run_jobs(jobs_of(tmp_path, {"a": PLAN, "b": PLAN}), lambda *_: True, pipelined=False)
    seen = events(tmp_path)
    assert seen[("b", "cluster_up")]["start"] >= seen[("a", "check")]["end"]


def test_a_campaign_that_stops_stops_the_run_it_started_and_drops_its_empty_folder(
    tmp_path: Path, fake_runs: None
) -> None:
    slow_up = {"cluster_up": 20.0, "workload": 1.0, "check": 0.5}
    judged: list[str] = []
    jobs = jobs_of(tmp_path, {"a": PLAN, "b": slow_up, "c": PLAN})
    run_jobs(jobs, lambda job, _t: judged.append(job.tag) is not None)
    assert judged == ["a"]
    assert not (tmp_path / "b" / "run").exists()  # stopped while its cluster came up
    assert not (tmp_path / "c").exists()  # never started
    assert ("b", "cluster_up") not in events(tmp_path)


def test_a_run_the_one_before_made_unwanted_is_stopped_and_the_next_goes_on(
    tmp_path: Path, fake_runs: None
) -> None:
    slow_up = {"cluster_up": 20.0, "workload": 1.0, "check": 0.5}
    judged: list[str] = []
    jobs = jobs_of(tmp_path, {"a": PLAN, "b": slow_up, "c": PLAN})
    run_jobs(
        jobs,
        lambda job, _t: judged.append(job.tag) is None,
        wanted=lambda job: job.tag != "b",
    )
    assert judged == ["a", "c"]


def test_a_run_that_overruns_its_bound_is_stopped_and_says_so(
    tmp_path: Path, fake_runs: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    healed: list[bool] = []
    monkeypatch.setattr(sequence, "heal", lambda: healed.append(True))
    trials: list[Trial] = []
    slow = {"cluster_up": 0.1, "workload": 30.0, "check": 0.1}
    run_jobs(jobs_of(tmp_path, {"a": slow}, timeout=2), lambda _j, t: trials.append(t) is None)
    (trial,) = trials
    assert trial.failure == "the run did not finish in 2 s" and trial.verdict is None
    assert trial.run_dir == tmp_path / "a" / "run" and trial.run_dir.is_dir()  # kept: it ran
    assert healed == []  # SIGTERM was enough: no `harness heal` needed
