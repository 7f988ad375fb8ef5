"""Corruption at rest, on a lazy disk's directories without a mount: which files a glob takes,
which bytes change and how, that the durable image is damaged alike, that a seed replays, and
that nothing outside the data directory is touched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lazyfs.corrupt import Corruption, corrupt, matching_files
from lazyfs.durable import NAMESPACE

SEGMENT = "jepsen-0/00000000000000000000.log"


def disk(tmp_path: Path) -> tuple[Path, Path]:
    """A live tree with a segment, an index and a metadata file, and a durable image holding
    the segment (committed as id 1) but not the index."""
    live, store = tmp_path / "live", tmp_path / "store"
    (live / "jepsen-0").mkdir(parents=True)
    (live / SEGMENT).write_bytes(bytes(range(64)))
    (live / "jepsen-0/00000000000000000000.index").write_bytes(b"\x01" * 16)
    (live / "meta.properties").write_text("node.id=1\n")
    (live / "empty.log").write_bytes(b"")
    (store / "files").mkdir(parents=True)
    (store / "files" / "1").write_bytes(bytes(range(32)))  # the synced half of the segment
    namespace = {"next_id": 1, "dirs": {}, "files": {SEGMENT: {"id": "1"}}, "links": {}}
    (store / NAMESPACE).write_text(json.dumps(namespace))
    return live, store


def test_the_glob_takes_regular_non_empty_files_and_spans_directories(tmp_path: Path) -> None:
    live, _ = disk(tmp_path)
    (live / "link.log").symlink_to(live / SEGMENT)
    assert matching_files(live, "*.log") == [SEGMENT]
    assert matching_files(live, "jepsen-0/*") == [
        "jepsen-0/00000000000000000000.index",
        SEGMENT,
    ]
    assert matching_files(live, "*.wal") == []


def test_a_flip_changes_one_bit_of_each_byte_live_and_durable_and_says_which(
    tmp_path: Path,
) -> None:
    live, store = disk(tmp_path)
    changes = corrupt(live, store, Corruption("*.log", seed=3, length=4, offset=10))
    assert len(changes) == 1
    (c,) = changes
    assert (c["file"], c["offset"], c["size"]) == (SEGMENT, 10, 64)
    old, new = bytes.fromhex(c["old"]), bytes.fromhex(c["new"])
    assert old == bytes(range(10, 14))
    assert all(bin(a ^ b).count("1") == 1 for a, b in zip(old, new, strict=True))
    data = (live / SEGMENT).read_bytes()
    assert data[10:14] == new and data[:10] + data[14:] == bytes(range(10)) + bytes(range(14, 64))
    # The durable copy holds the same bytes there: the same change.
    assert c["durable"] == {"old": c["old"], "new": c["new"]}
    assert (store / "files" / "1").read_bytes()[10:14] == new
    assert (live / "meta.properties").read_text() == "node.id=1\n"


def test_a_span_past_the_durable_copy_changes_the_live_file_alone(tmp_path: Path) -> None:
    live, store = disk(tmp_path)
    (c,) = corrupt(live, store, Corruption("*.log", seed=1, length=8, offset=-8, how="zero"))
    assert (c["offset"], c["new"]) == (56, "00" * 8)
    assert "durable" not in c
    assert (live / SEGMENT).read_bytes()[56:] == bytes(8)
    assert (store / "files" / "1").read_bytes() == bytes(range(32))


def test_the_same_seed_over_the_same_files_changes_the_same_bytes(tmp_path: Path) -> None:
    spec = Corruption("jepsen-0/*", seed=42, files=2, length=3, how="random")
    first = corrupt(*disk(tmp_path / "a"), spec)
    again = corrupt(*disk(tmp_path / "b"), spec)
    assert first == again
    assert len(first) == 2
    other = corrupt(*disk(tmp_path / "c"), Corruption("jepsen-0/*", seed=43, files=2, length=3))
    assert other != first


def test_a_span_is_cut_at_the_end_of_a_short_file_and_an_offset_past_it_is_skipped(
    tmp_path: Path,
) -> None:
    live, store = disk(tmp_path)
    (c,) = corrupt(live, store, Corruption("*.index", seed=0, length=100, how="zero"))
    assert (c["offset"], c["new"]) == (0, "00" * 16)
    (skipped,) = corrupt(live, store, Corruption("*.index", seed=0, offset=500))
    assert skipped["skipped"] and "new" not in skipped


def test_no_matching_file_changes_nothing(tmp_path: Path) -> None:
    live, store = disk(tmp_path)
    assert corrupt(live, store, Corruption("*.wal", seed=0)) == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"path": "/etc/passwd"},
        {"path": "../../etc/*"},
        {"path": "*.log", "files": 0},
        {"path": "*.log", "length": 0},
        {"path": "*.log", "how": "shred"},
    ],
)
def test_a_corruption_outside_the_data_directory_or_of_nothing_is_refused(
    kwargs: dict[str, object],
) -> None:
    with pytest.raises(ValueError):
        Corruption(seed=0, **kwargs)  # type: ignore[arg-type]


def test_each_node_draws_from_its_own_seed_and_the_same_one_every_time() -> None:
    spec = Corruption("*.log", seed=5)
    assert spec.for_node("kafka1") == spec.for_node("kafka1")
    assert spec.for_node("kafka1").seed != spec.for_node("kafka2").seed
    assert spec.for_node("kafka1").path == "*.log"
