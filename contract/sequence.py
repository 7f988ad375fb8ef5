"""A run's place in a sequence of runs (chaos, hunt, claims, compare), shared by the run and the
process that started it.

A sequence overlaps what can overlap: run N+1's cluster comes up while run N is torn down and
checked; nothing else does. Its runs take turns for the CPU, each from the start of its
workload to the end of its process (its check, reports and packing), so a check never runs
beside a workload (a busy CPU is a fault of its own, and not the one the schedule asked for).
The turn is an exclusive lock on one file of the sequence's folder: the kernel releases it when
the process ends, however it ends, so a run killed outright cannot keep the next one waiting.

Each run has a folder of its own in the sequence's folder; the run writes there where its run
directory is (a sequence may run one scenario twice at once, so the run directory is named,
not guessed) and, once its drain ended, that it drained: the sequence starts the next run then.
"""

from __future__ import annotations

import fcntl
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

TURN_LOCK = "turn.lock"
RUN_DIR_MARK = "run-dir"
DRAINED_MARK = "drained"
OUTPUT = "output.log"  # the run's own output, when the sequence does not show it
TURN_POLL = 0.2  # seconds between two tries of the turn's lock

# A turn taken is held until the process ends: the lock goes with the file's descriptor.
_held: list[IO[bytes]] = []


class TurnTimeout(Exception):
    """The run before never gave the turn up within the bound."""


@dataclass(frozen=True)
class SequenceSlot:
    """One run's folder in a sequence's folder."""

    folder: Path

    @property
    def lock(self) -> Path:
        return self.folder.parent / TURN_LOCK

    @property
    def output(self) -> Path:
        return self.folder / OUTPUT

    # ---- the run's side -----------------------------------------------------------------

    def say_run_dir(self, run_dir: Path) -> None:
        _write_atomically(self.folder / RUN_DIR_MARK, str(run_dir.resolve()))

    def say_drained(self) -> None:
        _write_atomically(self.folder / DRAINED_MARK, f"{time.time():.3f}")

    def take_turn(self, timeout: float) -> float:
        """Waits until no other run of the sequence holds the turn, then holds it until this
        process ends; returns the seconds it waited."""
        started = time.monotonic()
        handle = open(self.lock, "ab")  # noqa: SIM115 - held to the end of the process
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() - started >= timeout:
                    handle.close()
                    raise TurnTimeout(
                        f"the run before it kept the sequence's turn for {timeout:.0f} s"
                    ) from None
                time.sleep(TURN_POLL)
                continue
            _held.append(handle)
            return time.monotonic() - started

    # ---- the sequence's side --------------------------------------------------------------

    def run_dir(self) -> Path | None:
        try:
            said = (self.folder / RUN_DIR_MARK).read_text().strip()
        except OSError:
            return None
        return Path(said) if said else None

    def drained(self) -> bool:
        return (self.folder / DRAINED_MARK).exists()


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(text)
    tmp.replace(path)
