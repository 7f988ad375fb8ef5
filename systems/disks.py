"""The disk faults of a step (disk-error, disk-full, disk-ok), as both systems' steps name
their arguments: the common nemesis (nemesis.containers) writes them to the targets' lazy
disks (compose.disks), whose filesystems fail the brokers' calls (lazyfs.injected)."""

from __future__ import annotations

from typing import Any

from nemesis.containers import Nemesis, NemesisError

DISK_OPS = ("disk-error", "disk-full", "disk-ok")


def apply_disk_fault(net: Nemesis, op: str, nodes: list[str], step: Any) -> None:
    """A step of a disk op on its resolved nodes (disk-ok: none, every disk)."""
    if op == "disk-error":
        if step.fail_on is None:
            raise NemesisError("disk-error needs fail_on: write, fsync or read")
        net.disk_error(nodes, step.fail_on, step.path, step.probability)
    elif op == "disk-full":
        net.disk_full(nodes)
    elif op == "disk-ok":
        net.disk_ok(nodes or None)
    else:
        raise NemesisError(f"{op} is not a disk fault")
