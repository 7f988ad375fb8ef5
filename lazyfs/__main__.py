"""`python -m lazyfs LIVE STORE MOUNTPOINT`: serve the lazy filesystem until unmounted.

On its way out it writes `STORE/dropped.json`: what the unmount threw away (files with
unsynced data, their bytes, whether metadata was uncommitted): a power loss's toll.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import mfusepy

from lazyfs.durable import Durable
from lazyfs.fs import LazyFS

DROPPED = "dropped.json"


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m lazyfs LIVE STORE MOUNTPOINT", file=sys.stderr)
        return 2
    live, store, mountpoint = (Path(a) for a in argv)
    logging.basicConfig(level=logging.WARNING)
    durable = Durable(live, store)
    (store / DROPPED).unlink(missing_ok=True)
    mfusepy.FUSE(
        LazyFS(live, durable),
        str(mountpoint),
        foreground=True,
        allow_other=True,  # the broker in its container may run as another user
        default_permissions=True,  # the kernel checks modes; the daemon is root
        fsname="brokerjepsen-lazyfs",
    )
    (store / DROPPED).write_text(json.dumps(durable.unsynced()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
