"""What every compose cluster shares, without an engine: the logs of a node's containers kept
across its recreation (an upgrade), joined oldest first in the node's saved log."""

from __future__ import annotations

from pathlib import Path

import pytest

from compose.cluster import RETIRED_LOGS, ComposeCluster


class Container:
    def __init__(self, log: str) -> None:
        self.log = log.encode()

    def logs(self, timestamps: bool = False) -> bytes:
        return self.log


def cluster_of(tmp_path: Path, containers: dict[str, Container]) -> ComposeCluster:
    cluster = object.__new__(ComposeCluster)
    cluster.workdir = tmp_path / "cluster"
    cluster.containers = lambda: containers  # type: ignore[method-assign]
    return cluster


def test_a_recreated_nodes_log_holds_each_container_it_had_in_order(tmp_path: Path) -> None:
    containers = {"kafka1": Container("on 3.9\n"), "kafka10": Container("a neighbour\n")}
    cluster = cluster_of(tmp_path, containers)
    assert cluster.retire_logs("kafka1", "3.9.2") is not None
    containers["kafka1"] = Container("on 4.1\n")
    cluster.retire_logs("kafka1", "4.1.2 (refused)")
    containers["kafka1"] = Container("on 4.4\n")
    cluster.save_logs(tmp_path / "logs")
    assert [p.name for p in cluster.retired_logs("kafka1")] == [
        "kafka1.000.3.9.2.log",
        "kafka1.001.4.1.2-refused.log",
    ]
    assert (tmp_path / "logs" / "kafka1.log").read_text().splitlines() == [
        "=== kafka1: a retired container's log (3.9.2) ===",
        "on 3.9",
        "=== kafka1: a retired container's log (4.1.2-refused) ===",
        "on 4.1",
        "=== kafka1: its last container's log ===",
        "on 4.4",
    ]
    # Another node's log, whose name the first's begins with, is its own alone.
    assert (tmp_path / "logs" / "kafka10.log").read_text() == "a neighbour\n"
    assert (tmp_path / "cluster" / RETIRED_LOGS).is_dir()


def test_a_node_without_a_container_retires_nothing(tmp_path: Path) -> None:
    cluster = cluster_of(tmp_path, {})
    assert cluster.retire_logs("rabbit1", "4.0.5") is None
    assert cluster.retired_logs("rabbit1") == []


@pytest.mark.parametrize("tag", ["", "///"])
def test_a_tag_that_makes_no_file_name_is_unknown(tmp_path: Path, tag: str) -> None:
    cluster = cluster_of(tmp_path, {"rabbit1": Container("x\n")})
    path = cluster.retire_logs("rabbit1", tag)
    assert path is not None and path.name == "rabbit1.000.unknown.log"
