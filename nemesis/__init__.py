"""Faults: network cuts with iptables in each node's own namespace, and process faults.

The nemesis knows nodes only through `Topology` (names, container ids, addresses); it never
reaches into the compose layer.
"""

from nemesis.network import CLIENTS, Cut, NetworkState
from nemesis.topology import NodeHandle, Topology

__all__ = ["CLIENTS", "Cut", "NetworkState", "NodeHandle", "Topology"]
