"""Where a check's time goes (`harness check --profile`): wall time per phase, and on a Spark
of this process's own the Spark jobs and stages each phase ran.

The checker marks its phases with `phase(name)`; outside a profile that costs nothing. A Connect
session runs its jobs in the server, whose job list this process cannot see: its phases have
wall times alone. Independent phases run at once (checkers.engine.parallel), so each says when it
began, and the wall time from the first phase's start to the last one's end is less than their
sum.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from checkers.engine.kind import is_connect


@dataclass
class Phase:
    name: str
    seconds: float
    jobs: int | None  # None: not countable (a Connect session)
    stages: int | None
    began: float = 0.0  # seconds from the profile's start


@dataclass
class Profile:
    spark: Any
    phases: list[Phase] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)

    @property
    def seconds(self) -> float:
        """The phases' seconds added up: more than the wall time where phases overlapped."""
        return sum(p.seconds for p in self.phases)

    @property
    def wall(self) -> float:
        """From the first phase's start to the last one's end."""
        if not self.phases:
            return 0.0
        first = min(p.began for p in self.phases)
        return max(p.began + p.seconds for p in self.phases) - first

    def lines(self) -> list[str]:
        """The table a person reads: a phase a line in the order they began, the phases added
        up, then the wall time they took."""
        phases = sorted(self.phases, key=lambda p: p.began)
        rows = [(p.name, _at(p.began), p.seconds, p.jobs, p.stages) for p in phases]
        jobs = [p.jobs for p in phases]
        stages = [p.stages for p in phases]
        total = (
            "total",
            "",
            self.seconds,
            None if None in jobs else sum(j or 0 for j in jobs),
            None if None in stages else sum(s or 0 for s in stages),
        )
        wall = ("wall", "", self.wall, None, None)
        width = max(len(r[0]) for r in [*rows, total])
        out = [f"{'phase':<{width}}  {'began':>6}  {'seconds':>8}  {'jobs':>5}  {'stages':>6}"]
        for name, at, seconds, j, s in [*rows, total, wall]:
            out.append(f"{name:<{width}}  {at:>6}  {seconds:>8.2f}  {_n(j):>5}  {_n(s):>6}")
        return out

    def as_dict(self) -> list[dict[str, Any]]:
        return [p.__dict__ for p in self.phases]


T = TypeVar("T")

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
        # A group of this profile's own: a session's Spark keeps every group's jobs it ran.
        group = f"check:{id(profile)}:{profile.started}:{name}"
        tracker.setJobGroup(group, name)
    started = time.perf_counter()
    try:
        yield
    finally:
        seconds = time.perf_counter() - started
        jobs = stages = None
        if tracker is not None:
            status = tracker.statusTracker()
            ids = status.getJobIdsForGroup(group)
            infos = [status.getJobInfo(i) for i in ids]
            jobs = len(ids)
            stages = sum(len(info.stageIds) for info in infos if info is not None)
            tracker.setJobGroup("check", "outside the profiled phases")
        began = started - profile.started
        profile.phases.append(Phase(name, round(seconds, 3), jobs, stages, round(began, 3)))


def in_phase(name: str, question: Callable[[], T]) -> Callable[[], T]:
    """`question`, asked as the phase `name` (for work handed to another thread)."""

    def asked() -> T:
        with phase(name):
            return question()

    return asked


def _n(value: int | None) -> str:
    return "-" if value is None else str(value)


def _at(seconds: float) -> str:
    return f"+{seconds:.2f}"
