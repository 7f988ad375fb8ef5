"""`harness shrink RUN_DIR`: the smallest schedule that still shows RUN_DIR's violation, as a
scenario file (scenarios/found/<scenario>-min.yaml) and RUN_DIR/shrink.json for its report.

Each candidate is an ordinary run of a scenario (chaos.shrink decides which); it reproduces
when its verdict's outcome is the original's (loss, anomalies, ...).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from chaos.shrink import Data, Shrinker, ShrinkOptions, ShrinkResult
from contract.manifest import Manifest, ManifestError, read_manifest
from contract.rundir import RunDir
from harness.chaos import run_scenario
from systems.registry import parse_scenario
from systems.scenario import ScenarioError, to_yaml
from systems.schema import modeline

# What a verdict can show that a shrink can chase.
VIOLATIONS = frozenset({"loss", "anomalies", "duplicates", "reordered"})
# A scenario file whose verdict matches when the violation shows: its expectation word.
EXPECT_OF = {"loss": "loss", "duplicates": "duplicates", "reordered": "reordered"}


class ShrinkError(Exception):
    """A run directory that cannot be shrunk; one line for the user."""


def violation_of(run_dir: Path) -> tuple[Manifest, dict[str, Any], str]:
    """The run's manifest, verdict and the outcome to chase; ShrinkError when there is none."""
    run = RunDir(run_dir)
    try:
        manifest = read_manifest(run_dir, required=True)
        verdict: dict[str, Any] = json.loads(run.verdict.read_text())
    except ManifestError as e:
        raise ShrinkError(str(e)) from None
    except (OSError, ValueError):
        raise ShrinkError(f"{run_dir}: no readable verdict.json (harness check it first)") from None
    outcome = verdict.get("outcome", "")
    if outcome not in VIOLATIONS:
        raise ShrinkError(f"{run_dir}: nothing to shrink, its outcome is {outcome or 'unknown'}")
    if not manifest.scenario_spec.get("nemesis"):
        raise ShrinkError(f"{run_dir}: its scenario has no nemesis steps to shrink")
    return manifest, verdict, outcome


def hot_steps(steps: list[Data], skipped: list[dict[str, Any]], attribution: dict) -> set[int]:
    """Indexes of the scenario's steps the checker tied anomalies to. The checker numbers the
    nemesis's invokes; a scenario step makes one, except a step not applied (none), a leader
    snapshot (none) and a cut both ways or from the quorum (two)."""
    numbers = set()
    for groups in attribution.values():
        for tied in groups.values():
            for label in tied.get("by_step", {}):
                if m := re.match(r"(\d+)\. ", label):
                    numbers.add(int(m.group(1)))
    not_applied = {s["step"] for s in skipped}
    index_of: dict[int, int] = {}
    n = 0
    for i, step in enumerate(steps):
        invokes = 0 if i in not_applied or step.get("op") == "leaders" else 1
        if step.get("op") == "cut-from-quorum" or (
            step.get("op") == "cut" and step.get("both_ways")
        ):
            invokes = 2
        for _ in range(invokes):
            n += 1
            index_of[n] = i
    return {index_of[k] for k in numbers if k in index_of}


def spec_to_shrink(manifest: Manifest) -> Data:
    """The run's scenario as a file would hold it, in the run's own Kafka mode, with an id of its
    own so the candidates' runs do not mix with the original's."""
    data: Data = copy.deepcopy(manifest.scenario_spec)
    data["id"] = f"{data['id']}-shrink"
    if manifest.kafka_mode and data.get("cluster", {}).get("system") == "kafka":
        data["cluster"]["modes"] = [manifest.kafka_mode]
    return data


def plain(data: Data) -> Data:
    """The scenario with only what differs from the schema's defaults: what a person writes."""
    scenario = parse_scenario(to_yaml(data), "<minimal>")
    out: Data = scenario.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    return out


def valid(data: Data) -> bool:
    try:
        parse_scenario(to_yaml(data), "<candidate>")
    except ScenarioError:
        return False
    return True


def shrink_run(
    run_dir: Path,
    opts: ShrinkOptions,
    results: Path,
    found_dir: Path,
    say: Callable[[str], None],
    attempt: Callable[[Data], bool | None] | None = None,
) -> tuple[ShrinkResult, Path]:
    """Shrinks RUN_DIR's schedule; writes the found scenario file and RUN_DIR/shrink.json."""
    manifest, verdict, outcome = violation_of(run_dir)
    data = spec_to_shrink(manifest)

    def run_candidate(candidate: Data) -> bool | None:
        trial = run_scenario(
            parse_scenario(to_yaml(candidate), "<candidate>"), results, manifest.kafka_line
        )
        if trial.verdict is None:
            say(f"candidate run failed: {trial.failure}")
            return None
        return bool(trial.verdict.get("outcome") == outcome)

    hot = hot_steps(data["nemesis"], manifest.skipped_steps, verdict.get("attribution") or {})
    say(f"shrinking {len(data['nemesis'])} steps ({outcome}); tied to anomalies: {sorted(hot)}")
    result = Shrinker(attempt or run_candidate, valid, opts, say).shrink(data, hot, (1, 1))
    found = write_found(result, manifest, run_dir, outcome, found_dir)
    RunDir(run_dir).shrink.write_text(json.dumps(shrink_record(result, found), indent=2) + "\n")
    return result, found


def write_found(
    result: ShrinkResult, manifest: Manifest, run_dir: Path, outcome: str, found_dir: Path
) -> Path:
    """scenarios/found/<scenario>-min.yaml: the minimal schedule, expecting what it shows."""
    original = manifest.scenario_spec
    data = plain(result.minimal)
    data["id"] = f"{original['id']}-min"
    data["expect"] = EXPECT_OF.get(outcome, data.get("expect"))
    data["description"] = (
        f"shrunk by harness shrink from {run_dir.name} of {original['id']}: "
        f"{result.original_steps} steps down to {len(data['nemesis'])}; it showed {outcome} "
        f"in {result.reproduced} of {result.runs_of_minimal} runs"
    )
    generated = data.get("generated") or {"base": original["id"], "seed": manifest.seed or 0}
    generated["shrunk_from"] = {
        "run": str(run_dir),
        "outcome": outcome,
        "original_steps": plain(original)["nemesis"],
        "reproduced": result.reproduced,
        "runs": result.runs_of_minimal,
        "runs_spent": result.runs_spent,
    }
    data["generated"] = generated
    path = found_dir / f"{data['id']}.yaml"
    header = [
        modeline(path),
        f"Found by harness shrink from {run_dir} ({original['id']}, seed {manifest.seed}).",
        f"{result.original_steps} steps shrunk to {len(data['nemesis'])} in {result.runs_spent} "
        f"runs; the minimal schedule showed {outcome} in {result.reproduced} of "
        f"{result.runs_of_minimal} runs.",
        f"Run it: make test-scenario SCENARIO=found/{data['id']}",
    ]
    found_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(to_yaml(data, header))
    return path


def shrink_record(result: ShrinkResult, found: Path) -> dict[str, Any]:
    """shrink.json: original vs minimal steps, the runs spent, every candidate tried."""
    return {
        "found": str(found),
        "original_steps": result.original_steps,
        "minimal_steps": len(result.minimal["nemesis"]),
        "minimal": plain(result.minimal)["nemesis"],
        "runs_spent": result.runs_spent,
        "reproduced": result.reproduced,
        "runs_of_minimal": result.runs_of_minimal,
        "budget_spent": result.budget_spent,
        "candidates": [asdict(c) for c in result.candidates],
    }
