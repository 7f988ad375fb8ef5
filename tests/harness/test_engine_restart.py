"""The Docker engine restarted in the middle of a run: the run could not be carried out (one
line, exit 2), what was acknowledged before is still in the history, and heal cleans up."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.orphans import clients
from nemesis.containers import HELPER_LABEL
from tests.conftest import missing
from tests.helpers import ROOT, kafka_partition_scenario, run_disturbed

pytestmark = [pytest.mark.cluster, pytest.mark.e2e, pytest.mark.root]


def _restart_engine() -> None:
    """Stops dockerd (it stops the containers), then starts it as make setup does."""
    subprocess.run(["pkill", "-TERM", "-x", "dockerd"], check=False)
    deadline = time.monotonic() + 120
    while subprocess.run(["pgrep", "-x", "dockerd"], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, "dockerd did not stop"
        time.sleep(0.5)
    subprocess.run(["bash", "scripts/docker-engine.sh"], cwd=ROOT, check=True, timeout=300)


def _acked(history: Path) -> set[str]:
    lines = history.read_text().splitlines() if history.exists() else []
    events = [json.loads(x) for x in lines if x.endswith("}")]
    return {e["msg_id"] for e in events if e["f"] == "send" and e["type"] == "ok"}


def test_an_engine_restart_mid_run_is_a_run_that_could_not_be_carried_out(
    docker_client: Any, tmp_path: Path
) -> None:
    if subprocess.run(["pgrep", "-x", "dockerd"], capture_output=True).returncode != 0:
        missing("the Docker engine is not a local dockerd this test can restart")
    scenario = kafka_partition_scenario(tmp_path, "engine-restart", heal_at=20)
    acked_before: set[str] = set()

    def restart(run_dir: Path) -> None:
        acked_before.update(_acked(run_dir / "history" / "P1.jsonl"))
        _restart_engine()

    code, stderr, run_dir = run_disturbed(scenario, tmp_path / "results", restart)
    assert code == 2, stderr[-3000:]
    assert "Traceback" not in stderr
    last = stderr.strip().splitlines()[-1]
    print(last)  # for the record (pytest -rP)
    assert last.startswith("error: the run could not be carried out: the Docker engine went away")
    assert acked_before and acked_before <= _acked(run_dir / "history" / "P1.jsonl")

    heal = subprocess.run(
        [sys.executable, "-m", "harness.cli", "heal"], cwd=ROOT, capture_output=True, text=True
    )
    assert heal.returncode == 0, heal.stderr
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["error"].startswith("EngineLost: ")
    label = {"label": f"com.docker.compose.project={manifest['compose_project']}"}
    assert docker_client.containers.list(all=True, filters=label) == []
    assert docker_client.networks.list(filters=label) == []
    assert docker_client.containers.list(all=True, filters={"label": HELPER_LABEL}) == []
    assert clients() == []
