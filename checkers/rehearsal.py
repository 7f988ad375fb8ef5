"""Checks of a synthetic history that ready the engine for a run's (checkers.engine): the one
whose JVM writes the class archive (`make setup`), and the warm-up's on a new warm server
(`harness spark up`, and `python -m checkers.rehearsal warm-up URL`, which a server started
for the checks runs: checkers.engine.keeper). The engine says how each runs; this module gives
it the check, which is a whole check_run, so the engine imports nothing of the analyses.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from checkers import engine
from checkers.read import PARQUET
from checkers.run import check_run
from checkers.synthetic import synth_run
from contract.cache import cache_root

MESSAGES = 20_000  # a run's size: the queries a run's check plans, at a run's volume
CHECK_TIMEOUT = 180.0
SEED = 11  # not the bench's: a bench's history is never the one the server was warmed on
TRAINING_MESSAGES = 20_000  # the class archive's: a synthetic history with every anomaly


def history_run() -> Path:
    """The warm-up's run directory, its synthetic history made the first time."""
    return synth_run(cache_root() / "warm-up" / f"kafka-{MESSAGES}", MESSAGES, SEED)


def _check_from_jsonl(run: Path, spark: Any) -> None:
    """One warm-up check, begun from the history's JSONL as a run's first check is."""
    shutil.rmtree(run / PARQUET, ignore_errors=True)
    check_run(run, spark=spark, timeout=CHECK_TIMEOUT)


def warm_up(
    url: str,
    checks: int = engine.WARM_UP_CHECKS,
    budget: float = engine.WARM_UP_SECONDS,
    said: Callable[[int, float], None] = lambda _n, _s: None,
) -> list[float]:
    """Checks the warm-up history `checks` times on the server at `url` (fewer when `budget`
    seconds have passed); calls `said(n, seconds)` after each and returns their times."""
    return engine.warm_up(url, history_run, _check_from_jsonl, checks, budget, said)


def train(archive_to: Path) -> None:
    """The training check: a synthetic history with every anomaly, checked once in a local
    Spark whose JVM writes the class archive `archive_to` as it exits."""
    with tempfile.TemporaryDirectory(prefix="brokerjepsen-jvm-") as tmp:
        run = synth_run(Path(tmp), TRAINING_MESSAGES)
        with engine.archiving_session(archive_to) as spark:
            check_run(run, spark=spark)


def main(argv: Sequence[str] = ()) -> int:
    """`python -m checkers.rehearsal`: writes the class archive unless it is there (make setup);
    in the process write_archive starts, the training check. `... warm-up URL`: warms the
    server at URL."""
    if argv:
        if len(argv) != 2 or argv[0] != "warm-up":
            print("usage: python -m checkers.rehearsal [warm-up URL]", file=sys.stderr)
            return 2
        return _warm_up_command(argv[1])
    archive_to = engine.archive_to()
    if archive_to is not None:
        train(archive_to)
        return 0
    training = [sys.executable, "-m", "checkers.rehearsal"]
    print(f"setup: Spark class archive {engine.write_archive(training)}")
    return 0


def _warm_up_command(url: str) -> int:
    try:
        took = warm_up(url, said=lambda n, s: print(f"warm-up check {n}: {s:.1f} s", flush=True))
    except engine.HistoryError as e:
        print(f"warm-up failed: {e}", file=sys.stderr)
        return 1
    print(f"warm after {len(took)} checks in {sum(took):.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
