"""The live progress line: what it counts from a growing history, and silence off a terminal."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

from rich.console import Console

from harness.progress import HistoryTally, RunProgress


def line(**e: object) -> str:
    return json.dumps(e) + "\n"


def test_the_tally_reads_only_whole_new_lines(tmp_path: Path) -> None:
    p1 = tmp_path / "P1.jsonl"
    p1.write_text(line(f="send", type="invoke") + line(f="send", type="ok") + '{"f": "se')
    tally = HistoryTally(tmp_path)
    tally.update()
    assert tally.sends == {"ok": 1}
    with p1.open("a") as fh:  # the torn line completes, more arrive
        fh.write('nd", "type": "fail"}\n' + line(f="send", type="info"))
    (tmp_path / "reader.jsonl").write_text(line(f="receive", type="ok", group="reader") * 3)
    nemesis = {"op": "cut", "from": ["kafka4"], "to": ["kafka2", "kafka3"]}
    (tmp_path / "nemesis.jsonl").write_text(
        line(process="nemesis", f="start-partition", type="invoke", value=nemesis)
    )
    tally.update()
    assert tally.sends == {"ok": 1, "fail": 1, "info": 1}
    assert tally.received == {"reader": 3}
    assert tally.line() == (
        "acked 1, refused 1, unknown 1; received: reader 3; "
        "nemesis: start-partition cut kafka4 -> kafka2,kafka3"
    )


def test_progress_shows_on_a_terminal_and_nothing_elsewhere(tmp_path: Path) -> None:
    (tmp_path / "P1.jsonl").write_text(line(f="send", type="ok"))
    shown = io.StringIO()
    terminal = RunProgress(tmp_path, Console(file=shown, force_terminal=True, width=200))
    with terminal.phase("workload", 60):
        time.sleep(1.3)
    assert "workload" in shown.getvalue() and "acked 1" in shown.getvalue()
    quiet = io.StringIO()
    piped = RunProgress(tmp_path, Console(file=quiet, force_terminal=False))
    with piped.phase("workload", 60):
        time.sleep(1.3)
    assert quiet.getvalue() == ""
