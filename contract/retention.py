"""A retention policy for a results folder, so that a year of nights fits on the machine that
runs them: `harness prune` applies it, the nightly tier after its phases, and the results index
marks the runs it would remove next.

A run folder is removed when it is older than its kind's age (a failure is kept longer than a
pass), when it is not among the newest `keep_last` of its scenario, or, oldest first, while the
folder is over its size budget. Never removed, whatever the policy says:
- a run still running (no end in its manifest, its harness process alive);
- a run the repository refers to (docs/claims-results.md and .json, scenarios/found/): the
  evidence behind a published verdict;
- the newest run of each scenario.
"""

from __future__ import annotations

import calendar
import json
import re
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from contract.manifest import Manifest, ManifestError, read_manifest
from contract.process import alive
from contract.rundir import MANIFEST, VERDICT

DAY = 86_400.0
RUN_ID = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{4}")
# What a nightly machine keeps unless told otherwise (the nightly tier applies it).
DEFAULT_KEEP_DAYS = 14.0
DEFAULT_KEEP_FAILURES_DAYS = 90.0
DEFAULT_KEEP_LAST = 3


@dataclass(frozen=True)
class Policy:
    keep_days: float = DEFAULT_KEEP_DAYS
    keep_failures_days: float = DEFAULT_KEEP_FAILURES_DAYS
    keep_last: int = DEFAULT_KEEP_LAST
    max_gb: float | None = None


@dataclass(frozen=True)
class Run:
    path: Path
    scenario: str
    started: float
    size: int
    failed: bool
    running: bool


@dataclass(frozen=True)
class Decision:
    run: Run
    remove: bool
    why: str


def runs_under(root: Path) -> list[Run]:
    """Every run folder under `root` (a folder with a manifest), oldest first."""
    found = []
    for manifest_path in sorted(root.rglob(MANIFEST)):
        folder = manifest_path.parent
        if not RUN_ID.fullmatch(folder.name) or folder.is_symlink():
            continue
        try:
            manifest = read_manifest(folder)
        except ManifestError:
            manifest = None
        found.append(_run(folder, manifest))
    return sorted(found, key=lambda r: (r.started, r.path.name))


def _run(folder: Path, manifest: Manifest | None) -> Run:
    started = (manifest.started if manifest else None) or _id_time(folder.name)
    running = bool(
        manifest and manifest.ended is None and manifest.harness_pid and alive(manifest.harness_pid)
    )
    return Run(
        path=folder,
        scenario=(manifest.scenario if manifest else None) or folder.parent.name,
        started=started,
        size=folder_size(folder),
        failed=_failed(folder, manifest),
        running=running,
    )


def _id_time(run_id: str) -> float:
    return float(calendar.timegm(time.strptime(run_id[:16], "%Y%m%dT%H%M%SZ")))


def _failed(folder: Path, manifest: Manifest | None) -> bool:
    """A run that did not do what its scenario expected: an error, no verdict, or a verdict
    that does not match."""
    if manifest is None or manifest.error:
        return True
    try:
        verdict = json.loads((folder / VERDICT).read_text())
    except (OSError, ValueError):
        return True
    return not (isinstance(verdict, dict) and verdict.get("matched") is True)


def folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


REPOSITORY = Path(__file__).resolve().parent.parent


def referenced_run_ids(repository: Path = REPOSITORY) -> set[str]:
    """Run ids the repository's own files name: the evidence of published verdicts."""
    files = [
        repository / "docs" / "claims-results.md",
        repository / "docs" / "claims-results.json",
        *sorted((repository / "scenarios" / "found").glob("*.yaml")),
    ]
    ids: set[str] = set()
    for f in files:
        try:
            ids |= set(RUN_ID.findall(f.read_text()))
        except OSError:
            continue
    return ids


def decide(runs: list[Run], policy: Policy, referenced: set[str], now: float) -> list[Decision]:
    """What the policy does to each run, oldest first, and why."""
    by_scenario: dict[str, list[Run]] = {}
    for run in runs:
        by_scenario.setdefault(run.scenario, []).append(run)
    newest = {id(r) for group in by_scenario.values() for r in group[-max(policy.keep_last, 1) :]}
    decisions = []
    for run in runs:
        keep = _kept_because(run, newest, referenced)
        if keep:
            decisions.append(Decision(run, False, keep))
            continue
        days = (now - run.started) / DAY
        limit = policy.keep_failures_days if run.failed else policy.keep_days
        kind = "failure" if run.failed else "run"
        if days > limit:
            decisions.append(Decision(run, True, f"{kind} {days:.0f} days old (keep {limit:g})"))
        else:
            decisions.append(Decision(run, False, f"{kind} {days:.0f} days old"))
    return _over_budget(decisions, policy.max_gb)


def _kept_because(run: Run, newest: set[int], referenced: set[str]) -> str:
    if run.running:
        return "still running"
    if run.path.name in referenced:
        return "referenced by the repository"
    if id(run) in newest:
        return "among its scenario's newest"
    return ""


PROTECTED = ("still running", "referenced by the repository", "among its scenario's newest")


def _over_budget(decisions: list[Decision], max_gb: float | None) -> list[Decision]:
    """Oldest first, the runs the age rules keep are removed while the folder is over budget;
    the protected ones stay even then."""
    if max_gb is None:
        return decisions
    budget = max_gb * 1024**3
    kept = sum(d.run.size for d in decisions if not d.remove)
    out = []
    for d in decisions:
        if not d.remove and kept > budget and d.why not in PROTECTED:
            kept -= d.run.size
            d = Decision(d.run, True, f"over the {max_gb:g} GB budget ({d.why})")
        out.append(d)
    return out


def prune(decisions: Iterable[Decision], dry_run: bool) -> int:
    """Removes the runs decided so; the bytes freed (or that would be)."""
    freed = 0
    for d in decisions:
        if d.remove:
            if not dry_run:
                shutil.rmtree(d.run.path, ignore_errors=True)
            freed += d.run.size
    return freed


@dataclass(frozen=True)
class Pruning:
    """What a policy did (or, in a dry run, would do) to a results folder."""

    decisions: list[Decision]
    freed: int  # bytes

    @property
    def removed(self) -> list[Decision]:
        return [d for d in self.decisions if d.remove]

    @property
    def left(self) -> int:
        """Bytes the runs use once the removed ones are gone."""
        return sum(d.run.size for d in self.decisions) - self.freed


def plan(root: Path, policy: Policy | None = None) -> list[Decision]:
    """The policy's decision on every run under `root`, now (the default policy if none)."""
    return decide(runs_under(root), policy or Policy(), referenced_run_ids(), time.time())


def apply_policy(root: Path, policy: Policy | None = None, dry_run: bool = False) -> Pruning:
    decisions = plan(root, policy)
    return Pruning(decisions, prune(decisions, dry_run))
