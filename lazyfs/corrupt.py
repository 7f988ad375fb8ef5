"""Data corrupted at rest: bytes of a broker's own files changed behind its back, as a disk that
returns other bytes than it was given (a flipped bit, a sector of garbage or of zeros).

It acts on a lazy disk's two copies of the data, from the host: `live/` (what the broker reads
now, under the FUSE mount) and the durable image in `store/` (what a power loss brings back), so
that a power loss after it does not undo it: a damaged sector stays damaged. Nothing mends it.

Which files: those whose path relative to the data directory matches a glob (fnmatch, so `*`
spans directories, as the disk faults' rules match), regular files only, never through a
symbolic link, never outside the directory: only ever the broker's own data. How many, where
and what is drawn from a seed: the same seed over the same files changes the same bytes, and
every change is returned (file, offset, the old bytes and the new), for the history.
"""

from __future__ import annotations

import fnmatch
import json
import os
import random
import stat
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from lazyfs.durable import NAMESPACE

How = Literal["flip", "random", "zero"]
HOWS: tuple[How, ...] = ("flip", "random", "zero")
MAX_LENGTH = 1 << 20  # a span of a mebibyte at most: the history holds its bytes, twice


@dataclass(frozen=True)
class Corruption:
    """What to corrupt: `files` of the files matching `path`, each over `length` bytes at
    `offset` (from the end when negative; None: drawn), changed the way `how` says:
    flip one bit of each byte, random bytes, or zeros (a sector that reads back empty)."""

    path: str
    seed: int
    files: int = 1
    length: int = 1
    offset: int | None = None
    how: How = "flip"

    def for_node(self, node: str) -> Corruption:
        """The same corruption from the node's own seed, drawn from this one: replicas that
        hold the same files are not all damaged at the same bytes, and the run's seed still
        replays each."""
        return replace(self, seed=random.Random(f"{self.seed}:{node}").getrandbits(63))

    def __post_init__(self) -> None:
        if not self.path or self.path.startswith("/") or ".." in self.path.split("/"):
            raise ValueError(f"path {self.path!r}: a glob relative to the data directory")
        if self.files < 1 or not 1 <= self.length <= MAX_LENGTH:
            raise ValueError("files and length are at least 1 (length at most 1 MiB)")
        if self.how not in HOWS:
            raise ValueError(f"how is one of {', '.join(HOWS)}, not {self.how!r}")


def matching_files(root: Path, glob: str) -> list[str]:
    """The regular, non-empty files under `root` whose relative path matches `glob`, sorted
    (a draw over them is then the seed's alone); symbolic links are neither followed nor
    taken."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):  # os.walk follows no link by default
        dirnames.sort()
        for name in filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            st = os.lstat(full)
            if stat.S_ISREG(st.st_mode) and st.st_size > 0 and fnmatch.fnmatchcase(rel, glob):
                found.append(rel)
    return sorted(found)


def corrupt(live: Path, store: Path | None, spec: Corruption) -> list[dict[str, Any]]:
    """Changes the bytes `spec` draws in the live files, and the same bytes of their durable
    copies when `store` (a lazy disk's) has them; one record per file drawn."""
    rng = random.Random(spec.seed)
    candidates = matching_files(live, spec.path)
    chosen = sorted(rng.sample(candidates, min(spec.files, len(candidates))))
    durable_ids = _durable_ids(store) if store is not None else {}
    changes = []
    for rel in chosen:
        size = os.lstat(live / rel).st_size
        length = min(spec.length, size)
        offset = _offset(rng, spec.offset, size, length)
        if offset is None:
            changes.append({"file": rel, "size": size, "skipped": "the offset is past its end"})
            continue
        length = min(length, size - offset)
        change = _transform(rng, spec.how, length)
        old, new = _rewrite(live / rel, offset, length, change)
        record: dict[str, Any] = {
            "file": rel,
            "size": size,
            "offset": offset,
            "old": old.hex(),
            "new": new.hex(),
        }
        if (file_id := durable_ids.get(rel)) is not None and store is not None:
            # The durable copy may hold older bytes there (what was never synced): the same
            # change of them, so a power loss brings back damaged data, not repaired data.
            durable = store / "files" / file_id
            if durable.exists() and durable.stat().st_size > offset:
                d_old, d_new = _rewrite(durable, offset, length, change)
                record["durable"] = {"old": d_old.hex(), "new": d_new.hex()}
        changes.append(record)
    return changes


def _offset(rng: random.Random, asked: int | None, size: int, length: int) -> int | None:
    if asked is None:
        return rng.randrange(size - length + 1)
    at = asked if asked >= 0 else size + asked
    return at if 0 <= at < size else None


def _transform(rng: random.Random, how: How, length: int) -> Callable[[bytes], bytes]:
    """The change, drawn once and applied alike to the live bytes and the durable ones."""
    if how == "flip":
        masks = bytes(1 << rng.randrange(8) for _ in range(length))
        return lambda old: bytes(b ^ m for b, m in zip(old, masks, strict=False))
    if how == "random":
        noise = rng.randbytes(length)
        return lambda old: noise[: len(old)]
    return lambda old: bytes(len(old))


def _rewrite(
    file: Path, offset: int, length: int, change: Callable[[bytes], bytes]
) -> tuple[bytes, bytes]:
    fd = os.open(file, os.O_RDWR | os.O_NOFOLLOW)
    try:
        old = os.pread(fd, length, offset)  # shorter where the file ends sooner
        new = change(old)
        os.pwrite(fd, new, offset)
        # Durable on the host: the damage must outlast whatever happens to the daemon next.
        os.fsync(fd)
    finally:
        os.close(fd)
    return old, new


def _durable_ids(store: Path) -> dict[str, str]:
    """The committed names of the durable image and their data's ids."""
    try:
        namespace = json.loads((store / NAMESPACE).read_text())
    except FileNotFoundError:
        return {}
    return {rel: entry["id"] for rel, entry in namespace.get("files", {}).items()}
