"""The night's summary and JUnit from its runs (fake runs: no cluster)."""

from __future__ import annotations

import datetime
import inspect
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml

from chaos.generator import ChaosError, ChaosOptions, draw_schedule
from chaos.menu import FAMILIES
from chaos.schedule import chaos_scenario, options_for, shape_of
from faults.registry import ops_of
from harness import nightly
from harness.chaos import ChaosResult
from harness.commands import campaigns
from harness.nightly import (
    MATRIX,
    NIGHT_MINUTES,
    RUNS_PER_HOUR,
    Base,
    Night,
    first_seed_of,
    planned_runs,
    run_minutes,
    run_night,
    write_night,
)
from harness.sequence import Job, Trial
from systems.registry import AnyScenario, find_scenario, load_scenario
from tests.helpers import ROOT

SAFE = Base("chaos/kafka-safe", "kraft")
UNSAFE = Base("chaos/kafka-acks1", "kraft", unsafe=True)


def result(seed: int, outcome: str | None, matched: bool = False, **coverage: Any) -> ChaosResult:
    verdict = None
    if outcome is not None:
        verdict = {
            "outcome": outcome,
            "matched": matched,
            "reason": f"{outcome} because",
            "coverage": {"situations": coverage, "acked_in_faults": 10, "vacuous": False},
        }
    trial = Trial(Path(f"/r/{seed}"), 100.0, None if verdict else "no cluster", verdict)
    return ChaosResult(seed, f"x-s{seed}", trial)


def applying(r: ChaosResult, ops: dict[str, int]) -> ChaosResult:
    """The run with these steps carried out, by op (its coverage's `ops`)."""
    assert r.trial.verdict is not None
    r.trial.verdict["coverage"]["ops"] = ops
    return r


def test_a_violation_fails_a_safe_base_and_is_the_finding_of_an_unsafe_one(tmp_path: Path) -> None:
    night = Night("2026-11-24")
    night.runs = [
        (SAFE, applying(result(1, "safe", True, **{"leader-faulted": 2}), {"kill": 2, "start": 2})),
        (UNSAFE, result(2, "loss", **{"leader-faulted": 1, "leader-changed": 1})),
        (SAFE, applying(result(3, "loss"), {"kill": 1, "start": 1})),
        (SAFE, result(4, "inconclusive")),
        (SAFE, result(5, None)),
    ]
    night.shrinks = [
        {"run": "/r/2", "seed": 2, "found": "f.yaml", "original_steps": 9, "minimal_steps": 2,
         "runs_spent": 7, "reproduced": "2/3"},
    ]  # fmt: skip
    summary, junit = write_night(night, (SAFE, UNSAFE), tmp_path)
    assert summary == tmp_path / "chaos" / "2026-11-24" / "summary.md"
    text = summary.read_text()
    assert "| chaos/kafka-safe (kraft) | safe | 4 | 1 | 1 | 1 | 1 |" in text
    assert (
        "| chaos/kafka-acks1 (kraft) | unsafe (violations expected) | 1 | 0 | 1 | 0 | 0 |" in text
    )
    assert "| leader-faulted | 1 | 1 |" in text
    # Each op the nemesis carried out: steps in all, and (in brackets) in how many runs.
    assert "| kill | 3 (2) | - |" in text
    assert "| /r/2 | 9 | 2 | 7 | 2/3 | f.yaml |" in text
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("5", "1", "1")
    assert suite.get("skipped") == "1"


def test_a_nights_seeds_start_from_its_date() -> None:
    assert first_seed_of("2026-11-24") == 20261124000


def test_the_matrix_draws_the_exactly_once_copy_beside_the_isolation_base() -> None:
    keys = [b.key for b in MATRIX]
    isolation = keys.index("chaos/kafka-txn-isolation (kraft)")
    assert keys[isolation + 1] == "chaos/kafka-txn-eos (kraft)"
    eos = MATRIX[isolation + 1]
    assert not eos.unsafe  # its promise (no duplicates) is one a violation of fails the night


@pytest.mark.parametrize("base", MATRIX, ids=lambda b: b.key)
def test_every_base_of_the_matrix_draws_a_schedule_at_the_nights_defaults(base: Base) -> None:
    spec = load_scenario(find_scenario(base.scenario, ROOT / "scenarios"))
    scenario, steps = chaos_scenario(spec, ChaosOptions(seed=20261124000, seconds=120), base.mode)
    assert steps and scenario.generated is not None
    assert steps[0]["at"] >= (spec.chaos.warmup if spec.chaos else 0)


def test_a_night_too_short_for_a_bases_warmup_stops_before_its_first_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_cluster(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("a run started")

    monkeypatch.setattr(nightly, "run_jobs", no_cluster)
    bases = (SAFE, Base("chaos/kafka-txn-eos", "kraft"))
    with pytest.raises(ChaosError, match=r"chaos/kafka-txn-eos \(kraft\): .*25 s of warmup"):
        run_night(bases, 1, 0.5, 1, tmp_path, ROOT / "scenarios", lambda _s: None)


# ---- what an hour of the night draws ------------------------------------------------------------

# The ops issue 70 added to the nemesis (disks, clocks, membership, the controller quorum, rolling
# upgrades, the ZooKeeper-to-KRaft migration, RabbitMQ's metadata probe), the faults and what
# heals them: "the chaos run of the nightly tier draws every new op at least once in an hour".
ISSUE_70_OPS = frozenset(
    {
        "disk-error", "disk-full", "torn-write", "corrupt", "disk-ok",
        "clock", "clock-ok",
        "reassign", "remove-broker", "add-broker", "add-controller", "remove-controller",
        "forget-node", "add-node", "shrink-queue", "grow-queue",
        "upgrade", "finalize-feature", "migrate",
        "declare",
    }
)  # fmt: skip


def new_ops(specs: dict[str, AnyScenario]) -> dict[str, set[str]]:
    """Per real system, the issue's ops it has: what the nightly's first hour must draw."""
    return {
        system: set(ISSUE_70_OPS & set(ops_of(system)))
        for system in {spec.cluster.system for spec in specs.values()} - {"kafka-mock"}
    }


def loaded_matrix() -> dict[str, AnyScenario]:
    return {
        b.scenario: load_scenario(find_scenario(b.scenario, ROOT / "scenarios")) for b in MATRIX
    }


def drawn_in_an_hour(first_seed: int, specs: dict[str, AnyScenario]) -> dict[str, set[str]]:
    """The ops of the runs of the night's first hour (planned_runs: the matrix in turn, seed
    after seed, each run as long as its traffic and the measured rest of a run), by system,
    drawn as harness chaos draws them."""
    drawn: dict[str, set[str]] = {"kafka": set(), "rabbitmq": set()}
    for base, seed in planned_runs(MATRIX, specs, first_seed, 1.0):
        spec = specs[base.scenario]
        opts = ChaosOptions(seed=seed, seconds=NIGHT_MINUTES * 60)
        steps = draw_schedule(shape_of(spec, base.mode), options_for(spec, opts))
        drawn[spec.cluster.system] |= {s["op"] for s in steps}
    return drawn


def test_the_issues_ops_are_each_systems_own() -> None:
    wanted = new_ops(loaded_matrix())
    assert wanted["kafka"] >= {"upgrade", "finalize-feature", "migrate", "add-controller", "clock"}
    assert not wanted["kafka"] & {"declare", "forget-node", "shrink-queue"}
    assert wanted["rabbitmq"] >= {"clock", "clock-ok", "declare", "shrink-queue", "upgrade"}
    assert not wanted["rabbitmq"] & {"migrate", "add-controller", "reassign"}


def test_every_night_of_a_year_draws_each_of_the_issues_new_ops_in_its_first_hour() -> None:
    specs = loaded_matrix()
    wanted = new_ops(specs)
    day = datetime.date(2027, 1, 1)
    while day.year == 2027:
        drawn = drawn_in_an_hour(first_seed_of(day.isoformat()), specs)
        for system, ops in wanted.items():
            assert ops <= drawn[system], f"{day}: {system} drew no {sorted(ops - drawn[system])}"
        day += datetime.timedelta(days=1)


def own_traffic(spec: AnyScenario) -> float:
    return spec.chaos.traffic if spec.chaos is not None else 0.0


def test_an_hour_holds_as_many_runs_of_the_nights_traffic_as_ever_and_fewer_longer_ones() -> None:
    specs = loaded_matrix()
    plain = tuple(b for b in MATRIX if not own_traffic(specs[b.scenario]))
    assert len(planned_runs(plain, specs, 1, 1.0)) == RUNS_PER_HOUR == 11
    hour = planned_runs(MATRIX, specs, 1, 1.0)
    assert [seed for _b, seed in hour] == list(range(1, len(hour) + 1))
    assert sum(run_minutes(specs[b.scenario], NIGHT_MINUTES) for b, _ in hour) <= 60
    # A base that asks for more traffic takes as much longer.
    longer = {b.key for b, _ in hour if own_traffic(specs[b.scenario]) > NIGHT_MINUTES * 60}
    assert longer == {
        "chaos/kafka-upgrade (kraft)", "chaos/rabbitmq-upgrade", "chaos/kafka-migration (zk)"
    }  # fmt: skip
    upgrade = specs["chaos/kafka-upgrade"]
    assert run_minutes(upgrade, NIGHT_MINUTES) == pytest.approx(
        run_minutes(specs["chaos/kafka-safe"], NIGHT_MINUTES) + 1.0
    )


def test_a_nights_own_runs_draw_every_new_op_in_the_runs_of_an_hour(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through run_night itself (its turns, seeds and schedule files; no cluster): the
    schedules of its first hour's runs, as their scenario files hold them."""
    specs = loaded_matrix()
    first = first_seed_of("2026-11-24")
    hour = planned_runs(MATRIX, specs, first, 1.0)
    ran: list[tuple[Base, dict[str, Any]]] = []

    def fake_runs(jobs: Iterable[Job], judge: Callable[[Job, Trial], bool], **_k: Any) -> None:
        for job in jobs:
            ran.append((job.tag[0], yaml.safe_load(Path(job.scenario).read_text())))
            held = {"outcome": "safe", "matched": True, "reason": "held", "coverage": {}}
            if not judge(job, Trial(tmp_path, 1.0, None, held)) or len(ran) == len(hour):
                return

    monkeypatch.setattr(nightly, "run_jobs", fake_runs)
    run_night(MATRIX, 24, NIGHT_MINUTES, first, tmp_path, ROOT / "scenarios", lambda _s: None)
    assert [(b, data["generated"]["seed"]) for b, data in ran] == hour
    drawn: dict[str, set[str]] = {"kafka": set(), "rabbitmq": set()}
    for _base, data in ran:
        drawn[data["cluster"]["system"]] |= {s["op"] for s in data["nemesis"]}
    for system, ops in new_ops(specs).items():
        assert ops <= drawn[system], sorted(ops - drawn[system])
    # The same as the year's test draws for that night: it follows the night's own turns.
    assert drawn == drawn_in_an_hour(first, specs)


def test_the_bases_of_families_drawn_by_name_run_in_the_first_hour_before_any_unsafe_base() -> None:
    """An unsafe base's expected violation is shrunk in up to half of what is left of the
    night: the bases the hour's guarantee rests on come before it, within the hour."""
    specs = loaded_matrix()
    named = {
        i: own.faults
        for i, b in enumerate(MATRIX)
        if (own := specs[b.scenario].chaos) is not None and own.faults
    }
    first_unsafe = next(i for i, b in enumerate(MATRIX) if b.unsafe)
    assert named and max(named) < first_unsafe
    assert max(named) < len(planned_runs(MATRIX, specs, 1, 1.0))
    by_name = {
        f.name for system in ("kafka", "rabbitmq") for f in FAMILIES[system] if not f.default
    }
    # Every family drawn only by name has a base in the hour, but the clients' ones (the
    # client path and client bounces: the transactional bases') and a preferred election.
    assert by_name - {f for faults in named.values() for f in faults} == {
        "client-path", "clients", "elect"
    }  # fmt: skip


def test_the_nights_traffic_per_run_is_the_commands_default() -> None:
    default = inspect.signature(campaigns.nightly).parameters["minutes"].default
    assert default == NIGHT_MINUTES
