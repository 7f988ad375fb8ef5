"""What the power-loss filesystem costs: `make bench-lazyfs` writes the same files on a lazy disk
and on the plain directory under it, and prints MB/s for each pattern.

Patterns, each writing LAZYFS_BENCH_MB (default 64) MB in 16 KiB appends, as a broker does:
  appends          no fsync until the end (Kafka's default flush)
  fsync-every-64   an fsync every 64 appends
  fsync-every-1    an fsync after every append (flush.messages=1, RabbitMQ's WAL under load)
Figures, not assertions: a slower lazy disk is what it costs to be able to pull the plug.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from compose.disks import LazyDisk
from contract.numbers import parse_count

BLOCK = 16 * 1024
PATTERNS = {"appends": 0, "fsync-every-64": 64, "fsync-every-1": 1}


def write_file(path: Path, total: int, fsync_every: int) -> float:
    """Seconds to write `total` bytes in appends, with an fsync every `fsync_every` (0: once)."""
    block = os.urandom(BLOCK)
    started = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for i in range(total // BLOCK):
            os.write(fd, block)
            if fsync_every and (i + 1) % fsync_every == 0:
                os.fsync(fd)
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - started


def main() -> int:
    try:
        megabytes = parse_count(os.environ.get("LAZYFS_BENCH_MB") or "64")
    except ValueError as e:
        print(f"bench-lazyfs: LAZYFS_BENCH_MB: {e}", file=sys.stderr)
        return 2
    total = megabytes * 1024 * 1024
    root = Path(tempfile.mkdtemp(prefix="brokerjepsen-lazyfs-bench-"))
    disk = LazyDisk(root / "disk")
    disk.mount()
    print(f"{os.cpu_count()} cores; {megabytes} MB per pattern in {BLOCK // 1024} KiB appends")
    print(f"{'pattern':<16} {'plain MB/s':>11} {'lazyfs MB/s':>12} {'lazyfs / plain':>15}")
    try:
        for name, every in PATTERNS.items():
            plain = write_file(root / f"plain-{name}", total, every)
            lazy = write_file(disk.mnt / f"lazy-{name}", total, every)
            print(
                f"{name:<16} {megabytes / plain:>11.1f} {megabytes / lazy:>12.1f} "
                f"{plain / lazy:>15.2f}"
            )
    finally:
        disk.unmount()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
