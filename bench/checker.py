"""Checker benchmark: `make bench` times `harness check` beside DuckDB on the same histories.

For each size (BENCH_SIZES, default 60k, 1M and 10M messages; 60k is a run's size) a synthetic
Kafka history
(checkers.synthetic) is checked three ways, each in a process of its own so its wall time and
peak memory (the whole process tree: Python and Spark's JVM) are its own:
  duckdb         bench.duckdb_check on the JSONL files, every size's before the warm
                 server starts (DuckDB takes most of the machine's memory at 10M)
  cold check     the first check in a local Spark of its own (--master local[*]): JSONL parsed
                 into the Parquet copy, then checked (and report.html and junit.xml written)
  cold again     the Parquet copy there already (what re-checking a run costs)
  warm check     the first check again, on a warm Spark Connect server (checkers.engine.session)
                 that the bench starts once and warms as `harness spark up` does
                 (checkers.rehearsal) before the first size; its peak memory adds the
                 server's
  warm again     likewise, from the Parquet copy
  warm steady    run-sized histories only: the median of STEADY_CHECKS more, as a server that
                 has checked a few runs answers the next (the JVM's compiler still speeds up
                 Spark's code over a server's first checks)
and then `harness report` rebuilds report.html and junit.xml from the verdict and timeline.
BENCH_WARM=0 leaves the warm rows out.
The two implementations' answers are compared; any difference fails the bench. Figures, not
assertions: goals are read from the table, never enforced by a timed test.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkers.attribution import step_number
from checkers.synthetic import synth_run
from contract.numbers import parse_counts

DEFAULT_SIZES = "60k,1M,10M"
PHASE_TIMEOUT = 3600.0  # seconds one check may take before the bench gives up on it
STEADY_CHECKS = 5
STEADY_UP_TO = 100_000  # messages: past a run's size, more checks cost more than they say


@dataclass
class Timing:
    seconds: float
    peak_mb: float


def main() -> int:
    sizes = parse_sizes(os.environ.get("BENCH_SIZES") or DEFAULT_SIZES)
    root = Path(os.environ.get("BENCH_DIR") or tempfile.mkdtemp(prefix="brokerjepsen-bench-"))
    keep = os.environ.get("BENCH_KEEP") == "1"
    print(f"{os.cpu_count()} cores; histories in {root}" + (" (kept)" if keep else ""))
    print(
        f"{'messages':>10} {'lines':>10} {'MB':>7}  {'engine':<14} {'seconds':>8} "
        f"{'x duckdb':>8} {'peak MB':>8}"
    )
    differ = False
    try:
        # DuckDB answers every size before the warm server starts: at 10M it takes 20 GB, more
        # than the machine had beside the server's JVM after the 1M checks (the machine then
        # reclaimed its page cache for minutes, and the bench's hour ran out).
        duckdb = {n: _duckdb(root / f"run-{n}", n) for n in sizes}
        with _warm_session() as server_pid:
            for n in sizes:
                differ |= not _bench_size(root / f"run-{n}", n, server_pid, duckdb[n])
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    return 1 if differ else 0


@contextlib.contextmanager
def _warm_session() -> Iterator[int | None]:
    """The warm server's process (0 when it is elsewhere: SPARK_REMOTE), warmed as `harness
    spark up` warms it; None with BENCH_WARM=0 or when it cannot start."""
    if os.environ.get("BENCH_WARM") == "0":
        yield None
        return
    from checkers.engine import HistoryError, recorded_server, warm_server
    from checkers.rehearsal import MESSAGES, warm_up

    with warm_server() as url:
        if url is None:
            yield None
            return
        try:
            took = ", ".join(f"{s:.1f}" for s in warm_up(url))
        except HistoryError as e:
            raise SystemExit(f"bench: the warm server's warm-up failed: {e}") from None
        print(f"warm Spark Connect at {url}, warmed as harness spark up warms it: checks of a")
        print(f"{MESSAGES}-message history of another seed in {took} s")
        server = recorded_server()
        yield server.pid if server and server.url == url else 0


def parse_sizes(text: str) -> list[int]:
    """ "60k,1M,10M" or "60000,1000000" -> message counts; anything else: one line, exit 2."""
    try:
        return parse_counts(text)
    except ValueError as e:
        print(f"bench: BENCH_SIZES: {e}", file=sys.stderr)
        raise SystemExit(2) from None


def _duckdb(run: Path, messages: int) -> Timing:
    """DuckDB's answers for a history of `messages` (made first when it is not there yet)."""
    synth_run(run, messages)
    python = sys.executable
    return _timed([python, "-m", "bench.duckdb_check", str(run), str(duckdb_answers(run))])


def duckdb_answers(run: Path) -> Path:
    """Where DuckDB's answers for the history of `run` are written."""
    return run / "duckdb.json"


def _bench_size(run: Path, messages: int, server_pid: int | None, duckdb: Timing) -> bool:
    """Times the checker on one size beside DuckDB's `duckdb`; returns whether the two
    implementations agree."""
    history = run / "history"
    shutil.rmtree(run / "history.parquet", ignore_errors=True)
    lines = sum(1 for p in history.glob("*.jsonl") for _ in open(p, "rb"))
    mb = sum(p.stat().st_size for p in history.glob("*.jsonl")) / 1e6
    python = sys.executable
    harness = [python, "-m", "harness.cli", "check", str(run)]
    cold = [*harness, "--master", "local[*]"]
    timings = {
        "duckdb": duckdb,
        "cold check": _timed(cold, ok_codes=(0, 1)),
        "cold again": _timed(cold, ok_codes=(0, 1)),
    }
    if server_pid is not None:
        shutil.rmtree(run / "history.parquet", ignore_errors=True)
        also = [server_pid] if server_pid else []
        timings["warm check"] = _timed(harness, (0, 1), also)
        timings["warm again"] = _timed(harness, (0, 1), also)
        if messages <= STEADY_UP_TO:
            steady = sorted(
                (_timed(harness, (0, 1), also) for _ in range(STEADY_CHECKS)),
                key=lambda t: t.seconds,
            )
            timings["warm steady"] = steady[len(steady) // 2]
    # report.html and junit.xml again, from verdict.json and timeline.json alone
    timings["report"] = _timed([python, "-m", "harness.cli", "report", str(run)])
    base = timings["duckdb"].seconds
    for engine, t in timings.items():
        print(
            f"{messages:>10} {lines:>10} {mb:>7.0f}  {engine:<14} {t.seconds:>8.1f} "
            f"{t.seconds / base:>8.1f} {t.peak_mb:>8.0f}",
            flush=True,
        )
    differences = compare(
        json.loads((run / "verdict.json").read_text()), json.loads(duckdb_answers(run).read_text())
    )
    for d in differences:
        print(f"  DIFFERENT ANSWERS: {d}")
    if not differences:
        print(f"{'':>31}answers agree (every count, log, reader, producer, lost by step)")
    return not differences


def compare(verdict: dict[str, Any], duck: dict[str, Any]) -> list[str]:
    """Where the checker's verdict.json and DuckDB's answers differ, one line each."""
    out = []
    if verdict["groups"] != duck["groups"]:
        out.append(f"groups: checker {verdict['groups']} duckdb {duck['groups']}")
    for name, n in duck["log"].items():
        if verdict["log"].get(name) != n:
            out.append(f"log.{name}: checker {verdict['log'].get(name)} duckdb {n}")
    for metric, by_process in duck["per_process"].items():
        where = verdict["producers"] if metric == "nonmonotonic_sends" else verdict["readers"]
        ours = {p: c[metric] for p, c in where.items() if c[metric]}
        if ours != by_process:
            out.append(f"{metric}: checker {ours} duckdb {by_process}")
    for group, steps in duck["lost_by_step"].items():
        by_step = verdict["attribution"]["lost"].get(group, {}).get("by_step", {})
        ours = {step_number(label): n for label, n in by_step.items()}
        if ours != {int(k): v for k, v in steps.items()}:
            out.append(f"lost by step in {group}: checker {ours} duckdb {steps}")
    return out


def _timed(
    cmd: list[str], ok_codes: tuple[int, ...] = (0,), also: list[int] | None = None
) -> Timing:
    """The command's wall time and the peak memory of its process tree and of `also`'s."""
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak = _PeakRss([proc.pid, *(also or [])])
    try:
        _, err = proc.communicate(timeout=PHASE_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise SystemExit(
            f"bench: {' '.join(cmd[2:4])} did not finish in {PHASE_TIMEOUT:.0f} s"
        ) from None
    finally:
        peak.stop()
    if proc.returncode not in ok_codes:
        last = (err or "").strip().splitlines()[-1:] or ["no output"]
        raise SystemExit(f"bench: {' '.join(cmd[2:4])} exited {proc.returncode}: {last[0]}")
    return Timing(time.monotonic() - started, peak.mb)


class _PeakRss:
    """The highest resident memory of a process and all its descendants, sampled 5 times a
    second from /proc (Spark's JVM is a grandchild, out of rusage's reach while it runs)."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.mb = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._done.wait(0.2):
            tree = {p for root in self.pids for p in _tree(root)}
            self.mb = max(self.mb, sum(_rss_mb(p) for p in tree))


def _tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo += children.get(pid, [])
    return tree


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return 0.0


if __name__ == "__main__":
    sys.exit(main())
