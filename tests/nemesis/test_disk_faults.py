"""The common nemesis's disk faults on a fake of the lazy disks: what it asks of each disk, what
the history says, and that every heal of the run mends what it broke."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from contract.history import HistoryWriter
from contract.topology import NodeHandle, Topology
from lazyfs.corrupt import Corruption
from nemesis.containers import Nemesis, NemesisError

NODES = ("rabbit1", "rabbit2", "rabbit3")


class FakeDisks:
    """compose.disks.LazyDisks as the nemesis sees it: each call recorded; `broken`: a call
    that fails."""

    def __init__(self, nodes: tuple[str, ...] = NODES, broken: str = "") -> None:
        self.nodes = nodes
        self.broken = broken
        self.calls: list[tuple[Any, ...]] = []

    def has(self, node: str) -> bool:
        return node in self.nodes

    def power_loss(self, node: str) -> dict[str, Any]:
        return {}

    def _call(self, *call: Any) -> None:
        self.calls.append(call)
        if call[0] == self.broken:
            raise OSError(f"{call[0]} failed")

    def disk_error(self, nodes: list[str], on: str, path: str, probability: float) -> None:
        self._call("disk_error", nodes, on, path, probability)

    def disk_full(self, nodes: list[str]) -> None:
        self._call("disk_full", nodes)

    def disk_ok(self, nodes: list[str] | None = None) -> None:
        self._call("disk_ok", nodes)

    def torn_write(self, nodes: list[str], path: str, keep: float) -> None:
        self._call("torn_write", nodes, path, keep)

    def corrupt(self, node: str, spec: Corruption) -> list[dict[str, Any]]:
        self._call("corrupt", node, spec)
        return [{"file": "q.wal", "offset": 3, "old": "00", "new": "01", "seed": spec.seed}]


class FakeDocker:
    """The containers the nemesis kills and starts, each call in one list with the disks'."""

    def __init__(self, calls: list[tuple[Any, ...]]) -> None:
        self.containers = self
        self.calls = calls

    def get(self, name: str) -> Any:
        calls = self.calls

        class Container:
            def kill(self, signal: int) -> None:
                calls.append(("kill", name))

            def wait(self, timeout: float) -> None:
                calls.append(("wait", name))

            def start(self) -> None:
                calls.append(("start", name))

        return Container()


def nemesis(tmp_path: Path, disks: FakeDisks | None) -> Nemesis:
    topology = Topology(
        tuple(NodeHandle(n, n, f"10.0.0.{i}") for i, n in enumerate(NODES, 1)), "10.0.0.254"
    )
    history = HistoryWriter(tmp_path, "nemesis", "rabbitmq")
    client = FakeDocker(disks.calls) if disks is not None else object()
    return Nemesis(topology, "unused", history, client=cast(Any, client), disks=disks)


def events(tmp_path: Path) -> list[tuple[str, str, dict[str, Any]]]:
    rows = [json.loads(line) for line in (tmp_path / "nemesis.jsonl").read_text().splitlines()]
    return [(r["type"], r["f"], r["value"]) for r in rows]


def test_each_disk_fault_is_asked_of_the_disks_and_logged_until_its_disk_ok(
    tmp_path: Path,
) -> None:
    disks = FakeDisks()
    n = nemesis(tmp_path, disks)
    n.disk_error(["rabbit1"], "fsync", "*.wal", 0.5)
    n.disk_full(["rabbit2"])
    n.disk_ok(["rabbit1"])
    assert disks.calls == [
        ("disk_error", ["rabbit1"], "fsync", "*.wal", 0.5),
        ("disk_full", ["rabbit2"]),
        ("disk_ok", ["rabbit1"]),
    ]
    error = {"nodes": ["rabbit1"], "on": "fsync", "path": "*.wal", "probability": 0.5}
    assert events(tmp_path) == [
        ("invoke", "disk-error", error),
        ("ok", "disk-error", error),
        ("invoke", "disk-full", {"nodes": ["rabbit2"]}),
        ("ok", "disk-full", {"nodes": ["rabbit2"]}),
        ("invoke", "disk-ok", {"nodes": ["rabbit1"]}),
        ("ok", "disk-ok", {"nodes": ["rabbit1"], "remaining": ["rabbit2"]}),
    ]
    assert n.disk_faulted == {"rabbit2"}


def test_heal_all_mends_every_disk_and_leaves_them_alone_when_none_failed(
    tmp_path: Path,
) -> None:
    disks = FakeDisks()
    n = nemesis(tmp_path, disks)
    n.heal_all()
    assert disks.calls == []  # no disk fault: no disk-ok in the history of every lazy run
    n.disk_full(["rabbit3"])
    n.heal_all()
    n.heal_all()
    assert disks.calls == [("disk_full", ["rabbit3"]), ("disk_ok", None)]
    assert events(tmp_path)[-1] == ("ok", "disk-ok", {"nodes": "all", "remaining": []})


def test_a_disk_fault_that_failed_half_way_is_mended_by_the_heal(tmp_path: Path) -> None:
    disks = FakeDisks(broken="disk_error")
    n = nemesis(tmp_path, disks)
    with pytest.raises(OSError, match="disk_error failed"):
        n.disk_error(["rabbit1", "rabbit2"], "write", "*", 1.0)
    assert events(tmp_path)[-1][:2] == ("fail", "disk-error")
    n.heal_all()
    assert disks.calls[-1] == ("disk_ok", None)


@pytest.mark.parametrize("disks", [None, FakeDisks(nodes=("rabbit1",))])
def test_a_disk_fault_needs_lazy_disks_on_every_target(
    tmp_path: Path, disks: FakeDisks | None
) -> None:
    n = nemesis(tmp_path, disks)
    with pytest.raises(NemesisError, match="disk-full on rabbit1, rabbit2 needs lazy disks"):
        n.disk_full(["rabbit1", "rabbit2"])
    assert not n.disk_faulted
    if disks is None:
        with pytest.raises(NemesisError, match="^disk-ok needs lazy disks$"):
            n.disk_ok()


def test_a_torn_write_is_a_disk_fault_its_disk_ok_ends(tmp_path: Path) -> None:
    disks = FakeDisks()
    n = nemesis(tmp_path, disks)
    n.torn_write(["rabbit1"], "*.wal", 0.25)
    assert n.disk_faulted == {"rabbit1"}
    n.heal_all()
    assert disks.calls == [("torn_write", ["rabbit1"], "*.wal", 0.25), ("disk_ok", None)]
    assert events(tmp_path)[0] == (
        "invoke",
        "torn-write",
        {"nodes": ["rabbit1"], "path": "*.wal", "keep": 0.25},
    )


def test_corrupt_while_stopped_kills_changes_then_starts_and_logs_every_byte(
    tmp_path: Path,
) -> None:
    disks = FakeDisks()
    n = nemesis(tmp_path, disks)
    spec = Corruption("*.wal", seed=11, length=1)
    n.corrupt(["rabbit1", "rabbit2"], spec)
    # Both down before either changes: no node reads its damage before the other's is done.
    assert disks.calls == [
        ("kill", "rabbit1"),
        ("kill", "rabbit2"),
        ("wait", "rabbit1"),
        ("wait", "rabbit2"),
        ("corrupt", "rabbit1", spec.for_node("rabbit1")),
        ("corrupt", "rabbit2", spec.for_node("rabbit2")),
        ("start", "rabbit1"),
        ("start", "rabbit2"),
    ]
    (_, f, asked), (_, _, done) = events(tmp_path)
    assert f == "corrupt"
    assert asked["seed"] == 11 and asked["while"] == "stopped" and asked["path"] == "*.wal"
    assert done["changed"]["rabbit2"] == [
        {
            "file": "q.wal",
            "offset": 3,
            "old": "00",
            "new": "01",
            "seed": spec.for_node("rabbit2").seed,
        }
    ]
    assert not n.down and not n.disk_faulted  # nothing to mend: corrupted stays corrupted


def test_corrupt_leaves_a_node_already_down_down_and_a_running_one_running(
    tmp_path: Path,
) -> None:
    disks = FakeDisks()
    n = nemesis(tmp_path, disks)
    n.down.add("rabbit1")
    n.corrupt(["rabbit1"], Corruption("*", seed=1))
    n.corrupt(["rabbit2"], Corruption("*", seed=1), stopped=False)
    assert [c[:2] for c in disks.calls] == [("corrupt", "rabbit1"), ("corrupt", "rabbit2")]
    assert n.down == {"rabbit1"}
    assert events(tmp_path)[-1][2]["while"] == "running"
