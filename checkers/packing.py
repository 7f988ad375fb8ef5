"""A history's facts, from one job, and the integers its orders pack into when they fit.

Spark aggregates by hashing only when every aggregation buffer is a fixed-width number; one
string or struct buffer (a message's first delivery by time, then file, then line; its lowest
acknowledged position) makes it sort every row instead, which at 1M messages was the message
table's largest cost. Where a history allows it, each of those orders packs exactly into one
63-bit integer, with the strings it carries replaced by their rank in a sorted dictionary:
- a time between 2^30 and 2^31 s (2004 to 2038) is a whole multiple of 2^-22 s, so
  (time - first) * 2^22 counts it exactly (the subtraction of two such doubles is exact too);
  the file's rank and the line take the bits left below it;
- a position is the stream's rank, then the partition, then the offset less the lowest one.
When a history's facts do not fit (times outside those years, a negative partition, too many
bits), the message table keeps its structs (checkers.messages): slower, the same answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from checkers.read import HistoryError

DataFrame = Any  # pyspark.sql.DataFrame
TICKS_PER_SECOND = 2**22  # the spacing of doubles between 2^30 and 2^31
TIMES = (2.0**30, 2.0**31)
BITS = 62  # of a signed long, one spare: a packed key is never negative


@dataclass(frozen=True)
class HistoryFacts:
    """What the message table's dictionaries and bit widths are made from."""

    groups: tuple[str, ...]  # of the ok receives
    producers: tuple[str, ...]  # named by any event
    nodes: tuple[str, ...]  # acknowledging an ok send ("unknown" where it names none)
    streams: tuple[str, ...]  # of ok sends with a position
    files: tuple[str, ...]
    # First and last of any event; None for none, or where one is not a finite number.
    times: tuple[float, float] | None
    last_line: int
    partitions: tuple[int, int] | None  # lowest and highest of ok sends with a position
    offsets: tuple[int, int] | None


@dataclass(frozen=True)
class Packing:
    """Bit widths of the two packed orders, and the dictionaries their strings rank in."""

    facts: HistoryFacts
    first_time: float
    line_bits: int
    file_bits: int
    offset_bits: int
    partition_bits: int
    lowest_offset: int


# What the facts and the message table both ask of an event, stated once: a name the table
# ranks must be among those the facts list.
def ok_receive() -> Any:
    from pyspark.sql import functions as F

    return (F.col("f") == "receive") & (F.col("type") == "ok")


def ok_send() -> Any:
    from pyspark.sql import functions as F

    return (F.col("f") == "send") & (F.col("type") == "ok")


def reader_group() -> Any:
    """The group a receive counts in: its consumer group, else its stream (a queue's reader)."""
    from pyspark.sql import functions as F

    return F.coalesce(F.col("group"), F.col("stream"))


def acking_node() -> Any:
    from pyspark.sql import functions as F

    return F.coalesce(F.col("node"), F.lit("unknown"))


def acked_at_a_position() -> Any:
    """An ok send that names the partition and offset it was written at."""
    from pyspark.sql import functions as F

    col = F.col
    return ok_send() & col("partition").isNotNull() & col("offset").isNotNull()


def facts_by_names(events: DataFrame) -> DataFrame:
    """A row per file and each combination of names it holds (tens of rows, merged by facts_of).
    Grouped by the names rather than collecting them into sets, so Spark aggregates numbers
    only, by hashing, in generated code."""
    from pyspark.sql import functions as F

    col = F.col
    acked = ok_send()
    placed = acked_at_a_position()
    receive = ok_receive()
    return events.groupBy(
        "file",
        F.when(receive, reader_group()).alias("group"),
        "producer",
        F.when(acked, acking_node()).alias("node"),
        F.when(placed, col("stream")).alias("stream"),
    ).agg(
        F.max("line").alias("last_line"),
        F.min("time").alias("first_time"),
        F.max("time").alias("last_time"),
        F.max(receive & col("group").isNull() & col("stream").isNull()).alias("ungrouped"),
        F.min(F.when(placed, col("partition"))).alias("low_partition"),
        F.max(F.when(placed, col("partition"))).alias("high_partition"),
        F.min(F.when(placed, col("offset"))).alias("low_offset"),
        F.max(F.when(placed, col("offset"))).alias("high_offset"),
    )


def facts_of(collected: list[Any]) -> HistoryFacts:
    """The facts of the history from the collected rows of facts_by_names."""
    rows = [r.asDict() for r in collected]
    ungrouped = sorted(r["file"] for r in rows if r["ungrouped"])
    if ungrouped:
        raise HistoryError(f"{ungrouped[0]}: an ok receive names neither its group nor a stream")
    # Python's min and max of numbers with a NaN among them depend on their order.
    times = [t for r in rows for t in (r["first_time"], r["last_time"]) if t is not None]

    def names(name: str) -> tuple[str, ...]:
        return tuple(sorted({r[name] for r in rows if r[name] is not None}))

    def span(low: str, high: str) -> Any:
        lows = [r[low] for r in rows if r[low] is not None]
        return (min(lows), max(r[high] for r in rows if r[high] is not None)) if lows else None

    return HistoryFacts(
        groups=names("group"),
        producers=names("producer"),
        nodes=names("node"),
        streams=names("stream"),
        files=names("file"),
        times=(min(times), max(times)) if times and all(map(math.isfinite, times)) else None,
        last_line=max((r["last_line"] for r in rows), default=0),
        partitions=span("low_partition", "high_partition"),
        offsets=span("low_offset", "high_offset"),
    )


def packing(facts: HistoryFacts) -> Packing | None:
    """The bit widths when both orders fit (module docstring), else None."""
    if facts.times is None or not (TIMES[0] <= facts.times[0] and facts.times[1] < TIMES[1]):
        return None
    ticks = int((facts.times[1] - facts.times[0]) * TICKS_PER_SECOND)
    line_bits = facts.last_line.bit_length()
    file_bits = len(facts.files).bit_length()  # ranks count from 1
    if ticks.bit_length() + file_bits + line_bits > BITS:
        return None
    partitions = facts.partitions or (0, 0)
    offsets = facts.offsets or (0, 0)
    if partitions[0] < 0:
        return None
    offset_bits = (offsets[1] - offsets[0]).bit_length()
    partition_bits = partitions[1].bit_length()
    if len(facts.streams).bit_length() + partition_bits + offset_bits > BITS:
        return None
    return Packing(
        facts, facts.times[0], line_bits, file_bits, offset_bits, partition_bits, offsets[0]
    )


def rank_in(names: tuple[str, ...], column: Any) -> Any:
    """A column's rank in a sorted dictionary, from 1 (null for null): ranks order as names do.
    A name the dictionary lacks stops the query: ranked 0, it would order first, unsaid."""
    from pyspark.sql import functions as F

    missing = F.raise_error(F.lit("checker: a name is missing from the history's facts"))
    if not names:
        return F.when(column.isNotNull(), missing).cast("long")
    rank = F.array_position(F.array(*[F.lit(n) for n in names]), column)
    return F.when(rank == 0, missing).otherwise(rank)


def name_of(names: tuple[str, ...], rank: Any) -> Any:
    """The name a rank stands for (null for null, and for 0: a null ranked first)."""
    from pyspark.sql import functions as F

    if not names:
        return F.lit(None).cast("string")
    # Spark 4.3's element_at of a literal array at a null index answers an element, not null.
    element = F.element_at(F.array(*[F.lit(n) for n in names]), rank.cast("int"))
    return F.when(rank > 0, element)
