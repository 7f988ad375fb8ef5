"""The Spark settings every check runs with, on a Spark of its own or on the warm server: one
place, so the two engines plan and compile a check alike."""

from __future__ import annotations

# Generated code compiled per distinct query, kept for the JVM's life. A check compiles a few
# hundred classes (each query's stages, projections, orderings), past Spark's default of 100
# entries: with the default the cache turns over within one check and every check compiles
# everything again (about a third of a run-sized check's time, sampled by the JDK's flight
# recorder). Each entry is a class of a few kB.
CODEGEN_CACHE_ENTRIES = 4000

FEWEST_SHUFFLE_PARTITIONS = 2  # a task per core of this machine kind
# JSONL per shuffle partition. At 1M messages (1 GB) 8 partitions checked a Parquet copy in
# 48 s against 57 s with 2: each task's aggregation maps then fit its share of memory rather
# than spilling. Adaptive execution coalesces partitions that come out small.
BYTES_PER_SHUFFLE_PARTITION = 128 * 1024 * 1024
MOST_SHUFFLE_PARTITIONS = 200  # Spark's own default: past it a shuffle's map side changes


def shuffle_partitions(history_bytes: int | None) -> int:
    """The shuffle partitions for a check of a history of `history_bytes` of JSONL (None:
    unknown, the fewest)."""
    if history_bytes is None:
        return FEWEST_SHUFFLE_PARTITIONS
    wanted = -(-history_bytes // BYTES_PER_SHUFFLE_PARTITION)
    return max(FEWEST_SHUFFLE_PARTITIONS, min(MOST_SHUFFLE_PARTITIONS, wanted))


CHECKER_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # Two cores: a task per core; a run's history has nothing for more partitions to split.
    # A larger history's check sets its own (shuffle_partitions).
    "spark.sql.shuffle.partitions": str(FEWEST_SHUFFLE_PARTITIONS),
    "spark.default.parallelism": "2",
    "spark.sql.codegen.cache.maxEntries": str(CODEGEN_CACHE_ENTRIES),
}
