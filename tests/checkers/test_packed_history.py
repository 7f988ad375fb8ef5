"""The checker on a packed history (contract.packed): the same verdict as from the plain JSONL,
to the id, a cut last line still counted, a malformed line still named by file and line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from checkers.read import PARQUET, HistoryError
from checkers.run import check_run
from checkers.synthetic import synth
from contract.packed import pack_history

pytestmark = pytest.mark.spark


def _answer(verdict: dict[str, Any]) -> dict[str, Any]:
    """A verdict without what says how and when it was checked."""
    return {k: v for k, v in verdict.items() if k != "checker"}


def _ids(run: Path) -> dict[str, str]:
    return {str(p.relative_to(run)): p.read_text() for p in sorted((run / "ids").rglob("*.txt"))}


def test_a_packed_history_gets_the_verdict_of_its_plain_one(spark: Any, tmp_path: Path) -> None:
    plain, packed = tmp_path / "plain", tmp_path / "packed"
    synth(plain / "history", 3000)
    with open(plain / "history" / "P.jsonl", "a") as fh:
        fh.write('{"time": 9.0e9, "process": "P", "ty')  # a crash mid-write
    shutil.copytree(plain, packed)
    expected = check_run(plain, spark=spark)
    assert expected["truncated_lines"] == ["P.jsonl:6001"]
    assert expected["groups"]["g1"]["lost"] > 0, "the synthetic history plants losses"

    pack_history(packed / "history")
    first = check_run(packed, spark=spark)  # made its Parquet copy from the packed files
    assert _answer(first) == _answer(expected)
    assert _ids(packed) == _ids(plain)
    assert not list(packed.glob(".history-plain-*")), "the unpacked copies are removed"
    made = (packed / PARQUET / "_SUCCESS").stat().st_mtime_ns
    again = check_run(packed, spark=spark)  # the copy is fresh for the packed files
    assert (packed / PARQUET / "_SUCCESS").stat().st_mtime_ns == made
    assert _answer(again) == _answer(expected)


def test_a_copy_made_before_the_pack_stays_fresh(spark: Any, tmp_path: Path) -> None:
    run = tmp_path / "run"
    synth(run / "history", 500)
    check_run(run, spark=spark)
    sidecar = json.loads((run / PARQUET / "_brokerjepsen.json").read_text())
    pack_history(run / "history")
    assert check_run(run, spark=spark)["checker"]["history"] == "parquet"
    assert json.loads((run / PARQUET / "_brokerjepsen.json").read_text()) == sidecar


def test_a_malformed_line_of_a_packed_history_is_named(spark: Any, tmp_path: Path) -> None:
    run = tmp_path / "run"
    synth(run / "history", 50)
    lines = (run / "history" / "P.jsonl").read_text().splitlines(keepends=True)
    lines[3] = "{not json\n"
    (run / "history" / "P.jsonl").write_text("".join(lines))
    pack_history(run / "history")
    with pytest.raises(HistoryError, match=r"P\.jsonl:4: malformed history line"):
        check_run(run, spark=spark)
    assert not list(run.glob(".history-plain-*"))
