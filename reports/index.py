"""results/index.html: every run under a results root, newest first, linking to its report;
and, when the claims matrix has been measured, its cells linking to the runs behind them."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from contract import retention
from contract.manifest import Manifest, ManifestError, read_manifest
from contract.rundir import MANIFEST
from reports.html import REPORT_NAME, TEMPLATES, verdict_colour, verdict_word
from reports.run_data import ReportError

INDEX_NAME = "index.html"


@dataclass(frozen=True)
class RunRow:
    href: str  # relative to the index: the report, or the run directory when it has none
    started: float
    scenario: str
    claim: str
    mode: str
    version: str
    word: str
    colour: str
    acked: int | None
    lost: int | None
    duplicated: int | None
    seconds: float | None
    run_id: str
    size_mb: float = 0.0
    # What the default retention policy does with it at the next prune ("" while it keeps it).
    removed_next: str = ""


def _json_or_none(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def run_row(root: Path, run_dir: Path) -> RunRow | None:
    """The index row of one run directory; None for a directory that is not a run."""
    try:
        manifest = read_manifest(run_dir, required=True)
    except ManifestError:
        return None
    verdict = _json_or_none(run_dir / "verdict.json")
    groups = (verdict or {}).get("groups") or {}
    report = run_dir / REPORT_NAME
    target = report if report.exists() else run_dir
    started, ended = manifest.started, manifest.ended
    return RunRow(
        href=os.path.relpath(target, root),
        started=float(started or 0),
        scenario=str(manifest.scenario or run_dir.parent.name),
        claim=str(manifest.claim or "-"),
        mode=str(manifest.kafka_mode or manifest.system or "-"),
        version=str((verdict or {}).get("kafka_version") or _image_version(manifest) or "-"),
        word=verdict_word(verdict, manifest),
        colour=verdict_colour(verdict),
        acked=(verdict or {}).get("sends", {}).get("ok"),
        lost=max((g.get("lost", 0) for g in groups.values()), default=None),
        duplicated=max((g.get("duplicated", 0) for g in groups.values()), default=None),
        seconds=round(float(ended) - float(started), 1) if started and ended else None,
        run_id=str(manifest.run_id or run_dir.name),
    )


def _image_version(manifest: Manifest) -> str | None:
    for image in manifest.images.values():
        if isinstance(image, dict) and image.get("version"):
            return str(image["version"])
    return None


def runs_under(root: Path) -> list[RunRow]:
    """Every run at root/<scenario>/<run-id>/, newest first, with its size and what the default
    retention policy would do with it next."""
    runs = {
        manifest.parent: row
        for manifest in root.glob(f"*/*/{MANIFEST}")
        if not manifest.parent.is_symlink() and (row := run_row(root, manifest.parent)) is not None
    }
    fate = {d.run.path: d for d in retention.plan(root)}
    rows = []
    for run_dir, row in runs.items():
        if (d := fate.get(run_dir)) is not None:
            size = round(d.run.size / 1024**2, 1)
            row = replace(row, size_mb=size, removed_next=d.why if d.remove else "")
        rows.append(row)
    return sorted(rows, key=lambda r: r.started, reverse=True)


def claim_rows(root: Path, measured: dict[str, Any]) -> list[dict[str, Any]]:
    """Each measured cell of the claims matrix, with a link per run still under root."""
    rows = []
    for key, runs in sorted((measured.get("cells") or {}).items()):
        links = []
        for r in runs:
            run_dir = Path(r.get("run_dir", ""))
            report = run_dir / REPORT_NAME
            href = os.path.relpath(report, root) if report.exists() else None
            links.append({"word": r.get("word", "?"), "href": href, "name": run_dir.name})
        rows.append({"key": key, "runs": links})
    return rows


def render_index(root: Path, claims_file: Path | None = None) -> Path:
    """Writes root/index.html; returns its path."""
    if not root.is_dir():
        raise ReportError(f"{root}: not a results directory")
    measured = _json_or_none(claims_file) if claims_file else None
    page = TEMPLATES.get_template("index.html.j2").render(
        runs=runs_under(root),
        claims=claim_rows(root, measured or {}),
        built=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        when=lambda t: time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)),
    )
    out = root / INDEX_NAME
    out.write_text(page)
    return out
