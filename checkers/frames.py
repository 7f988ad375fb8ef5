"""Small DataFrames made from a few driver-side rows, built in the JVM.

PySpark's createDataFrame sends a Python list through a Python worker; on a cluster that is a
Python process on an executor. The checker keeps every executor on the JVM alone, so its few
driver-made tables (groups, fault steps, split offsets) are literals in a query plan instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def small_frame(spark: Any, rows: Sequence[Sequence[Any]], ddl: str) -> Any:
    """A DataFrame of `rows` with the columns of `ddl` ("name type, ..."), cast to those types."""
    from pyspark.sql import functions as F

    if not rows:
        fields = _fields(ddl)
        return spark.range(0).select(*[F.lit(None).cast(f.dataType).alias(f.name) for f in fields])
    return spark.range(1).select(F.inline(small_array(rows, ddl)))


def small_array(rows: Sequence[Sequence[Any]], ddl: str) -> Any:
    """`rows` as one literal array column of structs with the fields of `ddl`: a value each row
    of a query can carry (exploded, or folded by a higher-order function) where a join with a
    small_frame would cost a job of its own to broadcast."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType

    fields = _fields(ddl)
    if not rows:
        return F.array().cast(ArrayType(_struct(ddl)))
    structs = [
        F.struct(
            *[
                F.lit(value).cast(f.dataType).alias(f.name)
                for f, value in zip(fields, row, strict=True)
            ]
        )
        for row in rows
    ]
    return F.array(*structs)


def _struct(ddl: str) -> Any:
    from pyspark.sql.types import StructType

    schema = StructType.fromDDL(ddl)
    assert isinstance(schema, StructType)
    return schema


def _fields(ddl: str) -> list[Any]:
    return list(_struct(ddl).fields)


def in_spark_order(rows: Iterable[Any], *columns: str) -> list[Any]:
    """Collected rows sorted by `columns`, ascending, with nulls first as Spark's orderBy sorts.

    For a small result (a run's few producers, fault steps, samples): sorted here it costs no
    job, where Spark's sort of the whole result samples it in one job and sorts it in
    another."""

    def key(row: Any) -> tuple[tuple[bool, Any], ...]:
        return tuple((row[c] is not None, row[c]) for c in columns)

    return sorted(rows, key=key)


ROW_OF = "_row_of"  # in collected_together's union: which frame a row came from


def collected_together(frames: dict[str, Any]) -> dict[str, list[Any]]:
    """The rows of each frame of `frames` (name: frame of few rows), by name, in one action.

    On a warm server most of a small frame's collect is its own: a plan, a job and a round trip.
    Unioned, the frames are one of each; a column a frame lacks is null in its rows, and
    frames share a column's name only with its type."""
    from functools import reduce

    from pyspark.sql import functions as F

    named = [frame.select(F.lit(name).alias(ROW_OF), "*") for name, frame in frames.items()]
    union = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), named)
    out: dict[str, list[Any]] = {name: [] for name in frames}
    for row in union.collect():
        out[row[ROW_OF]].append(row)
    return out
