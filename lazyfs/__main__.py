"""`python -m lazyfs LIVE STORE MOUNTPOINT [--commit-interval S] [--writeback-after S]`: serve
the lazy filesystem until unmounted.

The intervals are the kernel's background work (lazyfs.durable): the journal commit (ext4's 5 s)
and the writeback of data dirty that long (Linux's 30 s); 0 turns either off, the worst moment
for a power loss. On its way out it writes `STORE/dropped.json`: what the unmount threw away
(files with unsynced data, their bytes, whether metadata was uncommitted), a power loss's toll.
While it serves, the harness may inject disk faults through `STORE/faults.json`
(lazyfs.injected); it starts with none, whatever an earlier daemon left there. Torn-write rules
among them act as it ends: the toll then lists the writes it tore (`torn`).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import mfusepy

from lazyfs.durable import Durable
from lazyfs.fs import LazyFS
from lazyfs.injected import FAULTS, Injector

DROPPED = "dropped.json"
TICK = 1.0  # seconds between looks at the background work (the kernel's: 5 s)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m lazyfs")
    parser.add_argument("live", type=Path)
    parser.add_argument("store", type=Path)
    parser.add_argument("mountpoint", type=Path)
    parser.add_argument("--commit-interval", type=float, default=5.0)
    parser.add_argument("--writeback-after", type=float, default=30.0)
    args = parser.parse_args(argv)
    # Timed, so that a disk fault's lines can be set beside the run's history.
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    durable = Durable(args.live, args.store, args.commit_interval, args.writeback_after)
    (args.store / DROPPED).unlink(missing_ok=True)
    (args.store / FAULTS).unlink(missing_ok=True)
    injector = Injector(args.store / FAULTS)
    stop = threading.Event()

    def background() -> None:
        while not stop.wait(TICK):
            durable.tick()

    if args.commit_interval or args.writeback_after:
        threading.Thread(target=background, daemon=True).start()
    try:
        mfusepy.FUSE(
            LazyFS(args.live, durable, injector),
            str(args.mountpoint),
            foreground=True,
            allow_other=True,  # the broker in its container may run as another user
            default_permissions=True,  # the kernel checks modes; the daemon is root
            fsname="brokerjepsen-lazyfs",
        )
    finally:
        stop.set()
        injector.log_injected()
    with durable.lock:  # nothing more is written back once unmounted: the power is off
        toll: dict[str, object] = {}
        # Torn writes first: what they keep is not in the toll of what was dropped.
        if torn := durable.tear(_torn_by(injector)):
            toll["torn"] = torn
        (args.store / DROPPED).write_text(json.dumps({**durable.unsynced(), **toll}))
    return 0


def _torn_by(injector: Injector) -> Callable[[str, int], int | None]:
    """How many bytes of a file's last unsynced write a power loss keeps now, by the disk's
    torn-write rules (lazyfs.injected); None: the write is dropped whole, as ever."""
    faults = injector.current()

    def kept(path: str, length: int) -> int | None:
        rule = faults.torn_keep(path)
        return rule.kept(length) if rule is not None else None

    return kept


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
