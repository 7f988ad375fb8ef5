"""The clock faults of a step (clock, clock-ok), as both systems' steps name their arguments: the
common nemesis (nemesis.containers) writes the offset to the targets' clock files
(compose.clocks), which libfaketime in the nodes reads."""

from __future__ import annotations

from typing import Any

from nemesis.containers import Nemesis, NemesisError

CLOCK_OPS = ("clock", "clock-ok")


def apply_clock_fault(net: Nemesis, op: str, nodes: list[str], step: Any) -> None:
    """A step of a clock op on its resolved nodes (clock-ok: none, every node's clock)."""
    if op == "clock":
        if step.offset is None:
            raise NemesisError("clock needs offset: seconds off true time (+3600, -3600)")
        net.clock(nodes, step.offset)
    elif op == "clock-ok":
        net.clock_ok(nodes or None)
    else:
        raise NemesisError(f"{op} is not a clock fault")
