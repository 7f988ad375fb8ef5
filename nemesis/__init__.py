"""Faults: network cuts with iptables in each node's own namespace, and process faults.

The nemesis knows nodes only through `contract.topology.Topology` (names, container ids,
addresses); it never reaches into the compose layer.
"""
