"""Bad flags and values: one line on stderr and exit 2, never a usage box or a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import ROOT, harness

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["claims", "--runs", "1M", "--dry-run"], "'1M' is more than 10"),
        (["claims", "--runs", "x", "--dry-run"], "'x' is not a count"),
        (["chaos", "chaos/kafka-safe", "--minutes", "x", "--dry-run"], "--minutes"),
        (["nightly", "--hours", "99"], "--hours"),
        (["shrink", "somewhere", "--tries", "0"], "'0' is not a count"),
        (["run"], "Missing argument"),
        (["heal", "--bogus"], "No such option: --bogus"),
        (["nosuch"], "No such command"),
    ],
)
def test_a_usage_error_is_one_line_and_exit_2(args: list[str], said: str) -> None:
    done = harness(*args, timeout=60)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and said in lines[0], done.stderr


def test_a_count_takes_the_readme_s_forms() -> None:
    done = harness("chaos", "chaos/kafka-mock", "--runs", "2", "--dry-run", timeout=60)
    assert done.returncode == 0, done.stderr


def test_the_command_line_leaves_the_engine_and_the_scenarios_to_the_commands_that_run() -> None:
    """`harness check` and `harness show` need neither the Docker client nor the scenarios'
    models: the command line imports them where a command uses them, not for every command."""
    heavy = ("docker", "requests", "systems", "nemesis", "compose.engine")
    done = subprocess.run(
        [sys.executable, "-c", "import sys, harness.cli; print(*sorted(sys.modules))"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    loaded = [m for m in done.stdout.split() if m.startswith(heavy)]
    assert loaded == [], loaded
