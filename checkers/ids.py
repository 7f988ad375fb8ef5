"""The ids behind every count, written by Spark: ids/<group>/<metric>.txt, one id a line.

Nothing per message passes through the driver: Spark writes each (group, metric) to a file of
its own, sorted as a person reads them (by producer, then seq as a number); the driver only
moves the files into place and counts their lines.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any
from urllib.parse import unquote

DataFrame = Any


def _natural_order(msg_id: Any) -> list[Any]:
    """Sort columns for "producer:seq" ids: producer, then seq as a number; others by text.

    Plain string functions, not regular expressions: this runs for every acknowledged id."""
    from pyspark.sql import functions as F

    seq = F.substring_index(msg_id, ":", -1)
    number = seq.try_cast("bigint")
    producer = F.when(
        number.isNotNull(), F.substr(msg_id, F.lit(1), F.length(msg_id) - F.length(seq) - 1)
    )
    return [F.coalesce(producer, msg_id), F.coalesce(number, F.lit(-1)), msg_id]


def write_ids(
    tagged: DataFrame, metrics: tuple[str, ...], groups: list[str], ids_dir: Path
) -> dict[str, dict[str, int]]:
    """Writes every (group, metric, msg_id) of `tagged`; returns the counts per group and
    metric (0 for each of `metrics` a group has no id of)."""
    from pyspark.sql import functions as F

    staging = ids_dir.with_name(ids_dir.name + ".spark")
    (
        tagged.repartition("group", "metric")
        .sortWithinPartitions("group", "metric", *_natural_order(F.col("msg_id")))
        .select("group", "metric", "msg_id")
        .write.mode("overwrite")
        .partitionBy("group", "metric")
        .text(str(staging))
    )
    shutil.rmtree(ids_dir, ignore_errors=True)
    counts = {g: dict.fromkeys(metrics, 0) for g in groups}
    for part_dir in staging.glob("group=*/metric=*"):
        group = unquote(part_dir.parent.name.removeprefix("group="))
        metric = unquote(part_dir.name.removeprefix("metric="))
        target = ids_dir / group / f"{metric}.txt"
        target.parent.mkdir(parents=True, exist_ok=True)
        # One file per (group, metric): the repartition put each in one task.
        (part,) = sorted(part_dir.glob("part-*"))
        shutil.move(part, target)
        counts.setdefault(group, dict.fromkeys(metrics, 0))[metric] = _line_count(target)
    shutil.rmtree(staging)
    for group, by_metric in counts.items():
        for metric in by_metric:
            target = ids_dir / group / f"{metric}.txt"
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.touch()
    return counts


def read_ids(ids_dir: Path, group: str, metric: str) -> list[str]:
    return (ids_dir / group / f"{metric}.txt").read_text().splitlines()


def _line_count(path: Path) -> int:
    count = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            count += chunk.count(b"\n")
    return count
