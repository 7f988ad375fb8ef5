"""pyarrow's copy of a history is Spark's copy, row for row; anything unusual goes to Spark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from checkers import columnar
from checkers.read import HistoryError, parquet_path, write_parquet
from checkers.run import check_run
from tests.checkers.histories import event, recv, send, write

pytestmark = pytest.mark.spark


def _history(history: Path) -> None:
    """Every column type, nemesis values of several shapes, a Kafka receive with offsets, a
    file cut mid-line and one whose whole last line has no newline."""
    events = send("A", 1, 1.0, "ok") + send("A", 2, 2.0, "fail") + send("A", 3, 3.0, None)
    events += [
        recv("g", "A", 1, 4.0, partition=2, offset=17),
        recv("g", "A", 1, 4.5, redelivered=True),
        event("nemesis", "invoke", "start-partition", 1.5, value={"nodes": ["n1"], "op": "x"}),
        event("nemesis", "ok", "start-partition", 1.6, value="text"),
        event("nemesis", "ok", "leaders", 1.7, value=[1, 2], error='said "value": null'),
    ]
    write(history, events)
    with open(history / "c-g.jsonl", "a") as fh:
        fh.write('{"time": 9.0, "process": "c-g", "ty')  # cut by a crash
    with open(history / "A.jsonl", "a") as fh:
        fh.write(json.dumps(event("A", "info", "commit", 5.0)))  # whole, unterminated


def _rows(spark: Any, history: Path) -> list[dict[str, Any]]:
    rows = [r.asDict() for r in spark.read.parquet(str(parquet_path(history))).collect()]
    for r in rows:  # an object's keys in any order, any spacing
        if r["value"] and r["value"][0] in "[{":
            r["value"] = json.loads(r["value"])
    return sorted(rows, key=lambda r: (r["file"], r["line"]))


def test_the_columnar_copy_is_the_spark_copy(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _history(tmp_path / "run" / "history")
    history = tmp_path / "run" / "history"
    monkeypatch.setattr(columnar, "BLOCK", 300)  # several blocks per file
    write_parquet(spark, history)
    ours = _rows(spark, history)
    sidecar = json.loads((parquet_path(history) / "_brokerjepsen.json").read_text())
    assert sidecar["truncated_lines"] == ["c-g.jsonl:3"]
    with monkeypatch.context() as m:
        m.setattr(columnar, "available", lambda: False)
        (parquet_path(history) / "_brokerjepsen.json").unlink()
        write_parquet(spark, history)
    assert _rows(spark, history) == ours
    assert [r["line"] for r in ours if r["file"] == "A.jsonl"] == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize(
    "bad",
    [
        "\n",
        '{"time": 1, "process": "A", "type": "ok", "f": "send", "msg_id": "A:1", "seq": "1"}\n',
        '{"time": 1, "process": "A", "type": "done", "f": "send", "msg_id": "A:1"}\n',
        '{"time": 1, "process": "A", "type": "ok", "f": "send"}\n',
    ],
)
def test_what_pyarrow_cannot_read_plainly_is_left_to_spark(tmp_path: Path, bad: str) -> None:
    history = tmp_path / "history"
    write(history, send("A", 1, 1.0, "ok"))
    with open(history / "A.jsonl", "a") as fh:
        fh.write(bad)
    with pytest.raises(columnar.NotPlain):
        columnar.copy(sorted(history.glob("*.jsonl")), tmp_path / "copy")


def test_a_malformed_line_is_still_named(spark: Any, tmp_path: Path) -> None:
    run = tmp_path / "run"
    write(run / "history", send("A", 1, 1.0, "ok") + send("A", 2, 2.0, "ok"))
    lines = (run / "history" / "A.jsonl").read_text().splitlines()
    lines.insert(1, '{"time": "soon", "process": "A", "type": "ok", "f": "x"}')
    (run / "history" / "A.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(HistoryError, match=r"A\.jsonl:2: malformed history line"):
        check_run(run, spark=spark)
