"""Shrinking a schedule that broke an invariant to the fewest, shortest, narrowest steps that
still break it.

Real clusters are not deterministic: a candidate counts as reproducing when `need` of at most
`tries` runs of it show the original violation. Candidates come in this order, each kept as
soon as it reproduces, so every later one starts from a smaller schedule:
  1. only the faults the checker tied the anomalies to (and their heals)
  2. each fault dropped with its heal, the ones no anomaly was tied to first
  3. each fault's window halved, while it still reproduces
  4. the whole schedule moved earlier, its first fault after a short warmup (or the
     scenario's own `chaos.warmup`, when its workload needs longer)
  5. each target narrowed: one node instead of several, one follower instead of all
  6. the load cut to what the shortened schedule needs
A shrink never grows the schedule, and it stops when its time budget is spent with the smallest
schedule found so far. One-way steps (an upgrade, a finalize, a migration's phase: `PATHS`) stay
a prefix of their path: a step dropped takes the path's later steps with it (an upgrade its
finalize, a phase the phases after it), a step kept keeps the ones before it, and none is
narrowed. Running a candidate is the caller's (`Attempt` in, nothing else): a fake
runner tests this module, a real one runs clusters.
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from faults.registry import op as registry_op

Data = dict[str, Any]  # a scenario as its file holds it
WARMUP = 5.0  # seconds of traffic before the first fault, once moved earlier
QUIET = 20.0  # seconds of traffic after the last step, once the load is cut
MIN_WINDOW = 1.0  # a fault's window is not halved below this


@dataclass(frozen=True)
class ShrinkOptions:
    tries: int = 3  # runs of one candidate at most
    need: int = 1  # of which this many must reproduce
    budget_s: float = 3600.0

    def check(self) -> None:
        if not 1 <= self.need <= self.tries:
            raise ValueError(
                f"--need must be between 1 and --tries ({self.tries}), not {self.need}"
            )


@dataclass
class Candidate:
    what: str  # what this candidate changed
    steps: int
    runs: int = 0
    reproduced: int = 0
    kept: bool = False


@dataclass
class ShrinkResult:
    minimal: Data
    original_steps: int
    runs_spent: int
    # of the minimal schedule's own runs, topped up to `tries` (the original's when nothing
    # shrank: the run being shrunk counts as one)
    reproduced: int
    runs_of_minimal: int
    candidates: list[Candidate] = field(default_factory=list)
    budget_spent: bool = False


class Shrinker:
    """One shrink: `attempt(data)` runs a candidate once and says whether it reproduced (None
    when the run failed), `valid(data)` whether the system's schema takes it."""

    def __init__(
        self,
        attempt: Callable[[Data], bool | None],
        valid: Callable[[Data], bool],
        opts: ShrinkOptions,
        say: Callable[[str], None] = lambda _s: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.attempt = attempt
        self.valid = valid
        self.opts = opts
        self.say = say
        self.clock = clock
        self.deadline = clock() + opts.budget_s
        self.runs = 0
        self.candidates: list[Candidate] = []
        self.refused: set[str] = set()  # candidates that did not reproduce, never run again

    def shrink(self, original: Data, hot: set[int], reproduced: tuple[int, int]) -> ShrinkResult:
        """`hot`: indexes of the original's steps the anomalies were tied to; `reproduced`: how
        often the original reproduced so far (got, runs)."""
        hot_steps = [original["nemesis"][i] for i in sorted(hot)]
        current, got = copy.deepcopy(original), reproduced
        improved = True
        while improved and not self.spent():
            improved = False
            heat = {i for i, step in enumerate(current["nemesis"]) if step in hot_steps}
            for what, candidate in self._candidates(current, heat):
                if self.spent():
                    break
                if len(candidate["nemesis"]) > len(current["nemesis"]):
                    continue
                key = json.dumps(candidate, sort_keys=True)
                if key in self.refused or not self.valid(candidate):
                    continue
                if (outcome := self._try(what, candidate)) is None:
                    self.refused.add(key)
                else:
                    # A kept candidate changes what comes next: the list starts again from it.
                    current, got, improved = candidate, outcome, True
                    break
        got = self._confirm(current, got)
        return ShrinkResult(
            minimal=current,
            original_steps=len(original["nemesis"]),
            runs_spent=self.runs,
            reproduced=got[0],
            runs_of_minimal=got[1],
            candidates=self.candidates,
            budget_spent=self.spent(),
        )

    def _confirm(self, minimal: Data, got: tuple[int, int]) -> tuple[int, int]:
        """The minimal schedule run until it has had `tries` runs (budget allowing): how often
        it reproduces, not just that it did once."""
        reproduced, runs = got
        while runs < self.opts.tries and not self.spent():
            runs += 1
            self.runs += 1
            reproduced += bool(self.attempt(minimal))
        self.say(f"the minimal schedule reproduced in {reproduced} of {runs} runs")
        return reproduced, runs

    def spent(self) -> bool:
        return self.clock() >= self.deadline

    def _try(self, what: str, candidate: Data) -> tuple[int, int] | None:
        """The candidate's runs: (reproduced, runs) when it counts as reproducing, else None."""
        c = Candidate(what, len(candidate["nemesis"]))
        self.candidates.append(c)
        while c.runs < self.opts.tries and c.reproduced < self.opts.need:
            if self.opts.tries - c.runs < self.opts.need - c.reproduced or self.spent():
                break
            c.runs += 1
            self.runs += 1
            if self.attempt(candidate):
                c.reproduced += 1
        c.kept = c.reproduced >= self.opts.need
        self.say(
            f"{'kept' if c.kept else 'not kept'}: {what} ({c.steps} steps; reproduced "
            f"{c.reproduced} of {c.runs})"
        )
        return (c.reproduced, c.runs) if c.kept else None

    # ---- candidates ----------------------------------------------------------------------------

    def _candidates(self, data: Data, hot: set[int]) -> Iterator[tuple[str, Data]]:
        steps = data["nemesis"]
        units = fault_units(steps)
        hot_units = [u for u in units if set(u) & hot]
        if hot_units and len(hot_units) < len(units):
            kept = {i for u in hot_units for i in u}
            # A one-way step keeps the steps of its path before it (a finalize its upgrades).
            kept |= _whole_units(units, {j for i in kept for j in path_neighbours(steps, i, False)})
            if len(kept) < len(steps):
                yield "only the faults the anomalies were tied to", _keeping(data, sorted(kept))
        # Later faults and cold ones first: they are the least likely cause.
        for unit in sorted(units, key=lambda u: (bool(set(u) & hot), -u[0])):
            dropped = _whole_units(
                units, set(unit) | {j for i in unit for j in path_neighbours(steps, i, True)}
            )
            keep = [i for i in range(len(steps)) if i not in dropped]
            also = " and its path's later steps" if len(dropped) > len(unit) else ""
            yield f"without step {unit[0]} ({_op_of(data, unit[0])}){also}", _keeping(data, keep)
        for unit in units:
            if len(unit) > 1 and (halved := _halved(data, unit)) is not None:
                yield f"step {unit[0]}'s window halved", halved
        if (earlier := _earlier(data)) is not None:
            yield "the schedule moved earlier", earlier
        for i, step in enumerate(data["nemesis"]):
            for narrowed in _narrowed(step):
                out = copy.deepcopy(data)
                out["nemesis"][i] = narrowed
                yield f"step {i}'s target narrowed", out
        if (lighter := _lighter(data)) is not None:
            yield "the load cut to the schedule", lighter


# The one-way steps that follow one another in a schedule, each path in its one order: a
# finalize needs the upgrades before it, a migration's phase the phases before it.
PATHS: tuple[frozenset[str], ...] = (
    frozenset({"upgrade", "finalize-feature"}),
    frozenset({"migrate"}),
)


def _path_of(step: Data) -> frozenset[str] | None:
    return next((p for p in PATHS if step.get("op") in p), None)


def path_neighbours(steps: list[Data], i: int, later: bool) -> list[int]:
    """The steps of step i's path after it (`later`) or before it; none for a step on no path."""
    path = _path_of(steps[i])
    span = range(i + 1, len(steps)) if later else range(i)
    return [j for j in span if path is not None and steps[j].get("op") in path]


def _whole_units(units: list[list[int]], some: set[int]) -> set[int]:
    """Every step of the units that hold any of `some`."""
    return {i for u in units if set(u) & some for i in u}


def fault_units(steps: list[Data]) -> list[list[int]]:
    """Each fault step with the steps that heal it, as indexes: a step labelled L with the
    later steps aimed at @L, else a fault with the first later step of its healing op on the
    same nodes (or a heal of everything: any network heal, a disk-ok, add-node or grow-queue
    naming no node). A step nothing pairs with is a unit of its own."""
    taken: set[int] = set()
    units: list[list[int]] = []
    for i, step in enumerate(steps):
        if i in taken:
            continue
        unit = [i]
        label = step.get("label")
        healed_by = _healed_by(step.get("op", ""))
        later = [j for j in range(i + 1, len(steps)) if j not in taken]
        if label:
            unit += [j for j in later if f"@{label}" in _aimed_at(steps[j])]
        if len(unit) == 1 and healed_by:
            for j in later:
                if steps[j].get("op") == healed_by and (
                    healed_by == "heal" or _nodes(steps[j]) in (None, _nodes(step))
                ):
                    unit.append(j)
                    break
        taken.update(unit)
        units.append(unit)
    return units


def _aimed_at(step: Data) -> list[Any]:
    """What a step names as its nodes: Kafka's target, from and to (a role, an @label, node
    names), RabbitMQ's nodes (a list, where an @label is one of them)."""
    named: list[Any] = [step.get(k) for k in ("target", "from", "to")]
    for k in ("target", "nodes", "from", "to"):
        if isinstance(step.get(k), list):
            named += step[k]
    return named


def _healed_by(op: str) -> str | None:
    try:
        return registry_op(op).healed_by
    except KeyError:
        return None


def _nodes(step: Data) -> Any:
    return step.get("nodes") or step.get("target") or step.get("brokers")


def _op_of(data: Data, i: int) -> str:
    return str(data["nemesis"][i].get("op"))


def _keeping(data: Data, keep: list[int]) -> Data:
    out = copy.deepcopy(data)
    out["nemesis"] = [copy.deepcopy(data["nemesis"][i]) for i in sorted(keep)]
    return out


def _sorted_steps(data: Data) -> Data:
    data["nemesis"] = sorted(data["nemesis"], key=lambda s: s["at"])
    return data


def _halved(data: Data, unit: list[int]) -> Data | None:
    steps = data["nemesis"]
    start, end = steps[unit[0]]["at"], steps[unit[-1]]["at"]
    window = end - start
    if window / 2 < MIN_WINDOW:
        return None
    out = copy.deepcopy(data)
    for j in unit[1:]:
        out["nemesis"][j]["at"] = round(start + (steps[j]["at"] - start) / 2, 1)
    return _sorted_steps(out)


def warmup_of(data: Data) -> float:
    """How early the first fault may come: WARMUP, or the scenario's own `chaos.warmup` when
    its workload needs longer before a fault tests anything (the exactly-once copiers)."""
    own = (data.get("chaos") or {}).get("warmup")
    return max(WARMUP, float(own)) if own is not None else WARMUP


def _earlier(data: Data) -> Data | None:
    steps = data["nemesis"]
    warmup = warmup_of(data)
    if not steps or steps[0]["at"] <= warmup:
        return None
    shift = steps[0]["at"] - warmup
    out = copy.deepcopy(data)
    for s in out["nemesis"]:
        s["at"] = round(s["at"] - shift, 1)
    return out


# A role naming several nodes, and the narrower role to try instead.
NARROWER_ROLE = {
    "followers": "follower",
    "isr": "leader",
    "replicas": "leader",
    "brokers": "leader",
}


def _narrowed(step: Data) -> Iterator[Data]:
    if _path_of(step) is not None:
        return  # an upgrade of fewer nodes would leave its finalize on a cluster not upgraded
    for key in ("target", "nodes", "from", "to", "brokers"):
        value = step.get(key)
        if isinstance(value, list) and len(value) > 1:
            yield {**copy.deepcopy(step), key: value[:1]}
        elif isinstance(value, str) and value in NARROWER_ROLE:
            yield {**copy.deepcopy(step), key: NARROWER_ROLE[value]}


def _producers(data: Data) -> list[Data]:
    workload = data.get("workload") or {}
    return list(workload.get("producers") or workload.get("publishers") or [])


def _lighter(data: Data) -> Data | None:
    """Producers that stop QUIET seconds after the last step, where they went on longer."""
    steps = data["nemesis"]
    seconds = (steps[-1]["at"] if steps else 0.0) + QUIET
    out = copy.deepcopy(data)
    smaller = False
    for p in _producers(out):
        rate = p.get("rate") or 0
        if rate > 0 and (wanted := math.ceil(rate * seconds)) < p["count"]:
            p["count"] = wanted
            smaller = True
    return out if smaller else None
