"""The disk under results/ fills up in the middle of a partition: one line, exit 2, the fault
healed and the cluster removed, and what was written before is still there."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.orphans import clients
from tests.conftest import missing
from tests.helpers import kafka_partition_scenario, run_disturbed

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
    scenario = kafka_partition_scenario(tmp_path, "full-disk", heal_at=8)
    code, stderr, run_dir = run_disturbed(scenario, small_disk, lambda _: _fill(small_disk))
    assert code == 2, stderr[-3000:]
    assert "Traceback" not in stderr
    last = stderr.strip().splitlines()[-1]
    print(last)  # for the record (pytest -rP)
    assert last.startswith("error: cannot write the run's results: No space left on device")
    assert last.endswith("; faults healed")

    manifest = json.loads((run_dir / "manifest.json").read_text())
    label = {"label": f"com.docker.compose.project={manifest['compose_project']}"}
    assert docker_client.containers.list(all=True, filters=label) == []
    assert clients() == []
    lines = (run_dir / "history" / "nemesis.jsonl").read_text().splitlines()
    events = [json.loads(x) for x in lines if x.endswith("}")]  # the last may be cut short
    assert [e["f"] for e in events if e["type"] == "ok"][:1] == ["start-partition"]
    assert (run_dir / "history" / "P1.jsonl").stat().st_size > 0
