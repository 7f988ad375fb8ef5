"""The history's Parquet copy made by pyarrow's JSON reader, on one machine.

Spark's reader parses a line per row through the JVM on two cores; pyarrow's reader parses
blocks of lines in C++ and is several times faster (figures: README, "The checker"). It makes
the same copy checkers.read describes (every event column, file, line, malformed) from
well-formed histories only: at anything else (a blank line, a line pyarrow cannot read into
the event columns, a required field missing) it gives up and the Spark path, which names the
malformed line, makes the copy. A last line cut off by a crash is read here, as there.

`value` holds any JSON and is not a column pyarrow can type; the few lines that carry one
(nemesis steps, partition states) are found by a byte search and read by Python's json.
"""

from __future__ import annotations

import concurrent.futures
import json
import re
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from checkers.lines import EVENT_COLUMNS, parse_line
from contract.history import EVENT_TYPES

# The copy stays beside the packed history for re-checks: zstd makes it 2.3x smaller than
# snappy (an 80 000-message history: 8.2 MB against 3.5 MB).
CODEC = "zstd"
BLOCK = 256 << 20  # bytes of whole lines parsed at a time: bounds the memory at any size
# A non-null "value" field, in any JSON spacing; a quote inside a string is escaped, so an
# error text that mentions "value": cannot match.
_VALUE = re.compile(rb'"value"\s*:\s*(?!null\b)')


class NotPlain(Exception):
    """The history is not plainly well formed: the Spark path makes the copy."""


def _schema() -> Any:
    import pyarrow as pa

    types = {"time": pa.float64(), "seq": pa.int64(), "partition": pa.int64()}
    types |= {"offset": pa.int64(), "redelivered": pa.bool_()}
    return pa.schema([(c, types.get(c, pa.string())) for c in EVENT_COLUMNS if c != "value"])


def available() -> bool:
    try:
        import pyarrow.json  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return False
    return True


def copy(files: list[Path], target: Path) -> list[str]:
    """Writes the Parquet copy of `files` into the directory `target`; returns the cut last
    lines ("file:line"). Raises NotPlain (leaving `target` to the caller) when the Spark path
    must make it."""
    import pyarrow.parquet as pq

    target.mkdir(parents=True, exist_ok=True)
    truncated: list[str] = []
    writer: Any = None
    # A block is compressed and written while the next is parsed (both release the GIL): one
    # block waits at most, so the memory stays bounded by two blocks.
    written: Future[None] | None = None
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="parquet-copy") as pool:
        try:
            for path in files:
                lines = 0
                for table, n, cut in _tables(path):
                    writer = writer or pq.ParquetWriter(
                        str(target / "part-00000.parquet"), table.schema, compression=CODEC
                    )
                    if written is not None:
                        written.result()
                    written = pool.submit(writer.write_table, table)
                    lines += n
                    if cut:
                        truncated.append(f"{path.name}:{lines}")
            if written is not None:
                written.result()
        finally:
            if written is not None:
                written.cancel()
                concurrent.futures.wait([written])
            if writer is not None:
                writer.close()
    (target / "_SUCCESS").touch()  # as Spark's writer marks a whole copy
    return truncated


def _tables(path: Path) -> Iterator[tuple[Any, int, bool]]:
    """(rows, lines, whether the last was a cut line) per block of the file."""
    done = 0
    with open(path, "rb") as fh:
        rest = b""
        while True:
            chunk = fh.read(BLOCK)
            data = rest + chunk
            if not chunk:
                break
            end = data.rfind(b"\n") + 1
            rest = data[end:]
            if end:
                table = _block(data[:end], path.name, done)
                done += table.num_rows
                yield table, table.num_rows, False
        if data:  # the last line has no newline: cut by a crash, or whole but unterminated
            table, cut = _last_line(data.decode("utf-8", "replace"), path.name, done)
            yield table, 1, cut


def _block(data: bytes, file: str, first_line: int) -> Any:
    """The rows of whole lines `data`, which start at line first_line + 1 of `file`."""
    import pyarrow as pa
    import pyarrow.json as pj

    try:
        table = pj.read_json(
            pa.py_buffer(data),
            read_options=pj.ReadOptions(block_size=min(len(data) + 1, 1 << 26)),
            parse_options=pj.ParseOptions(
                explicit_schema=_schema(), unexpected_field_behavior="ignore"
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise NotPlain(f"{file}: {e}") from None
    # pyarrow skips a blank line, or one of spaces: a row short, the Spark path decides.
    if table.num_rows != data.count(b"\n"):
        raise NotPlain(f"{file}: a blank line")
    _require_event_fields(table, file)
    return _finish(table, _values(data, table.num_rows), file, first_line)


def _require_event_fields(table: Any, file: str) -> None:
    """What checkers.read's well-formed test asks of every row, vectorised."""
    import pyarrow.compute as pc

    required = [pc.is_valid(table[c]) for c in ("time", "process", "f")]
    known_type = pc.is_in(table["type"], value_set=_types())
    needs_id = pc.and_(pc.equal(table["f"], "send"), pc.is_null(table["msg_id"]))
    ok = pc.and_kleene(pc.and_(pc.and_(required[0], required[1]), required[2]), known_type)
    ok = pc.and_(pc.fill_null(ok, False), pc.invert(pc.fill_null(needs_id, False)))
    if not pc.all(ok).as_py():
        raise NotPlain(f"{file}: a line that is not an event")


def _types() -> Any:
    import pyarrow as pa

    return pa.array(sorted(EVENT_TYPES))


def _values(data: bytes, rows: int) -> list[str | None]:
    """Each line's value (value_text), or None."""
    values: list[str | None] = [None] * rows
    line, counted = 0, 0
    for match in _VALUE.finditer(data):
        line += data.count(b"\n", counted, match.start())
        counted = match.start()
        start = data.rfind(b"\n", 0, match.start()) + 1
        end = data.find(b"\n", match.start())
        try:
            event = json.loads(data[start:end])
        except ValueError:
            raise NotPlain("a line pyarrow read and json cannot") from None
        if isinstance(event, dict) and event.get("value") is not None:
            values[line] = value_text(event["value"])
    return values


def value_text(value: Any) -> str:
    """A value as Spark's reader gives it for a string column: a string as it is, anything
    else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _finish(table: Any, values: list[str | None], file: str, first_line: int) -> Any:
    """The rows in the copy's column order, with value, file, line and malformed."""
    import pyarrow as pa

    n = table.num_rows
    columns = {c: table[c] for c in table.column_names}
    columns["value"] = pa.array(values, pa.string())
    ordered = [columns[c] for c in EVENT_COLUMNS]
    extra = [
        pa.repeat(pa.scalar(file, pa.string()), n),
        pa.array(range(first_line + 1, first_line + n + 1), pa.int64()),
        pa.nulls(n, pa.string()),
    ]
    return pa.Table.from_arrays(
        [*ordered, *extra], names=[*EVENT_COLUMNS, "file", "line", "malformed"]
    )


def _last_line(text: str, file: str, before: int) -> tuple[Any, bool]:
    """The row of an unterminated last line: its event if it is whole, else kept as malformed
    (a cut line, skipped by readers)."""
    import pyarrow as pa

    verdict, row = parse_line(file, before, text)
    if verdict == "skip":
        raise NotPlain(f"{file}: a blank last line")
    names = [*EVENT_COLUMNS, "file", "line", "malformed"]
    if verdict == "ok":
        values = list(row) + [None]
        event = json.loads(text)
        values[EVENT_COLUMNS.index("value")] = (
            None if event.get("value") is None else value_text(event["value"])
        )
    else:
        values = [None] * len(EVENT_COLUMNS) + [file, before + 1, text]
    schema = _schema()
    types = {f.name: f.type for f in schema} | {"value": pa.string(), "file": pa.string()}
    types |= {"line": pa.int64(), "malformed": pa.string()}
    arrays = [pa.array([v], types[name]) for name, v in zip(names, values, strict=True)]
    return pa.Table.from_arrays(arrays, names=names), verdict != "ok"
