"""The profile's table: a phase a line, totals that add up, and '-' where a count is unknown."""

from __future__ import annotations

from checkers.engine.profile import Phase, Profile


def test_the_table_adds_up_its_phases() -> None:
    profile = Profile(None, [Phase("read", 1.5, 1, 1), Phase("message table, ids", 2.25, 16, 37)])
    lines = profile.lines()
    assert lines[0].split() == ["phase", "began", "seconds", "jobs", "stages"]
    assert lines[1].split() == ["read", "+0.00", "1.50", "1", "1"]
    assert lines[-2].split() == ["total", "3.75", "17", "38"]


def test_phases_that_overlapped_take_less_wall_time_than_their_sum() -> None:
    phases = [Phase("log", 2.0, 3, 3, began=1.0), Phase("read", 1.0, 1, 1, began=0.0)]
    phases.append(Phase("timeline", 1.5, 2, 2, began=1.25))
    lines = Profile(None, phases).lines()
    assert [line.split()[0] for line in lines[1:4]] == ["read", "log", "timeline"]
    assert lines[-2].split() == ["total", "4.50", "6", "6"]
    assert lines[-1].split() == ["wall", "3.00", "-", "-"]


def test_a_connect_session_has_wall_times_alone() -> None:
    profile = Profile(None, [Phase("read", 1.0, None, None), Phase("log", 0.5, None, None)])
    assert profile.lines()[-2].split() == ["total", "1.50", "-", "-"]
    assert profile.as_dict()[0] == {
        "name": "read",
        "seconds": 1.0,
        "jobs": None,
        "stages": None,
        "began": 0.0,
    }


def test_a_watcher_hears_each_phase_as_it_begins_without_a_profile() -> None:
    from checkers.engine.profile import phase, watching

    heard: list[str] = []
    with watching(heard.append):
        with phase("read"):
            heard.append("reading")
        with phase("log"):
            pass
    with phase("after"):  # no watcher any more
        pass
    assert heard == ["read", "reading", "log"]
