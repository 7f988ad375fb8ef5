"""`harness prune` from the command line: what it would remove and free, in a dry run that
removes nothing."""

from __future__ import annotations

from pathlib import Path

from tests.contract.test_retention import plant
from tests.helpers import harness


def test_prune_from_the_cli_says_what_it_would_free_and_removes_nothing(tmp_path: Path) -> None:
    old = plant(tmp_path, "K4", 30)
    plant(tmp_path, "K4", 1)
    done = harness(
        "prune",
        "--results",
        str(tmp_path),
        "--dry-run",
        "--keep-last",
        "1",
    )
    assert done.returncode == 0, done.stderr
    assert f"would remove {old}" in done.stdout and old.exists()
    assert "would free 0.0 MB of 2 runs" in done.stdout
