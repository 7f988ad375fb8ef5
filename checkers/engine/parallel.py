"""The independent questions of a check, asked at once.

A check's Spark jobs are small: most of each one's time is the driver's (planning, generating
code, scheduling, bringing rows back), so one question at a time keeps about one core busy.
Two questions at a time keep a second core busy with the other's driver work while the first
runs its tasks; two per core, up to four, also fill the waits of a warm server's round trips.
Each part runs in a copy of the caller's context, so it reports its phases to the same profile
and watcher (checkers.engine.profile).

The threads live as long as the process: PySpark pins a JVM thread to each Python thread that
calls it, and a pool made per check would leave a pair behind for every check of a long-lived
session.
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Any

# Parts asked at once: two per core, up to four. On a warm server a part's time is partly the
# round trips of its requests, which a third and fourth part fill: a run-sized warm check took
# 0.3-0.4 s less with four than with two on 2 cores (20k messages: 4.4 against 4.8 s, the real
# K4 run 5.4 against 5.8 s), and a cold one or one of 1M messages no different.
WORKERS = min(4, 2 * len(os.sched_getaffinity(0)))

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _workers() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="check")
        return _pool


def together(parts: list[Callable[[], Any]], interrupt: Callable[[], None]) -> list[Any]:
    """Each part's result, in the parts' order. The parts start in that order (put the longest
    first). When one fails, or this thread is interrupted (^C), the parts not yet started are
    dropped, `interrupt()` stops the running ones (cancels their Spark jobs), they are waited
    for, and the first failure is raised: nothing of the check runs on after it."""
    pool = _workers()
    futures: list[Future[Any]] = [
        pool.submit(contextvars.copy_context().run, part) for part in parts
    ]
    try:
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        for f in futures:
            if f in done and f.exception() is not None:
                raise f.exception()  # type: ignore[misc]
        return [f.result() for f in futures]
    except BaseException:
        for f in futures:
            f.cancel()
        if not all(f.done() for f in futures):
            interrupt()
        wait(futures)
        raise
