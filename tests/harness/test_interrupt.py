"""SIGTERM in the middle of a fault: the harness heals, resumes, removes the cluster, exits."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT

pytestmark = [pytest.mark.cluster, pytest.mark.e2e]


def test_sigterm_during_a_partition_heals_and_cleans_up(
    docker_client: Any, rabbitmq_image: str, tmp_path: Path
) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            str(ROOT / "tests/scenarios/interrupt.yaml"),
            "--results",
            str(tmp_path),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        nemesis_log = tmp_path / "interrupt"
        deadline = time.monotonic() + 300
        paused = False
        while time.monotonic() < deadline and proc.poll() is None and not paused:
            for f in nemesis_log.glob("*/history/nemesis.jsonl"):
                paused = any(
                    json.loads(x)["f"] == "pause" and json.loads(x)["type"] == "ok"
                    for x in f.read_text().splitlines()
                    if x.endswith("}")
                )
            time.sleep(1)
        assert paused, "the partition and pause never started"
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1] == (
        "error: interrupted by SIGTERM; faults healed and cluster removed"
    )
    run_dir = (tmp_path / "latest").resolve()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["error"] == "Interrupted: SIGTERM" and manifest["ended"]
    events = [
        json.loads(x) for x in (run_dir / "history" / "nemesis.jsonl").read_text().split("\n") if x
    ]
    done = [(e["f"], e["value"].get("op")) for e in events if e["type"] == "ok"]
    assert done[-2:] == [("resume", None), ("stop-partition", "heal")]
    left = docker_client.containers.list(
        all=True, filters={"label": f"com.docker.compose.project={manifest['compose_project']}"}
    )
    assert left == []
