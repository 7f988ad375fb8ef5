"""A client started by a harness ends when that harness is killed outright."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.unit

# A stand-in harness: starts one client the way a run does (own session, its pid in the
# environment), prints the client's pid, then waits to be killed.
HARNESS = textwrap.dedent(
    """
    import os, subprocess, sys, time
    client = subprocess.Popen(
        [sys.executable, "-c", sys.argv[1]],
        start_new_session=True,
        env={**os.environ, "BJ_HARNESS_PID": str(os.getpid())},
    )
    print(client.pid, flush=True)
    time.sleep(120)
    """
)
CLIENT = (
    "from workloads.lifeline import tie_to_harness; import time; tie_to_harness(); time.sleep(120)"
)


def _gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return True
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return True
        time.sleep(0.05)
    return False


def _start(client_code: str) -> tuple[subprocess.Popen[str], int]:
    harness = subprocess.Popen(
        [sys.executable, "-c", HARNESS, client_code],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert harness.stdout is not None
    return harness, int(harness.stdout.readline())


def test_a_client_ends_within_a_second_of_its_harness_killed() -> None:
    harness, client = _start(CLIENT)
    time.sleep(0.5)  # the tie is made
    assert not _gone(client, 0.5), "the client ended before its harness"
    harness.send_signal(signal.SIGKILL)
    harness.wait()
    assert _gone(client, 3.0)


def test_a_client_whose_harness_died_before_the_tie_ends_at_once() -> None:
    late = "import time; time.sleep(1); " + CLIENT
    harness, client = _start(late)
    harness.send_signal(signal.SIGKILL)
    harness.wait()
    assert _gone(client, 4.0)


def test_the_watcher_alone_ends_a_client_without_a_parent_death_signal() -> None:
    # The parent-death signal cleared after the tie: only the watcher thread can end it.
    cleared = CLIENT.replace(
        "tie_to_harness();",
        "tie_to_harness(); import ctypes; ctypes.CDLL(None).prctl(1, 0, 0, 0, 0);",
    )
    harness, client = _start(cleared)
    time.sleep(0.5)
    harness.send_signal(signal.SIGKILL)
    harness.wait()
    assert _gone(client, 3.0)


def test_a_client_started_by_hand_is_left_alone() -> None:
    env = {k: v for k, v in os.environ.items() if k != "BJ_HARNESS_PID"}
    code = "from workloads.lifeline import tie_to_harness; tie_to_harness(); print('alive')"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=30
    )
    assert done.stdout.strip() == "alive"
