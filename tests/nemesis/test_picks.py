"""Targets drawn anew each step: every shape splits the nodes it is given, a majorities ring
leaves every node a majority of its own, and one seed draws one sequence."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemesis.picks import SHAPES, draw_groups, neighbours, shape_refusal

pytestmark = pytest.mark.unit


def _nodes(n: int) -> list[str]:
    return [f"n{i}" for i in range(1, n + 1)]


@given(st.integers(min_value=2, max_value=7), st.sampled_from(SHAPES), st.integers(0, 10**6))
def test_every_shape_splits_the_nodes_it_is_given(n: int, shape: str, seed: int) -> None:
    if shape_refusal(shape, n):
        return
    groups = draw_groups(shape, _nodes(n), random.Random(seed))
    assert set().union(*map(set, groups)) == set(_nodes(n))
    assert all(groups), "no empty side"
    seen = [neighbours(groups, node) for node in _nodes(n)]
    assert any(s != set(_nodes(n)) for s in seen), "some link is cut"


@given(st.integers(min_value=4, max_value=7), st.integers(0, 10**6))
def test_a_majorities_ring_leaves_each_node_a_majority_no_two_alike(n: int, seed: int) -> None:
    groups = draw_groups("majorities-ring", _nodes(n), random.Random(seed))
    seen = {node: neighbours(groups, node) for node in _nodes(n)}
    assert all(len(s) > n // 2 for s in seen.values())
    assert all(len(s) < n for s in seen.values()), "nobody sees everyone"
    assert len({frozenset(s) for s in seen.values()}) == n
    assert all(a in seen[b] for a in seen for b in seen[a]), "links are cut both ways"


def test_five_nodes_split_as_the_rabbitmq_suite_splits_them() -> None:
    rng = random.Random(1)
    assert draw_groups("halves", _nodes(5), rng) == [["n1", "n2"], ["n3", "n4", "n5"]]
    assert sorted(map(len, draw_groups("random-halves", _nodes(5), rng))) == [2, 3]
    assert sorted(map(len, draw_groups("random-node", _nodes(5), rng))) == [1, 4]
    ring = draw_groups("majorities-ring", _nodes(5), rng)
    assert all(len(neighbours(ring, n)) == 3 for n in _nodes(5))


def test_one_seed_draws_one_sequence_and_halves_never_change() -> None:
    def sequence(seed: int, shape: str) -> list[list[list[str]]]:
        rng = random.Random(seed)
        return [draw_groups(shape, _nodes(5), rng) for _ in range(8)]

    assert sequence(3, "random-halves") == sequence(3, "random-halves")
    assert len({str(g) for g in sequence(3, "random-halves")}) > 1
    assert len({str(g) for g in sequence(3, "halves")}) == 1


def test_a_ring_of_three_is_refused_in_one_line() -> None:
    said = shape_refusal("majorities-ring", 3)
    assert said and "4 nodes or more" in said and "\n" not in said
    assert shape_refusal("random-halves", 3) is None
    assert "2 nodes or more" in (shape_refusal("halves", 1) or "")
