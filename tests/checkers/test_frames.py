"""Small frames and small results: rows sorted on the driver as Spark's orderBy sorts them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers.frames import collected_together, in_spark_order, small_frame

DDL = "a string, b bigint, c double"
a_row = st.tuples(
    st.none() | st.sampled_from(["", "x", "y", "x1"]),
    st.none() | st.integers(-3, 3),
    st.none() | st.floats(-2, 2, allow_nan=False, width=32),
)


@pytest.mark.spark
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(a_row, max_size=12), st.permutations(["a", "b", "c"]))
def test_rows_sorted_on_the_driver_are_in_sparks_order(
    spark: Any, rows: list[tuple[Any, ...]], columns: list[str]
) -> None:
    frame = small_frame(spark, rows, DDL)
    # Ties on every column are equal rows: whichever comes first, the lists compare equal.
    expected = [tuple(r) for r in frame.orderBy(*columns).collect()]
    assert [tuple(r) for r in in_spark_order(frame.collect(), *columns)] == expected


@pytest.mark.spark
def test_frames_collected_together_are_each_their_own_rows(spark: Any) -> None:
    """Each frame gets back its rows and only its own, an empty one none, whatever columns the
    others have."""
    numbers = small_frame(spark, [("x", 1, 0.5), ("y", 2, None)], DDL)
    names = small_frame(spark, [("z", "w")], "a string, d string")
    rows = collected_together({"numbers": numbers, "names": names, "none": numbers.filter("b > 5")})
    assert sorted((r["a"], r["b"], r["c"]) for r in rows["numbers"]) == [
        ("x", 1, 0.5),
        ("y", 2, None),
    ]
    assert [(r["a"], r["d"]) for r in rows["names"]] == [("z", "w")]
    assert rows["none"] == []
