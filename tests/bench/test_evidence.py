"""The evidence bench reads run folders as `harness run` leaves them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.evidence import TARGET_SECONDS, cost_of, costs_under, table

pytestmark = pytest.mark.unit


def a_run(root: Path, name: str, seconds: float, *, data: int = 0) -> Path:
    run_dir = root / "K1" / name
    evidence = run_dir / "evidence"
    (evidence / "kafka1").mkdir(parents=True)
    (run_dir / "manifest.json").write_text(json.dumps({"system": "kafka"}))
    (evidence / "evidence.json").write_text(json.dumps({"seconds": seconds, "nodes": [{}] * 3}))
    (evidence / "kafka1" / "dump.txt.zst").write_bytes(b"x" * 1000)
    if data:
        (evidence / "kafka1-data.tar.zst").write_bytes(b"d" * data)
    return run_dir


def test_a_run_costs_its_seconds_and_its_bytes_the_data_archive_apart(tmp_path: Path) -> None:
    cost = cost_of(a_run(tmp_path, "r1", 8.5, data=4096))
    assert cost is not None
    assert (cost.system, cost.nodes, cost.seconds, cost.data_bytes) == ("kafka", 3, 8.5, 4096)
    assert 1000 <= cost.decoded_bytes < 4096  # the dump and the index, not the archive
    assert cost.within


def test_a_slow_collection_is_said_over_its_target(tmp_path: Path) -> None:
    a_run(tmp_path, "r1", 8.0)
    a_run(tmp_path, "r2", TARGET_SECONDS + 1)
    costs = costs_under(tmp_path)
    assert [c.within for c in costs] == [True, False]
    assert table(costs)[-1].endswith("1 over a target")


def test_a_run_without_evidence_is_not_counted(tmp_path: Path) -> None:
    (tmp_path / "K1" / "r0" / "evidence").mkdir(parents=True)
    assert costs_under(tmp_path) == []
