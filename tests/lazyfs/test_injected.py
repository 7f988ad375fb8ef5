"""The rules of injected disk faults, apart from any mount: what the file says, which calls a
rule fails, how often, and when the daemon sees a change."""

from __future__ import annotations

import errno
import json
import random
from pathlib import Path

import pytest

from lazyfs.injected import (
    FAULTS,
    RECHECK_S,
    Faults,
    Injector,
    Rule,
    Torn,
    disk_error,
    disk_full,
    read_faults,
    torn_write,
    write_faults,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def injector(store: Path, seed: int = 7) -> tuple[Injector, Clock]:
    clock = Clock()
    return Injector(store / FAULTS, random.Random(seed), clock), clock


def test_the_file_says_what_was_written_and_nothing_when_there_is_none(tmp_path: Path) -> None:
    assert read_faults(tmp_path / FAULTS) == Faults()
    faults = disk_error("fsync", "jepsen-0/*.log", 0.5).plus(disk_full())
    write_faults(tmp_path, faults)
    assert read_faults(tmp_path / FAULTS) == faults
    assert json.loads((tmp_path / FAULTS).read_text())["full"] is True
    assert not (tmp_path / (FAULTS + ".tmp")).exists()


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ({"rules": [{"on": "unlink", "error": "EIO"}]}, "on is one of write, fsync, read, create"),
        ({"rules": [{"on": "write", "error": "EPERM"}]}, "error is one of EIO, ENOSPC"),
        ({"rules": [{"on": "write", "error": "EIO", "probability": 2}]}, "in \\(0, 1\\]"),
        ({"rules": [{"on": "write", "error": "EIO", "probability": True}]}, "is a number"),
        ({"rules": [{"on": "write", "error": "EIO", "path": ""}]}, "path is a glob"),
        ({"rules": [{"on": "write"}]}, "a rule is an object of on, error"),
        ({"rules": [], "full": "yes"}, "its full true or false"),
        ([], "an object of rules, full and torn"),
    ],
)
def test_a_rule_the_harness_would_not_write_is_one_line(data: object, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        Faults.parse(data)


def test_a_rule_fails_its_kind_of_call_on_the_files_its_glob_matches() -> None:
    rule = Rule("write", "EIO", "*.log")
    assert rule.matches("write", "jepsen-0/00000000000000000000.log")  # * spans directories
    assert not rule.matches("write", "jepsen-0/00000000000000000000.index")
    assert not rule.matches("fsync", "jepsen-0/00000000000000000000.log")
    assert Rule("read", "EIO").matches("read", "meta.properties")


def test_a_full_disk_refuses_what_needs_space_and_says_it_has_none() -> None:
    full = disk_full()
    assert full.full and {(r.on, r.error) for r in full.rules} == {
        ("write", "ENOSPC"),
        ("create", "ENOSPC"),
    }
    assert not Faults() and full and disk_error("read")


def test_the_injector_fails_matching_calls_with_the_rules_errno(tmp_path: Path) -> None:
    write_faults(tmp_path, disk_error("write", "data/*").plus(disk_full()))
    inject, _ = injector(tmp_path)
    assert inject.error("write", "data/segment") == errno.EIO  # the first matching rule
    assert inject.error("write", "other") == errno.ENOSPC
    assert inject.error("create", "other") == errno.ENOSPC
    assert inject.error("read", "data/segment") is None
    assert inject.full
    assert inject.injected == {"write EIO": 1, "write ENOSPC": 1, "create ENOSPC": 1}


def test_a_probability_fails_that_share_of_calls_as_the_seeded_draws_say(tmp_path: Path) -> None:
    write_faults(tmp_path, disk_error("fsync", probability=0.25))
    inject, _ = injector(tmp_path, seed=3)
    failed = [inject.error("fsync", "f") is not None for _ in range(2000)]
    draws = random.Random(3)
    assert failed == [draws.random() < 0.25 for _ in range(2000)]
    assert 400 < sum(failed) < 600


def test_the_rules_are_looked_at_again_only_after_the_recheck_interval(tmp_path: Path) -> None:
    inject, clock = injector(tmp_path)
    assert inject.error("write", "f") is None
    write_faults(tmp_path, disk_error("write"))
    clock.now += RECHECK_S / 2
    assert inject.error("write", "f") is None  # cached: no look at the file yet
    clock.now += RECHECK_S / 2
    assert inject.error("write", "f") == errno.EIO


def test_clearing_the_rules_or_removing_the_file_ends_the_fault(tmp_path: Path) -> None:
    write_faults(tmp_path, disk_full())
    inject, clock = injector(tmp_path)
    assert inject.error("create", "x") == errno.ENOSPC
    write_faults(tmp_path, Faults())
    clock.now += RECHECK_S
    assert inject.error("create", "x") is None and not inject.full
    assert inject.injected == {}  # counted afresh under each set of rules
    write_faults(tmp_path, disk_full())
    clock.now += RECHECK_S
    assert inject.full
    (tmp_path / FAULTS).unlink()
    clock.now += RECHECK_S
    assert not inject.full


def test_an_unreadable_file_injects_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / FAULTS).write_text('{"rules": [{"on": "write", "error": "EXYZ"}]}')
    inject, _ = injector(tmp_path)
    assert inject.error("write", "f") is None
    assert "disk faults ignored" in caplog.text and "EXYZ" in caplog.text


def test_torn_writes_go_through_the_file_and_leave_a_file_without_them_as_it_was(
    tmp_path: Path,
) -> None:
    faults = disk_full().plus(torn_write("*.log", 0.25))
    write_faults(tmp_path, faults)
    assert read_faults(tmp_path / FAULTS) == faults
    assert faults.torn_keep("jepsen-0/00.log") == Torn("*.log", 0.25)
    assert faults.torn_keep("jepsen-0/00.index") is None
    assert "torn" not in disk_full().as_data()
    assert bool(torn_write())  # a disk that only tears is a faulted disk: disk-ok mends it


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ({"torn": [{"path": "*", "keep": 1}]}, "keep is a number in \\(0, 1\\)"),
        ({"torn": [{"path": "*", "keep": True}]}, "keep is a number"),
        ({"torn": [{"path": ""}]}, "path is a glob"),
        ({"torn": [{"path": "*", "at": 3}]}, "an object of path and keep"),
        ({"torn": {}}, "rules and torn are lists"),
    ],
)
def test_a_torn_write_the_daemon_cannot_read_is_refused(data: object, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        Faults.parse(data)
