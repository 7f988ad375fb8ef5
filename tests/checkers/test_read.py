"""Reading a history: its size as a check asks for it (a packed file is unpacked once per
version), a truncated or malformed line, and a small history read as one partition."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from checkers import read
from checkers.read import HistoryError
from checkers.run import check_run
from checkers.spark import check_history
from checkers.synthetic import synth
from contract.history import HistoryWriter
from contract.packed import pack_history, plain_size
from tests.checkers.histories import event


def test_a_packed_files_plain_size_is_unpacked_once_per_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = tmp_path / "run" / "history"
    synth(history, 300)
    sizes = read._sizes(history)
    plain = sum(sizes.values())
    packed = pack_history(history)
    unpacked: list[Path] = []

    def counted(path: Path) -> int:
        unpacked.append(path)
        return plain_size(path)

    monkeypatch.setattr(read, "plain_size", counted)
    read._plain_size.cache_clear()
    # The check's size, then whether its Parquet copy is fresh, then the copy's sidecar.
    assert [read.history_bytes(history) for _ in range(3)] == [plain] * 3
    assert sorted(unpacked) == sorted(p.resolve() for p in packed)

    unpacked.clear()
    # A file packed again is a new version: its size is unpacked again.
    again = packed[0].name.removesuffix(".zst")
    packed[0].unlink()
    (history / again).write_text('{"a": 1}\n')
    pack_history(history)
    assert read.history_bytes(history) == plain - sizes[again] + len('{"a": 1}\n')
    assert unpacked == [packed[0].resolve()]


@pytest.mark.spark
def test_truncated_last_line_is_skipped_and_counted(spark: Any, tmp_path: Path) -> None:
    history = tmp_path / "run" / "history"
    with HistoryWriter(history, "A", "rabbitmq") as w:
        w.write("invoke", "send", producer="A", seq=1, stream="x")
        w.write("ok", "send", producer="A", seq=1, stream="x")
    with HistoryWriter(history, "c", "rabbitmq") as w:
        w.write("ok", "receive", producer="A", seq=1, group="g", stream="g")
    with open(history / "A.jsonl", "a") as fh:
        fh.write('{"time": 3.0, "process": "A", "ty')  # a crash mid-write
    verdict = check_run(tmp_path / "run", spark=spark)
    assert verdict["truncated_lines"] == ["A.jsonl:3"]
    assert verdict["groups"]["g"]["lost"] == 0
    assert verdict["matched"] is True
    assert (tmp_path / "run" / "ids" / "g" / "lost.txt").read_text() == ""
    assert "truncated last lines skipped: 1" in (tmp_path / "run" / "summary.txt").read_text()


@pytest.mark.spark
def test_malformed_middle_line_names_file_and_line(spark: Any, tmp_path: Path) -> None:
    history = tmp_path / "history"
    history.mkdir()
    good = json.dumps(event("A", "invoke", "send", 1.0, producer="A", seq=1))
    (history / "A.jsonl").write_text(good + "\n{not json\n" + good + "\n")
    with pytest.raises(HistoryError, match=r"A\.jsonl:2: malformed history line"):
        check_history(spark, history, tmp_path / "ids")
    (history / "A.jsonl").write_text(good + "\n" + good.replace('"invoke"', '"maybe"') + "\n")
    with pytest.raises(HistoryError, match=r"A\.jsonl:2: .*type 'maybe'"):
        check_history(spark, history, tmp_path / "ids")


@pytest.mark.spark
def test_a_small_history_is_read_as_one_partition(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No grouping of a small history's events shuffles; a large one's does."""
    history = tmp_path / "history"
    synth(history, 200)

    def plan() -> str:
        events = read.read_history(spark, history).events
        return str(events.groupBy("process").count()._jdf.queryExecution().executedPlan())

    assert "Exchange" not in plan()
    monkeypatch.setattr(read, "SMALL_HISTORY_BYTES", read.history_bytes(history) - 1)
    assert "Exchange" in plan()
