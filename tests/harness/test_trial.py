"""A campaign's run ends with the campaign: a hunt, chaos or claims process killed outright
(SIGKILL, no cleanup of its own) leaves no run going on without it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from contract.process import alive
from contract.wait import wait_until
from tests.helpers import ROOT

# Stands for `harness run`: says its pid, then waits; SIGTERM (what a run heals and tears down
# on) is written down before it exits.
RUN = (
    "import os, signal, sys, time\n"
    "def stop(*_):\n"
    "    open(sys.argv[1], 'w').write('SIGTERM'); sys.exit(0)\n"
    "signal.signal(signal.SIGTERM, stop)\n"
    "open(sys.argv[2], 'w').write(str(os.getpid()))\n"
    "time.sleep(60)\n"
)


def test_a_campaign_killed_outright_stops_its_run_with_sigterm(tmp_path: Path) -> None:
    said, pid_file = tmp_path / "said", tmp_path / "pid"
    campaign = (
        "import sys\n"
        "from pathlib import Path\n"
        "from harness import sequence, trial\n"
        f"sequence.Job.argv = lambda *_: [sys.executable, '-c', {RUN!r}, {str(said)!r}, "
        f"{str(pid_file)!r}]\n"
        f"trial.run_once('x', 'x', Path({str(tmp_path)!r}), timeout=60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", campaign], cwd=ROOT)
    assert wait_until(pid_file.exists, 20), "the run never started"
    time.sleep(0.2)
    run = int(pid_file.read_text())
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(timeout=10)
    assert wait_until(lambda: not alive(run), 10), "the run outlived its campaign"
    assert said.read_text() == "SIGTERM"
