"""`harness chaos` and `harness nightly` end to end: a seed always draws the same schedule, a
generated run carries its seed, its schedule and its coverage, and the night writes its summary
and JUnit. One short run on the kafka-mock tier (every change), one on real Kafka (e2e)."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import ROOT


def harness(*args: str, timeout: float = 1200) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
    )


def dry_run(base: str, seed: int, minutes: str, *more: str) -> list[dict[str, Any]]:
    result = harness("chaos", base, "--seed", str(seed), "--minutes", minutes, "--dry-run", *more)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"# chaos-{base.split('/')[1]}, seed {seed}")
    steps: list[dict[str, Any]] = yaml.safe_load(result.stdout)["nemesis"]
    return steps


def only_run(results: Path, scenario_id: str) -> Path:
    (run_dir,) = (results / scenario_id).iterdir()
    return run_dir


def test_a_dry_run_draws_the_same_schedule_for_the_same_seed() -> None:
    first = dry_run("chaos/kafka-safe", 42, "3")
    assert first == dry_run("chaos/kafka-safe", 42, "3")
    assert first != dry_run("chaos/kafka-safe", 43, "3")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["chaos", "R1", "--dry-run"], "needs a rate"),
        (["chaos", "chaos/kafka-safe", "--faults", "bogus", "--dry-run"], "no fault family"),
        (["chaos", "chaos/kafka-safe", "--interval", "5", "--dry-run"], "--interval takes"),
        (["chaos", "chaos/rabbitmq-quorum", "--mode", "zk", "--dry-run"], "--mode is for Kafka"),
        (["chaos", "no-such-base", "--dry-run"], "no scenario"),
        (["nightly", "--bases", "chaos/none"], "no base"),
        (["shrink", "/nonexistent-run"], "no manifest"),
        (["shrink", "scenarios", "--tries", "1", "--need", "2"], "--need must be"),
    ],
)
def test_bad_chaos_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = harness(*args)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def check_generated_run(run_dir: Path, seed: int, steps: list[dict[str, Any]]) -> dict[str, Any]:
    """The run directory of a generated schedule: seed, schedule and coverage."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["seed"] == seed and manifest["chaos"]["seed"] == seed
    schedule = yaml.safe_load((run_dir / "schedule.yaml").read_text())
    assert schedule["nemesis"] == steps  # the file replays the very schedule drawn
    assert manifest["scenario_file"] == str(run_dir / "schedule.yaml")
    verdict: dict[str, Any] = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["seed"] == seed
    coverage = verdict["coverage"]
    assert coverage["steps"], "the faults of a generated schedule show in the coverage"
    assert {"situations", "ops", "acked_in_faults", "vacuous"} <= set(coverage)
    assert coverage["ops"], "each op the nemesis carried out is counted"
    report = (run_dir / "report.html").read_text()
    assert 'id="coverage-steps"' in report and f"seed {seed}" in report
    assert 'id="coverage-ops"' in report
    return verdict


# Nightly (75 s in a loaded fast tier), beside the real-Kafka night: the fast tier keeps the
# schedule's generator, coverage and shrinker tests.
@pytest.mark.nightly
@pytest.mark.spark
def test_a_chaos_run_on_the_mock_tier_carries_its_seed_schedule_and_coverage(
    spark: object, tmp_path: Path
) -> None:
    # Brokers down and slow brokers only: injected produce errors make the mock's idempotence
    # report a message delivered that its log never held (docs/claims-findings.md), which is
    # the mock's, not what this test is about.
    faults = ("--faults", "kill,slow")
    steps = dry_run("chaos/kafka-mock", 7, "0.75", *faults)
    result = harness(
        "chaos", "chaos/kafka-mock", "--seed", "7", "--minutes", "0.75", *faults,
        "--results", str(tmp_path),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "seed 7: held" in result.stdout
    run_dir = only_run(tmp_path, "chaos-kafka-mock-s7")
    verdict = check_generated_run(run_dir, 7, steps)
    assert verdict["matched"] and verdict["tier"] == "kafka-mock"


@pytest.mark.e2e
def test_a_night_on_real_kafka_runs_a_seeded_schedule_and_writes_its_summary(
    docker_client: Any, tmp_path: Path
) -> None:
    """The smallest night: one generated run of the safe base (acks=all, min ISR 2) on a real
    KRaft cluster. A violation here is a broker's or ours, and fails the test."""
    steps = dry_run("chaos/kafka-safe", 1001, "1")
    result = harness(
        "nightly",
        "--hours", "0.01",
        "--minutes", "1",
        "--bases", "chaos/kafka-safe",
        "--seed", "1001",
        "--results", str(tmp_path),
        timeout=1500,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    run_dir = only_run(tmp_path, "chaos-kafka-safe-s1001")
    verdict = check_generated_run(run_dir, 1001, steps)
    assert verdict["kafka_mode"] == "kraft" and verdict["tier"] == "real-cluster"
    assert verdict["groups"]["final"]["lost"] == 0
    (night,) = (tmp_path / "chaos").iterdir()
    summary = (night / "summary.md").read_text()
    assert "| chaos/kafka-safe (kraft) | 1001 |" in summary
    assert "## Coverage" in summary
    suite = ET.parse(night / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "1" and suite.get("failures") == "0"
