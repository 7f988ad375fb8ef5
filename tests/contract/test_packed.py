"""The packed history: byte-exact round trips, a cut file read up to its last whole frame, an
interrupted pack that loses nothing, and `harness export --jsonl`."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from contract import packed
from contract.history import HistoryWriter
from contract.packed import (
    PACKED,
    PackError,
    frames,
    history_paths,
    pack_file,
    pack_history,
    plain_history,
    plain_size,
    read_bytes,
    read_lines,
    unpack_history,
)
from tests.helpers import ROOT

pytestmark = pytest.mark.unit


def _history(history: Path, sends: int = 500) -> None:
    """A producer's sends and a nemesis step (a `value` object), as clients write them."""
    with HistoryWriter(history, "P1", "kafka") as p1:
        for seq in range(1, sends + 1):
            p1.write("invoke", "send", producer="P1", seq=seq, stream="t")
            p1.write("ok", "send", producer="P1", seq=seq, stream="t", partition=0, offset=seq)
    with HistoryWriter(history, "nemesis", "kafka", keep_going=True) as nemesis:
        nemesis.write("invoke", "partition", value={"cut": ["kafka1"], "why": "ünïcode"})
        nemesis.write("ok", "partition", value={"cut": ["kafka1"]})


def _digests(files: list[Path]) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def test_a_packed_history_gives_back_every_byte(tmp_path: Path) -> None:
    history = tmp_path / "history"
    _history(history)
    before = _digests(sorted(history.glob("*.jsonl")))
    sizes = {p.name: p.stat().st_size for p in history.glob("*.jsonl")}
    packed_files = pack_history(history)
    assert sorted(p.name for p in packed_files) == ["P1.jsonl.zst", "nemesis.jsonl.zst"]
    assert not list(history.glob("*.jsonl")), "a packed file replaces its plain one"
    assert sum(p.stat().st_size for p in packed_files) < sum(sizes.values()) / 5
    assert {packed.plain_name(p): plain_size(p) for p in packed_files} == sizes
    step = json.loads(read_lines(history / "nemesis.jsonl.zst")[0])
    assert step["value"] == {"cut": ["kafka1"], "why": "ünïcode"}
    copy = unpack_history(history, tmp_path / "copy")
    assert _digests(copy) == before and list(history.glob(f"*{PACKED}"))
    in_place = unpack_history(history)
    assert _digests(in_place) == before and not list(history.glob(f"*{PACKED}"))


@pytest.mark.parametrize("damage", ["cut", "flipped byte"])
def test_a_damaged_packed_file_is_refused_and_salvaged_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    monkeypatch.setattr(packed, "FRAME_BYTES", 4096)  # many frames of a small history
    monkeypatch.setattr(packed, "READ_BYTES", 1000)  # frames spanning reads, reads many frames
    history = tmp_path / "history"
    _history(history)
    plain = (history / "P1.jsonl").read_bytes()
    target = pack_file(history / "P1.jsonl")
    whole = [content for content, ok in frames(target) if ok]
    assert len(whole) > 10 and b"".join(whole) == plain
    assert all(c.endswith(b"\n") for c in whole), "a frame holds whole lines"
    data = bytearray(target.read_bytes())
    if damage == "cut":  # a disk that filled under a copy
        data = data[: len(data) * 2 // 3]
    else:  # one byte flipped in the middle: the frame's checksum refuses it
        data[len(data) // 2] ^= 0x55
    target.write_bytes(bytes(data))
    with pytest.raises(PackError, match="damaged at frame"):
        read_bytes(target)
    with pytest.raises(PackError):
        unpack_history(history)
    assert target.exists(), "a damaged packed file is never replaced by less"
    kept = read_bytes(target, salvage=True)
    assert kept and plain.startswith(kept) and kept.endswith(b"\n")
    assert len(kept) < len(plain)


def test_a_line_longer_than_a_frame_stays_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(packed, "FRAME_BYTES", 64)
    plain = tmp_path / "A.jsonl"
    text = b'{"a":"' + b"x" * 300 + b'"}\n{"b":1}\n{"cut'  # and a last line cut by a crash
    plain.write_bytes(text)
    target = pack_file(plain)
    assert [c for c, _ in frames(target)] == [text[:-5], b'{"cut']
    assert read_bytes(target) == text


def test_an_interrupted_pack_loses_nothing(tmp_path: Path) -> None:
    history = tmp_path / "history"
    _history(history)
    plain = history / "P1.jsonl"
    original = plain.read_bytes()
    # Killed after the packed copy was renamed into place, before the plain file went: both.
    pack_file(plain)
    plain.write_bytes(original)
    (history / "nemesis.jsonl.zst.partial").write_bytes(b"half a frame")
    assert [p.name for p in history_paths(history)] == ["P1.jsonl", "nemesis.jsonl"]
    pack_history(history)
    assert sorted(p.name for p in history.iterdir()) == ["P1.jsonl.zst", "nemesis.jsonl.zst"]
    assert read_bytes(history / "P1.jsonl.zst") == original


def test_a_reader_that_needs_files_gets_plain_ones_and_they_go_after(tmp_path: Path) -> None:
    history = tmp_path / "history"
    _history(history)
    expected = _digests(sorted(history.glob("*.jsonl")))
    pack_file(history / "P1.jsonl")  # one packed, one plain
    with plain_history(history, tmp_path) as files, plain_history(history, tmp_path) as again:
        assert _digests(files) == expected == _digests(again)
        assert files[0].parent.parent == tmp_path and files[1].parent == history
        assert files[0].parent != again[0].parent, "two readers, two scratch folders"
    assert not list(tmp_path.glob(".history-plain-*"))


def test_export_gives_the_plain_history_back(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _history(run / "history")
    before = _digests(sorted((run / "history").glob("*.jsonl")))
    pack_history(run / "history")
    cli = [sys.executable, "-m", "harness.cli", "export", str(run)]
    copy = subprocess.run(
        [*cli, "--jsonl", "--to", str(tmp_path / "out")],
        cwd=ROOT,
        text=True,
        capture_output=True,
        timeout=60,
    )
    assert copy.returncode == 0, copy.stderr
    assert _digests(sorted((tmp_path / "out").glob("*.jsonl"))) == before
    in_place = subprocess.run(
        [*cli, "--jsonl"], cwd=ROOT, text=True, capture_output=True, timeout=60
    )
    assert in_place.returncode == 0 and "2 files" in in_place.stdout
    assert _digests(sorted((run / "history").glob("*.jsonl"))) == before
    bad = subprocess.run(
        [*cli[:-1], str(tmp_path / "nothing"), "--jsonl"],
        cwd=ROOT,
        text=True,
        capture_output=True,
        timeout=60,
    )
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0
    assert "no history" in bad.stderr
