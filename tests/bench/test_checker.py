"""The bench's sizes, written as the README writes them."""

from __future__ import annotations

import pytest

from bench.checker import parse_sizes

pytestmark = pytest.mark.unit


def test_sizes_take_the_readme_s_words() -> None:
    assert parse_sizes("60k,1M,10M") == [60_000, 1_000_000, 10_000_000]
    assert parse_sizes("1000000, 2k") == [1_000_000, 2_000]


@pytest.mark.parametrize("bad", ["1.5M", "", "ten", "0", "1G", "-1k"])
def test_anything_else_is_one_line_and_exit_2(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        parse_sizes(bad)
    assert stopped.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1
