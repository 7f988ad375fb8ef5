"""Lazy disks: a node's data directory on the power-loss filesystem (`lazyfs`), mounted on the
host under the run directory and bind-mounted into the node's container.

Each disk is `<workdir>/disks/<node>/` with `live/` (what the broker sees, passed through),
`store/` (the durable image: what fsync made durable) and `mnt/` (the FUSE mount). A power loss
(`power_loss`) needs the node's container killed first: it unmounts the filesystem (its daemon
ends, and with it every unsynced write it knew of), rebuilds `live/` from the durable image and
mounts it again, fresh, so no kernel cache keeps what the disk lost.

A disk may also be made to fail (`disk_error`, `disk_full`, `torn_write`: at a power loss)
until it is mended (`disk_ok`):
rules its daemon reads from `store/faults.json` (lazyfs.injected). A disk keeps its faults
through a power loss, as a broken disk stays broken when the machine comes back: its new daemon
starts with none and is given them again. Its data may be corrupted (`corrupt`), which nothing
mends.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from compose.cli import ComposeError
from lazyfs.corrupt import Corruption, corrupt
from lazyfs.durable import restore
from lazyfs.injected import SETTLE_S, Faults, disk_error, disk_full, torn_write, write_faults

FSNAME = "brokerjepsen-lazyfs"  # in /proc/mounts; `harness heal` unmounts what it finds
MOUNT_TIMEOUT = 15.0


class DiskError(ComposeError):
    """A lazy disk that would not mount or unmount: one line for the user."""


class LazyDisk:
    """`commit_interval`, `writeback_after`: the kernel's background journal commit and
    writeback, in seconds (Linux's 5 and 30); 0 and 0 is the worst moment, nothing ever
    written back unless fsynced (the filesystem's own tests use that)."""

    def __init__(
        self, base: Path, commit_interval: float = 5.0, writeback_after: float = 30.0
    ) -> None:
        self.intervals = [
            f"--commit-interval={commit_interval}",
            f"--writeback-after={writeback_after}",
        ]
        self.base = base.resolve()  # compose reads a relative bind path as the file's own
        self.live, self.store, self.mnt = (self.base / d for d in ("live", "store", "mnt"))
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.faults = Faults()  # what the harness made the disk do wrong, until mended

    def mount(self) -> None:
        for d in (self.live, self.store, self.mnt):
            d.mkdir(parents=True, exist_ok=True)
        self._log = open(self.base / "lazyfs.log", "ab")  # noqa: SIM115 - kept for the daemon
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "lazyfs",
                str(self.live),
                str(self.store),
                str(self.mnt),
                *self.intervals,
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C to the harness must not unmount a live broker
        )
        deadline = time.monotonic() + MOUNT_TIMEOUT
        while self.mnt not in leftover_mounts():
            if self.process.poll() is not None or time.monotonic() > deadline:
                log_file = self._log.name
                self.unmount()
                raise DiskError(f"lazy disk {self.mnt} did not mount (see {log_file})")
            time.sleep(0.05)

    def unmount(self) -> dict[str, Any]:
        """Unmounts and waits for the daemon; returns what it dropped (unsynced files, bytes)."""
        # /proc/mounts, not ismount: a FUSE mount whose daemon died cannot even be stat'ed.
        if self.mnt in leftover_mounts():
            unmount(self.mnt)
        if self.process is not None:
            try:
                self.process.wait(timeout=MOUNT_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
        if self._log is not None:
            self._log.close()
            self._log = None
        try:
            dropped: dict[str, Any] = json.loads((self.store / "dropped.json").read_text())
        except (FileNotFoundError, ValueError):
            dropped = {}
        return dropped

    def power_loss(self) -> dict[str, Any]:
        """Everything not fsynced is gone (the container must be down already)."""
        dropped = self.unmount()
        restore(self.live, self.store)
        self.mount()
        if self.faults:
            self.set_faults(self.faults)
        return dropped

    def set_faults(self, faults: Faults) -> None:
        """What the disk does wrong from now on (see lazyfs.injected): its daemon sees it
        within SETTLE_S (LazyDisks waits that long)."""
        self.faults = faults
        write_faults(self.store, faults)


def unmount(mountpoint: Path) -> None:
    """fusermount3 -u; lazily (-z) when something still holds it."""
    for argv in (["fusermount3", "-u", str(mountpoint)], ["fusermount3", "-uz", str(mountpoint)]):
        if subprocess.run(argv, capture_output=True, timeout=30).returncode == 0:
            return
    raise DiskError(f"cannot unmount the lazy disk {mountpoint}")


class LazyDisks:
    """The lazy disks of a cluster's nodes, by node name."""

    def __init__(self, workdir: Path, nodes: list[str]) -> None:
        self.disks = {n: LazyDisk(workdir / "disks" / n) for n in nodes}

    def has(self, node: str) -> bool:
        return node in self.disks

    def mountpoint(self, node: str) -> Path:
        return self.disks[node].mnt

    def mount_all(self) -> None:
        try:
            for disk in self.disks.values():
                disk.mount()
        except DiskError:
            self.unmount_all()
            raise

    def unmount_all(self) -> None:
        for disk in self.disks.values():
            disk.unmount()

    def power_loss(self, node: str) -> dict[str, Any]:
        return self.disks[node].power_loss()

    def disk_error(self, nodes: list[str], on: str, path: str, probability: float) -> None:
        """The nodes' disks fail that kind of call (write, fsync, read) on paths matching the
        glob with EIO, each call with that probability; on top of any fault they have."""
        self._add(nodes, disk_error(on, path, probability))

    def disk_full(self, nodes: list[str]) -> None:
        """The nodes' disks are full: ENOSPC for what needs space, statfs says none is free."""
        self._add(nodes, disk_full())

    def disk_ok(self, nodes: list[str] | None = None) -> None:
        """The nodes' disks (None: every disk) do nothing wrong any more."""
        for node in self.disks if nodes is None else nodes:
            self.disks[node].set_faults(Faults())
        time.sleep(SETTLE_S)

    def torn_write(self, nodes: list[str], path: str, keep: float) -> None:
        """At the nodes' next power losses, until disk_ok, the last unsynced write of each file
        matching the glob keeps `keep` of its bytes (lazyfs.injected.Torn)."""
        self._add(nodes, torn_write(path, keep))

    def corrupt(self, node: str, spec: Corruption) -> list[dict[str, Any]]:
        """Changes bytes of the node's data files, live and durable (lazyfs.corrupt); what it
        changed. Works whether the daemon runs or not: it reads neither's state but the files."""
        disk = self.disks[node]
        return corrupt(disk.live, disk.store, spec)

    def _add(self, nodes: list[str], faults: Faults) -> None:
        for node in nodes:
            disk = self.disks[node]
            disk.set_faults(disk.faults.plus(faults))
        time.sleep(SETTLE_S)  # once for all: each daemon sees its rules by then


def leftover_mounts() -> list[Path]:
    """Lazy disks mounted now (after a run that was killed: what `harness heal` unmounts)."""
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return []
    return [Path(f.split()[1]) for f in lines if f.split()[0] == FSNAME]
