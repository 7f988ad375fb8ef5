"""bench-runs' figures: a pipelined run's cost is the wall time it adds to the sequence, not its
own process's span (most of which overlapped the run before)."""

from __future__ import annotations

from bench.runs import RunFigures, SequenceFigures


def run(scenario: str, seconds: float, ended_at: float, schedule: float = 60.0) -> RunFigures:
    return RunFigures(
        scenario, seconds, 10, 0, schedule, 1, 5, 10, {}, "safe", True, None, ended_at
    )


def test_a_pipelined_run_counts_from_the_end_of_the_one_before() -> None:
    # K4 runs 0-100; the second starts at 80 (the first drained) and ends at 180: it added 80 s.
    sequence = SequenceFigures("pipelined", 180, [run("K4", 100, 100), run("K4", 100, 180)])
    assert sequence.efficiency == 120 / 180
    assert sequence.efficiency_of("K4") == 120 / 180


def test_one_at_a_time_each_run_counts_whole() -> None:
    runs = [run("K4", 100, 100), run("T1", 150, 260, schedule=85)]  # T1 began at 110
    sequence = SequenceFigures("one at a time", 260, runs)
    assert sequence.efficiency_of("K4") == 60 / 100 and sequence.efficiency_of("T1") == 85 / 150
    assert sequence.efficiency_of("K9") == 0.0
