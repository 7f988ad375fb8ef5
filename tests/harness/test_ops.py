"""`harness ops SYSTEM`: the fault ops a system's steps take, one line each, from the registry."""

from __future__ import annotations

import pytest

from faults.registry import OPS
from tests.helpers import harness


@pytest.mark.parametrize("system", ["kafka", "rabbitmq"])
def test_every_op_of_a_system_is_one_line_the_disk_faults_among_them(system: str) -> None:
    listed = harness("ops", system)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    names = [line.split()[0] for line in lines]
    assert names == [op.name for op in OPS if system in op.systems]
    by_name = dict(zip(names, lines, strict=True))
    for op in ("disk-error", "disk-full", "torn-write", "corrupt", "disk-ok"):
        assert "needs lazy disks" in by_name[op]
    assert "healed by disk-ok" in by_name["torn-write"]
    assert "no heal" in by_name["corrupt"] and "Changes `length` bytes" in by_name["corrupt"]


def test_a_system_it_does_not_know_is_bad_input() -> None:
    listed = harness("ops", "redis")
    assert listed.returncode == 2
    assert "no system 'redis' (systems: kafka, kafka-mock, rabbitmq)" in listed.stderr
