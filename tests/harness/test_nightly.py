"""The night's summary and JUnit from its runs (fake runs: no cluster)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from chaos.generator import ChaosError, ChaosOptions
from chaos.schedule import chaos_scenario
from harness import nightly
from harness.chaos import ChaosResult
from harness.nightly import MATRIX, Base, Night, first_seed_of, run_night, write_night
from harness.sequence import Trial
from systems.registry import find_scenario, load_scenario
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


def test_a_violation_fails_a_safe_base_and_is_the_finding_of_an_unsafe_one(tmp_path: Path) -> None:
    night = Night("2026-11-24")
    night.runs = [
        (SAFE, result(1, "safe", True, **{"leader-faulted": 2})),
        (UNSAFE, result(2, "loss", **{"leader-faulted": 1, "leader-changed": 1})),
        (SAFE, result(3, "loss")),
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
