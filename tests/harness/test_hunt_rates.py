"""Hunted rates in the claims table: rows recorded from hunt folders (hunt.json and the runs'
manifests), summed per scenario, release and client, and a hunt of another version of the
scenario kept apart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.hunt import on_client
from harness.hunt_rates import (
    HUNTS_NAME,
    HuntRecordError,
    digest_of,
    hunted_section,
    load_hunted,
    record_hunt,
)
from systems.registry import find_scenario, load_scenario, parse_scenario
from systems.scenario import scenario_data, to_yaml
from tests.helpers import ROOT, harness

pytestmark = pytest.mark.unit

SCENARIOS = ROOT / "scenarios"


def t2_spec(client: str, release: str, *, tampered: bool = False) -> dict[str, Any]:
    """T2 as a run's manifest holds it: on a client, with the release line it ran on."""
    data = scenario_data(on_client(load_scenario(find_scenario("T2", SCENARIOS)), client))
    data.setdefault("cluster", {})["release"] = release
    if tampered:
        data["workload"]["producers"][0]["count"] = 7
    return data


def a_hunt(
    root: Path, name: str, rows: list[tuple[str, str, str, list[str]]], *, tampered: bool = False
) -> Path:
    """A hunt folder: per row (line, release, client, kinds of its runs), the runs' manifests."""
    folder = root / "hunt" / name
    folder.mkdir(parents=True)
    document: dict[str, Any] = {"scenario": "T2", "started": f"{name} UTC", "rows": []}
    for line, release, client, kinds in rows:
        every = []
        for i, kind in enumerate(kinds):
            run_dir = root / "T2" / f"{name}-{line}-{client}-{i}"
            run_dir.mkdir(parents=True)
            spec = t2_spec(client, line, tampered=tampered)
            (run_dir / "manifest.json").write_text(json.dumps({"scenario_spec": spec}))
            every.append({"run_dir": str(run_dir), "kind": kind})
        document["rows"].append(
            {
                "line": line,
                "client": client,
                "releases": release,
                "violations": kinds.count("violation"),
                "clean": kinds.count("clean"),
                "inconclusive": kinds.count("inconclusive"),
                "failed": kinds.count("failed"),
                "violating": [r for r in every if r["kind"] == "violation"],
                "every_run": every,
            }
        )
    (folder / "hunt.json").write_text(json.dumps(document))
    return folder


def rate_rows(section: list[str]) -> list[list[str]]:
    return [
        [cell.strip() for cell in ln.strip("|").split("|")]
        for ln in section
        if ln.startswith("| T2 ")
    ]


def test_two_hunts_of_one_scenario_sum_per_release_and_client(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    first = a_hunt(
        tmp_path,
        "T2-20261129T0600Z",
        [("3.9", "3.9.2", "confluent-kafka", ["clean", "violation", "clean", "inconclusive"])],
    )
    second = a_hunt(
        tmp_path,
        "T2-20261129T0800Z",
        [
            ("3.9", "3.9.2", "confluent-kafka", ["clean", "clean", "failed"]),
            ("4.4", "4.4.0", "java", ["clean", "clean"]),
        ],
    )
    record_hunt(first, docs / HUNTS_NAME)
    record_hunt(second, docs / HUNTS_NAME)
    rows = rate_rows(hunted_section(docs, SCENARIOS))
    assert [r[:8] for r in rows] == [
        ["T2", "3.9.2", "confluent-kafka", "2", "5", "1", "1 of 5", "[0.036, 0.624]"],
        ["T2", "4.4.0", "java", "1", "2", "0", "0 of 2", "[0.000, 0.658]"],
    ]
    assert rows[0][8] == "`T2-20261129T0600Z-3.9-confluent-kafka-1`"
    assert rows[1][8] == "-"


def test_a_hunt_recorded_again_replaces_its_rows(tmp_path: Path) -> None:
    folder = a_hunt(tmp_path, "T2-1", [("3.9", "3.9.2", "confluent-kafka", ["clean"])])
    record_hunt(folder, tmp_path / HUNTS_NAME)
    assert len(record_hunt(folder, tmp_path / HUNTS_NAME)) == 1
    assert load_hunted(tmp_path / HUNTS_NAME)[0].judged == 1


def test_a_hunt_of_another_version_of_the_scenario_counts_apart(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    shipped = a_hunt(tmp_path, "T2-a", [("4.4", "4.4.0", "java", ["clean"])])
    changed = a_hunt(tmp_path, "T2-b", [("4.4", "4.4.0", "java", ["violation"])], tampered=True)
    record_hunt(shipped, docs / HUNTS_NAME)
    record_hunt(changed, docs / HUNTS_NAME)
    current, earlier = "\n".join(hunted_section(docs, SCENARIOS)).split("earlier version")
    assert "| T2 | 4.4.0 | java | 1 | 1 | 0 | 0 of 1 |" in current
    assert "| T2 | 4.4.0 | java | 1 | 1 | 1 | 1 of 1 |" in earlier


def test_the_release_line_a_run_was_given_is_not_the_scenario() -> None:
    shipped = on_client(load_scenario(find_scenario("T2", SCENARIOS)), "java")
    on_44 = parse_scenario(to_yaml(t2_spec("java", "4.4")), "T2 on 4.4")
    assert digest_of(on_44) == digest_of(shipped)


def test_a_row_whose_judged_runs_left_no_manifest_is_refused(tmp_path: Path) -> None:
    folder = a_hunt(tmp_path, "T2-c", [("4.4", "4.4.0", "java", ["clean"])])
    for manifest in (tmp_path / "T2").glob("*/manifest.json"):
        manifest.unlink()
    with pytest.raises(HuntRecordError, match="ran 0 scenarios"):
        record_hunt(folder, tmp_path / HUNTS_NAME)


def test_a_row_whose_runs_all_failed_adds_nothing(tmp_path: Path) -> None:
    folder = a_hunt(tmp_path, "T2-d", [("4.4", "4.4.0", "java", ["failed", "failed"])])
    for manifest in (tmp_path / "T2").glob("*/manifest.json"):
        manifest.unlink()
    assert record_hunt(folder, tmp_path / HUNTS_NAME) == []


def test_no_hunt_recorded_adds_no_section(tmp_path: Path) -> None:
    assert hunted_section(tmp_path, SCENARIOS) == []


def test_add_hunt_of_a_folder_without_hunt_json_is_one_line(tmp_path: Path) -> None:
    result = harness("claims", "--add-hunt", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "hunt.json" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_field_the_harness_adds_at_its_default_leaves_the_scenario_the_same() -> None:
    shipped = load_scenario(find_scenario("T2", SCENARIOS))
    spelled = shipped.model_dump(mode="json", by_alias=True, exclude_unset=True)
    # Fields spelled at their defaults (what a dump by a later harness adds): the same scenario.
    for step in spelled["nemesis"]:
        step |= {"release": None, "phase": None, "within": 60.0}
    assert digest_of(parse_scenario(to_yaml(spelled), "T2 as run")) == digest_of(shipped)
    # A value that differs from the default is another scenario.
    spelled["nemesis"][0]["within"] = 7
    assert digest_of(parse_scenario(to_yaml(spelled), "T2 changed")) != digest_of(shipped)
