"""Disk faults on a real FUSE mount: the calls an ordinary program makes see exactly the errno
injected (EIO, ENOSPC), a full disk's statfs says so, and mending the disk ends it."""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from compose.disks import LazyDisks, leftover_mounts
from lazyfs.corrupt import Corruption
from lazyfs.injected import FAULTS, Faults, disk_full, read_faults, write_faults
from tests.conftest import missing

pytestmark = pytest.mark.root

NODE = "n1"


@pytest.fixture
def disks(tmp_path: Path) -> Iterator[LazyDisks]:
    """One lazy disk, mounted, with a file already written and synced; unmounted whatever the
    test did."""
    if not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None:
        missing("no /dev/fuse or fusermount3 (make setup installs Debian's fuse3)")
    if os.geteuid() != 0:
        missing("the lazy filesystem mounts with allow_other, which needs root")
    disks = LazyDisks(tmp_path, [NODE])
    # What an earlier daemon was told: a new one starts with no faults.
    store = disks.disks[NODE].store
    store.mkdir(parents=True)
    write_faults(store, disk_full())
    try:
        disks.mount_all()
        append(disks.mountpoint(NODE) / "log", b"first", fsync=True)
        yield disks
    finally:
        disks.unmount_all()
        assert disks.mountpoint(NODE) not in leftover_mounts()


def append(path: Path, data: bytes, fsync: bool = False) -> None:
    """One write(2) (and fsync(2)), unbuffered: an error is the call's own."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def errno_of(act: Callable[[], object]) -> int | None:
    try:
        act()
    except OSError as e:
        return e.errno
    return None


def test_a_disk_error_on_write_fails_write_with_eio_and_changes_nothing(disks: LazyDisks) -> None:
    log = disks.mountpoint(NODE) / "log"
    disks.disk_error([NODE], "write", "*", 1.0)
    assert errno_of(lambda: append(log, b" second")) == errno.EIO
    assert errno_of(lambda: append(log, b"", fsync=True)) is None  # only writes fail
    assert log.read_bytes() == b"first"
    disks.disk_ok([NODE])
    append(log, b" second", fsync=True)
    assert log.read_bytes() == b"first second"


def test_a_full_disk_refuses_writes_and_new_files_and_says_it_is_full(disks: LazyDisks) -> None:
    m = disks.mountpoint(NODE)
    assert os.statvfs(m).f_bavail > 0
    disks.disk_full([NODE])
    st = os.statvfs(m)
    assert (st.f_bavail, st.f_bfree) == (0, 0)
    assert errno_of(lambda: append(m / "log", b" more")) == errno.ENOSPC
    assert errno_of(lambda: append(m / "new", b"")) == errno.ENOSPC
    assert errno_of(lambda: os.mkdir(m / "dir")) == errno.ENOSPC
    assert (m / "log").read_bytes() == b"first"  # reads go on
    assert not (m / "new").exists()
    disks.disk_ok()
    assert os.statvfs(m).f_bavail > 0
    append(m / "new", b"fits", fsync=True)
    assert (m / "new").read_bytes() == b"fits"


def test_a_failed_fsync_makes_nothing_durable_and_the_fault_outlives_a_power_loss(
    disks: LazyDisks,
) -> None:
    log = disks.mountpoint(NODE) / "log"
    disks.disk_error([NODE], "fsync", "*", 1.0)
    assert errno_of(lambda: append(log, b" unsynced", fsync=True)) == errno.EIO
    disks.power_loss(NODE)
    assert log.read_bytes() == b"first"
    assert errno_of(lambda: append(log, b" again", fsync=True)) == errno.EIO  # still failing
    disks.disk_ok([NODE])
    append(log, b"", fsync=True)  # the write went through before: now it is made durable
    disks.power_loss(NODE)
    assert log.read_bytes() == b"first again"


def test_a_read_error_fails_only_the_files_its_glob_matches(disks: LazyDisks) -> None:
    m = disks.mountpoint(NODE)
    append(m / "segment.log", b"records", fsync=True)
    disks.disk_error([NODE], "read", "*.log", 1.0)
    assert errno_of((m / "segment.log").read_bytes) == errno.EIO  # a new open: no page cache
    assert (m / "log").read_bytes() == b"first"
    disks.disk_ok([NODE])
    assert (m / "segment.log").read_bytes() == b"records"
    assert read_faults(disks.disks[NODE].store / FAULTS) == Faults()


def test_a_power_loss_tears_the_last_unsynced_write_of_a_matching_file_until_mended(
    disks: LazyDisks,
) -> None:
    m = disks.mountpoint(NODE)
    append(m / "other", b"x", fsync=True)
    disks.torn_write([NODE], "log", 0.5)
    append(m / "log", b"a" * 100)
    append(m / "log", b"b" * 3000)  # one write(2), one FUSE write: the one that tears
    append(m / "other", b"y" * 10)  # not matched: dropped whole, as ever
    dropped = disks.power_loss(NODE)
    assert dropped["torn"] == [{"file": "log", "offset": 105, "length": 3000, "kept": 1024}]
    assert (m / "log").read_bytes() == b"first" + b"a" * 100 + b"b" * 1024
    assert (m / "other").read_bytes() == b"x"
    # The rule outlives the power loss, as the other faults do, until a disk-ok.
    append(m / "log", b"c" * 10)
    assert disks.power_loss(NODE)["torn"][0]["kept"] == 5
    disks.disk_ok([NODE])
    append(m / "log", b"d" * 10)
    assert "torn" not in disks.power_loss(NODE)
    assert (m / "log").read_bytes() == b"first" + b"a" * 100 + b"b" * 1024 + b"c" * 5


def test_corrupted_bytes_are_read_through_the_mount_and_survive_a_power_loss(
    disks: LazyDisks,
) -> None:
    m = disks.mountpoint(NODE)
    assert (m / "log").read_bytes() == b"first"  # in the kernel's page cache now
    spec = Corruption("log", seed=1, offset=1, length=2, how="zero")
    (change,) = disks.corrupt(NODE, spec)
    assert (change["file"], change["old"], change["new"]) == ("log", b"ir".hex(), "0000")
    assert change["durable"] == {"old": b"ir".hex(), "new": "0000"}
    assert (m / "log").read_bytes() == b"f\0\0st"  # a new open drops the cached pages
    disks.power_loss(NODE)
    assert (m / "log").read_bytes() == b"f\0\0st"
