"""A client process's tie to the harness that started it: it ends when the harness ends.

A harness killed with SIGKILL runs no cleanup, and clients in a session of their own (so that
a Ctrl-C reaches the harness alone) would go on writing into a dead run's history. Two ties,
either enough: the kernel's parent-death signal, and a thread that watches the parent's pid
(which also covers a harness that died before the first was set). SIGTERM's default action
ends the client at once; every history line is already flushed, so nothing recorded is lost.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time

HARNESS_PID_ENV = "BJ_HARNESS_PID"  # set by the harness for each client it starts
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
WATCH_INTERVAL = 1.0  # seconds between two looks at the parent


def _set_parent_death_signal(signum: int) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the watcher alone
        pass


def die_with_parent() -> None:
    """For a child process (subprocess's preexec_fn) that must end with the client that started
    it: a Java client outlives no Python one."""
    _set_parent_death_signal(signal.SIGTERM)


def _end_if_orphaned(harness_pid: int) -> None:
    if os.getppid() != harness_pid:
        os.kill(os.getpid(), signal.SIGTERM)


def _watch(harness_pid: int) -> None:
    while True:
        time.sleep(WATCH_INTERVAL)
        _end_if_orphaned(harness_pid)


def tie_to_harness() -> None:
    """Ends this process when the harness named in BJ_HARNESS_PID ends (a client started by
    hand, without it, is left alone)."""
    text = os.environ.get(HARNESS_PID_ENV, "")
    if not text.isdigit():
        return
    harness_pid = int(text)
    _set_parent_death_signal(signal.SIGTERM)
    _end_if_orphaned(harness_pid)
    threading.Thread(target=_watch, args=(harness_pid,), name="lifeline", daemon=True).start()
