"""The workload's clients paused and resumed by their process groups: the signals with a fake
kill, then once for real on a process of the test's own (no cluster, no Docker)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nemesis.clients import ClientGroups
from nemesis.containers import NemesisError


class Signals:
    """os.killpg's stand-in: what was sent to which group; groups in `gone` have ended."""

    def __init__(self, gone: set[int] | None = None) -> None:
        self.sent: list[tuple[int, signal.Signals]] = []
        self.gone = gone or set()

    def __call__(self, group: int, signum: int) -> None:
        if group in self.gone:
            raise ProcessLookupError(group)
        self.sent.append((group, signal.Signals(signum)))


def test_a_client_is_paused_and_resumed_by_its_process_group() -> None:
    running = {"P1": 4242, "P2": 4343}
    signals = Signals()
    clients = ClientGroups(lambda: running, signals)
    assert clients.pause(["P1"]) == {"P1": 4242}
    assert clients.paused == {"P1": 4242}
    assert clients.resume(["P1"]) == {"P1": 4242}
    assert signals.sent == [(4242, signal.SIGSTOP), (4242, signal.SIGCONT)]
    assert clients.paused == {}


def test_a_client_not_running_cannot_be_paused() -> None:
    signals = Signals()
    clients = ClientGroups(lambda: {"P1": 4242}, signals)
    with pytest.raises(NemesisError, match="client P9 is not running: it cannot be paused"):
        clients.pause(["P1", "P9"])
    assert signals.sent == [] and clients.paused == {}


def test_a_resume_reaches_the_group_of_a_leader_that_ended_and_forgets_a_group_gone() -> None:
    # The harness's teardown kills a client's Python process (the group's leader) before the
    # heal: its Java child, still stopped in the group, must be resumed all the same.
    running = {"P1": 4242, "P2": 4343}
    signals = Signals()
    clients = ClientGroups(lambda: running, signals)
    clients.pause(["P1", "P2"])
    running.clear()
    signals.gone = {4343}
    assert clients.resume(["P1", "P2"]) == {"P1": 4242}
    assert signals.sent[-1] == (4242, signal.SIGCONT) and clients.paused == {}


class Refusing(Signals):
    """Refuses SIGCONT to the groups in `refused` (as a group not ours to signal would)."""

    def __init__(self, refused: set[int]) -> None:
        super().__init__()
        self.refused = refused

    def __call__(self, group: int, signum: int) -> None:
        if group in self.refused and signum == signal.SIGCONT:
            raise PermissionError(group)
        super().__call__(group, signum)


def test_one_client_that_cannot_be_resumed_stays_paused_and_the_others_are_resumed() -> None:
    signals = Refusing({4242})
    clients = ClientGroups(lambda: {"P1": 4242, "P2": 4343}, signals)
    clients.pause(["P1", "P2"])
    with pytest.raises(NemesisError, match="could not resume P1"):
        clients.resume(["P1", "P2"])
    assert signals.sent[-1] == (4343, signal.SIGCONT)
    assert clients.paused == {"P1": 4242}  # the next heal tries it again
    signals.refused.clear()
    assert clients.resume(["P1"]) == {"P1": 4242} and clients.paused == {}


def test_a_client_that_ended_as_it_was_paused_is_one_line_and_not_kept_paused() -> None:
    clients = ClientGroups(lambda: {"P1": 4242}, Signals(gone={4242}))
    with pytest.raises(NemesisError, match="client P1 ended as it was paused"):
        clients.pause(["P1"])
    assert clients.paused == {}


def _state(pid: int) -> str:
    """The process's state letter in /proc (T: stopped)."""
    return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_real_client_and_its_child_stop_and_run_again_together() -> None:
    # A client in a session of its own, as the harness starts it, with a child in its group
    # (a Java client's JVM).
    code = (
        "import subprocess, sys, time; "
        "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        "print(c.pid, flush=True); time.sleep(60)"
    )
    client = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True, text=True
    )
    try:
        assert client.stdout is not None
        child = int(client.stdout.readline())
        clients = ClientGroups(lambda: {"P1": client.pid})
        clients.pause(["P1"])
        time.sleep(0.2)
        assert (_state(client.pid), _state(child)) == ("T", "T")
        clients.resume(["P1"])
        time.sleep(0.2)
        assert "T" not in (_state(client.pid), _state(child))
    finally:
        os.killpg(client.pid, signal.SIGKILL)
        client.wait()


def test_a_client_is_killed_or_stopped_by_its_process_group() -> None:
    running = {"P1": 4242, "C1": 4343}
    signals = Signals()
    clients = ClientGroups(lambda: running, signals)
    assert clients.end(["P1"], signal.SIGKILL) == {"P1": 4242}
    assert clients.end(["C1"], signal.SIGTERM) == {"C1": 4343}
    # A SIGTERM is followed by a SIGCONT: a paused client holds it unheard until then.
    assert signals.sent == [
        (4242, signal.SIGKILL),
        (4343, signal.SIGTERM),
        (4343, signal.SIGCONT),
    ]


def test_a_paused_client_killed_is_no_longer_paused() -> None:
    running = {"C1": 4343}
    clients = ClientGroups(lambda: running, Signals())
    clients.pause(["C1"])
    clients.end(["C1"], signal.SIGKILL)
    assert clients.paused == {}


def test_a_client_not_running_cannot_be_ended_and_one_restarted_through_the_run() -> None:
    started: list[str] = []

    def restart(name: str) -> int:
        started.append(name)
        return 5050

    clients = ClientGroups(lambda: {}, Signals(), restart)
    with pytest.raises(NemesisError, match="C1 is not running"):
        clients.end(["C1"], signal.SIGKILL)
    assert clients.restart(["C1"]) == {"C1": 5050} and started == ["C1"]
    with pytest.raises(NemesisError, match="cannot restart"):
        ClientGroups(lambda: {}, Signals()).restart(["C1"])


def test_a_real_client_killed_takes_its_group_with_it() -> None:
    """A client and its child (a Java client's JVM under its Python) end together."""
    child = (
        "import subprocess, sys, time; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        "print('up', flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", child], start_new_session=True, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
    clients = ClientGroups(lambda: {"C1": proc.pid})
    clients.end(["C1"], signal.SIGKILL)
    assert proc.wait(timeout=10) == -signal.SIGKILL
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the client's child outlived its kill")
