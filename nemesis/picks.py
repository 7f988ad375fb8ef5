"""Targets drawn anew on every step, as Jepsen's partition nemeses draw theirs: one random node,
or the sides of a partition in a named shape. Each step draws from a generator seeded by the
run's seed (recorded in its manifest) and the step's number, so a run replayed with the same seed
and schedule draws the same targets.

The shapes, over the cluster's nodes in their order:
  halves           the first ⌊n/2⌋ nodes against the rest, the same every step
  random-halves    the same split of the nodes shuffled anew
  random-node      one node drawn anew against the rest
  majorities-ring  the nodes shuffled into a ring; each sees only its nearest ring neighbours
                   on both sides, the fewest that make a majority with itself, so every node
                   sees a majority and no two see the same one (four nodes or more)
"""

from __future__ import annotations

import random
from typing import Literal, get_args

RANDOM_NODE = "random-node"
Shape = Literal["halves", "random-halves", "random-node", "majorities-ring"]
SHAPES: tuple[str, ...] = get_args(Shape)
RING_NODES = 4  # fewer, and every node's neighbours are all the others: no cut


def shape_refusal(shape: str, nodes: int) -> str | None:
    """One line when the shape cannot split `nodes` nodes, else None."""
    if nodes < 2:
        return f"{shape} needs 2 nodes or more: one node has nothing to be cut from"
    if shape == "majorities-ring" and nodes < RING_NODES:
        return (
            f"majorities-ring needs {RING_NODES} nodes or more: on {nodes} every node's "
            "neighbours are all the others"
        )
    return None


def draw_node(nodes: list[str], rng: random.Random) -> str:
    return rng.choice(sorted(nodes))


def draw_groups(shape: str, nodes: list[str], rng: random.Random) -> list[list[str]]:
    """The sides of a partition of `nodes` in `shape`, as the partition op takes them (nodes
    that share no group are cut apart)."""
    ordered = sorted(nodes)
    if shape == "halves":
        return _bisect(ordered)
    if shape == "random-halves":
        rng.shuffle(ordered)
        return [sorted(side) for side in _bisect(ordered)]
    if shape == "random-node":
        alone = draw_node(ordered, rng)
        return [[alone], [n for n in ordered if n != alone]]
    if shape == "majorities-ring":
        rng.shuffle(ordered)
        return _ring(ordered)
    raise ValueError(f"unknown partition shape {shape!r} (shapes are {', '.join(SHAPES)})")


def _bisect(nodes: list[str]) -> list[list[str]]:
    cut = len(nodes) // 2
    return [nodes[:cut], nodes[cut:]]


def _ring(ring: list[str]) -> list[list[str]]:
    """Each pair of nodes at most `reach` apart on the ring, a group of its own: a node sees its
    reach on both sides, 2·reach + 1 nodes with itself, the fewest so that make a majority."""
    n = len(ring)
    reach = -(-(n // 2) // 2)  # ⌈(majority - 1) / 2⌉
    pairs = {
        tuple(sorted((ring[i], ring[(i + d) % n]))) for i in range(n) for d in range(1, reach + 1)
    }
    return [list(p) for p in sorted(pairs)]


def neighbours(groups: list[list[str]], node: str) -> set[str]:
    """The nodes `node` still reaches under `groups` (itself included)."""
    return {m for g in groups if node in g for m in g} | {node}
