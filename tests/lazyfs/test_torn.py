"""Torn writes, apart from any mount: the durable image fed calls as the filesystem would feed
them, then torn as a power loss tears it (what a real mount does is in test_disk_faults.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lazyfs.durable import Durable, restore
from lazyfs.injected import SECTOR, Faults, Torn, torn_write

LOG = "jepsen-0/00.log"


class Disk:
    """A live tree and its durable image, written to as the filesystem would (no FUSE): each
    write goes to the live file and is told to the image."""

    def __init__(self, base: Path) -> None:
        self.live, self.store = base / "live", base / "store"
        (self.live / "jepsen-0").mkdir(parents=True)
        self.durable = Durable(self.live, self.store, commit_interval=0, writeback_after=0)
        self.fds: dict[str, int] = {}

    def write(self, rel: str, data: bytes, at: int | None = None) -> None:
        if rel not in self.fds:
            fd = os.open(self.live / rel, os.O_RDWR | os.O_CREAT, 0o644)
            self.durable.created(os.fstat(fd).st_ino)
            self.fds[rel] = fd
        fd = self.fds[rel]
        offset = os.fstat(fd).st_size if at is None else at
        os.pwrite(fd, data, offset)
        self.durable.wrote(os.fstat(fd).st_ino, rel, offset, len(data))

    def fsync(self, rel: str) -> None:
        fd = self.fds[rel]
        self.durable.fsync_file(os.fstat(fd).st_ino, fd)

    def power_loss(self, faults: Faults) -> tuple[list[dict[str, object]], dict[str, int]]:
        """The daemon's end (lazyfs.__main__): torn writes, then the toll; the live tree
        rebuilt from the image."""

        def kept(path: str, length: int) -> int | None:
            rule = faults.torn_keep(path)
            return rule.kept(length) if rule else None

        torn = self.durable.tear(kept)
        toll = self.durable.unsynced()
        for fd in self.fds.values():
            os.close(fd)
        restore(self.live, self.store)
        return torn, toll


@pytest.fixture
def disk(tmp_path: Path) -> Disk:
    d = Disk(tmp_path)
    d.write(LOG, b"synced|")
    d.fsync(LOG)
    return d


def test_without_a_rule_every_unsynced_write_is_dropped(disk: Disk) -> None:
    disk.write(LOG, b"a" * 100)
    disk.write(LOG, b"b" * 100)
    torn, toll = disk.power_loss(Faults())
    assert torn == []
    assert toll["bytes"] == 200
    assert (disk.live / LOG).read_bytes() == b"synced|"


def test_a_torn_append_keeps_the_earlier_writes_and_a_prefix_of_the_last(disk: Disk) -> None:
    disk.write(LOG, b"a" * 100)
    disk.write(LOG, b"b" * 3000)
    torn, toll = disk.power_loss(torn_write("*.log", keep=0.5))
    # Half of 3000 is 1500, down to whole sectors: 1024.
    assert torn == [{"file": LOG, "offset": 107, "length": 3000, "kept": 1024}]
    assert toll["files"] == 0  # nothing of that file is dropped whole any more
    assert (disk.live / LOG).read_bytes() == b"synced|" + b"a" * 100 + b"b" * 1024


def test_a_torn_write_inside_a_file_keeps_the_old_bytes_past_its_cut(disk: Disk) -> None:
    disk.write(LOG, b"0123456789")
    disk.fsync(LOG)
    disk.write(LOG, b"XXXX", at=9)
    torn, _ = disk.power_loss(torn_write("*", keep=0.5))
    assert torn == [{"file": LOG, "offset": 9, "length": 4, "kept": 2}]
    assert (disk.live / LOG).read_bytes() == b"synced|01XX456789"


def test_only_the_files_the_glob_matches_tear(disk: Disk) -> None:
    disk.write("jepsen-0/00.index", b"i" * 10)
    disk.fsync("jepsen-0/00.index")  # its name committed, as the log's is
    disk.write("jepsen-0/00.index", b"j" * 10)
    disk.write(LOG, b"l" * 10)
    torn, toll = disk.power_loss(torn_write("*.log", keep=0.5))
    assert [t["file"] for t in torn] == [LOG]
    assert toll == {"files": 1, "bytes": 10, "journal": 0}
    assert (disk.live / "jepsen-0/00.index").read_bytes() == b"i" * 10
    assert (disk.live / LOG).read_bytes() == b"synced|" + b"l" * 5


@pytest.mark.parametrize(
    ("keep", "length", "kept"),
    [
        (0.5, 3000, 1024),
        (0.5, 100, 50),
        (0.2, 4096, 512),
        (0.1, 4096, 409),
        (0.99, 10, 9),
        (0.01, 10, 1),
        (0.5, 1, 0),
    ],
)
def test_what_a_tear_keeps_is_some_but_not_all_in_whole_sectors(
    keep: float, length: int, kept: int
) -> None:
    assert Torn(keep=keep).kept(length) == kept
    assert SECTOR == 512
