"""How often a rare anomaly shows, in the claims table: the rows of `harness hunt` runs, kept in
`docs/claims-hunts.json` and summed per scenario, release and client across hunts.

A hunt's rate is only worth summing with another's when both ran the same scenario. Each
recorded row carries the digest of the scenario its runs ran (read back from the runs'
manifests, so a hunt's own folder is the only input); the claims table sums the rows whose
digest is the scenario's as shipped now (on the row's client), and lists the rest apart as runs
of an earlier version of the scenario, counted nowhere.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from contract.rundir import MANIFEST
from harness.hunt import TRANSACTION_CLIENTS, on_client, wilson_interval
from systems.loading import load_checked
from systems.registry import AnyScenario, parse_scenario
from systems.scenario import ScenarioError, to_yaml

HUNTS_NAME = "claims-hunts.json"


class HuntRecordError(Exception):
    """A hunt folder that cannot be recorded (no hunt.json, or runs without manifests)."""


@dataclass(frozen=True)
class HuntedRow:
    """One row of one hunt: a scenario on one release with one client."""

    scenario: str
    hunt: str  # the hunt's folder name: <scenario>-<time>
    started: str
    line: str
    release: str
    client: str
    judged: int  # violations and clean runs: the rate's denominator
    violations: int
    inconclusive: int
    failed: int
    violating: list[str] = field(default_factory=list)  # run ids
    digest: str = ""  # of the scenario its runs ran


def digest_of(spec: AnyScenario) -> str:
    """The scenario's every field that is not at its default, but its release, hashed: a file
    that spells a default out and one that leaves it are the same scenario, and so are a
    scenario before and after the harness adds a field (at its default, it changes nothing the
    runs did: a digest of every field made every recorded hunt an "earlier version" at each new
    field). A run's manifest holds the release line it was run on (`--kafka 4.4`), and the
    row's release says it already."""
    data = spec.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    data.get("cluster", {}).pop("release", None)
    canonical = json.dumps(data, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def shipped_digest(shipped: AnyScenario, client: str) -> str:
    """The digest a hunted row must carry to count for the shipped scenario on its client."""
    if client in TRANSACTION_CLIENTS:
        try:
            return digest_of(on_client(shipped, client))
        except ScenarioError:
            return ""
    return digest_of(shipped)


def _run_digests(run_dirs: Iterable[str]) -> set[str]:
    """The digests of the scenarios the runs ran, from their manifests (a run that gave no
    manifest says nothing)."""
    found = set()
    for run_dir in run_dirs:
        try:
            manifest = json.loads((Path(run_dir) / MANIFEST).read_text())
        except (OSError, ValueError):
            continue
        spec = manifest.get("scenario_spec")
        if spec:
            found.add(digest_of(parse_scenario(to_yaml(spec), f"{run_dir}/{MANIFEST}")))
    return found


def rows_of_hunt(folder: Path) -> list[HuntedRow]:
    """The rows of the hunt in `folder` (its hunt.json), each with its scenario's digest."""
    try:
        document = json.loads((folder / "hunt.json").read_text())
    except (OSError, ValueError) as e:
        raise HuntRecordError(f"{folder}: no readable hunt.json ({e})") from None
    rows = []
    for row in document.get("rows", []):
        every = row.get("every_run", [])
        digests = _run_digests(r["run_dir"] for r in every if r.get("run_dir"))
        judged = int(row["violations"]) + int(row["clean"])
        if not digests and not judged:
            continue  # no run of the row gave a verdict: nothing to add to a rate
        if len(digests) != 1:
            raise HuntRecordError(
                f"{folder}: the runs of line {row.get('line')} client {row.get('client')} "
                f"ran {len(digests)} scenarios by their manifests (1 expected)"
            )
        rows.append(
            HuntedRow(
                scenario=str(document["scenario"]),
                hunt=folder.name,
                started=str(document.get("started", "")),
                line=str(row.get("line") or ""),
                release=str(row.get("releases") or "-"),
                client=str(row.get("client") or "-"),
                judged=judged,
                violations=int(row["violations"]),
                inconclusive=int(row["inconclusive"]),
                failed=int(row["failed"]),
                violating=[Path(r["run_dir"]).name for r in row.get("violating", [])],
                digest=digests.pop(),
            )
        )
    return rows


def load_hunted(path: Path) -> list[HuntedRow]:
    if not path.exists():
        return []
    return [HuntedRow(**r) for r in json.loads(path.read_text())["rows"]]


def record_hunt(folder: Path, path: Path) -> list[HuntedRow]:
    """The hunt's rows added to the file at `path` (a hunt recorded again replaces its rows);
    returns every recorded row."""
    new = rows_of_hunt(folder)
    kept = [r for r in load_hunted(path) if r.hunt != folder.name]
    every = sorted([*kept, *new], key=lambda r: (r.scenario, r.started, r.line, r.client))
    document: dict[str, Any] = {"rows": [asdict(r) for r in every]}
    path.write_text(json.dumps(document, indent=2) + "\n")
    return every


@dataclass
class Rate:
    """A scenario's rate on one release and client, summed over hunts."""

    scenario: str
    release: str
    client: str
    hunts: int = 0
    judged: int = 0
    violations: int = 0
    violating: list[str] = field(default_factory=list)

    def add(self, row: HuntedRow) -> None:
        self.hunts += 1
        self.judged += row.judged
        self.violations += row.violations
        self.violating += row.violating


def rates(rows: Iterable[HuntedRow]) -> list[Rate]:
    summed: dict[tuple[str, str, str], Rate] = {}
    for row in rows:
        key = (row.scenario, row.release, row.client)
        summed.setdefault(key, Rate(*key)).add(row)
    return [summed[k] for k in sorted(summed)]


def split_current(
    rows: list[HuntedRow], shipped: dict[str, AnyScenario]
) -> tuple[list[HuntedRow], list[HuntedRow]]:
    """The rows of the scenarios as shipped now, and those of earlier versions (or of scenarios
    no longer shipped)."""
    current: list[HuntedRow] = []
    earlier: list[HuntedRow] = []
    for row in rows:
        spec = shipped.get(row.scenario)
        same = spec is not None and row.digest == shipped_digest(spec, row.client)
        (current if same else earlier).append(row)
    return current, earlier


COLUMNS = [
    "| scenario | release | client | hunts | runs judged | violations | rate | 95 % interval "
    "| violating runs |",
    "|---|---|---|---|---|---|---|---|---|",
]


def _rate_row(rate: Rate) -> str:
    low, high = wilson_interval(rate.violations, rate.judged)
    runs = " ".join(f"`{r}`" for r in rate.violating) or "-"
    return (
        f"| {rate.scenario} | {rate.release} | {rate.client} | {rate.hunts} | {rate.judged} | "
        f"{rate.violations} | {rate.violations} of {rate.judged} | [{low:.3f}, {high:.3f}] | "
        f"{runs} |"
    )


def shipped_scenarios(ids: Iterable[str], scenarios_dir: Path) -> dict[str, AnyScenario]:
    """The shipped scenario of each id that still has one."""
    found = {}
    for scenario_id in set(ids):
        try:
            found[scenario_id] = load_checked(scenario_id, scenarios_dir).scenario
        except ScenarioError:
            continue
    return found


def hunted_section(docs: Path, scenarios_dir: Path) -> list[str]:
    """The claims table's section of hunted rates, from docs/claims-hunts.json (nothing when no
    hunt was recorded)."""
    rows = load_hunted(docs / HUNTS_NAME)
    return render_section(rows, shipped_scenarios((r.scenario for r in rows), scenarios_dir))


def render_section(rows: list[HuntedRow], shipped: dict[str, AnyScenario]) -> list[str]:
    if not rows:
        return []
    current, earlier = split_current(rows, shipped)
    lines = [
        "",
        "## Rates from hunts",
        "",
        f"From `{HUNTS_NAME}` (`harness hunt SCENARIO --claims` records a hunt; `harness claims "
        "--add-hunt FOLDER` one already made). A rare anomaly's rate: violations over the runs "
        "that judged something, summed over every recorded hunt of the scenario as shipped now, "
        "per release and client, with its Wilson score 95 % interval. A hunt's clean runs keep "
        "only their verdicts; its violating runs keep everything (named here by run id).",
        "",
        *COLUMNS,
        *(_rate_row(r) for r in rates(current)),
    ]
    if earlier:
        lines += [
            "",
            "Hunted on an earlier version of the scenario (or one no longer shipped), counted "
            "nowhere above:",
            "",
            *COLUMNS,
            *(_rate_row(r) for r in rates(earlier)),
        ]
    return lines
