"""A scenario end to end on a machine whose every core is busy with something else (a shared CI
runner) still gives its verdict, and the verdict its claim expects."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import kafka_partition_scenario, run_harness

pytestmark = [pytest.mark.cluster, pytest.mark.e2e]

BURN_SECONDS = 900  # each burner stops by itself after this, whatever happens to the test
BURNER = f"import time\nend = time.time() + {BURN_SECONDS}\nwhile time.time() < end:\n    pass\n"


def test_a_scenario_under_a_busy_cpu_gives_its_verdict(docker_client: Any, tmp_path: Path) -> None:
    scenario = kafka_partition_scenario(tmp_path, "busy-cpu", heal_at=10)
    burners = [subprocess.Popen([sys.executable, "-c", BURNER]) for _ in range(os.cpu_count() or 2)]
    try:
        result, run_dir = run_harness(str(scenario), tmp_path / "results", timeout=BURN_SECONDS)
    finally:
        for b in burners:
            b.kill()
            b.wait()
    assert result.returncode == 0, result.stderr[-3000:]
    assert "verdict: safe (matches" in result.stdout
    assert (run_dir / "verdict.json").exists()
