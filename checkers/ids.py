"""The ids behind every count, written by Spark: ids/<group>/<metric>.txt, one id a line.

Nothing per message passes through the driver: Spark writes each (group, metric) as a file per
task, sorted as a person reads them (by producer, then seq as a number); the driver joins a
(group, metric)'s files in task order and counts their lines.

The messages are sorted once, before they are told apart by group and metric: each task
writes its sorted range into an open file per (group, metric) (Spark's concurrent writers, not
the sort by group and metric its partitioned write would add), and a range sort gives task i
ids before task i + 1's, so the files joined in task order are in order.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from checkers.engine import session_conf
from contract.packed import either_form, pack_file, read_lines

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


def in_natural_order(df: DataFrame, msg_id: str = "msg_id") -> DataFrame:
    """df sorted across its partitions by the natural order of its `msg_id` column.

    The order's keys are columns made once per row before the sort: as expressions of the
    sort they would be computed again at every comparison (at 1M messages, 8 s of a 9 s
    sort)."""
    from pyspark.sql import functions as F

    keys = _natural_order(F.col(msg_id))
    names = [f"_natural_order_{i}" for i in range(len(keys))]
    with_keys = df.select("*", *[key.alias(name) for key, name in zip(keys, names, strict=True)])
    return with_keys.orderBy(*names).drop(*names)


def write_ids(
    ordered: list[DataFrame], metrics: tuple[str, ...], groups: list[str], ids_dir: Path
) -> dict[str, dict[str, int]]:
    """Writes every (group, metric, msg_id) of the `ordered` frames, each in natural order of
    msg_id across its partitions (in_natural_order) and each metric from one of them; returns
    the counts per group and metric (0 for each of `metrics` a group has no id of)."""
    staging = ids_dir.with_name(ids_dir.name + ".spark")
    rows = ordered[0]
    for df in ordered[1:]:
        rows = rows.unionByName(df)  # a union appends its inputs' partitions, in order
    spark = rows.sparkSession
    files = len(groups) * len(metrics) + 1  # open at once; past it Spark would sort again
    with session_conf(
        spark,
        {
            "spark.sql.optimizer.plannedWrite.enabled": "false",
            "spark.sql.maxConcurrentOutputFileWriters": str(files),
        },
    ):
        rows.select("group", "metric", "msg_id").write.mode("overwrite").partitionBy(
            "group", "metric"
        ).text(str(staging))
    shutil.rmtree(ids_dir, ignore_errors=True)
    counts = {g: dict.fromkeys(metrics, 0) for g in groups}
    for part_dir in staging.glob("group=*/metric=*"):
        group = unquote(part_dir.parent.name.removeprefix("group="))
        metric = unquote(part_dir.name.removeprefix("metric="))
        target = ids_dir / group / f"{metric}.txt"
        target.parent.mkdir(parents=True, exist_ok=True)
        _join(sorted(part_dir.glob("part-*")), target)
        counts.setdefault(group, dict.fromkeys(metrics, 0))[metric] = _line_count(target)
    shutil.rmtree(staging)
    for group, by_metric in counts.items():
        for metric in by_metric:
            target = ids_dir / group / f"{metric}.txt"
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.touch()
    return counts


def _join(parts: list[Path], target: Path) -> None:
    """The parts, in order, as one file."""
    shutil.move(parts[0], target)
    if len(parts) > 1:
        with open(target, "ab") as out:
            for part in parts[1:]:
                with open(part, "rb") as fh:
                    shutil.copyfileobj(fh, out, 1 << 20)


# The lists of every message a group was sent or got, rather than of what went wrong: packed
# with a run's history (contract.packed) as `<metric>.txt.zst`, the anomalies' lists left plain.
COMPLETE_LISTS = ("acked", "received")


def read_ids(ids_dir: Path, group: str, metric: str) -> list[str]:
    path = either_form(ids_dir / group / f"{metric}.txt")
    if path is None:
        raise FileNotFoundError(ids_dir / group / f"{metric}.txt")
    return read_lines(path)


def pack_complete_lists(ids_dir: Path) -> list[Path]:
    """Packs each group's acked and received lists; returns the packed files."""
    return [
        pack_file(path)
        for metric in COMPLETE_LISTS
        for path in sorted(ids_dir.glob(f"*/{metric}.txt"))
    ]


def _line_count(path: Path) -> int:
    count = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            count += chunk.count(b"\n")
    return count
