"""Parts of a check asked at once: results in the parts' order, the caller's context in each,
and a failure that stops the rest rather than waiting for them."""

from __future__ import annotations

import contextvars
import threading
import time

import pytest

from checkers.engine import parallel as t

pytestmark = pytest.mark.unit

WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


def _never() -> None:
    raise AssertionError("nothing is interrupted when every part succeeds")


def test_results_come_in_the_parts_order_with_the_callers_context() -> None:
    WHO.set("the check")

    def slow() -> str:
        time.sleep(0.2)
        return f"slow for {WHO.get()}"

    assert t.together([slow, lambda: "quick", lambda: WHO.get()], _never) == [
        "slow for the check",
        "quick",
        "the check",
    ]


def test_a_failure_interrupts_the_running_parts_and_drops_the_rest() -> None:
    stopped = threading.Event()
    ran: list[str] = []

    def long_running() -> None:  # a Spark job, until the interrupt cancels it
        if not stopped.wait(30):
            ran.append("ran to its end")

    def failing() -> None:
        raise ValueError("a question failed")

    def later() -> None:
        time.sleep(0.3)
        ran.append("a later part")

    started = time.monotonic()
    with pytest.raises(ValueError, match="a question failed"):
        t.together([long_running, failing, *[later] * 6], stopped.set)
    assert time.monotonic() - started < 10
    assert stopped.is_set() and "ran to its end" not in ran
    # A worker freed by the failure may start one more before the rest are dropped.
    assert len(ran) <= t.WORKERS - 1
