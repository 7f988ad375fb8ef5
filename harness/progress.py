"""Live progress of a run on a terminal: the phase, its time against its timeout, and what the
history says so far (acked, refused, unknown, received per group, the nemesis step in effect).

Read from the history files as they grow, never from the clients: what it shows is what the
checker will read. Not on a terminal (CI), it shows nothing and costs nothing.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.live import Live
from rich.text import Text

from checkers.attribution import describe
from contract.history import NEMESIS_PROCESS, event_value

REFRESH_SECONDS = 1.0
# The harness's stderr: log lines and the live status share it, so neither garbles the other.
STATUS_CONSOLE = Console(stderr=True, highlight=False, soft_wrap=True)


@dataclass
class HistoryTally:
    """Counts of the history so far, read incrementally (each file from where it was left)."""

    history_dir: Path
    sends: Counter[str] = field(default_factory=Counter)  # ok / fail / info
    received: Counter[str] = field(default_factory=Counter)  # per group
    step: str = ""  # the nemesis's latest invoke
    _offsets: dict[Path, int] = field(default_factory=dict)

    def update(self) -> None:
        for path in sorted(self.history_dir.glob("*.jsonl")):
            with path.open("rb") as fh:
                fh.seek(self._offsets.get(path, 0))
                chunk = fh.read()
            whole = chunk[: chunk.rfind(b"\n") + 1]  # a line still being written waits
            self._offsets[path] = self._offsets.get(path, 0) + len(whole)
            for line in whole.splitlines():
                self._count(line)

    def _count(self, line: bytes) -> None:
        try:
            e = json.loads(line)
        except ValueError:
            return
        f, type_ = e.get("f"), e.get("type")
        if f == "send" and type_ in ("ok", "fail", "info"):
            self.sends[type_] += 1
        elif f == "receive" and type_ == "ok":
            self.received[e.get("group") or e.get("stream") or "?"] += 1
        elif e.get("process") == NEMESIS_PROCESS and type_ == "invoke" and f != "leaders":
            self.step = f"{f}{describe(event_value(e.get('value')))}"

    def line(self) -> str:
        received = ", ".join(f"{g} {n}" for g, n in sorted(self.received.items())) or "-"
        return (
            f"acked {self.sends['ok']}, refused {self.sends['fail']}, "
            f"unknown {self.sends['info']}; received: {received}; "
            f"nemesis: {self.step or 'no fault yet'}"
        )


class RunProgress:
    """One status line per phase, refreshed every second while the phase runs."""

    def __init__(self, history_dir: Path, console: Console | None = None) -> None:
        self.console = console or STATUS_CONSOLE
        self.tally = HistoryTally(history_dir)
        self.enabled = self.console.is_terminal

    @contextmanager
    def phase(
        self, name: str, timeout: float | None, detail: Callable[[], str] | None = None
    ) -> Iterator[None]:
        if not self.enabled:
            yield
            return
        started = time.monotonic()
        stop = threading.Event()

        def render() -> Text:
            elapsed = time.monotonic() - started
            bound = f"/{timeout:.0f}" if timeout else ""
            extra = ""
            try:
                extra = detail() if detail else self._history_line()
            except Exception as e:  # noqa: BLE001 - a progress line never stops a run
                extra = f"({type(e).__name__})"
            return Text(f"{name} {elapsed:.0f}{bound} s  {extra}")

        with Live(render(), console=self.console, transient=True) as live:

            def refresh() -> None:
                while not stop.wait(REFRESH_SECONDS):
                    live.update(render())

            thread = threading.Thread(target=refresh, daemon=True)
            thread.start()
            try:
                yield
            finally:
                stop.set()
                thread.join()

    def _history_line(self) -> str:
        self.tally.update()
        return self.tally.line()
