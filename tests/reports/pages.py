"""What the report tests share: a checked run as the report reads it, and one element of a
rendered page."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any


def checked_run(run_dir: Path, transactions: dict[str, Any] | None) -> Path:
    """A checked transactional run as the report reads it: manifest and verdict.json only."""
    run_dir.mkdir(parents=True)
    manifest = {"scenario": "T2", "run_id": "t1", "tier": "real-cluster", "expect": "safe"}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    counts = {"acked": 400, "received": 400, "lost": 0, "duplicated": 0, "reordered": 0}
    verdict = {
        "outcome": "anomalies",
        "matched": False,
        "expect": "safe",
        "reason": "read_committed broken",
        "groups": {"committed": counts, "uncommitted": counts},
        "sends": {"ok": 400, "fail": 0, "info": 10, "aborted": 56},
        "transactions": transactions,
    }
    (run_dir / "verdict.json").write_text(json.dumps(verdict))
    return run_dir


def safe_verdict_run(run_dir: Path, **sections: Any) -> Path:
    """A run checked safe as the report reads it (manifest and verdict.json only), its verdict
    with the sections given (`sends` among them, to replace the default)."""
    run_dir.mkdir(parents=True)
    scenario, run_id = run_dir.parent.name, run_dir.name
    manifest = {"scenario": scenario, "run_id": run_id, "tier": "real-cluster", "expect": "safe"}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    verdict = {
        "outcome": "safe",
        "matched": True,
        "expect": "safe",
        "reason": "nothing lost",
        "groups": {},
        "sends": {"ok": 1},
    } | sections
    (run_dir / "verdict.json").write_text(json.dumps(verdict))
    return run_dir


def section(html: str, element: str, element_id: str) -> str:
    found = re.search(rf'<{element} id="{element_id}">(.*?)</{element}>', html, re.S)
    assert found is not None, f"no {element}#{element_id}"
    return found.group(1)
