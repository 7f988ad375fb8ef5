"""A run's complete id lists packed with its history; the anomalies' lists stay plain, and
every list reads the same either way."""

from __future__ import annotations

from pathlib import Path

import pytest

from checkers.ids import pack_complete_lists, read_ids

pytestmark = pytest.mark.unit


def test_the_complete_lists_pack_and_read_back_and_the_anomalies_stay_plain(
    tmp_path: Path,
) -> None:
    ids = tmp_path / "ids"
    (ids / "g").mkdir(parents=True)
    acked = [f"P1:{n}" for n in range(1, 5001)]
    (ids / "g" / "acked.txt").write_text("".join(f"{i}\n" for i in acked))
    (ids / "g" / "received.txt").write_text("P1:1\n")
    (ids / "g" / "lost.txt").write_text("P1:7\n")
    packed = pack_complete_lists(ids)
    assert sorted(p.name for p in packed) == ["acked.txt.zst", "received.txt.zst"]
    assert sorted(p.name for p in (ids / "g").iterdir()) == [
        "acked.txt.zst",
        "lost.txt",
        "received.txt.zst",
    ]
    assert read_ids(ids, "g", "acked") == acked and read_ids(ids, "g", "lost") == ["P1:7"]
    with pytest.raises(FileNotFoundError):
        read_ids(ids, "g", "unseen")
