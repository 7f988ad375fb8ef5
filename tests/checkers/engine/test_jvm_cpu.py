"""The checker JVM's CPU by kind of thread, read from a /proc tree made here."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from checkers.engine import jvm_cpu
from checkers.engine.jvm_cpu import CpuSample, kind_of, measured, sample, spent

TICKS = os.sysconf("SC_CLK_TCK")


def _stat(tid: int, name: str, user_ticks: int, system_ticks: int) -> str:
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
    return f"{tid} ({name}) S 1 1 1 0 -1 0 0 0 0 0 {user_ticks} {system_ticks} 0 0 20 0 1 0\n"


def _process(
    root: Path, pid: int, total: tuple[int, int], threads: dict[str, tuple[int, int]]
) -> None:
    (root / str(pid) / "task").mkdir(parents=True)
    (root / str(pid) / "stat").write_text(_stat(pid, "java", *total))
    for tid, (name, ticks) in enumerate(threads.items(), start=pid + 1):
        (root / str(pid) / "task" / str(tid)).mkdir()
        (root / str(pid) / "task" / str(tid) / "stat").write_text(_stat(tid, name, *ticks))


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("C2 CompilerThre", "jit"),
        ("C1 CompilerThre", "jit"),
        ("Executor task l", "tasks"),
        ("GC Thread#0", "gc"),
        ("G1 Conc#0", "gc"),
        ("G1 Refine#0", "gc"),
        ("VM Thread", "other"),
        ("grpc-default-ex", "other"),
        ("dag-scheduler-e", "other"),
    ],
)
def test_a_thread_is_of_the_kind_its_name_says(name: str, kind: str) -> None:
    assert kind_of(name) == kind


def test_a_sample_adds_up_each_kind_and_reads_names_with_spaces_and_parentheses(
    tmp_path: Path,
) -> None:
    threads = {
        "C2 CompilerThre": (3 * TICKS, TICKS),
        "C1 CompilerThre": (TICKS, 0),
        "Executor task l": (2 * TICKS, 0),
        "(odd) name": (5 * TICKS, 0),
        "GC Thread#0": (0, TICKS),
    }
    _process(tmp_path, 4242, (20 * TICKS, 2 * TICKS), threads)
    got = sample(4242, proc=tmp_path)
    assert got == CpuSample(22.0, {"jit": 5.0, "tasks": 2.0, "gc": 1.0})


def test_a_process_that_is_not_there_has_no_sample(tmp_path: Path) -> None:
    assert sample(4242, proc=tmp_path) is None


def test_what_was_spent_counts_ended_threads_as_other_and_never_below_zero() -> None:
    before = CpuSample(10.0, {"jit": 4.0, "tasks": 2.0, "gc": 1.0})
    after = CpuSample(17.5, {"jit": 7.0, "tasks": 3.5, "gc": 1.0})
    assert spent(before, after) == {
        "process": 7.5,
        "jit": 3.0,
        "tasks": 1.5,
        "gc": 0.0,
        "other": 3.0,
    }
    # A thread that ended takes its seconds out of the live threads' sum: not a negative kind.
    assert spent(after, CpuSample(18.0, {"jit": 2.0, "tasks": 3.5, "gc": 1.0}))["jit"] == 0.0


def test_an_inactive_measure_reads_nothing_and_says_nothing() -> None:
    with measured(spark=None, connect_url="sc://elsewhere:15002", active=False) as cpu:
        pass
    assert cpu == {}


def test_a_connect_server_this_machine_did_not_start_is_not_measured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import checkers.engine.session

    monkeypatch.setattr(checkers.engine.session, "recorded_server", lambda: None)
    assert jvm_cpu.jvm_pid(spark=None, connect_url="sc://elsewhere:15002") is None
    with measured(spark=None, connect_url="sc://elsewhere:15002", active=True) as cpu:
        pass
    assert cpu == {}
