"""The lazy filesystem: a FUSE passthrough to a live directory that tells `Durable` what an
fsync would make durable (mfusepy over Debian's libfuse3).

The broker sees an ordinary filesystem; what it wrote stays readable until a power loss
(`compose.disks`) unmounts it and rebuilds the live directory from the durable image. Until
then the harness may make its calls fail (`lazyfs.injected`): a call that fails does nothing,
so a failed write leaves the file as it was and a failed fsync makes nothing durable.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mfusepy

from lazyfs.durable import Durable
from lazyfs.injected import Injector

log = logging.getLogger("lazyfs")

_STAT_KEYS = (
    "st_mode",
    "st_ino",
    "st_nlink",
    "st_uid",
    "st_gid",
    "st_size",
    "st_atime_ns",
    "st_mtime_ns",
    "st_ctime_ns",
    "st_blocks",
    "st_blksize",
)


class LazyFS(mfusepy.Operations):  # type: ignore[misc]
    use_ns = True  # utimens in nanoseconds

    def __init__(self, live: Path, durable: Durable, injector: Injector | None = None) -> None:
        self.live = str(live)
        self.durable = durable
        self.injector = injector

    def _path(self, path: str) -> str:
        return self.live + path

    def _unless_injected(self, call: str, path: str) -> None:
        """Fails the call with the errno the harness injected for it, if any."""
        if self.injector is not None:
            code = self.injector.error(call, (path or "").lstrip("/"))
            if code is not None:
                raise mfusepy.FuseOSError(code)

    def _owned_by_caller(self, full: str) -> None:
        """The daemon runs as root: what it creates belongs to the process that asked."""
        uid, gid, _ = mfusepy.fuse_get_context()
        os.lchown(full, uid, gid)

    # ---- attributes and directories -----------------------------------------------------------

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        st = os.fstat(fh) if fh is not None else os.lstat(self._path(path))
        out = {k: getattr(st, k) for k in _STAT_KEYS}
        for k in ("st_atime", "st_mtime", "st_ctime"):  # mfusepy takes ns under these names
            out[k] = out.pop(k + "_ns")
        return out

    def access(self, path: str, amode: int) -> int:
        if not os.access(self._path(path), amode):
            raise mfusepy.FuseOSError(errno.EACCES)
        return 0

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *os.listdir(self._path(path))]

    def readlink(self, path: str) -> str:
        return os.readlink(self._path(path))

    def statfs(self, path: str) -> dict[str, int]:
        st = os.statvfs(self._path(path))
        keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files")
        out = {k: getattr(st, k) for k in (*keys, "f_flag", "f_frsize", "f_namemax")}
        if self.injector is not None and self.injector.full:
            out["f_bavail"] = out["f_bfree"] = 0  # what df and a broker's disk monitor read
        return out

    # ---- metadata: the journal ----------------------------------------------------------------

    # Each change of names holds the journal's lock, so that a commit (an fsync in another
    # thread) walks a tree nobody is changing under it.

    def mkdir(self, path: str, mode: int) -> int:
        self._unless_injected("create", path)
        full = self._path(path)
        with self.durable.lock:
            os.mkdir(full, mode)
            self._owned_by_caller(full)
            self.durable.metadata_changed()
        return 0

    def rmdir(self, path: str) -> int:
        with self.durable.lock:
            os.rmdir(self._path(path))
            self.durable.metadata_changed()
        return 0

    def unlink(self, path: str) -> int:
        with self.durable.lock:
            os.unlink(self._path(path))
            self.durable.metadata_changed()
        return 0

    def symlink(self, target: str, source: str) -> int:
        self._unless_injected("create", target)
        full = self._path(target)
        with self.durable.lock:
            os.symlink(source, full)
            self._owned_by_caller(full)
            self.durable.metadata_changed()
        return 0

    def rename(self, old: str, new: str) -> int:
        with self.durable.lock:
            ino = os.lstat(self._path(old)).st_ino
            replaced = os.path.lexists(self._path(new))
            os.rename(self._path(old), self._path(new))
            self.durable.renamed(ino, new.lstrip("/"), replaced)
        return 0

    def link(self, target: str, source: str) -> int:
        with self.durable.lock:
            os.link(self._path(source), self._path(target))
            self.durable.metadata_changed()
        return 0

    def chmod(self, path: str, mode: int) -> int:
        with self.durable.lock:
            os.chmod(self._path(path), mode)
            self.durable.metadata_changed()
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        with self.durable.lock:
            os.lchown(self._path(path), uid, gid)
            self.durable.metadata_changed()
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        if times is None:
            os.utime(self._path(path), follow_symlinks=False)
        else:
            os.utime(self._path(path), ns=times, follow_symlinks=False)
        return 0

    # ---- files --------------------------------------------------------------------------------

    def create(self, path: str, mode: int, fi: Any = None) -> int:
        self._unless_injected("create", path)
        full = self._path(path)
        with self.durable.lock:
            fd = os.open(full, os.O_RDWR | os.O_CREAT | os.O_TRUNC, mode)
            self._owned_by_caller(full)
            self.durable.created(os.fstat(fd).st_ino)
        return fd

    def open(self, path: str, flags: int) -> int:
        # Opened read-write whatever was asked: fsync reads back what it must write back. No
        # O_APPEND: the kernel hands every write its offset (the end, for an appending writer).
        access = os.O_RDWR if flags & (os.O_WRONLY | os.O_RDWR) else os.O_RDONLY
        fd = os.open(self._path(path), access)
        if flags & os.O_TRUNC:
            os.ftruncate(fd, 0)
            self.durable.resized(os.fstat(fd).st_ino, path.lstrip("/"))
        return fd

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        self._unless_injected("read", path)
        return os.pread(fh, size, offset)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        self._unless_injected("write", path)
        written = os.pwrite(fh, data, offset)
        self.durable.wrote(os.fstat(fh).st_ino, path.lstrip("/"), offset, written)
        return written

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        if fh is not None:
            os.ftruncate(fh, length)
            ino = os.fstat(fh).st_ino
        else:
            full = self._path(path)
            os.truncate(full, length)
            ino = os.lstat(full).st_ino
        self.durable.resized(ino, path.lstrip("/"))
        return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        self._unless_injected("fsync", path)
        return _said_if_failed(
            f"fsync {path}", lambda: self.durable.fsync_file(os.fstat(fh).st_ino, fh)
        )

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        self._unless_injected("fsync", path)
        return _said_if_failed(f"fsync of directory {path}", self.durable.fsync_dir)

    def flush(self, path: str, fh: int) -> int:
        return 0  # close(2) makes nothing durable

    def release(self, path: str, fh: int) -> int:
        os.close(fh)
        return 0


def _said_if_failed(what: str, sync: Callable[[], None]) -> int:
    """A failed fsync reaches the broker as an I/O error: lazyfs.log says which and why."""
    try:
        sync()
    except OSError as e:
        log.error("%s failed: %s", what, e)
        raise
    return 0
