"""Which /24 a cluster's network gets.

Nodes keep fixed addresses (a restarted node must come back where the nemesis's rules expect
it), so each cluster asks Docker for an explicit subnet. A fixed one collides with any network
already holding it: another run or test session on the same engine, or an unrelated compose
project to which Docker's default pools handed 172.29.0.0/16. Docker then refuses with "Pool
overlaps with other one on this address space". So the subnet is chosen among the free ones
when the cluster is made, and chosen again when another process took it first.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import Any

from compose.cli import ComposeError

DEFAULT_NET_PREFIX = "172.29.57"
SUBNET_TAKEN = "Pool overlaps"  # Docker's words when a requested subnet is already allocated


class NoFreeSubnet(ComposeError):
    """A ComposeError: the harness reports it in one line like any cluster that cannot start."""


def _candidates(preferred: str) -> Iterator[str]:
    yield preferred
    for third in range(0, 256):
        yield f"172.29.{third}"
    for third in range(0, 256):
        yield f"10.213.{third}"


def taken_subnets(client: Any) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """Every subnet Docker's networks hold."""
    out = []
    for net in client.networks.list():
        for config in (net.attrs.get("IPAM") or {}).get("Config") or []:
            if config.get("Subnet"):
                out.append(ipaddress.ip_network(config["Subnet"], strict=False))
    return out


def free_net_prefix(
    client: Any, preferred: str = DEFAULT_NET_PREFIX, avoid: frozenset[str] = frozenset()
) -> str:
    """The first three octets of a /24 no Docker network overlaps, `preferred` when free."""
    taken = taken_subnets(client)
    for prefix in _candidates(preferred):
        if prefix in avoid:
            continue
        subnet = ipaddress.ip_network(f"{prefix}.0/24")
        if not any(subnet.overlaps(t) for t in taken if t.version == 4):
            return prefix
    raise NoFreeSubnet(
        "no free /24 for the cluster network in 172.29.0.0/16 or 10.213.0.0/16 "
        "(docker network ls; `make heal` removes what killed runs left)"
    )
