"""What a disk would still hold after a power cut: the durable image behind the lazy filesystem.

The filesystem (`lazyfs.fs`) passes every call through to a live directory, so the
broker reads back what it wrote; this module keeps, beside it, only what an fsync made durable.
A power loss throws the live directory away and rebuilds it from this image.

The semantics are those of ext4 in its default mode (data=ordered, delayed allocation,
auto_da_alloc) with Linux's default background writeback, or, with both intervals 0, at the
worst moment, no background writeback or periodic journal commit ever (Jepsen's lazyfs):

- File data is durable once that file is fsynced (fsync or fdatasync, msync of a mapping).
- Metadata (which names exist, renames, unlinks, new directories, modes and owners) goes into
  one journal, committed by any fsync of any file or directory: ext4 has a single journal, and
  an fsync commits the running transaction whole. Until then a create, rename or unlink is lost.
- A file renamed over an existing one has its data written when that rename is committed
  (auto_da_alloc), so replace-by-rename without an fsync of the new file keeps its new contents
  once anything commits the journal, and keeps the old file's otherwise.
- In the background (`tick`), the journal commits every `commit_interval` seconds (ext4's
  commit=5) and a file whose data has been dirty for `writeback_after` seconds is written
  back (vm.dirty_expire_centisecs=3000, checked every 5 s). So a power loss takes the last
  half minute or so of unsynced writes, not everything since the last fsync: a file written
  once at start-up without an fsync (Kafka's bootstrap.checkpoint) is on disk a minute later.

On disk, in the store directory: `files/<id>` (each file's durable contents, by a stable id, so
a rename moves a name, not the data) and `namespace.json` (the committed names).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NAMESPACE = "namespace.json"


@dataclass
class Pending:
    """What one file has been told since its last fsync: ranges written and a size change."""

    ranges: list[list[int]] = field(default_factory=list)  # [start, end), appends merged
    resized: bool = False
    since: float = field(default_factory=time.monotonic)  # dirty since (the oldest change)
    path: str = ""  # where the live file is now (relative), for the background writeback
    last: tuple[int, int] | None = None  # the last write's offset and length (what may tear)

    def wrote(self, offset: int, length: int) -> None:
        end = offset + length
        self.last = (offset, length)
        if self.ranges and self.ranges[-1][1] == offset:
            self.ranges[-1][1] = end  # an append right after the last write: one range
        else:
            self.ranges.append([offset, end])

    def bytes(self) -> int:
        return sum(e - s for s, e in _merged(self.ranges))


def _merged(ranges: list[list[int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(ranges):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


class Durable:
    """The durable image of a live directory, fed the filesystem's calls as they happen.

    Thread-safe: the FUSE loop calls it from several threads.
    """

    def __init__(
        self,
        live: Path,
        store: Path,
        commit_interval: float = 5.0,
        writeback_after: float = 30.0,
    ) -> None:
        """`commit_interval`, `writeback_after`: the background journal commit and writeback
        (seconds; 0: never)."""
        self.commit_interval = commit_interval
        self.writeback_after = writeback_after
        self.last_commit = time.monotonic()
        self.live = live
        self.store = store
        self.files_dir = store / "files"
        self.files_dir.mkdir(parents=True, exist_ok=True)
        self.lock = threading.RLock()
        committed = _load_namespace(store)
        self.next_id: int = committed["next_id"]
        self.id_of: dict[int, str] = {}  # live inode -> durable id
        for rel, entry in committed["files"].items():
            try:
                self.id_of[os.lstat(live / rel).st_ino] = entry["id"]
            except FileNotFoundError:
                continue  # the live tree is rebuilt from the image before a mount
        self.pending: dict[int, Pending] = {}
        self.flush_at_commit: set[int] = set()  # renamed over another file (auto_da_alloc)
        self.journal_dirty = False

    # ---- what the filesystem reports ----------------------------------------------------------

    def created(self, ino: int) -> None:
        """A new file: a new id, even where the inode number is a deleted file's."""
        with self.lock:
            self.id_of[ino] = self._new_id()
            self.pending.pop(ino, None)
            self.journal_dirty = True

    def metadata_changed(self) -> None:
        with self.lock:
            self.journal_dirty = True

    def renamed(self, ino: int, new_path: str, replaced_existing: bool) -> None:
        with self.lock:
            self.journal_dirty = True
            if ino in self.pending:
                self.pending[ino].path = new_path
                if replaced_existing:
                    self.flush_at_commit.add(ino)

    def wrote(self, ino: int, path: str, offset: int, length: int) -> None:
        with self.lock:
            pending = self.pending.setdefault(ino, Pending())
            pending.wrote(offset, length)
            pending.path = path

    def resized(self, ino: int, path: str) -> None:
        with self.lock:
            pending = self.pending.setdefault(ino, Pending())
            pending.resized = True
            pending.path = path

    def tick(self, now: float | None = None) -> None:
        """The kernel's background work: write back data dirty for `writeback_after` seconds,
        and commit the journal every `commit_interval` (each, when not 0)."""
        now = time.monotonic() if now is None else now
        with self.lock:
            if self.writeback_after:
                expired = [
                    ino for ino, p in self.pending.items() if now - p.since >= self.writeback_after
                ]
                for ino in expired:
                    self._write_back_at(ino, self.pending[ino].path)
            if self.commit_interval and now - self.last_commit >= self.commit_interval:
                self._commit()

    def fsync_file(self, ino: int, live_fd: int) -> None:
        """fsync/fdatasync of a file: its data, then the journal (every metadata change)."""
        with self.lock:
            self._write_back(ino, live_fd)
            self._commit()

    def fsync_dir(self) -> None:
        with self.lock:
            self._commit()

    def tear(self, kept: Callable[[str, int], int | None]) -> list[dict[str, Any]]:
        """At a power loss, before the toll is taken: each file with unsynced writes for which
        `kept(path, length of its last write)` says how many bytes of that write survive is
        written back as if the power went while the disk wrote it back: its earlier unsynced
        writes whole, its last only that prefix. A log then ends in a partial record at the
        end of what it had, not after a hole. What was torn, one record a file."""
        torn: list[dict[str, Any]] = []
        with self.lock:
            for ino, pending in list(self.pending.items()):
                if pending.last is None:
                    continue
                offset, length = pending.last
                keep = kept(pending.path, length)
                if keep is None:
                    continue
                if self._torn_write_back(ino, pending, offset + keep, offset + length):
                    torn.append(
                        {"file": pending.path, "offset": offset, "length": length, "kept": keep}
                    )
        return torn

    def _torn_write_back(self, ino: int, pending: Pending, cut: int, end: int) -> bool:
        try:
            fd = os.open(self.live / pending.path, os.O_RDONLY)
        except OSError:
            return False  # gone since: nothing of it to write back
        try:
            if os.fstat(fd).st_ino != ino:
                return False
            size = os.fstat(fd).st_size
            # An append (the write reached the end) leaves the file ending at the cut; a write
            # inside the file leaves its size, with the old bytes past the cut.
            new_size = cut if end >= size else size
            self._copy_ranges(ino, fd, new_size, _without(_merged(pending.ranges), (cut, end)))
            del self.pending[ino]
            return True
        finally:
            os.close(fd)

    def unsynced(self) -> dict[str, int]:
        """What a power loss now would drop: files with unsynced data, their bytes, and whether
        the journal holds uncommitted metadata."""
        with self.lock:
            return {
                "files": sum(1 for p in self.pending.values() if p.ranges or p.resized),
                "bytes": sum(p.bytes() for p in self.pending.values()),
                "journal": int(self.journal_dirty),
            }

    # ---- inside -------------------------------------------------------------------------------

    def _new_id(self) -> str:
        self.next_id += 1
        return str(self.next_id)

    def _id(self, ino: int) -> str:
        if ino not in self.id_of:
            self.id_of[ino] = self._new_id()
        return self.id_of[ino]

    def _write_back(self, ino: int, live_fd: int) -> None:
        pending = self.pending.pop(ino, None)
        self.flush_at_commit.discard(ino)
        if pending is None:
            return
        self._copy_ranges(ino, live_fd, os.fstat(live_fd).st_size, _merged(pending.ranges))

    def _copy_ranges(
        self, ino: int, live_fd: int, size: int, ranges: list[tuple[int, int]]
    ) -> None:
        """The durable copy becomes `size` long, with the live file's bytes over `ranges`."""
        fd = os.open(self.files_dir / self._id(ino), os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            os.ftruncate(fd, size)
            for start, end in ranges:
                end = min(end, size)
                while start < end:
                    chunk = os.pread(live_fd, min(end - start, 1 << 20), start)
                    if not chunk:
                        break
                    os.pwrite(fd, chunk, start)
                    start += len(chunk)
        finally:
            os.close(fd)

    def _write_back_at(self, ino: int, rel: str) -> None:
        """Writes back a file's data, opening it where it lives now; a file no longer there
        (unlinked since) has nothing to write back."""
        try:
            fd = os.open(self.live / rel, os.O_RDONLY)
        except OSError:
            self.pending.pop(ino, None)
            return
        try:
            if os.fstat(fd).st_ino == ino:
                self._write_back(ino, fd)
            else:
                self.pending.pop(ino, None)
        finally:
            os.close(fd)

    def _commit(self) -> None:
        """The journal commit: the live tree's names become the durable ones."""
        self.last_commit = time.monotonic()
        if not self.journal_dirty and not self.flush_at_commit:
            return
        for ino in list(self.flush_at_commit):
            if ino in self.pending:
                self._write_back_at(ino, self.pending[ino].path)
            self.flush_at_commit.discard(ino)
        dirs: dict[str, list[int]] = {}
        files: dict[str, dict[str, Any]] = {}
        links: dict[str, str] = {}
        for root, dirnames, filenames in os.walk(self.live):
            for name in dirnames + filenames:
                full = os.path.join(root, name)
                rel = os.path.relpath(full, self.live)
                try:
                    st = os.lstat(full)
                except FileNotFoundError:
                    continue  # gone since the listing (names change under the lock only)
                owner = [st.st_mode & 0o7777, st.st_uid, st.st_gid]
                if stat.S_ISDIR(st.st_mode):
                    dirs[rel] = owner
                elif stat.S_ISLNK(st.st_mode):
                    links[rel] = os.readlink(full)
                elif stat.S_ISREG(st.st_mode):
                    file_id = self._id(st.st_ino)
                    durable = self.files_dir / file_id
                    if not durable.exists():
                        durable.touch(0o600)  # a name whose data was never synced: empty
                    files[rel] = {"id": file_id, "owner": owner}
        _save_namespace(
            self.store, {"next_id": self.next_id, "dirs": dirs, "files": files, "links": links}
        )
        kept = {f["id"] for f in files.values()}
        for durable in self.files_dir.iterdir():
            if durable.name not in kept:
                durable.unlink()
        self.journal_dirty = False


def _without(ranges: list[tuple[int, int]], cut: tuple[int, int]) -> list[tuple[int, int]]:
    """The ranges less the span `cut` ([start, end))."""
    out = []
    for s, e in ranges:
        if s < cut[0]:
            out.append((s, min(e, cut[0])))
        if e > cut[1]:
            out.append((max(s, cut[1]), e))
    return out


def _load_namespace(store: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads((store / NAMESPACE).read_text())
        return data
    except FileNotFoundError:
        return {"next_id": 0, "dirs": {}, "files": {}, "links": {}}


def _save_namespace(store: Path, namespace: dict[str, Any]) -> None:
    tmp = store / (NAMESPACE + ".tmp")
    tmp.write_text(json.dumps(namespace))
    os.replace(tmp, store / NAMESPACE)


def restore(live: Path, store: Path) -> None:
    """After a power loss: the live tree becomes exactly the durable image."""
    if live.exists():
        shutil.rmtree(live)
    live.mkdir(parents=True)
    namespace = _load_namespace(store)
    for rel, (mode, uid, gid) in sorted(namespace["dirs"].items()):
        path = live / rel
        path.mkdir(parents=True, exist_ok=True)
        os.chown(path, uid, gid)
        os.chmod(path, mode)
    for rel, entry in namespace["files"].items():
        path = live / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(store / "files" / entry["id"], path)
        mode, uid, gid = entry["owner"]
        os.chown(path, uid, gid)
        os.chmod(path, mode)
    for rel, target in namespace["links"].items():
        os.symlink(target, live / rel)
