"""The cache's lock taken only when free: another process holding it is not waited for, and
the lock is free again when the block ends."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from contract.cache import exclusive_now

pytestmark = pytest.mark.unit
HOLDER = (
    "import fcntl, sys, time\n"
    "fh = open(sys.argv[1], 'a')\n"
    "fcntl.flock(fh, fcntl.LOCK_EX)\n"
    "print('held', flush=True)\n"
    "sys.stdin.read()\n"
)


def test_a_lock_another_process_holds_is_not_waited_for(tmp_path: Path) -> None:
    lock = tmp_path / "dir" / "lock"
    lock.parent.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lock)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    with exclusive_now(lock) as fh:
        assert fh is None
    holder.communicate("")  # it ends, and its lock with it
    with exclusive_now(lock) as fh:
        assert fh is not None
        fh.write("mine\n")
    with exclusive_now(lock) as fh:
        assert fh is not None and lock.read_text() == "mine\n"


def test_the_lock_file_and_its_folder_are_made(tmp_path: Path) -> None:
    with exclusive_now(tmp_path / "a" / "b" / "lock") as fh:
        assert fh is not None
    assert (tmp_path / "a" / "b" / "lock").is_file()
