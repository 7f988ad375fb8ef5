"""Where a cluster's nodes are: plain data the cluster layer fills in for nemesis and clients."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NodeHandle:
    name: str  # broker host name, e.g. rabbit1
    container: str  # container id or name
    address: str  # the node's address on the cluster network


@dataclass(frozen=True)
class Topology:
    nodes: tuple[NodeHandle, ...]
    # Where client traffic comes from as the nodes see it (the network's gateway: clients run
    # on the host and reach nodes through published ports).
    client_address: str

    def node(self, name: str) -> NodeHandle:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"no node {name!r} in this cluster")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)


@dataclass(frozen=True)
class Endpoint:
    """Where a client reaches one node (a port published on the host)."""

    node: str
    host: str
    port: int
