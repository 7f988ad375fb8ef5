"""Where a check's time goes (`harness check --profile`): wall time per phase, and on a Spark
of this process's own the Spark jobs and stages each phase ran.

The checker marks its phases with `phase(name)`; outside a profile that costs nothing. A Connect
session runs its jobs in the server, whose job list this process cannot see: its phases have
wall times alone.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from checkers.engine import is_connect


@dataclass
class Phase:
    name: str
    seconds: float
    jobs: int | None  # None: not countable (a Connect session)
    stages: int | None


@dataclass
class Profile:
    spark: Any
    phases: list[Phase] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.phases)

    def lines(self) -> list[str]:
        """The table a person reads: a phase a line, then the totals."""
        rows = [(p.name, p.seconds, p.jobs, p.stages) for p in self.phases]
        jobs = [p.jobs for p in self.phases]
        stages = [p.stages for p in self.phases]
        total = (
            "total",
            self.seconds,
            None if None in jobs else sum(j or 0 for j in jobs),
            None if None in stages else sum(s or 0 for s in stages),
        )
        width = max(len(r[0]) for r in [*rows, total])
        out = [f"{'phase':<{width}}  {'seconds':>8}  {'jobs':>5}  {'stages':>6}"]
        for name, seconds, j, s in [*rows, total]:
            out.append(f"{name:<{width}}  {seconds:>8.2f}  {_n(j):>5}  {_n(s):>6}")
        return out

    def as_dict(self) -> list[dict[str, Any]]:
        return [p.__dict__ for p in self.phases]


_current: contextvars.ContextVar[Profile | None] = contextvars.ContextVar("profile", default=None)


@contextlib.contextmanager
def profiling(spark: Any) -> Iterator[Profile]:
    """Every phase run inside this block is recorded in the profile it yields."""
    profile = Profile(spark)
    token = _current.set(profile)
    try:
        yield profile
    finally:
        _current.reset(token)


_watcher: contextvars.ContextVar[Callable[[str], None] | None] = contextvars.ContextVar(
    "phase watcher", default=None
)


@contextlib.contextmanager
def watching(on_phase: Callable[[str], None]) -> Iterator[None]:
    """`on_phase(name)` as each phase begins inside this block: what a console shows while a
    check runs, so that a minute of Spark is not a minute of silence."""
    token = _watcher.set(on_phase)
    try:
        yield
    finally:
        _watcher.reset(token)


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """One phase of a check; said to a watcher, and recorded when a profile is active."""
    if (on_phase := _watcher.get()) is not None:
        on_phase(name)
    profile = _current.get()
    if profile is None:
        yield
        return
    tracker = None if is_connect(profile.spark) else profile.spark.sparkContext
    if tracker is not None:
        tracker.setJobGroup(f"check:{name}", name)
    started = time.perf_counter()
    try:
        yield
    finally:
        seconds = time.perf_counter() - started
        jobs = stages = None
        if tracker is not None:
            status = tracker.statusTracker()
            ids = status.getJobIdsForGroup(f"check:{name}")
            infos = [status.getJobInfo(i) for i in ids]
            jobs = len(ids)
            stages = sum(len(info.stageIds) for info in infos if info is not None)
            tracker.setJobGroup("check", "outside the profiled phases")
        profile.phases.append(Phase(name, round(seconds, 3), jobs, stages))


def _n(value: int | None) -> str:
    return "-" if value is None else str(value)
