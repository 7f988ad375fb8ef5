"""The two tiers are decided by markers and measured cost (tests/tiers.py); these tests keep
an end-to-end test or a slow one from landing in the gate CI runs on every change."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, cast

import pytest

from tests import tiers

ROOT = Path(__file__).resolve().parent.parent


class Stub:
    """An item as tier_of reads it: its markers by name."""

    def __init__(self, *marks: pytest.MarkDecorator) -> None:
        self.marks = {m.mark.name: m.mark for m in marks}
        self.nodeid = "tests/x.py::test_x"
        self.user_properties: list[tuple[str, object]] = []

    def get_closest_marker(self, name: str) -> Any:
        return self.marks.get(name)


def tier(*marks: pytest.MarkDecorator) -> str:
    return tiers.tier_of(cast(pytest.Item, Stub(*marks)))


def test_an_e2e_test_is_nightly_unless_it_is_its_lines_smoke() -> None:
    assert tier(pytest.mark.e2e) == "nightly"
    assert tier(pytest.mark.e2e, pytest.mark.smoke("kafka", "3.9")) == "fast"
    assert tier(pytest.mark.cluster) == "fast"
    assert tier(pytest.mark.cluster, pytest.mark.nightly) == "nightly"
    assert tier() == "fast"


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], set[str]]:
    """Every item of the suite with its tier, and the node ids `--tier fast` selects."""
    dump = tmp_path_factory.mktemp("tiers") / "items.json"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "--tier", "fast"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**_environ(), "BJ_TIER_DUMP": str(dump)},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    selected = {ln for ln in result.stdout.splitlines() if "::" in ln}
    return json.loads(dump.read_text()), selected


def _environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}


def test_no_e2e_test_is_in_the_fast_tier_without_being_declared_a_smoke(
    collected: tuple[list[dict[str, Any]], set[str]],
) -> None:
    items, _ = collected
    undeclared = [i["nodeid"] for i in items if i["e2e"] and i["tier"] == "fast" and not i["smoke"]]
    assert undeclared == [], f"e2e tests in the fast tier that are no smoke: {undeclared}"


def test_each_default_line_has_exactly_one_smoke_and_every_smoke_is_end_to_end(
    collected: tuple[list[dict[str, Any]], set[str]],
) -> None:
    items, _ = collected
    smokes = [i for i in items if i["smoke"]]
    assert all(i["e2e"] for i in smokes), [i["nodeid"] for i in smokes if not i["e2e"]]
    lines = Counter(tuple(i["smoke"]) for i in smokes)
    assert set(lines) == set(tiers.SMOKE_LINES), lines
    assert all(n == 1 for n in lines.values()), lines


def test_the_fast_tier_selects_its_tests_and_the_nightly_tier_holds_the_rest(
    collected: tuple[list[dict[str, Any]], set[str]],
) -> None:
    items, selected = collected
    fast = {i["nodeid"] for i in items if i["tier"] == "fast"}
    nightly = {i["nodeid"] for i in items if i["tier"] == "nightly"}
    assert selected == fast
    assert fast and nightly and not fast & nightly
    assert fast | nightly == {i["nodeid"] for i in items}  # no test left out of both


def test_a_test_measured_over_90_s_is_not_in_the_fast_tier_unless_it_is_a_smoke(
    collected: tuple[list[dict[str, Any]], set[str]],
) -> None:
    items, _ = collected
    fast = {i["nodeid"] for i in items if i["tier"] == "fast" and not i["smoke"]}
    too_slow = {k: s for k, s in tiers.recorded_slow().items() if k in fast}
    assert too_slow == {}, f"measured over {tiers.NIGHTLY_OVER_S:.0f} s: mark them nightly"


def test_a_session_records_its_slow_tests_and_forgets_those_that_became_quick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tiers, "DURATIONS", tmp_path / "durations.json")
    tiers.DURATIONS.write_text(json.dumps({"slow": {"a": 120, "b": 95, "c": 200}}))
    clock = tiers.Clock()
    clock.seconds = {"a": 3.0, "b": 97.4, "d": 130.2}  # c did not run this time
    tiers.record(clock)
    assert tiers.recorded_slow() == {"b": 97.0, "c": 200.0, "d": 130.0}


def test_the_fast_tier_says_its_wall_time_and_warns_before_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Config:
        def getoption(self, name: str) -> str:
            return "fast"

    clock = tiers.Clock()
    clock.seconds = {"slow": 140.0, "smoke": 300.0, "quick": 4.0}
    clock.tiers = {"slow": "fast", "smoke": "fast", "quick": "fast"}
    clock.smokes = {"smoke"}
    config = cast(pytest.Config, Config())
    lines = tiers.summary_lines(config, clock)
    assert lines[0].startswith("fast tier: 0.0 min")
    assert lines[1:] == [
        "WARNING: slow took 140 s in the fast tier (over 90 s): mark it nightly",
    ]
    clock.started = time.monotonic() - 31 * 60
    assert any("over 30" in ln for ln in tiers.summary_lines(config, clock))
