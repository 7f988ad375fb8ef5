"""The profile's table: a phase a line, totals that add up, and '-' where a count is unknown."""

from __future__ import annotations

from checkers.profile import Phase, Profile


def test_the_table_adds_up_its_phases() -> None:
    profile = Profile(None, [Phase("read", 1.5, 1, 1), Phase("message table, ids", 2.25, 16, 37)])
    lines = profile.lines()
    assert lines[0].split() == ["phase", "seconds", "jobs", "stages"]
    assert lines[1].split() == ["read", "1.50", "1", "1"]
    assert lines[-1].split() == ["total", "3.75", "17", "38"]


def test_a_connect_session_has_wall_times_alone() -> None:
    profile = Profile(None, [Phase("read", 1.0, None, None), Phase("log", 0.5, None, None)])
    assert profile.lines()[-1].split() == ["total", "1.50", "-", "-"]
    assert profile.as_dict()[0] == {"name": "read", "seconds": 1.0, "jobs": None, "stages": None}


def test_a_watcher_hears_each_phase_as_it_begins_without_a_profile() -> None:
    from checkers.profile import phase, watching

    heard: list[str] = []
    with watching(heard.append):
        with phase("read"):
            heard.append("reading")
        with phase("log"):
            pass
    with phase("after"):  # no watcher any more
        pass
    assert heard == ["read", "reading", "log"]
