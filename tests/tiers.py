"""The two test tiers: a fast gate on every change (`make test`, what CI runs) and a nightly
tier (`make test-nightly`) with everything else.

Where a test goes is read from its markers and its measured cost, never from a list of names:
- an `e2e` test is nightly unless it is marked `smoke(system, line)`: the one end-to-end run
  of its system on that release line that the gate keeps;
- a test marked `nightly` is nightly (a cluster test that measured over NIGHTLY_OVER_S);
- everything else is fast.
Each tiered session records the tests that took longer than NIGHTLY_OVER_S in DURATIONS
(committed), and `tests/test_tiers.py` fails while one of them is still in the fast tier: a
test that grew slow is seen by the next run, not when CI runs out of time.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

TIERS = ("fast", "nightly", "all")
NIGHTLY_OVER_S = 90.0  # a test slower than this is nightly unless it is its line's smoke
FAST_BUDGET_MIN = 35.0  # CI's gate, make setup included
FAST_WARN_MIN = 30.0  # said at the end of the fast tier, before the budget is spent
DURATIONS = Path(__file__).resolve().parent / "tier-durations.json"
# The lines the gate runs one scenario on, end to end: each needs exactly one smoke. Each
# system's default line only: on the others the gate starts a real cluster in its cluster tests
# (Kafka 4.1 and 4.4: forms, an ISR shrinks and heals; RabbitMQ 4.0 and 4.3: forms; a node cut
# off and healed is nightly), and their end-to-end runs (K4 on 4.4, R9-kill on 4.0, R10 on 4.0
# and 4.3: 140-160 s each on a slow day) are nightly.
SMOKE_LINES = frozenset({("kafka", "3.9"), ("rabbitmq", "3.10")})


@dataclass(frozen=True)
class Smoke:
    system: str
    line: str


def smoke_of(item: pytest.Item) -> Smoke | None:
    """The system and release line an item is the end-to-end smoke for, if it is one."""
    marker = item.get_closest_marker("smoke")
    if marker is None:
        return None
    system, line = marker.args
    return Smoke(str(system), str(line))


def tier_of(item: pytest.Item) -> str:
    if item.get_closest_marker("nightly") is not None:
        return "nightly"
    if item.get_closest_marker("e2e") is not None and smoke_of(item) is None:
        return "nightly"
    return "fast"


def add_option(parser: pytest.Parser) -> None:
    parser.addoption(
        "--tier",
        choices=TIERS,
        default="all",
        help="fast: the gate CI runs (make test); nightly: the rest (make test-nightly); all",
    )
    parser.addoption(
        "--record-durations",
        action="store_true",
        help=f"keep the tests slower than {NIGHTLY_OVER_S:.0f} s in tests/tier-durations.json",
    )


def dump(items: list[pytest.Item], path: Path) -> None:
    """Every collected item's tier and the markers it was decided by (tests/test_tiers.py)."""
    rows = []
    for item in items:
        smoke = smoke_of(item)
        rows.append(
            {
                "nodeid": item.nodeid,
                "tier": tier_of(item),
                "e2e": item.get_closest_marker("e2e") is not None,
                "nightly": item.get_closest_marker("nightly") is not None,
                "smoke": None if smoke is None else [smoke.system, smoke.line],
            }
        )
    path.write_text(json.dumps(rows))


def select(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks each item with its tier and deselects the items of the other tier."""
    if os.environ.get("BJ_TIER_DUMP"):
        dump(items, Path(os.environ["BJ_TIER_DUMP"]))
    wanted = config.getoption("--tier")
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        tier = tier_of(item)
        item.user_properties.append(("tier", tier))
        if smoke_of(item) is not None:
            item.user_properties.append(("smoke", True))
        (kept if wanted in ("all", tier) else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


class Clock:
    """The session's wall time and each test's (setup, call and teardown together)."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.seconds: dict[str, float] = {}
        self.tiers: dict[str, str] = {}
        self.smokes: set[str] = set()

    def add(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration
        for key, value in report.user_properties:
            if key == "tier":
                self.tiers[report.nodeid] = str(value)
            if key == "smoke":
                self.smokes.add(report.nodeid)

    def slow(self) -> dict[str, float]:
        return {k: s for k, s in self.seconds.items() if s > NIGHTLY_OVER_S}

    def slow_in_fast_tier(self) -> dict[str, float]:
        return {
            k: s
            for k, s in self.slow().items()
            if self.tiers.get(k) == "fast" and k not in self.smokes
        }


def recorded_slow() -> dict[str, float]:
    """The tests measured over NIGHTLY_OVER_S, by node id (as the last tiered runs left it)."""
    if not DURATIONS.exists():
        return {}
    return {str(k): float(v) for k, v in json.loads(DURATIONS.read_text())["slow"].items()}


def record(clock: Clock) -> None:
    """Updates DURATIONS with what this session measured: a test that ran and was quick leaves
    it, a slow one enters it with its seconds (whole, so that the file changes rarely)."""
    slow = {k: v for k, v in recorded_slow().items() if k not in clock.seconds}
    slow.update({k: round(s) for k, s in clock.slow().items()})
    body = {
        "why": f"tests measured over {NIGHTLY_OVER_S:.0f} s; tests/test_tiers.py fails while "
        "one is in the fast tier without being its line's smoke",
        "slow": dict(sorted(slow.items())),
    }
    text = json.dumps(body, indent=1) + "\n"
    if not DURATIONS.exists() or DURATIONS.read_text() != text:
        DURATIONS.write_text(text)


def summary_lines(config: pytest.Config, clock: Clock) -> list[str]:
    """What a tiered session says at its end: its wall time against the budget, and the tests
    that are too slow for the tier they ran in."""
    tier = config.getoption("--tier")
    minutes = (time.monotonic() - clock.started) / 60
    lines = []
    if tier == "fast":
        lines.append(
            f"fast tier: {minutes:.1f} min of pytest (budget {FAST_BUDGET_MIN:.0f} min with "
            "make setup)"
        )
        if minutes > FAST_WARN_MIN:
            lines.append(
                f"WARNING: the fast tier took {minutes:.1f} min, over {FAST_WARN_MIN:.0f}: "
                "move a test to the nightly tier before CI's budget is spent"
            )
        for nodeid, seconds in sorted(clock.slow_in_fast_tier().items()):
            lines.append(
                f"WARNING: {nodeid} took {seconds:.0f} s in the fast tier (over "
                f"{NIGHTLY_OVER_S:.0f} s): mark it nightly"
            )
    elif tier == "nightly":
        lines.append(f"nightly tier: {minutes:.1f} min of pytest")
    return lines
