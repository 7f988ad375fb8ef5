"""A fault schedule drawn from a seed: the same seed and options always give the same steps.

Like Jepsen's generators, faults come about every `interval` seconds and last `duration`
seconds; families of different kinds overlap (a node killed while another is cut off, a clock
skewed meanwhile), two of one kind never do. Every fault is healed by its own pair, the last
heal comes `quiet` seconds before the workload ends, so the drain and the final read see a
whole cluster. A path's one-way steps (an upgrade, a migration's phases) take every other draw
until their end, each on a cluster no fault is in, and a probe rides a fault of its kind. The
nemesis runs the steps one after another: a step that keeps it busy (a node upgraded, a
declare waited for) pushes the next draw back by as long.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, get_args

from chaos.menu import ClusterShape, Draws, Family, Kind, Step, families


class ChaosError(ValueError):
    """Options a schedule cannot be drawn from; one line for the user."""


@dataclass(frozen=True)
class ChaosOptions:
    seed: int
    seconds: float  # the workload's length: faults fit in [warmup, seconds - quiet]
    faults: frozenset[str] | None = None  # families by name; None: every one the cluster fits
    interval: tuple[float, float] = (5.0, 15.0)  # between two faults' starts (mean 10 s)
    duration: tuple[float, float] = (3.0, 15.0)  # how long a fault lasts before its heal
    warmup: float = 5.0  # traffic before the first fault
    quiet: float = 20.0  # after the last heal, before the workload ends

    def as_dict(self) -> dict[str, Any]:
        """The options as a scenario file records them (generated.options)."""
        return {
            "seconds": self.seconds,
            "faults": sorted(self.faults) if self.faults is not None else None,
            "interval": list(self.interval),
            "duration": list(self.duration),
            "warmup": self.warmup,
            "quiet": self.quiet,
        }

    def check(self) -> None:
        for name, (low, high) in (("interval", self.interval), ("duration", self.duration)):
            if not 0 < low <= high:
                raise ChaosError(f"--{name} needs 0 < low <= high, not {low}..{high}")
        if self.warmup < 0 or self.quiet < 0:
            raise ChaosError("warmup and quiet are seconds, not negative")
        if self.seconds - self.quiet - self.warmup < self.duration[0]:
            raise ChaosError(
                f"a workload of {self.seconds:.0f} s leaves no room for a fault after "
                f"{self.warmup:.0f} s of warmup and before {self.quiet:.0f} s of quiet"
            )


def draw_schedule(shape: ClusterShape, opts: ChaosOptions) -> list[Step]:
    """The nemesis steps, in time order, every fault healed before the quiet period."""
    opts.check()
    try:
        menu = families(shape, opts.faults)
    except ValueError as e:
        raise ChaosError(str(e)) from None
    rng = Draws(opts.seed)
    last_heal = opts.seconds - opts.quiet
    busy_until: dict[Kind, float] = {k: 0.0 for k in get_args(Kind)}
    ordinary = [f for f in menu if f.path is None and f.rides is None]
    # Families drawn only by name are each drawn once before any is drawn again (when free): a
    # base that names two (the controller quorum's changes and a clock) tests both in every
    # run. The families drawn by default keep the schedules their seeds always drew.
    first_round = {f.name for f in ordinary if not f.default}
    if len(first_round) < 2:
        first_round.clear()  # one family: nothing to take turns with
    timed: list[tuple[float, int, Step]] = []  # (at, order, step): heals sort before faults
    t = opts.warmup
    n = 0
    path_turn = True  # a path's step comes first, then every other draw until its end
    while t + opts.duration[0] <= last_heal:
        paths = [f for f in menu if f.path is not None and f.left(rng, shape)]
        if paths and path_turn:
            # On a cluster no fault is in: what comes between two steps is what is tested.
            calm = max(busy_until.values())
            if calm > t:
                t = calm
                continue
            family = paths[0] if len(paths) == 1 else rng.choice(paths)
        else:
            free = [f for f in ordinary if busy_until[f.kind] <= t]
            if not free:
                later = [busy_until[f.kind] for f in ordinary if busy_until[f.kind] > t]
                if not later:
                    break
                t = min(later)
                continue
            unseen = [f for f in free if f.name in first_round]
            family = rng.choice(unseen or free)
            first_round.discard(family.name)
        path_turn = family.path is None or not ordinary
        n += 1
        fault, heal = family.draw(rng, shape, f"f{n}")
        took = family.lasts(shape, fault)
        end = _end_of(rng, family, t + took, opts, last_heal)
        timed.append((round(t, 1), 1, {"at": round(t, 1), **fault}))
        # A heal of several steps (a disk mended, then its node restarted) keeps its order:
        # the sort below is stable.
        for step in [] if heal is None else heal if isinstance(heal, list) else [heal]:
            timed.append((round(end, 1), 0, {"at": round(end, 1), **step}))
        busy_until[family.kind] = end
        t += took + _probes(rng, menu, family, shape, (t, end), timed, busy_until)
        t += rng.uniform(*opts.interval)
    timed.sort(key=lambda x: (x[0], x[1]))
    return [step for _at, _order, step in timed]


def _probes(
    rng: Draws,
    menu: tuple[Family, ...],
    fault: Family,
    shape: ClusterShape,
    window: tuple[float, float],
    timed: list[tuple[float, int, Step]],
    busy_until: dict[Kind, float],
) -> float:
    """The probes that ride the fault just drawn, halfway through its window: every other
    fault of the kind they ride, the first one among them (Draws.rides counts them); the
    seconds the nemesis is busy with them (its fault's heal waits as long)."""
    took = 0.0
    start, end = window
    for probe in (f for f in menu if f.rides == fault.kind):
        ridden = rng.rides.get(probe.name, 0)
        rng.rides[probe.name] = ridden + 1
        if ridden % 2 or end - start < 0.2:
            continue
        at = round(start + (end - start) / 2, 1)
        step, _ = probe.draw(rng, shape, "")
        timed.append((at, 1, {"at": at, **step}))
        took += probe.lasts(shape, step)
    busy_until[fault.kind] += took
    return took


def _end_of(rng: Draws, family: Family, t: float, opts: ChaosOptions, last: float) -> float:
    """When the heal runs; a one-off (a restart) holds its kind as long, so the next process
    fault does not land on a node still coming back."""
    return min(t + rng.uniform(*opts.duration), last)
