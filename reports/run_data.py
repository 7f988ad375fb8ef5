"""One run directory as the reports read it: the files the harness and the checker wrote.

Only the documented outputs are read (manifest.json, verdict.json, timeline.json, ids/, logs/,
schedule.yaml and shrink.json),
never the history itself: a report is rebuilt in a second, whatever the run's size.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contract.manifest import Manifest, ManifestError, read_manifest
from contract.rundir import RunDir

SAMPLE_IDS = 5  # ids shown per anomaly in the report; the id file holds them all


class ReportError(Exception):
    """A run directory a report cannot be built from: one line for the user."""


@dataclass
class RunData:
    run_dir: Path
    manifest: Manifest
    verdict: dict[str, Any] | None  # None: the run ended before the checker (manifest error)
    timeline: dict[str, Any] | None  # None: checked by a checker older than timeline.json
    logs: list[str] = field(default_factory=list)  # relative paths of the broker and client logs
    shrink: dict[str, Any] | None = None  # shrink.json: what `harness shrink` made of the run

    @property
    def run_start(self) -> float:
        if self.timeline:
            return float(self.timeline["run_start"])
        workload = self.manifest.phases.get("workload") or {}
        return float(workload.get("start") or self.manifest.started or 0)

    def sample_ids(self, group: str, metric: str) -> list[str]:
        """The first ids behind a count, from ids/<group>/<metric>.txt."""
        path = RunDir(self.run_dir).ids / group / f"{metric}.txt"
        if not path.is_file():
            return []
        with path.open() as fh:
            return [line.strip() for _, line in zip(range(SAMPLE_IDS), fh, strict=False)]


def _json(path: Path, required: bool) -> dict[str, Any] | None:
    if not path.is_file():
        if required:
            raise ReportError(f"{path}: missing (not a run directory?)")
        return None
    try:
        value = json.loads(path.read_text())
    except ValueError:
        raise ReportError(f"{path}: not valid JSON") from None
    if not isinstance(value, dict):
        raise ReportError(f"{path}: not a JSON object")
    return value


def load(run_dir: Path) -> RunData:
    if not run_dir.is_dir():
        raise ReportError(f"{run_dir}: not a directory")
    run = RunDir(run_dir)
    try:
        manifest = read_manifest(run_dir, required=True)
    except ManifestError as e:
        raise ReportError(f"{e} (not a run directory?)") from None
    logs = sorted(str(p.relative_to(run_dir)) for p in run.logs.glob("*.log"))
    return RunData(
        run_dir=run_dir,
        manifest=manifest,
        verdict=_json(run.verdict, required=False),
        timeline=_json(run.timeline, required=False),
        logs=logs,
        shrink=_json(run.shrink, required=False),
    )
