"""Runs of a campaign (chaos, hunt, claims, compare) one after another, each a `harness run` in a
process of its own, bounded in time, overlapping only what can overlap.

Pipelined, run N+1 starts as soon as run N's drain ended: its cluster comes up while run N is
torn down and checked; its workload waits for the sequence's turn (contract.sequence), which run
N holds until its process ends, check and reports done. So no check ever competes with a
workload for the CPU, and a run's verdict is the one it would have had alone. One at a time
(`pipelined=False`), each run starts when the one before has ended, as a campaign always did.

A run that overruns its bound is sent SIGTERM (it heals its faults and removes its cluster, as
`harness run` does), and killed if it has not ended within HEAL_TIMEOUT; then `harness heal`
mends what it left, which ends the other run's cluster too: a failure in either heals both. A
campaign interrupted (Ctrl-C, or killed: its runs' parent-death signal) stops both runs the same
way. The runs' output goes, line by line, to a file in each run's folder of the sequence, and to
the terminal when asked.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from contract.manifest import ManifestError, read_manifest
from contract.process import dies_with
from contract.rundir import VERDICT
from contract.sequence import SequenceSlot

ROOT = Path(__file__).resolve().parent.parent
HEAL_TIMEOUT = 300
POLL = 0.5  # seconds between two looks at a running run's marks


@dataclass(frozen=True)
class Trial:
    run_dir: Path | None  # None: it failed before it had one
    seconds: float
    failure: str | None  # why there is no verdict
    verdict: dict[str, Any] | None


@dataclass(frozen=True)
class Job:
    """`harness run SCENARIO --results RESULTS [extra]`, its run directory made under
    RESULTS/<scenario_id>/, bounded by `timeout` seconds."""

    scenario: str | Path
    scenario_id: str
    results: Path
    timeout: float
    extra: tuple[str, ...] = ()
    tag: Any = field(default=None, compare=False)  # the campaign's own: which row, which seed

    def argv(self, slot: SequenceSlot) -> list[str]:
        return [
            sys.executable, "-m", "harness.cli", "run", str(self.scenario),
            "--results", str(self.results), *self.extra, "--in-sequence", str(slot.folder),
        ]  # fmt: skip


@dataclass
class _Running:
    job: Job
    slot: SequenceSlot
    proc: subprocess.Popen[bytes]
    started: float  # time.monotonic()
    deadline: float
    relay: threading.Thread
    timed_out: bool = field(default=False)

    def ended(self) -> bool:
        return self.proc.poll() is not None


def run_jobs(
    jobs: Iterable[Job],
    on_trial: Callable[[Job, Trial], bool],
    pipelined: bool = True,
    show_output: bool = False,
    wanted: Callable[[Job], bool] = lambda _job: True,
) -> None:
    """Runs the jobs in their order (taken from `jobs` only when a run is about to start);
    `on_trial` gets each run's Trial as it ends and says whether to go on: when it says no, a
    run already started for the next job is stopped and its cluster removed. So is one that
    the trial before made unwanted (`wanted`, asked again once a trial is judged: a hunt's row
    that found what it hunted), and the sequence goes on with the job after it."""
    with tempfile.TemporaryDirectory(prefix="bj-sequence-") as folder:
        _Sequence(Path(folder), show_output).run(iter(jobs), on_trial, pipelined, wanted)


class _Sequence:
    def __init__(self, folder: Path, show_output: bool) -> None:
        self.folder = folder
        self.show_output = show_output
        self.count = 0
        self.running: list[_Running] = []

    def run(
        self,
        jobs: Any,
        on_trial: Callable[[Job, Trial], bool],
        pipelined: bool,
        wanted: Callable[[Job], bool],
    ) -> None:
        try:
            current = self._start_next(jobs)
            while current is not None:
                following = None
                if pipelined:
                    self._wait_drained_or_ended(current)
                    if not current.ended():
                        following = self._start_next(jobs)
                trial = self._finish(current)
                if following is not None:  # its bound counts from when the turn was free
                    following.deadline = max(
                        following.deadline, time.monotonic() + following.job.timeout
                    )
                if not on_trial(current.job, trial):
                    if following is not None:
                        self._stop(following)
                    return
                if following is not None and not wanted(following.job):
                    self._stop(following)
                    following = None
                current = following if following is not None else self._start_next(jobs)
        except BaseException:
            for r in list(self.running):
                self._stop(r)
            raise

    # ---- starting and waiting -------------------------------------------------------------

    def _start_next(self, jobs: Any) -> _Running | None:
        job: Job | None = next(jobs, None)
        return None if job is None else self._start(job)

    def _start(self, job: Job) -> _Running:
        self.count += 1
        slot = SequenceSlot(self.folder / f"run-{self.count}")
        slot.folder.mkdir()
        proc = subprocess.Popen(
            job.argv(slot),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            preexec_fn=dies_with(os.getpid()),
        )
        relay = threading.Thread(target=_relay, args=(proc, slot.output, self.show_output))
        relay.start()
        started = time.monotonic()
        running = _Running(job, slot, proc, started, started + job.timeout, relay)
        self.running.append(running)
        return running

    def _wait_drained_or_ended(self, r: _Running) -> None:
        while not r.slot.drained() and not r.ended() and time.monotonic() < r.deadline:
            time.sleep(POLL)

    def _finish(self, r: _Running) -> Trial:
        """Waits for the run to end, within its bound; its Trial."""
        try:
            r.proc.wait(timeout=max(0.0, r.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            r.timed_out = True
            self._stop(r)
        else:
            self._forget(r)
        seconds = time.monotonic() - r.started
        failure = _failure(r)
        run_dir = r.slot.run_dir()
        return Trial(run_dir, seconds, failure, _verdict(run_dir, failure))

    # ---- stopping -----------------------------------------------------------------------------

    def _stop(self, r: _Running) -> None:
        """SIGTERM (the run heals and removes its cluster itself); a run still there after
        HEAL_TIMEOUT is killed, and `harness heal` mends what it left. A run stopped before its
        workload began leaves nothing to look at: its run directory goes."""
        if not r.ended():
            r.proc.send_signal(signal.SIGTERM)
            try:
                r.proc.wait(timeout=HEAL_TIMEOUT)
            except subprocess.TimeoutExpired:
                r.proc.kill()
                r.proc.wait()
                heal()
        self._forget(r)
        if not r.timed_out:
            _remove_if_unstarted(r.slot.run_dir())

    def _forget(self, r: _Running) -> None:
        r.relay.join(timeout=10)
        if r in self.running:
            self.running.remove(r)


def heal() -> None:
    """`harness heal`: what a run killed outright left behind."""
    argv = [sys.executable, "-m", "harness.cli", "heal"]
    subprocess.run(argv, cwd=ROOT, timeout=HEAL_TIMEOUT, capture_output=True, check=False)


def _relay(proc: subprocess.Popen[bytes], log: Path, show: bool) -> None:
    """The run's output, line by line, to its file, and to the terminal when asked (whole
    lines: two runs' output never mixes within a line)."""
    assert proc.stdout is not None
    with open(log, "wb") as out:
        for line in proc.stdout:
            out.write(line)
            out.flush()
            if show:
                _show(line)


def _show(line: bytes) -> None:
    stream: IO[bytes] = sys.stderr.buffer
    stream.write(line)
    stream.flush()


def _failure(r: _Running) -> str | None:
    if r.timed_out:
        return f"the run did not finish in {r.job.timeout:.0f} s"
    code = r.proc.returncode
    if code in (0, 1):
        return None
    said = [ln for ln in _lines(r.slot.output) if ln.startswith("error:")]
    return said[-1] if said else f"harness run exited {code}"


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()
    except OSError:
        return []


def _verdict(run_dir: Path | None, failure: str | None) -> dict[str, Any] | None:
    if failure or run_dir is None:
        return None
    try:
        verdict: dict[str, Any] = json.loads((run_dir / VERDICT).read_text())
    except (OSError, ValueError):
        return None
    return verdict


def _remove_if_unstarted(run_dir: Path | None) -> None:
    """A run stopped while its cluster came up, or waiting for its turn, removed: no workload
    ran, so there is nothing to judge."""
    if run_dir is None or not run_dir.is_dir():
        return
    try:
        manifest = read_manifest(run_dir)
    except (ManifestError, OSError):
        return
    if "workload" not in manifest.phases:
        shutil.rmtree(run_dir, ignore_errors=True)
