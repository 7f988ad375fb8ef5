"""Choosing the cluster network's /24 among the ones Docker has not handed out."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from compose.cli import ComposeError
from compose.cluster import ComposeCluster
from compose.subnet import NoFreeSubnet, free_net_prefix


class Engine:
    """The part of a Docker client the chooser asks: its networks' subnets."""

    def __init__(self, *subnets: str) -> None:
        self.subnets = list(subnets)
        self.networks = SimpleNamespace(list=self._list)

    def _list(self) -> list[Any]:
        return [SimpleNamespace(attrs={"IPAM": {"Config": [{"Subnet": s}]}}) for s in self.subnets]


def test_the_preferred_subnet_when_no_network_holds_it() -> None:
    assert free_net_prefix(Engine("172.17.0.0/16", "fd00::/64")) == "172.29.57"


def test_a_network_on_the_preferred_subnet_moves_the_cluster_to_the_next_free_one() -> None:
    assert free_net_prefix(Engine("172.29.57.0/24", "172.29.0.0/24")) == "172.29.1"


def test_a_default_pool_holding_all_of_172_29_moves_it_to_10_213() -> None:
    # Docker's default pools hand out 172.17.0.0/16 ... 172.31.0.0/16 to compose projects.
    assert free_net_prefix(Engine("172.29.0.0/16")) == "10.213.0"


def test_no_free_subnet_is_one_clear_error() -> None:
    with pytest.raises(NoFreeSubnet, match="make heal"):
        free_net_prefix(Engine("172.29.0.0/16", "10.0.0.0/8"))


TAKEN = ComposeError(
    "docker compose up failed: failed to create network x_cluster: Error response from daemon: "
    "Pool overlaps with other one on this address space"
)


def test_a_subnet_taken_after_it_was_chosen_is_chosen_again(tmp_path: Path) -> None:
    engine = Engine()
    cluster = ComposeCluster(tmp_path, "t", client=engine)  # type: ignore[arg-type]
    tried: list[str] = []

    def start() -> None:
        tried.append(cluster.net_prefix)
        if len(tried) == 1:  # another session created its network on it in between
            engine.subnets.append(f"{cluster.net_prefix}.0/24")
            raise TAKEN

    cluster.start_on_free_subnet(start)
    assert tried == ["172.29.57", "172.29.0"]
    assert cluster.net_prefix == "172.29.0"


def test_a_subnet_the_user_gave_is_not_replaced(tmp_path: Path) -> None:
    cluster = ComposeCluster(tmp_path, "t", "172.29.99", client=Engine())  # type: ignore[arg-type]

    def start() -> None:
        raise TAKEN

    with pytest.raises(ComposeError, match=r"172\.29\.99\.0/24 overlaps a Docker network"):
        cluster.start_on_free_subnet(start)


def test_other_compose_failures_are_not_retried(tmp_path: Path) -> None:
    cluster = ComposeCluster(tmp_path, "t", client=Engine())  # type: ignore[arg-type]
    calls = []

    def start() -> None:
        calls.append(1)
        raise ComposeError("docker compose up failed: no such image")

    with pytest.raises(ComposeError, match="no such image"):
        cluster.start_on_free_subnet(start)
    assert len(calls) == 1
