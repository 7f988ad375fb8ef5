"""The disk under results/ fills up in the middle of a partition: one line, exit 2, the fault
healed and the cluster removed, and what was written before is still there."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.orphans import clients
from tests.conftest import missing
from tests.helpers import ROOT

pytestmark = [pytest.mark.cluster, pytest.mark.e2e, pytest.mark.root]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MB tmpfs: room for the run's start, not for its history."""
    if os.geteuid() != 0:
        missing("mounting a small filesystem needs root")
    mnt = tmp_path / "results"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(mnt: Path) -> None:
    with open(mnt / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError as e:
            assert e.errno == errno.ENOSPC


def test_a_full_results_disk_ends_the_run_in_one_line_with_faults_healed(
    docker_client: Any, small_disk: Path, tmp_path: Path
) -> None:
    spec = yaml.safe_load((ROOT / "tests/scenarios/kill-points.yaml").read_text())
    spec["id"] = "full-disk"
    spec["cluster"]["lazy_disks"] = False  # nothing of the brokers' on the small disk
    spec["nemesis"] = [{"at": 3, "op": "isolate", "target": ["kafka3"]}, {"at": 8, "op": "heal"}]
    scenario = tmp_path / "full-disk.yaml"
    scenario.write_text(yaml.safe_dump(spec))
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", str(scenario), "--results", str(small_disk)],
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
            nemesis = list(small_disk.glob("full-disk/*/history/nemesis.jsonl"))
        _fill(small_disk)
        _, stderr = proc.communicate(timeout=400)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2, stderr[-3000:]
    assert "Traceback" not in stderr
    last = stderr.strip().splitlines()[-1]
    print(last)  # for the record (pytest -rP)
    assert last.startswith("error: cannot write the run's results: No space left on device")
    assert last.endswith("; faults healed")

    (run_dir,) = small_disk.glob("full-disk/*/")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    label = {"label": f"com.docker.compose.project={manifest['compose_project']}"}
    assert docker_client.containers.list(all=True, filters=label) == []
    assert clients() == []
    events = [
        json.loads(x) for x in (run_dir / "history" / "nemesis.jsonl").read_text().splitlines()
    ]
    assert [e["f"] for e in events if e["type"] == "ok"][:1] == ["start-partition"]
    assert (run_dir / "history" / "P1.jsonl").stat().st_size > 0
