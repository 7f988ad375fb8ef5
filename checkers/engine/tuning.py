"""The Spark settings every check runs with, on a Spark of its own or on the warm server: one
place, so the two engines plan and compile a check alike."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# A history up to this much JSONL (some 200 000 messages) is small: starting and warming the
# JVM and planning the queries are most of its check, not its rows (checkers.engine.jvm,
# checkers.read).
SMALL_HISTORY_BYTES = 200 << 20

# Generated code compiled per distinct query, kept for the JVM's life. A check compiles a few
# hundred classes (each query's stages, projections, orderings), past Spark's default of 100
# entries: with the default the cache turns over within one check and every check compiles
# everything again (about a third of a run-sized check's time, sampled by the JDK's flight
# recorder). Each entry is a class of a few kB.
CODEGEN_CACHE_ENTRIES = 4000

CHECKER_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # Two cores: a task per core; a run's history has nothing for more partitions to split.
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.codegen.cache.maxEntries": str(CODEGEN_CACHE_ENTRIES),
}

# A small history's check, read as one partition (checkers.read), is planned without adaptive
# execution: adaptive plans hide their partitioning from a local checkpoint, so every grouping
# of a checkpointed frame (the message table's) shuffled its one partition again, a stage and
# often a job each. Without it, a checkpoint keeps "one partition" and nothing downstream
# shuffles; a shuffle that remains (of the few driver-made rows) makes one partition, not two.
ONE_PARTITION_CONF: dict[str, str] = {
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.shuffle.partitions": "1",
}


@contextmanager
def session_conf(spark: Any, settings: dict[str, str]) -> Iterator[None]:
    """`settings` in the session while the block runs (a check, a write), then each key's value
    before it: a warm server's session, and a test's, outlive the check."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
