"""What a run keeps of its brokers' evidence once its verdict is known."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from systems.evidence import EVIDENCE_FILE, found_something, prune_evidence

pytestmark = pytest.mark.unit


def test_raw_data_is_kept_only_for_a_run_that_found_something(tmp_path: Path) -> None:
    clean = {"matched": True, "groups": {"reader": {"lost": 0, "duplicated": 0}}}
    loss_reproduced = {"matched": True, "groups": {"reader": {"lost": 12}}}
    refuted = {"matched": False, "groups": {"reader": {"lost": 0}}}
    assert not found_something(clean)
    assert found_something(loss_reproduced) and found_something(refuted)
    evidence = tmp_path / "evidence"
    (evidence / "kafka1").mkdir(parents=True)
    (evidence / "kafka1-data.tar.zst").write_bytes(b"x" * 100)
    (evidence / "kafka1" / "jepsen.dump.txt.zst").write_bytes(b"dump")
    (evidence / EVIDENCE_FILE).write_text(json.dumps({"nodes": []}))
    assert prune_evidence(evidence, loss_reproduced) == 0
    assert (evidence / "kafka1-data.tar.zst").exists()
    assert prune_evidence(evidence, clean) == 100
    assert not (evidence / "kafka1-data.tar.zst").exists()
    assert (evidence / "kafka1" / "jepsen.dump.txt.zst").exists()
    assert "not kept" in json.loads((evidence / EVIDENCE_FILE).read_text())["data_removed"]
    assert prune_evidence(tmp_path / "none", clean) == 0
