"""The common nemesis's clock faults on a fake of the fake clocks: what it asks of them, the
offset each node got in the history, and that every heal of the run sets the clocks true."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from contract.history import HistoryWriter
from contract.topology import NodeHandle, Topology
from nemesis.containers import Nemesis, NemesisError

NODES = ("kafka1", "kafka2", "kafka3")


class FakeClocks:
    """compose.clocks.FakeClocks as the nemesis sees it; `broken`: a call that fails."""

    def __init__(self, nodes: tuple[str, ...] = NODES, broken: str = "") -> None:
        self.nodes = nodes
        self.broken = broken
        self.calls: list[tuple[Any, ...]] = []

    def has(self, node: str) -> bool:
        return node in self.nodes

    def set_offset(self, nodes: list[str], offset: float) -> dict[str, float]:
        self.calls.append(("set_offset", nodes, offset))
        if self.broken == "set_offset":
            raise OSError("set_offset failed")
        return {n: offset for n in nodes}

    def reset(self, nodes: list[str] | None = None) -> None:
        self.calls.append(("reset", nodes))


def nemesis(tmp_path: Path, clocks: FakeClocks | None) -> Nemesis:
    topology = Topology(
        tuple(NodeHandle(n, n, f"10.0.0.{i}") for i, n in enumerate(NODES, 1)), "10.0.0.254"
    )
    history = HistoryWriter(tmp_path, "nemesis", "kafka")
    return Nemesis(topology, "unused", history, client=cast(Any, object()), clocks=clocks)


def events(tmp_path: Path) -> list[tuple[str, str, dict[str, Any]]]:
    rows = [json.loads(line) for line in (tmp_path / "nemesis.jsonl").read_text().splitlines()]
    return [(r["type"], r["f"], r["value"]) for r in rows]


def test_a_clock_step_records_each_nodes_offset_until_its_clock_ok(tmp_path: Path) -> None:
    clocks = FakeClocks()
    n = nemesis(tmp_path, clocks)
    n.clock(["kafka1", "kafka2"], 3600)
    n.clock(["kafka1"], -3600)
    n.clock_ok(["kafka1"])
    assert clocks.calls == [
        ("set_offset", ["kafka1", "kafka2"], 3600),
        ("set_offset", ["kafka1"], -3600),
        ("reset", ["kafka1"]),
    ]
    first = {"nodes": ["kafka1", "kafka2"], "offset": 3600}
    assert events(tmp_path) == [
        ("invoke", "clock", first),
        ("ok", "clock", {**first, "offsets": {"kafka1": 3600, "kafka2": 3600}}),
        ("invoke", "clock", {"nodes": ["kafka1"], "offset": -3600}),
        ("ok", "clock", {"nodes": ["kafka1"], "offset": -3600, "offsets": {"kafka1": -3600}}),
        ("invoke", "clock-ok", {"nodes": ["kafka1"]}),
        ("ok", "clock-ok", {"nodes": ["kafka1"], "remaining": ["kafka2"]}),
    ]
    assert n.clock_skewed == {"kafka2"}


def test_heal_all_sets_every_clock_true_and_leaves_them_alone_when_none_was_off(
    tmp_path: Path,
) -> None:
    clocks = FakeClocks()
    n = nemesis(tmp_path, clocks)
    n.heal_all()
    assert clocks.calls == []  # no skew: no clock-ok in the history of every fake-clock run
    n.clock(["kafka3"], 60)
    n.heal_all()
    n.heal_all()
    assert clocks.calls == [("set_offset", ["kafka3"], 60), ("reset", None)]
    assert events(tmp_path)[-1] == ("ok", "clock-ok", {"nodes": "all", "remaining": []})


def test_a_clock_step_that_failed_half_way_is_set_back_by_the_heal(tmp_path: Path) -> None:
    clocks = FakeClocks(broken="set_offset")
    n = nemesis(tmp_path, clocks)
    with pytest.raises(OSError, match="set_offset failed"):
        n.clock(["kafka1", "kafka2"], 5)
    assert events(tmp_path)[-1][:2] == ("fail", "clock")
    n.heal_all()
    assert clocks.calls[-1] == ("reset", None)


@pytest.mark.parametrize("clocks", [None, FakeClocks(nodes=("kafka1",))])
def test_a_clock_step_needs_a_fake_clock_on_every_target(
    tmp_path: Path, clocks: FakeClocks | None
) -> None:
    n = nemesis(tmp_path, clocks)
    with pytest.raises(NemesisError, match="clock on kafka1, kafka2 needs cluster.fake_clock"):
        n.clock(["kafka1", "kafka2"], 1)
    assert not n.clock_skewed
    if clocks is None:
        with pytest.raises(NemesisError, match="^clock-ok needs cluster.fake_clock: true$"):
            n.clock_ok()
