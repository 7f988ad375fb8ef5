"""Helpers shared by the tests: end-to-end runs, histories, rendered compose files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contract.packed import history_file, read_lines

ROOT = Path(__file__).resolve().parent.parent


def history_events(history_dir: Path, process: str) -> list[dict[str, Any]]:
    """A process's events, from its history file in either form: a run that got its verdict
    has packed its history (contract.packed)."""
    path = history_file(history_dir, process)
    assert path is not None, f"{history_dir}: no history of {process}"
    return [json.loads(line) for line in read_lines(path) if line.strip()]


def harness(
    *args: str, timeout: float = 120, cwd: Path = ROOT, no_engine: bool = False
) -> subprocess.CompletedProcess[str]:
    """`harness ARGS...` as a user types it, from the repository's root (or `cwd`); with
    `no_engine`, on a machine whose Docker engine cannot be reached."""
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent"} if no_engine else None
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
    )


def run_harness(
    scenario: str, results: Path, *options: str, timeout: float = 1500
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`harness run SCENARIO --results RESULTS [OPTIONS]`; returns the result and the run
    directory."""
    result = harness("run", scenario, "--results", str(results), *options, timeout=timeout)
    latest = results / "latest"
    assert latest.is_symlink(), result.stderr[-2000:]
    return result, latest.resolve()


def kafka_partition_scenario(tmp_path: Path, scenario_id: str, heal_at: float) -> Path:
    """tests/scenarios/kill-points.yaml's cluster and workload without lazy disks, with one
    follower isolated from second 3 to `heal_at`: a short real run with one fault."""
    import yaml

    spec = yaml.safe_load((ROOT / "tests/scenarios/kill-points.yaml").read_text())
    spec["id"] = scenario_id
    spec["cluster"]["lazy_disks"] = False
    spec["nemesis"] = [
        {"at": 3, "op": "isolate", "target": ["kafka3"]},
        {"at": heal_at, "op": "heal"},
    ]
    path = tmp_path / f"{scenario_id}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def run_disturbed(
    scenario: Path, results: Path, disturb: Callable[[Path], None], timeout: float = 600
) -> tuple[int, str, Path]:
    """`harness run SCENARIO --results RESULTS` until its first partition is in effect, then
    `disturb(run_dir)`; returns the exit code, stderr and the run directory once it ended."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", str(scenario), "--results", str(results)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 400
        nemesis: list[Path] = []
        while not any("start-partition" in p.read_text() for p in nemesis):
            assert proc.poll() is None and time.monotonic() < deadline, "no partition began"
            time.sleep(0.2)
            nemesis = list(results.glob("*/*/history/nemesis.jsonl"))
        run_dir = nemesis[0].parent.parent
        disturb(run_dir)
        _, stderr = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, stderr, run_dir


def one_job_at_a_time(run: Callable[[Any], Any]) -> Callable[..., None]:
    """A stand-in for harness.sequence.run_jobs: each job run by `run(job) -> Trial`, one after
    another, with run_jobs's rules (on_trial says whether to go on; a job made unwanted by the
    trial before is skipped)."""

    def run_jobs(
        jobs: Any,
        on_trial: Callable[[Any, Any], bool],
        pipelined: bool = True,
        show_output: bool = False,
        wanted: Callable[[Any], bool] = lambda _job: True,
    ) -> None:
        for job in jobs:
            if not wanted(job):
                continue
            if not on_trial(job, run(job)):
                return

    return run_jobs


def services_up_starts(compose_data: dict[str, Any], tmp_path: Path) -> list[str]:
    """The services `docker compose up` starts from a rendered compose file (those of no
    profile), as Compose itself lists them: a spare's profile keeps it out."""
    from compose.cli import compose_command

    path = tmp_path / "docker-compose.yml"
    path.write_text(json.dumps(compose_data))  # YAML is a superset of JSON
    listed = subprocess.run(
        [*compose_command(), "-f", str(path), "config", "--services"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    return sorted(listed.stdout.split())
