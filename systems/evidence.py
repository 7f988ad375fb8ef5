"""A run's evidence from the brokers themselves (RUN_DIR/evidence/), whatever the system: its
index, its compression, and what is kept once the verdict is known.

Each system reads its own (systems.kafka.evidence, systems.rabbitmq.evidence) before the
cluster comes down; what could not be had is said in evidence.json, never silently missing.
Decoded evidence (dumps, a node's own status) is always kept; the raw data files, the largest
part, only for a run whose verdict found something.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

import zstandard

from contract.rundir import DATA_CAP_MIB as DATA_CAP_MIB
from contract.rundir import EVIDENCE_INDEX as EVIDENCE_FILE

LEVEL = 3  # zstd's default: fast, and a dump's repeated fields shrink many times over


@contextlib.contextmanager
def compressing(raw: IO[bytes]) -> Iterator[IO[bytes]]:
    """A zstd stream written into `raw`."""
    with zstandard.ZstdCompressor(level=LEVEL).stream_writer(raw, closefd=False) as sink:
        yield sink  # type: ignore[misc]


def compress_file(source: Path, target: Path) -> None:
    with source.open("rb") as src, target.open("wb") as raw, compressing(raw) as sink:
        shutil.copyfileobj(src, sink)


def keep_text(out_dir: Path, node: str, name: str, text: str, suffix: str = "txt") -> str:
    """A node's answer kept as `<node>/<name>.<suffix>.zst` under `out_dir`; returns that path,
    relative to `out_dir`, as evidence.json names it."""
    node_dir = out_dir / node
    node_dir.mkdir(parents=True, exist_ok=True)
    target = node_dir / f"{name}.{suffix}.zst"
    target.write_bytes(zstandard.ZstdCompressor(level=LEVEL).compress(text.encode()))
    return str(target.relative_to(out_dir))


def write_index(out_dir: Path, nodes: list[Any], seconds: float) -> None:
    """evidence.json: per node, what was had and what not (dataclasses), and the time spent."""
    index = {"seconds": round(seconds, 2), "nodes": [asdict(n) for n in nodes]}
    (out_dir / EVIDENCE_FILE).write_text(json.dumps(index, indent=2) + "\n")


def found_something(verdict: dict[str, Any]) -> bool:
    """Whether a verdict is one whose raw data files are worth keeping: it did not match its
    claim, or it counted an anomaly (a loss claim reproduced, a duplicate, a torn
    transaction)."""
    if not verdict.get("matched", False):
        return True
    anomalous = ("lost", "duplicated", "reordered")
    return any(
        (counts or {}).get(k, 0)
        for counts in (verdict.get("groups") or {}).values()
        for k in anomalous
    )


def prune_evidence(evidence_dir: Path, verdict: dict[str, Any]) -> int:
    """Removes the raw data archives of a run that found nothing (its dumps stay); returns the
    bytes freed, and says so in evidence.json."""
    if found_something(verdict) or not evidence_dir.is_dir():
        return 0
    freed = 0
    for archive in evidence_dir.glob("*-data.tar.zst"):
        freed += archive.stat().st_size
        archive.unlink()
    index_file = evidence_dir / EVIDENCE_FILE
    if freed and index_file.exists():
        index = json.loads(index_file.read_text())
        index["data_removed"] = "the run found nothing: its raw data files were not kept"
        index_file.write_text(json.dumps(index, indent=2) + "\n")
    return freed
