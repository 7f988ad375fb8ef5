"""The history at rest: each process's JSONL packed into zstd frames, `<process>.jsonl.zst`
(and any other file of lines the same way, `<name>.zst`: a run's complete id lists).

Clients write plain JSONL while a run goes (contract.history: every event in the kernel as it
happens, which a frame buffered in the client could not promise); once a run's verdict and
reports are written, its history is packed. A packed file holds exactly the bytes of the plain
one, nulls included: zstd stores a repeated null field in a few bits (dropping them saved 2 %
of the packed size on an 80 000-message history), and the same bytes mean `harness export`
gives the history back byte for byte.

A packed file is a sequence of independent frames of whole lines (FRAME_BYTES of input each),
so a file cut short is readable up to its last whole frame. Packing writes the frames beside
the plain file, reads them back and compares, and only then removes the plain file: a pack
interrupted at any point leaves the plain file, which readers prefer when both are there.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import zstandard

PLAIN = ".jsonl"
ZST = ".zst"  # a packed file's name: its plain name and this
PACKED = PLAIN + ZST
FRAME_BYTES = 4 << 20  # input bytes a frame: large enough to pack well, small to lose little
READ_BYTES = 1 << 20  # compressed bytes read at a time
SCRATCH_PREFIX = ".history-plain-"  # a packed history unpacked for one reading pass
LEVEL = 3  # zstd's default: ~0.3 s for an 80 000-message run, 20x smaller


class PackError(Exception):
    """A packed file whose frames do not give back the plain file's bytes."""


def process_name(path: Path) -> str:
    """The process a history file belongs to, whichever form it is in."""
    return path.name.removesuffix(PACKED).removesuffix(PLAIN)


def plain_name(path: Path) -> str:
    """The name the file has plain (a history file's: what line references say)."""
    return path.name.removesuffix(ZST)


def history_paths(history_dir: Path) -> list[Path]:
    """One file per process, plain or packed, in order of name; a process whose pack was
    interrupted has both, and its plain file is the one listed."""
    packed = {process_name(p): p for p in history_dir.glob(f"*{PACKED}")}
    plain = {process_name(p): p for p in history_dir.glob(f"*{PLAIN}")}
    every = packed | plain
    return [every[name] for name in sorted(every, key=lambda n: n + PLAIN)]


def history_file(history_dir: Path, process: str) -> Path | None:
    """A process's history file in whichever form it is in; None when it wrote none."""
    return next((p for p in history_paths(history_dir) if process_name(p) == process), None)


def is_packed(path: Path) -> bool:
    return path.name.endswith(ZST)


def frames(path: Path) -> Iterator[tuple[bytes, bool]]:
    """(content, whole) of each frame of a packed file, read in chunks (linear in its size); a
    last frame cut short gives what it has, not whole; a frame that does not decode (a damaged
    byte: each frame carries its checksum) gives nothing, not whole, and ends the file."""
    with open(path, "rb") as fh:
        frame = zstandard.ZstdDecompressor().decompressobj()
        content: list[bytes] = []
        started = False
        pending = b""
        while chunk := pending or fh.read(READ_BYTES):
            pending = b""
            started = True
            try:
                content.append(frame.decompress(chunk))
            except zstandard.ZstdError:
                yield b"", False
                return
            if frame.eof:
                yield b"".join(content), True
                pending = frame.unused_data  # the next frame's start, from this chunk
                frame, content, started = zstandard.ZstdDecompressor().decompressobj(), [], False
        if started:
            yield b"".join(content), False


def read_bytes(path: Path, salvage: bool = False) -> bytes:
    """The plain content of a file in either form. A packed file that is not whole raises
    PackError, unless `salvage`: then its whole frames, up to the damage."""
    if not is_packed(path):
        return path.read_bytes()
    return b"".join(_whole_frames(path, salvage))


def _whole_frames(path: Path, salvage: bool) -> Iterator[bytes]:
    for number, (content, whole) in enumerate(frames(path), 1):
        if not whole:
            if salvage:
                return
            raise PackError(f"{path}: damaged at frame {number} (harness export --salvage)")
        yield content


def read_lines(path: Path) -> list[str]:
    """The lines of a file in either form (a last line without newline included)."""
    return read_bytes(path).decode("utf-8", "replace").splitlines()


def either_form(plain: Path) -> Path | None:
    """The file at `plain`'s path, plain or packed (the plain one while both are there)."""
    for candidate in (plain, plain.with_name(plain.name + ZST)):
        if candidate.is_file():
            return candidate
    return None


def plain_size(path: Path) -> int:
    """The size the file has (or had) plain; PackError for a damaged packed file."""
    if not is_packed(path):
        return path.stat().st_size
    return sum(len(content) for content in _whole_frames(path, salvage=False))


def _frames_of(fh: IO[bytes]) -> Iterator[bytes]:
    """The plain file as chunks of whole lines of about FRAME_BYTES (the last may be cut)."""
    rest = b""
    while chunk := fh.read(FRAME_BYTES):
        data = rest + chunk
        end = data.rfind(b"\n") + 1
        if end == 0:  # one line longer than a frame: wait for its end
            rest = data
            continue
        yield data[:end]
        rest = data[end:]
    if rest:
        yield rest


def pack_file(plain: Path) -> Path:
    """Packs one plain file of lines; returns the packed file. The plain file goes only after
    the packed one has been read back equal to it."""
    target = plain.with_name(plain.name + ZST)
    partial = target.with_name(target.name + ".partial")
    compressor = zstandard.ZstdCompressor(level=LEVEL, write_checksum=True)
    digest = hashlib.sha256()
    with open(plain, "rb") as src, open(partial, "wb") as out:
        for chunk in _frames_of(src):
            digest.update(chunk)
            out.write(compressor.compress(chunk))
        out.flush()
        os.fsync(out.fileno())
    back = hashlib.sha256()
    for content, whole in frames(partial):
        if not whole:
            partial.unlink()
            raise PackError(f"{plain}: a frame of its packed copy did not read back whole")
        back.update(content)
    if back.digest() != digest.digest():
        partial.unlink()
        raise PackError(f"{plain}: its packed copy did not read back equal")
    partial.replace(target)
    plain.unlink()
    return target


def pack_history(history_dir: Path) -> list[Path]:
    """Packs every plain file of a history (a run that has its verdict); returns the packed
    files. Leftovers of an interrupted pack are removed first."""
    for partial in history_dir.glob(f"*{PACKED}.partial"):
        partial.unlink()
    return [pack_file(p) for p in history_paths(history_dir) if not is_packed(p)]


def unpack_file(path: Path, target_dir: Path, salvage: bool = False) -> Path:
    """Writes the plain form of `path` into `target_dir`, the packed file kept; PackError for a
    damaged one, unless `salvage` (its whole frames, up to the damage)."""
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / plain_name(path)
    partial = target.with_name(target.name + ".partial")
    try:
        with open(partial, "wb") as out:
            for content in _whole_frames(path, salvage):
                out.write(content)
    except PackError:
        partial.unlink()
        raise
    partial.replace(target)
    return target


def unpack_history(
    history_dir: Path, target_dir: Path | None = None, salvage: bool = False
) -> list[Path]:
    """The history as plain JSONL: into `target_dir` (a copy, the run stays packed), or in
    place (a packed file removed once its plain one is whole). Returns the plain files."""
    written = []
    for path in history_paths(history_dir):
        if target_dir is None:
            if is_packed(path):
                written.append(unpack_file(path, history_dir, salvage))
                if not salvage:  # a salvaged copy lacks frames: the damaged original stays
                    path.unlink()
            else:
                written.append(path)
        elif is_packed(path):
            written.append(unpack_file(path, target_dir, salvage))
        else:
            target_dir.mkdir(parents=True, exist_ok=True)
            written.append(target_dir / path.name)
            written[-1].write_bytes(path.read_bytes())
    return written


@contextmanager
def plain_history(history_dir: Path, scratch_parent: Path) -> Iterator[list[Path]]:
    """The history's files as plain JSONL for a reader that needs files (Spark's, pyarrow's):
    the plain files where they are, packed ones unpacked into a folder of this pass's own under
    `scratch_parent`, removed after."""
    paths = history_paths(history_dir)
    if not any(is_packed(p) for p in paths):
        yield paths
        return
    scratch = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX, dir=scratch_parent))
    try:
        yield [unpack_file(p, scratch) if is_packed(p) else p for p in paths]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
