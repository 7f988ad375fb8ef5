"""The run skeleton's signals: SIGINT or SIGTERM ends a run in whatever phase it comes."""

from __future__ import annotations

import os
import signal
import time

import pytest

from systems.run import Interrupted, _signals_interrupt


def _wait_for_a_broker() -> None:
    """The shape of every wait in cluster_up: any error is a broker still starting."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
        except Exception:  # noqa: BLE001, S110 - as the waits do
            pass


def test_a_signal_is_not_taken_for_a_brokers_refusal() -> None:
    before = signal.getsignal(signal.SIGINT)  # pytest's, or a Spark session's in the suite
    started = time.monotonic()
    with pytest.raises(Interrupted, match="SIGINT"), _signals_interrupt():
        _wait_for_a_broker()
    assert time.monotonic() - started < 1
    assert signal.getsignal(signal.SIGINT) is before
