"""A new warm server's first checks are slow: `harness spark up` checks a synthetic run-sized
history a few times once the server listens, so a user's first check is not one of them.

A fresh server's JVM interprets Spark's code until its JIT has compiled what a check runs, and
compiles each query shape's generated classes once: measured on this machine kind, checks of a
20 000-message history took 28, 12-14, 10-11, 9-10 s and then settled near 8 s. The warm-up
pays those first checks. Its history is one `make bench` never checks (another seed), kept in
the cache and made once, and each check begins from its JSONL, as a run's first check does. Its
checks run in the server's kept session, as a user's would (checkers.engine.kept_session), and write
only into the cache; two warm-ups at once (a bench beside `spark up`) take turns.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

from checkers.bench_synth import synth_run
from checkers.read import PARQUET
from contract.cache import cache_root, exclusive

MESSAGES = 20_000  # a run's size: the queries a run's check plans, at a run's volume
CHECKS = 4  # where the fresh server's check times had mostly settled
BUDGET_SECONDS = 240.0  # no check begins after this: a slow machine gets fewer
CHECK_TIMEOUT = 180.0
SEED = 11  # not the bench's: a bench's history is never the one the server was warmed on


def history_run() -> Path:
    """The warm-up's run directory, its synthetic history made the first time."""
    return synth_run(cache_root() / "warm-up" / f"kafka-{MESSAGES}", MESSAGES, SEED)


def warm_up(
    url: str,
    checks: int = CHECKS,
    budget: float = BUDGET_SECONDS,
    said: Callable[[int, float], None] = lambda _n, _s: None,
) -> list[float]:
    """Checks the warm-up history `checks` times on the server at `url` (fewer when `budget`
    seconds have passed); calls `said(n, seconds)` after each and returns their times."""
    from checkers.engine.session import server_session
    from checkers.run import check_run

    began = time.monotonic()
    took: list[float] = []
    # Two warm-ups at once take turns at its run directory: the other ends within its budget.
    with exclusive(cache_root() / "warm-up" / "lock"):
        run = history_run()
        while len(took) < checks and time.monotonic() - began < budget:
            started = time.monotonic()
            shutil.rmtree(run / PARQUET, ignore_errors=True)
            with server_session(url) as spark:
                check_run(run, spark=spark, timeout=CHECK_TIMEOUT)
            took.append(time.monotonic() - started)
            said(len(took), took[-1])
    return took
