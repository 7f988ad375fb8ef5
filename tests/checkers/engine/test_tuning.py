"""The settings a check runs with, and what they do to a small history's plans."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checkers import read
from checkers.engine.tuning import ONE_PARTITION_CONF, session_conf
from checkers.synthetic import synth

UNSET = "spark.brokerjepsen.test.unset"  # no Spark default: absent unless set


def test_the_settings_hold_inside_the_block_and_the_values_before_it_come_back(
    spark: Any,
) -> None:
    key = "spark.sql.shuffle.partitions"
    before = spark.conf.get(key)
    with pytest.raises(RuntimeError), session_conf(spark, {key: "3", UNSET: "x"}):
        assert spark.conf.get(key) == "3"
        assert spark.conf.get(UNSET, None) == "x"
        raise RuntimeError("a check that failed restores them too")
    assert spark.conf.get(key) == before
    assert spark.conf.get(UNSET, None) is None


def test_a_small_historys_checkpointed_groups_are_grouped_again_without_a_shuffle(
    spark: Any, tmp_path: Path
) -> None:
    """The message table is a grouping of the events, kept by a local checkpoint, and grouped
    again by every per-producer and per-group question: none of those may shuffle."""
    history = tmp_path / "history"
    synth(history, 200)
    with session_conf(spark, ONE_PARTITION_CONF):
        events = read.read_history(spark, history).events
        table = events.groupBy("msg_id", "process").count().localCheckpoint(eager=True)
        again = table.groupBy("process").count()
        plan = str(again._jdf.queryExecution().executedPlan())
        partitions = again.rdd.getNumPartitions()
    assert "Exchange" not in plan, plan
    assert partitions == 1
