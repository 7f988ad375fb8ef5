"""Processes on this machine: whether one still runs (a zombie has ended: its parent reaps it),
and a child tied to its parent's life."""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable
from pathlib import Path


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # "pid (comm) state ...": comm may hold spaces and parentheses, so split after it.
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def dies_with(parent: int) -> Callable[[], None]:
    """A subprocess's preexec_fn for a helper that must not outlive `parent` (a harness killed
    with SIGKILL runs no cleanup): SIGTERM when `parent` ends, and an exit at once if it ended
    before the child asked."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return arm
