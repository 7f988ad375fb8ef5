"""The harness's cache on this machine (BJ_CACHE_DIR, else ~/.cache/brokerjepsen): what is read
once from an image or a JDK and kept, written whole or not at all."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    return Path(os.environ.get("BJ_CACHE_DIR") or Path.home() / ".cache" / "brokerjepsen")


def write_whole(path: Path, text: str) -> None:
    """Writes `text` to `path` through a temporary file and a rename: a reader never sees half
    a file, and two writers never mix theirs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
