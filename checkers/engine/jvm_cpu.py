"""Where the checker's JVM spent its CPU during a check (`harness check --profile`), by kind of
thread: the JIT compiler, Spark's tasks, garbage collection, and the rest (query planning, the
scheduler, the Connect server's own threads).

On this 2-core machine kind a warm check is bound by CPU, and a warm server still compiles
Spark's code after dozens of checks: a run-sized check spent 2.3-5 CPU-s in the JIT's compiler
threads beside 2 CPU-s of Spark's tasks. A phase's wall time does not show that; this does.
Read from Linux's /proc, for a JVM on this machine only (a remote Spark's CPU is not ours to
see); threads that ended during the check count in the process's total, under "other".
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkers.engine import session

PROC = Path("/proc")
KINDS = ("jit", "tasks", "gc")  # and "other": what the process used beyond them


def kind_of(thread_name: str) -> str:
    """The kind of a JVM thread, from its name as Linux keeps it (15 characters at most)."""
    if "CompilerThre" in thread_name:
        return "jit"
    if thread_name.startswith("Executor task"):
        return "tasks"
    if thread_name.startswith(("GC Thread", "G1 ")):
        return "gc"
    return "other"


@dataclass(frozen=True)
class CpuSample:
    """A process's CPU seconds so far, and its live threads' by kind."""

    process: float
    by_kind: dict[str, float]


def sample(pid: int, proc: Path = PROC) -> CpuSample | None:
    """The process's CPU seconds now; None when it is not there to read."""
    ticks = os.sysconf("SC_CLK_TCK")
    try:
        process = _cpu_ticks((proc / str(pid) / "stat").read_text()) / ticks
        tasks = list((proc / str(pid) / "task").iterdir())
    except OSError:
        return None
    by_kind = dict.fromkeys(KINDS, 0.0)
    for task in tasks:
        try:
            stat = (task / "stat").read_text()
        except OSError:  # the thread ended while we read
            continue
        kind = kind_of(stat[stat.index("(") + 1 : stat.rindex(")")])
        if kind != "other":
            by_kind[kind] += _cpu_ticks(stat) / ticks
    return CpuSample(process, by_kind)


def _cpu_ticks(stat: str) -> int:
    """utime + stime of a /proc stat line (the fields after the name, which may hold spaces)."""
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])


def spent(before: CpuSample, after: CpuSample) -> dict[str, float]:
    """CPU seconds between two samples: the process's, each kind's, and the rest as other."""
    kinds = {k: round(max(0.0, after.by_kind[k] - before.by_kind[k]), 2) for k in KINDS}
    process = round(after.process - before.process, 2)
    return {"process": process, **kinds, "other": round(max(0.0, process - sum(kinds.values())), 2)}


def jvm_pid(spark: Any, connect_url: str | None) -> int | None:
    """The checker JVM's process on this machine: a local Spark's driver, or the warm server
    when the session is the one this machine started; None for anything else."""
    if connect_url is None:
        gateway = getattr(spark.sparkContext, "_gateway", None)  # PySpark's own, no API
        proc = getattr(gateway, "proc", None)
        return getattr(proc, "pid", None)
    server = session.recorded_server()
    return server.pid if server is not None and server.url == connect_url else None


@contextlib.contextmanager
def measured(spark: Any, connect_url: str | None, active: bool) -> Iterator[dict[str, float]]:
    """The CPU the checker's JVM spends inside the block (spent's figures), filled in as it
    ends when `active`; left empty when that JVM is not this machine's to read."""
    pid = jvm_pid(spark, connect_url) if active else None
    before = sample(pid) if pid else None
    cpu: dict[str, float] = {}
    yield cpu
    after = sample(pid) if pid else None
    if before is not None and after is not None:
        cpu.update(spent(before, after))


def said(cpu: dict[str, float]) -> str:
    """One line for people."""
    parts = ", ".join(f"{name} {cpu[name]:.2f}" for name in (*KINDS, "other"))
    return f"checker JVM CPU: {cpu['process']:.2f} s ({parts})"
