"""A new warm server's first checks are slow: `harness spark up` checks a synthetic run-sized
history a few times once the server listens, so a user's first check is not one of them.

A fresh server's JVM interprets Spark's code until its JIT has compiled what a check runs, and
compiles each query shape's generated classes once: measured on this machine kind, checks of a
20 000-message history took 28, 12-14, 10-11, 9-10 s and then settled near 8 s. The warm-up
pays those first checks. What it checks, and how, is its caller's (checkers.rehearsal: a
history `make bench` never checks, kept in the cache and made once, each check begun from its
JSONL as a run's first check is). Its checks run in the server's kept session, as a user's would
(checkers.engine.kept_session); two warm-ups at once (a bench beside `spark up`) take turns.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from checkers.engine.session import server_session
from contract.cache import cache_root, exclusive

WARM_UP_CHECKS = 4  # where the fresh server's check times had mostly settled
WARM_UP_SECONDS = 240.0  # no check begins after this: a slow machine gets fewer


def warm_up(
    url: str,
    run: Callable[[], Path],
    check: Callable[[Path, Any], object],
    checks: int = WARM_UP_CHECKS,
    budget: float = WARM_UP_SECONDS,
    said: Callable[[int, float], None] = lambda _n, _s: None,
) -> list[float]:
    """Checks the run directory `run()` makes `checks` times on the server at `url` (fewer when
    `budget` seconds have passed), each `check(run_dir, session)` in the server's session; calls
    `said(n, seconds)` after each and returns their times."""
    began = time.monotonic()
    took: list[float] = []
    # Two warm-ups at once take turns at its run directory: the other ends within its budget.
    with exclusive(cache_root() / "warm-up" / "lock"):
        run_dir = run()
        while len(took) < checks and time.monotonic() - began < budget:
            started = time.monotonic()
            with server_session(url) as spark:
                check(run_dir, spark)
            took.append(time.monotonic() - started)
            said(len(took), took[-1])
    return took
