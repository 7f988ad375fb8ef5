"""The history writer: one line per event, and what it does when a line cannot be written."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest

from contract.history import FIELDS, HistoryWriter

pytestmark = pytest.mark.unit


def test_a_line_holds_every_field_in_order(tmp_path: Path) -> None:
    with HistoryWriter(tmp_path, "P1", "kafka") as history:
        history.write("ok", "send", producer="P1", seq=7, partition=0, offset=6)
    (line,) = (tmp_path / "P1.jsonl").read_text().splitlines()
    event = json.loads(line)
    assert list(event) == list(FIELDS)
    assert event["msg_id"] == "P1:7" and event["offset"] == 6 and event["value"] is None
    with (
        pytest.raises(ValueError, match="not history fields"),
        HistoryWriter(tmp_path, "P1", "kafka") as history,
    ):
        history.write("ok", "send", colour="red")


def _full_disk_after(monkeypatch: pytest.MonkeyPatch, lines: int) -> None:
    """`lines` whole writes, then one cut short (5 bytes), then no room at all."""
    real, calls = os.write, [0]

    def write(fd: int, data: Any) -> int:
        calls[0] += 1
        if calls[0] <= lines:
            return real(fd, data)
        if calls[0] == lines + 1:
            return real(fd, bytes(data)[:5])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", write)


def test_a_client_s_writer_raises_on_a_full_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = HistoryWriter(tmp_path, "P1", "kafka")
    _full_disk_after(monkeypatch, 2)
    history.write("invoke", "send", producer="P1", seq=1)
    history.write("ok", "send", producer="P1", seq=1)
    with pytest.raises(OSError, match="No space"):
        history.write("invoke", "send", producer="P1", seq=2)
    history.close()


def test_the_nemesis_writer_goes_on_and_leaves_no_torn_middle_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = HistoryWriter(tmp_path, "nemesis", "kafka", keep_going=True)
    _full_disk_after(monkeypatch, 1)
    history.write("invoke", "start-partition")
    for _ in range(3):
        history.write("ok", "start-partition")  # the fault went ahead all the same
    assert isinstance(history.failed, OSError) and history.failed.errno == errno.ENOSPC
    history.close()
    monkeypatch.undo()
    text = (tmp_path / "nemesis.jsonl").read_text()
    whole, cut = text.split("\n")
    assert json.loads(whole)["type"] == "invoke" and len(cut) == 5  # only the last is cut


def test_a_scheduled_steps_invoke_says_when_it_was_due_and_how_late_it_began(
    tmp_path: Path,
) -> None:
    history = HistoryWriter(tmp_path, "nemesis", "kafka")
    history.schedule_next_invoke(100.0)
    history.write("info", "resolve", value={"op": "kill"})  # resolving the role: not the fault
    invoke = history.write("invoke", "kill", value={"nodes": ["kafka1"]})
    ok = history.write("ok", "kill", value={"nodes": ["kafka1"]})
    later = history.write("invoke", "start", value={"nodes": ["kafka1"]})
    assert invoke["value"] == {
        "nodes": ["kafka1"],
        "scheduled": 100.0,
        "lag": round(invoke["time"] - 100.0, 3),
    }
    assert "lag" not in ok["value"] and "lag" not in later["value"]  # the step's first invoke only
    history.schedule_next_invoke(200.0)
    history.schedule_next_invoke(None)  # the step failed before its fault began
    assert "lag" not in history.write("invoke", "kill", value={})["value"]
