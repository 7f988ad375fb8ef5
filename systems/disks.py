"""The disk faults of a step (disk-error, disk-full, torn-write, corrupt, disk-ok), as both
systems' steps name their arguments: the common nemesis (nemesis.containers) writes them to the
targets' lazy disks (compose.disks), whose filesystems fail the brokers' calls and tear their
writes at a power loss (lazyfs.injected), or changes the bytes of their files (lazyfs.corrupt)."""

from __future__ import annotations

import random
from typing import Any

from lazyfs.corrupt import Corruption
from nemesis.containers import Nemesis, NemesisError

DISK_OPS = ("disk-error", "disk-full", "torn-write", "corrupt", "disk-ok")


def apply_disk_fault(net: Nemesis, op: str, nodes: list[str], step: Any) -> None:
    """A step of a disk op on its resolved nodes (disk-ok: none, every disk)."""
    if op == "disk-error":
        if step.fail_on is None:
            raise NemesisError("disk-error needs fail_on: write, fsync or read")
        net.disk_error(nodes, step.fail_on, step.path, step.probability)
    elif op == "disk-full":
        net.disk_full(nodes)
    elif op == "torn-write":
        net.torn_write(nodes, step.path, step.keep)
    elif op == "corrupt":
        net.corrupt(nodes, corruption_of(step), stopped=step.while_ == "stopped")
    elif op == "disk-ok":
        net.disk_ok(nodes or None)
    else:
        raise NemesisError(f"{op} is not a disk fault")


def corruption_of(step: Any) -> Corruption:
    """A corrupt step's corruption; a step without a seed gets one drawn here, which the
    history records, so the run can be replayed with it."""
    seed = step.seed if step.seed is not None else random.SystemRandom().getrandbits(63)
    return Corruption(
        path=step.path,
        seed=seed,
        files=step.files,
        length=step.length,
        offset=step.offset,
        how=step.corruption,
    )
