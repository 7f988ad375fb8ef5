"""Reading a history into its Parquet copy, then with Spark's own readers.

On a cluster Spark's JSON reader parses every line in the JVM, no Python worker does, so the
check runs unchanged on executors that have none of our Python modules; on one machine
pyarrow's reader makes the same copy faster (checkers.columnar), and leaves to Spark's path
any history that is not plainly well formed.

Each row keeps its file and line number: ties in time break by file order, and a malformed
line is reported by file and line. Only the reason for a malformed line is found in Python, on
the driver, for the one line reported.

The JSONL files are the contract, plain or packed (contract.packed); history.parquet beside
them is a columnar copy, made by one pass over the JSONL the first time a history is checked,
and read from then on while it is fresh: its sidecar records each JSONL file's plain size and
the columns read, and a history that changed since, or a copy made for other columns, is copied
again (a packed history is unpacked beside the run for that pass, and the copies removed).
pandas (pyarrow) and DuckDB open it as they are (Spark's _SUCCESS and our sidecar start with
"_", which they skip); a row whose `malformed` column is set is a last line cut off by a crash,
not an event.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from itertools import groupby
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from checkers import columnar
from checkers.engine import SMALL_HISTORY_BYTES, HistoryError, on_this_machine
from checkers.frames import small_frame
from checkers.lines import EVENT_COLUMNS, EVENT_SCHEMA, parse_line
from contract.history import EVENT_TYPES
from contract.packed import PackError, history_paths, plain_history, plain_name, plain_size

PARQUET = "history.parquet"  # beside the history directory
SIDECAR = "_brokerjepsen.json"  # in it: the JSONL sizes it was made from, and cut last lines
MALFORMED = "malformed"  # in the Parquet copy: the text of a line that is not an event
CORRUPT = "_corrupt_record"  # where Spark's JSON parser puts a line it could not read whole
JSON_SCHEMA = f"{EVENT_SCHEMA}, {CORRUPT} string"


@dataclass
class History:
    events: Any  # DataFrame of ROW_SCHEMA: every well-formed event, with file and line
    truncated_lines: list[str]  # "file:line" of last lines cut off by a crash, skipped
    source: str  # "jsonl" or "parquet"
    one_partition: bool  # read by one task: checked with tuning.ONE_PARTITION_CONF


def history_files(history_dir: Path) -> list[Path]:
    """One file per process, plain (`*.jsonl`) or packed (`*.jsonl.zst`)."""
    files = history_paths(history_dir)
    if not files:
        raise HistoryError(f"{history_dir}: no history files (*.jsonl)")
    return files


def parquet_path(history_dir: Path) -> Path:
    return history_dir.parent / PARQUET


def read_history(spark: Any, history_dir: Path) -> History:
    """Every well-formed event of the history, from its Parquet copy, made first from the JSONL
    files unless a fresh one is there (raising HistoryError on a malformed line other than a cut
    last line)."""
    made_from, fresh = _write_parquet(spark, history_dir)
    events = (
        spark.read.parquet(str(parquet_path(history_dir)))
        .filter(f"{MALFORMED} IS NULL")
        .select(*EVENT_COLUMNS, "file", "line")
    )
    one_partition = history_bytes(history_dir) <= SMALL_HISTORY_BYTES
    if one_partition:
        # Read by one task, and planned as one partition: no grouping, window or join of the
        # check then shuffles. A run-sized history fits a task many times over, and each
        # shuffle cost a stage of its own (a third of the check's stages, a sixth of its time).
        events = events.coalesce(1)
    source = "parquet" if fresh else "jsonl"
    return History(events, made_from["truncated_lines"], source, one_partition)


def write_parquet(spark: Any, history_dir: Path) -> Path:
    """The history as Parquet beside it, unless a fresh copy is there already."""
    _write_parquet(spark, history_dir)
    return parquet_path(history_dir)


def _write_parquet(spark: Any, history_dir: Path) -> tuple[dict[str, Any], bool]:
    """Makes the Parquet copy unless a fresh one is there; returns its sidecar, and whether it
    was there.

    One pass parses every line and writes it; the few malformed lines are then found in the copy
    (a cut last line is kept there, marked, and skipped by readers). A history with any other
    malformed line raises, and leaves no copy."""
    fresh = _fresh_parquet(history_dir)
    if fresh is not None:
        return fresh, True
    path = parquet_path(history_dir)
    sizes = _sizes(history_dir)
    with _plain(history_dir) as files:
        truncated = _columnar_copy(spark, files, path)
        if truncated is None:
            lengths = _parse_into(spark, files, path)
            try:
                truncated = _truncated_or_raise(spark, path, history_dir, files, lengths)
            except HistoryError:
                shutil.rmtree(path, ignore_errors=True)
                raise
    sidecar = {"files": sizes, "truncated_lines": truncated, "schema": EVENT_SCHEMA}
    (path / SIDECAR).write_text(json.dumps(sidecar, indent=1) + "\n")
    return sidecar, False


def _columnar_copy(spark: Any, files: list[Path], path: Path) -> list[str] | None:
    """On one machine, the copy made by pyarrow (checkers.columnar), and its cut last lines;
    None where Spark's reader must make it: on a cluster, whose executors read the files, or
    for a history that is not plainly well formed."""
    if not on_this_machine(spark) or not columnar.available():
        return None
    shutil.rmtree(path, ignore_errors=True)
    try:
        truncated = columnar.copy(files, path)
    except columnar.NotPlain:
        shutil.rmtree(path, ignore_errors=True)
        return None
    return truncated


def history_bytes(history_dir: Path) -> int:
    """The history's size as plain JSONL (HistoryError for a damaged packed file)."""
    return sum(_sizes(history_dir).values())


def _sizes(history_dir: Path) -> dict[str, int]:
    try:
        return {plain_name(p): _plain_size_of(p) for p in history_files(history_dir)}
    except PackError as e:
        raise HistoryError(str(e)) from None


def _plain_size_of(path: Path) -> int:
    stat = path.stat()
    return _plain_size(path.resolve(), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=1024)
def _plain_size(path: Path, size: int, mtime_ns: int) -> int:
    """A packed file's plain size is known only by unpacking it, and a check asks for it
    several times (its size, then whether the Parquet copy is fresh, then the copy's sidecar):
    it is unpacked once per version of the file, which its size and time stand for."""
    return plain_size(path)


@contextmanager
def _plain(history_dir: Path) -> Iterator[list[Path]]:
    """The history's files as plain ones (a packed history unpacked beside the run)."""
    try:
        with plain_history(history_dir, history_dir.parent) as files:
            yield files
    except PackError as e:
        raise HistoryError(str(e)) from None


def _fresh_parquet(history_dir: Path) -> dict[str, Any] | None:
    """The sidecar of a Parquet copy made from the JSONL files as they are now, else None."""
    sidecar = parquet_path(history_dir) / SIDECAR
    try:
        made_from = json.loads(sidecar.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(made_from, dict) or made_from.get("files") != _sizes(history_dir):
        return None
    if made_from.get("schema") != EVENT_SCHEMA:  # made by a checker that read other columns
        return None
    return made_from


def _parse_into(spark: Any, files: list[Path], path: Path) -> dict[str, int]:
    """Writes every line of the JSONL files to `path` as an event row, the text of a line that
    is not a well-formed event kept in `malformed`; returns each file's number of lines."""
    from pyspark.sql import functions as F

    lines, lengths = _numbered_lines(spark, files)
    parsed = lines.withColumn(
        "e",
        F.from_json(
            "text", JSON_SCHEMA, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
        ),
    ).select("file", "line", "text", "e.*")
    parsed = parsed.filter(F.trim("text") != "")
    malformed = F.when(~_well_formed(), F.col("text")).alias(MALFORMED)
    rows = parsed.select(*EVENT_COLUMNS, "file", "line", malformed)
    rows.write.mode("overwrite").option("compression", columnar.CODEC).parquet(str(path))
    return lengths


def _numbered_lines(spark: Any, files: list[Path]) -> tuple[Any, dict[str, int]]:
    """(file, line, text) for every line, and each file's number of lines.

    A file may be split over several Spark partitions and a partition may hold several files, so
    the line number is the row's place in its partition, less where its file starts there, plus
    the file's rows in earlier partitions. A file's splits go to partitions in file order (Spark
    packs splits in the order it cut them), and a partition reads each split in order.
    """
    from pyspark.sql import functions as F

    raw = (
        spark.read.text([str(p.resolve()) for p in files])
        .withColumnRenamed("value", "text")
        .withColumn("uri_name", F.element_at(F.split(F.input_file_name(), "/"), -1))
        .withColumn("pid", F.spark_partition_id())
        .withColumn("rid", F.monotonically_increasing_id())
    )
    pieces = (
        raw.groupBy("uri_name", "pid")
        .agg(F.min("rid").alias("first"), F.count("*").alias("rows"))
        .collect()
    )
    starts, lengths = [], {}
    for uri_name, rows in groupby(sorted(pieces, key=lambda r: (r[0], r["pid"])), lambda r: r[0]):
        file = unquote(uri_name)  # the reader's URI escapes some characters; "+" stays "+"
        before = 0
        for r in rows:
            starts.append((uri_name, r["pid"], r["first"], before, file))
            before += r["rows"]
        lengths[file] = before
    offsets = small_frame(
        spark, starts, "uri_name string, pid int, first bigint, before bigint, file string"
    )
    numbered = raw.join(F.broadcast(offsets), ["uri_name", "pid"]).withColumn(
        "line", F.col("rid") - F.col("first") + F.col("before") + 1
    )
    return numbered.select("file", "line", "text"), lengths


def _well_formed() -> Any:
    """The history contract, as a Spark column: what parse_line accepts."""
    from pyspark.sql import functions as F

    return (
        F.col(CORRUPT).isNull()
        & F.col("time").isNotNull()
        & F.col("process").isNotNull()
        & F.col("f").isNotNull()
        & F.col("type").isin(*sorted(EVENT_TYPES))
        & ~((F.col("f") == "send") & F.col("msg_id").isNull())
    )


def _truncated_or_raise(
    spark: Any, path: Path, history_dir: Path, files: list[Path], lengths: dict[str, int]
) -> list[str]:
    """The last lines cut off mid-write; any other malformed line raises. A file has at most
    one cut line, so the first len(lengths) + 1 malformed lines hold any other there is."""
    from pyspark.sql import functions as F

    bad = (
        spark.read.parquet(str(path))
        .filter(F.col(MALFORMED).isNotNull())
        .select("file", "line", F.col(MALFORMED).alias("text"))
        .orderBy("file", "line")
        .limit(len(lengths) + 1)
        .collect()
    )
    truncated = []
    plain = {p.name: p for p in files}
    for r in bad:
        path = history_dir / r["file"]
        if r["line"] == lengths.get(r["file"]) and _ends_cut(plain[r["file"]]):
            truncated.append(f"{r['file']}:{r['line']}")
            continue
        verdict, detail = parse_line(r["file"], r["line"] - 1, r["text"])
        reason = detail[2] if verdict == "bad" else "a field of the wrong type"
        raise HistoryError(f"{path}:{r['line']}: malformed history line ({reason})")
    return truncated


def _ends_cut(path: Path) -> bool:
    """Whether the file's last line has no newline: a write cut off by a crash."""
    size = path.stat().st_size
    if size == 0:
        return False
    with open(path, "rb") as fh:
        fh.seek(size - 1)
        return fh.read(1) != b"\n"
