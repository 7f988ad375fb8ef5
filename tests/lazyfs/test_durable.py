"""The power-loss filesystem on a real FUSE mount: what survives a power loss and what does not.

Semantics (lazyfs/durable.py): ext4 data=ordered with delayed allocation at its worst moment.
Data is durable once its file is fsynced; names (create, rename, unlink) once any fsync commits
the one journal; a file renamed over another gets its data written with that commit.
"""

from __future__ import annotations

import mmap
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from compose.disks import LazyDisk, leftover_mounts
from tests.conftest import missing

pytestmark = pytest.mark.root


def mounted(base: Path, commit_interval: float, writeback_after: float) -> Iterator[LazyDisk]:
    if not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None:
        missing("no /dev/fuse or fusermount3 (make setup installs Debian's fuse3)")
    if os.geteuid() != 0:
        missing("the lazy filesystem mounts with allow_other, which needs root")
    d = LazyDisk(base, commit_interval=commit_interval, writeback_after=writeback_after)
    d.mount()
    yield d
    d.unmount()
    assert d.mnt not in leftover_mounts()


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[LazyDisk]:
    """The worst moment: nothing is written back or committed unless fsynced."""
    yield from mounted(tmp_path / "disk", commit_interval=0, writeback_after=0)


@pytest.fixture
def writeback_disk(tmp_path: Path) -> Iterator[LazyDisk]:
    """The kernel's background work, sped up: commit every 1 s, write back after 2 s."""
    yield from mounted(tmp_path / "disk", commit_interval=1, writeback_after=2)


def write(path: Path, data: bytes, fsync: bool) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        if fsync:
            os.fsync(f.fileno())


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def test_fsynced_data_survives_and_the_rest_is_gone(disk: LazyDisk) -> None:
    m = disk.mnt
    write(m / "other", b"written, never synced", fsync=False)
    with open(m / "log", "wb") as f:
        f.write(b"acknowledged")
        f.flush()
        os.fsync(f.fileno())
        f.write(b" and then some")  # page cache only
    write(m / "after", b"", fsync=False)
    assert (m / "log").read_bytes() == b"acknowledged and then some"  # readable before the loss

    dropped = disk.power_loss()

    assert (m / "log").read_bytes() == b"acknowledged"
    # `other`'s name was committed with log's fsync (one journal); its data never was.
    assert (m / "other").read_bytes() == b""
    assert not (m / "after").exists()  # created after the last commit
    assert dropped == {"files": 2, "bytes": len(b" and then some") + 21, "journal": 1}


def test_a_file_nobody_synced_anything_after_is_gone(disk: LazyDisk) -> None:
    write(disk.mnt / "a", b"x", fsync=False)
    disk.power_loss()
    assert not (disk.mnt / "a").exists()


def test_rename_without_directory_fsync_is_lost_until_the_journal_commits(disk: LazyDisk) -> None:
    m = disk.mnt
    write(m / "checkpoint.tmp", b"offsets 42", fsync=True)
    os.rename(m / "checkpoint.tmp", m / "checkpoint")
    disk.power_loss()
    # ext4: the rename sat in an uncommitted journal transaction.
    assert (m / "checkpoint.tmp").read_bytes() == b"offsets 42"
    assert not (m / "checkpoint").exists()

    os.rename(m / "checkpoint.tmp", m / "checkpoint")
    fsync_dir(m)
    disk.power_loss()
    assert (m / "checkpoint").read_bytes() == b"offsets 42"
    assert not (m / "checkpoint.tmp").exists()


def test_replace_by_rename_writes_the_new_data_with_the_commit(disk: LazyDisk) -> None:
    """ext4's auto_da_alloc: renaming over a file flushes the new one's data at commit."""
    m = disk.mnt
    write(m / "state", b"old", fsync=True)
    write(m / "state.tmp", b"new", fsync=False)
    os.rename(m / "state.tmp", m / "state")
    disk.power_loss()
    assert (m / "state").read_bytes() == b"old"  # nothing committed the rename

    write(m / "state.tmp", b"new", fsync=False)
    os.rename(m / "state.tmp", m / "state")
    write(m / "unrelated", b"", fsync=True)  # any fsync commits the journal
    disk.power_loss()
    assert (m / "state").read_bytes() == b"new"


def test_unlink_and_truncate_need_a_sync_too(disk: LazyDisk) -> None:
    m = disk.mnt
    write(m / "segment", b"0123456789", fsync=True)
    write(m / "deleted", b"kept", fsync=True)
    os.unlink(m / "deleted")
    os.truncate(m / "segment", 4)
    disk.power_loss()
    assert (m / "deleted").read_bytes() == b"kept"
    assert (m / "segment").read_bytes() == b"0123456789"

    os.unlink(m / "deleted")
    with open(m / "segment", "r+b") as f:
        f.truncate(4)
        os.fsync(f.fileno())
    disk.power_loss()
    assert (m / "segment").read_bytes() == b"0123"
    assert not (m / "deleted").exists()  # segment's fsync committed the unlink


def test_mapped_writes_survive_only_once_msynced(disk: LazyDisk) -> None:
    """Kafka's offset and time indexes are memory-mapped; msync is their fsync."""
    m = disk.mnt
    write(m / "index", b"\0" * 8192, fsync=True)
    with open(m / "index", "r+b") as f, mmap.mmap(f.fileno(), 8192) as mapped:
        mapped[0:4] = b"SYNC"
        mapped.flush()  # msync
        mapped[4096:4100] = b"LOST"
    disk.power_loss()
    data = (m / "index").read_bytes()
    assert data[0:4] == b"SYNC" and data[4096:4100] == b"\0\0\0\0"


def test_owners_modes_and_directories_come_back(disk: LazyDisk) -> None:
    m = disk.mnt
    (m / "mnesia" / "node").mkdir(parents=True)
    write(m / "mnesia" / "node" / "msg_store", b"m", fsync=True)
    os.chown(m / "mnesia", 999, 999)
    os.chmod(m / "mnesia" / "node" / "msg_store", 0o640)
    fsync_dir(m / "mnesia")
    disk.power_loss()
    st = os.stat(m / "mnesia")
    assert (st.st_uid, st.st_gid) == (999, 999)
    assert os.stat(m / "mnesia" / "node" / "msg_store").st_mode & 0o777 == 0o640
    assert (m / "mnesia" / "node" / "msg_store").read_bytes() == b"m"


def test_appends_after_a_loss_go_on_from_the_durable_end(disk: LazyDisk) -> None:
    m = disk.mnt
    with open(m / "wal", "ab") as f:
        f.write(b"one;")
        f.flush()
        os.fsync(f.fileno())
        f.write(b"two;")
    disk.power_loss()
    with open(m / "wal", "ab") as f:
        f.write(b"three;")
        f.flush()
        os.fsync(f.fileno())
    disk.power_loss()
    assert (m / "wal").read_bytes() == b"one;three;"


def test_fsync_while_other_threads_rename_and_unlink(disk: LazyDisk) -> None:
    """A broker checkpoints (write, fsync, rename) in one thread while another fsyncs its log:
    no fsync may fail because a name changed under the journal commit."""
    m = disk.mnt
    errors: list[BaseException] = []

    def checkpoints(worker: int) -> None:
        try:
            for i in range(150):
                tmp, final = m / f"cp{worker}.tmp", m / f"cp{worker}"
                write(tmp, str(i).encode(), fsync=False)
                os.rename(tmp, final)
                write(m / f"seg{worker}-{i}", b"x", fsync=False)
                if i >= 2:
                    os.unlink(m / f"seg{worker}-{i - 2}")
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    def fsyncs() -> None:
        try:
            with open(m / "log", "ab") as f:
                for _ in range(300):
                    f.write(b"record")
                    f.flush()
                    os.fsync(f.fileno())
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    threads = [threading.Thread(target=checkpoints, args=(w,)) for w in range(2)]
    threads.append(threading.Thread(target=fsyncs))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    disk.power_loss()
    assert (m / "log").read_bytes() == b"record" * 300


def test_background_writeback_keeps_what_is_old_enough(writeback_disk: LazyDisk) -> None:
    """Linux writes back data dirty for 30 s and ext4 commits every 5 s (here 2 s and 1 s):
    what was written long enough before the power loss survives it without an fsync, what was
    written just before it does not."""
    m = writeback_disk.mnt
    write(m / "bootstrap.checkpoint", b"written once, never synced", fsync=False)
    time.sleep(4.5)  # past the writeback age, and a tick and a commit after it
    write(m / "recent", b"just now", fsync=False)
    with open(m / "bootstrap.checkpoint", "ab") as f:
        f.write(b" + a late append")
    writeback_disk.power_loss()
    assert (m / "bootstrap.checkpoint").read_bytes() == b"written once, never synced"
    assert not (m / "recent").exists()
