"""The sequence's turn: one run at a time from its workload to the end of its process, released
by the kernel however the process ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from contract.sequence import SequenceSlot, TurnTimeout
from contract.wait import wait_until
from tests.helpers import ROOT

HOLDER = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from contract.sequence import SequenceSlot\n"
    "SequenceSlot(Path(sys.argv[1])).take_turn(10)\n"
    "Path(sys.argv[2]).write_text('held')\n"
    "time.sleep(60)\n"
)


def slot(tmp_path: Path, name: str) -> SequenceSlot:
    (tmp_path / name).mkdir()
    return SequenceSlot(tmp_path / name)


def test_a_turn_held_by_another_process_is_waited_for_until_it_ends(tmp_path: Path) -> None:
    held = tmp_path / "held"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(slot(tmp_path, "run-1").folder), str(held)], cwd=ROOT
    )
    try:
        assert wait_until(held.exists, 20)
        second = slot(tmp_path, "run-2")
        with pytest.raises(TurnTimeout, match="kept the sequence's turn for 1 s"):
            second.take_turn(1)
        os.kill(holder.pid, signal.SIGKILL)  # no cleanup of its own: the kernel lets go
        holder.wait(timeout=10)
        assert second.take_turn(10) < 10
    finally:
        holder.kill()
        holder.wait()


def test_a_run_says_where_its_run_directory_is_and_that_it_drained(tmp_path: Path) -> None:
    mine = slot(tmp_path, "run-1")
    assert mine.run_dir() is None and not mine.drained()
    mine.say_run_dir(tmp_path / "results" / "K4" / "x")
    mine.say_drained()
    assert mine.run_dir() == (tmp_path / "results" / "K4" / "x").resolve() and mine.drained()
