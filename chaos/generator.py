"""A fault schedule drawn from a seed: the same seed and options always give the same steps.

Like Jepsen's generators, faults come about every `interval` seconds and last `duration`
seconds; families of different kinds overlap (a node killed while another is cut off, a clock
skewed meanwhile), two of one kind never do. Every fault is healed by its own pair, the last
heal comes `quiet` seconds before the workload ends, so the drain and the final read see a
whole cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
    busy_until: dict[Kind, float] = {"network": 0.0, "process": 0.0, "client": 0.0, "clock": 0.0}
    timed: list[tuple[float, int, Step]] = []  # (at, order, step): heals sort before faults
    t = opts.warmup
    n = 0
    while t + opts.duration[0] <= last_heal:
        free = [f for f in menu if busy_until[f.kind] <= t]
        if not free:
            t = min(busy_until[f.kind] for f in menu)
            continue
        family = rng.choice(free)
        n += 1
        fault, heal = family.draw(rng, shape, f"f{n}")
        end = _end_of(rng, family, t, opts, last_heal)
        timed.append((round(t, 1), 1, {"at": round(t, 1), **fault}))
        # A heal of several steps (a disk mended, then its node restarted) keeps its order:
        # the sort below is stable.
        for step in [] if heal is None else heal if isinstance(heal, list) else [heal]:
            timed.append((round(end, 1), 0, {"at": round(end, 1), **step}))
        busy_until[family.kind] = end
        t += rng.uniform(*opts.interval)
    timed.sort(key=lambda x: (x[0], x[1]))
    return [step for _at, _order, step in timed]


def _end_of(rng: Draws, family: Family, t: float, opts: ChaosOptions, last: float) -> float:
    """When the fault's heal runs; a one-off (a restart) holds its kind as long, so the next
    process fault does not land on a node still coming back."""
    return min(t + rng.uniform(*opts.duration), last)
