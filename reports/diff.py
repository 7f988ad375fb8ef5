"""Two runs side by side, setting by setting (`harness diff RUN1 RUN2`): what differed in their
configuration, their releases and modes, and what each verdict said."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contract.manifest import Manifest, read_manifest
from contract.rundir import RunDir

ABSENT = "-"  # a setting one run did not have


@dataclass(frozen=True)
class Row:
    scope: str
    key: str
    left: str
    right: str

    @property
    def differs(self) -> bool:
        return self.left != self.right


def _verdict(run_dir: Path) -> dict[str, Any]:
    path = RunDir(run_dir).verdict
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _run_facts(manifest: Manifest, verdict: dict[str, Any]) -> dict[str, str]:
    lost = sum(int(g.get("lost", 0)) for g in (verdict.get("groups") or {}).values())
    images = {role: str(info.get("version") or info.get("image_version") or info.get("name"))
              for role, info in manifest.images.items()}  # fmt: skip
    facts = {
        "scenario": str(manifest.scenario),
        "mode": str(manifest.kafka_mode or ABSENT),
        "outcome": str(verdict.get("outcome", "no verdict")),
        "claim verdict": str(verdict.get("claim_verdict") or ABSENT),
        "lost (all groups)": str(lost),
    }
    return facts | {f"{role} release": v for role, v in images.items()}


def diff_rows(left: Path, right: Path) -> list[Row]:
    """Every setting and run fact of two runs, in a stable order: the run's facts first, then
    each scope's keys."""
    lm, rm = read_manifest(left, required=True), read_manifest(right, required=True)
    rows = []
    lf, rf = _run_facts(lm, _verdict(left)), _run_facts(rm, _verdict(right))
    for key in [*lf, *(k for k in rf if k not in lf)]:
        rows.append(Row("run", key, lf.get(key, ABSENT), rf.get(key, ABSENT)))
    scopes = [*lm.settings, *(s for s in rm.settings if s not in lm.settings)]
    for scope in scopes:
        ls, rs = lm.settings.get(scope, {}), rm.settings.get(scope, {})
        for key in sorted(set(ls) | set(rs)):
            rows.append(Row(scope, key, ls.get(key, ABSENT), rs.get(key, ABSENT)))
    return rows
