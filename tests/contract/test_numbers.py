"""Counts as the README writes them."""

from __future__ import annotations

import pytest

from contract.numbers import parse_count, parse_counts

pytestmark = pytest.mark.unit


def test_the_readme_s_forms() -> None:
    assert parse_counts("60k,1M,10M") == [60_000, 1_000_000, 10_000_000]
    assert [parse_count(w) for w in ("3", " 2k ", "1_000", "1m")] == [3, 2_000, 1_000, 1_000_000]


@pytest.mark.parametrize("bad", ["", "0", "-1", "1.5M", "ten", "1G", "k", "１２"])
def test_anything_else_is_one_line(bad: str) -> None:
    with pytest.raises(ValueError) as e:
        parse_count(bad)
    assert "\n" not in str(e.value) and repr(bad) in str(e.value)
