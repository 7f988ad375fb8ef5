"""Where a run's output goes: results/<scenario>/<run-id>/, and results/latest."""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

DEFAULT_ROOT = Path(os.environ.get("BJ_RESULTS", "results"))


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(2)


def make_run_dir(root: Path, scenario_id: str, run_id: str) -> Path:
    run_dir = root / scenario_id / run_id
    (run_dir / "history").mkdir(parents=True, exist_ok=False)
    (run_dir / "logs").mkdir()
    latest = root / "latest"
    if latest.is_symlink() or latest.exists():
        latest.unlink()
    latest.symlink_to(Path(scenario_id) / run_id)
    return run_dir


def write_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    tmp = run_dir / "manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=2, default=str) + "\n")
    tmp.replace(run_dir / "manifest.json")
