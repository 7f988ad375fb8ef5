"""Each node's fake clock: the file libfaketime reads the node's offset from true time in.

A cluster started with `fake_clock` reads each node's offset from true time from one file,
`faketime`, in a directory of the host's bind-mounted into the node's container
(`<workdir>/clocks/<node>/`): a RabbitMQ node's processes under libfaketime (LD_PRELOAD,
`environment()`), a Kafka or ZooKeeper node's JVM through a Java agent (compose.clock_agent). The
harness replaces that file, atomically, to move the node's clock; the host's own clock is never
set (the containers share the host's kernel, and with it its clock).

The directory is mounted, not the file: a bind mount of a file holds the inode it was given, so
a rename over the file on the host would never reach the container. docs/clock-faults.md says
what is faked and what is not.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from pathlib import Path

# Where the images put the library (compose/images/build_local_images.sh links Debian's
# multiarch path here, so one path holds on every architecture).
LIBRARY = "/usr/local/lib/faketime/libfaketime.so.1"
CONTAINER_DIR = "/run/brokerjepsen-clock"  # the node's clock directory, as its processes see it
# libfaketime 0.9.10 (Debian's) shares a state between a node's processes through a POSIX
# semaphore and shared memory, made by the first preloaded process and removed when it exits,
# or when any fork of it exits (a shell's subshell): the processes started after that cannot
# open them and exit at once (kafka1 "exited while the cluster formed": "libfaketime: In
# ft_shm_init(), sem_open failed and recreation attempts failed"). That state serves rates and
# increments, which a clock here never uses (an offset read from the file); on a read-only
# /dev/shm the library cannot make it, and goes without it, silently, by design.
SHM_DIR = "/dev/shm"
FILE = "faketime"
# libfaketime reads the file again on the first call in each new second of true time (cache
# duration 0: its cache lasts while the whole second is the same); a step's ok is written after
# that, so every process has read the new offset by then, whichever took the time last.
SETTLE_S = 1.2
# A year either way: more is no skew a broker's clock meets, and libfaketime's offset is a
# double of seconds anyway.
MAX_OFFSET_S = 366 * 86400


def faketime_line(offset: float) -> str:
    """The file's one line for an offset from true time, in seconds: libfaketime reads a leading
    `+` or `-` as a relative offset (`+3600`, `-0.5`); no unit letter (it would read `m` as
    minutes), no `x` (a rate, measured from each process's start: docs/clock-faults.md)."""
    if not math.isfinite(offset) or abs(offset) > MAX_OFFSET_S:
        raise ValueError(f"clock offset {offset!r}: at most {MAX_OFFSET_S} s either way")
    number = f"{abs(offset):.6f}".rstrip("0").rstrip(".")
    return f"{'-' if offset < 0 else '+'}{number}\n"


def write_offset(directory: Path, offset: float) -> None:
    """Replaces `directory/faketime` with the offset, atomically: a process that reads it reads
    the old line or the new one, never half of either (a rename over it)."""
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".faketime.", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(faketime_line(offset))
        # mkstemp makes it 0600; the broker reads it as its own user (rabbitmq, not root).
        os.chmod(tmp, 0o644)
        os.replace(tmp, directory / FILE)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def clock_file() -> str:
    """The node's clock file, as its processes see it."""
    return f"{CONTAINER_DIR}/{FILE}"


def environment() -> dict[str, str]:
    """The container's variables that put its processes under libfaketime (RabbitMQ's nodes; a
    JVM node's clock is compose.clock_agent's)."""
    return {
        "LD_PRELOAD": LIBRARY,
        "FAKETIME_TIMESTAMP_FILE": clock_file(),
        # Read the file once a second (the default caches it 10 s).
        "FAKETIME_CACHE_DURATION": "0",
        # The monotonic clock stays true: faked, it would jump back with a negative offset and
        # a JVM waits on it (libfaketime's README: java hangs), so would ERTS; what a broker
        # does when the time of day jumps is the question, not what a backwards monotonic clock
        # does to its runtime.
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }


class FakeClocks:
    """The clock files of a cluster's nodes, under `<workdir>/clocks/`."""

    def __init__(self, workdir: Path, nodes: list[str]) -> None:
        self.base = workdir / "clocks"
        self.offsets: dict[str, float] = {n: 0.0 for n in nodes}

    def has(self, node: str) -> bool:
        return node in self.offsets

    def directory(self, node: str) -> Path:
        """The host's directory mounted as the node's CONTAINER_DIR."""
        return self.base / node

    @property
    def no_shm(self) -> Path:
        """An empty directory of the host's, mounted read-only as every node's /dev/shm."""
        return self.base / ".no-shm"

    def clock_volume(self, node: str) -> str:
        """The mount of the node's clock directory, read-only, at CONTAINER_DIR."""
        return f"{self.directory(node).resolve()}:{CONTAINER_DIR}:ro"

    def volumes(self, node: str) -> list[str]:
        """The node's mounts under libfaketime: its clock's directory, and a /dev/shm the library
        cannot write."""
        return [self.clock_volume(node), f"{self.no_shm.resolve()}:{SHM_DIR}:ro"]

    def prepare(self) -> None:
        """Every node's clock true (before the containers start: each reads it at once)."""
        self.no_shm.mkdir(parents=True, exist_ok=True)
        for node in self.offsets:
            self.offsets[node] = 0.0
            write_offset(self.directory(node), 0.0)

    def set_offset(self, nodes: list[str], offset: float) -> dict[str, float]:
        """The nodes' clocks read `offset` s off true time (not added to what they had), by the
        time it returns; what each node's offset is now."""
        for node in nodes:
            write_offset(self.directory(node), offset)
            self.offsets[node] = offset
        time.sleep(SETTLE_S)  # once for all: each node's processes have read it by then
        return {n: self.offsets[n] for n in nodes}

    def reset(self, nodes: list[str] | None = None) -> None:
        """The nodes' clocks (None: every node's) true again."""
        names = list(self.offsets) if nodes is None else nodes
        for node in names:
            write_offset(self.directory(node), 0.0)
            self.offsets[node] = 0.0
        time.sleep(SETTLE_S)

    def skewed(self) -> list[str]:
        return sorted(n for n, o in self.offsets.items() if o != 0)
