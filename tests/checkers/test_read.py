"""The history's size as a check asks for it: a packed file is unpacked once per version."""

from __future__ import annotations

from pathlib import Path

import pytest

from checkers import read
from checkers.synthetic import synth
from contract.packed import pack_history, plain_size


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
