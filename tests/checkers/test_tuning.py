from checkers.tuning import (
    BYTES_PER_SHUFFLE_PARTITION,
    FEWEST_SHUFFLE_PARTITIONS,
    MOST_SHUFFLE_PARTITIONS,
    shuffle_partitions,
)


def test_a_run_sized_history_keeps_a_partition_per_core() -> None:
    assert shuffle_partitions(None) == FEWEST_SHUFFLE_PARTITIONS
    assert shuffle_partitions(0) == FEWEST_SHUFFLE_PARTITIONS
    assert shuffle_partitions(20_000_000) == FEWEST_SHUFFLE_PARTITIONS


def test_a_larger_history_gets_a_partition_per_share_of_its_bytes() -> None:
    assert shuffle_partitions(8 * BYTES_PER_SHUFFLE_PARTITION) == 8
    assert shuffle_partitions(8 * BYTES_PER_SHUFFLE_PARTITION + 1) == 9


def test_partitions_stop_at_sparks_default() -> None:
    assert shuffle_partitions(10**15) == MOST_SHUFFLE_PARTITIONS
