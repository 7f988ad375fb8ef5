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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import zstandard

PLAIN = ".jsonl"
ZST = ".zst"  # a packed file's name: its plain name and this
PACKED = PLAIN + ZST
FRAME_BYTES = 4 << 20  # input bytes a frame: large enough to pack well, small to lose little
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


def is_packed(path: Path) -> bool:
    return path.name.endswith(ZST)


def frames(data: bytes) -> Iterator[tuple[bytes, bool]]:
    """(content, whole) of each frame of `data`; a frame cut short gives what it has, not
    whole, and ends the file."""
    while data:
        frame = zstandard.ZstdDecompressor().decompressobj()
        try:
            content = frame.decompress(data)
        except zstandard.ZstdError:
            yield b"", False
            return
        if not frame.eof:
            yield content, False
            return
        yield content, True
        data = frame.unused_data


def read_bytes(path: Path) -> bytes:
    """The plain content of a history file; of a packed one cut short, its whole frames."""
    if not is_packed(path):
        return path.read_bytes()
    return b"".join(content for content, whole in frames(path.read_bytes()) if whole)


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
    """The size the file has (or had) as plain JSONL."""
    if not is_packed(path):
        return path.stat().st_size
    return sum(len(content) for content, whole in frames(path.read_bytes()) if whole)


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
    compressor = zstandard.ZstdCompressor(level=LEVEL)
    digest = hashlib.sha256()
    with open(plain, "rb") as src, open(partial, "wb") as out:
        for chunk in _frames_of(src):
            digest.update(chunk)
            out.write(compressor.compress(chunk))
        out.flush()
        os.fsync(out.fileno())
    back = hashlib.sha256()
    for content, whole in frames(partial.read_bytes()):
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


def unpack_file(path: Path, target_dir: Path) -> Path:
    """Writes the plain form of `path` into `target_dir` (whole frames of a cut file); the
    packed file stays."""
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / plain_name(path)
    partial = target.with_name(target.name + ".partial")
    with open(partial, "wb") as out:
        for content, whole in frames(path.read_bytes()):
            if whole:
                out.write(content)
    partial.replace(target)
    return target


def unpack_history(history_dir: Path, target_dir: Path | None = None) -> list[Path]:
    """The history as plain JSONL: into `target_dir` (a copy, the run stays packed), or in
    place (each packed file replaced by its plain one). Returns the plain files."""
    written = []
    for path in history_paths(history_dir):
        if target_dir is None:
            if is_packed(path):
                written.append(unpack_file(path, history_dir))
                path.unlink()
            else:
                written.append(path)
        elif is_packed(path):
            written.append(unpack_file(path, target_dir))
        else:
            target_dir.mkdir(parents=True, exist_ok=True)
            written.append(target_dir / path.name)
            written[-1].write_bytes(path.read_bytes())
    return written


@contextmanager
def plain_history(history_dir: Path, scratch: Path) -> Iterator[list[Path]]:
    """The history's files as plain JSONL for a reader that needs files (Spark's, pyarrow's):
    the plain files where they are, packed ones unpacked into `scratch`, removed after."""
    paths = history_paths(history_dir)
    if not any(is_packed(p) for p in paths):
        yield paths
        return
    try:
        yield [unpack_file(p, scratch) if is_packed(p) else p for p in paths]
    finally:
        for p in scratch.glob(f"*{PLAIN}"):
            p.unlink()
        if scratch.exists() and not any(scratch.iterdir()):
            scratch.rmdir()
