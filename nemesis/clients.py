"""Faults on the workload's own client processes: a client paused (SIGSTOP) and resumed
(SIGCONT), as a long GC pause or a VM its hypervisor froze stops an application instance while
the brokers and every other client go on; a client killed (SIGKILL: a crash) or stopped
(SIGTERM: its own shutdown), and a new instance of it started, as Kafka's own TransactionsTest
bounces its copiers. Kafka's zombie fencing (KIP-98) is about such an
instance: a replacement takes its transactional id meanwhile, and the old one, resumed, must not
commit.

Each client leads a process group of its own (the harness starts it in a new session), and the
signal goes to the group: a Python client's Java child stops and resumes with it. A paused
client is a fault in effect until it is resumed, and every heal resumes it: a stopped process
must never outlive its run (a stopped child even holds a SIGTERM pending, unheard, until
SIGCONT).
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable, Iterable, Mapping

from nemesis.containers import NemesisError

log = logging.getLogger(__name__)


class ClientGroups:
    """Pauses and resumes the workload's client processes by their process groups.

    `groups` says, when asked, each running client's process group (its leader's pid); a
    client that has ended is not in it. `signal_group` is os.killpg (a test's fake otherwise).
    """

    def __init__(
        self,
        groups: Callable[[], Mapping[str, int]],
        signal_group: Callable[[int, int], None] = os.killpg,
        restart: Callable[[str], int] | None = None,
    ) -> None:
        self.groups = groups
        self.signal_group = signal_group
        # Starts a new instance of an ended client and returns its group (the run's).
        self.restart_one = restart
        # The paused clients' groups, as they were when paused: a resume needs no leader alive
        # (a Java child outlives its Python parent killed at teardown).
        self.paused: dict[str, int] = {}

    def pause(self, names: Iterable[str]) -> dict[str, int]:
        """SIGSTOP to each client's group; returns {client: group}."""
        running = self.groups()
        names = list(names)
        if missing := [n for n in names if n not in running]:
            raise NemesisError(f"client {missing[0]} is not running: it cannot be paused")
        out = {}
        for name in names:
            # Recorded before the signal: whatever comes between them (an interrupt), every
            # heal resumes it, and SIGCONT to a group never stopped does nothing.
            self.paused[name] = out[name] = running[name]
            try:
                self.signal_group(running[name], signal.SIGSTOP)
            except ProcessLookupError:
                del self.paused[name]
                raise NemesisError(f"client {name} ended as it was paused") from None
        return out

    def end(self, names: Iterable[str], signum: int) -> dict[str, int]:
        """SIGKILL or SIGTERM to each client's group (a paused one thawed first for a SIGTERM:
        a stopped process holds it unheard); returns {client: group}."""
        running = self.groups()
        names = list(names)
        if missing := [n for n in names if n not in running and n not in self.paused]:
            raise NemesisError(f"client {missing[0]} is not running: it cannot be ended")
        out = {}
        for name in names:
            group = self.paused.pop(name, None) or running[name]
            try:
                self.signal_group(group, signum)
                if signum != signal.SIGKILL:
                    self.signal_group(group, signal.SIGCONT)
            except ProcessLookupError:
                log.info("client %s had ended before its %s", name, signal.Signals(signum).name)
            out[name] = group
        return out

    def restart(self, names: Iterable[str]) -> dict[str, int]:
        """A new instance of each ended client; returns {client: its new group}."""
        if self.restart_one is None:
            raise NemesisError("this run cannot restart its clients")
        return {name: self.restart_one(name) for name in names}

    def resume(self, names: Iterable[str]) -> dict[str, int]:
        """SIGCONT to each client's group (a client never paused is resumed all the same: a
        no-op); returns {client: group} of those signalled. A group that is gone is done."""
        running = self.groups()
        out: dict[str, int] = {}
        failed: list[str] = []
        for name in names:
            group = self.paused.get(name) or running.get(name)
            if group is None:
                continue
            try:
                self.signal_group(group, signal.SIGCONT)
            except ProcessLookupError:
                log.info("client %s had ended before its resume", name)
            except OSError as e:  # kept paused, to be resumed by the next heal; the rest go on
                failed.append(f"{name}: {e}")
                continue
            else:
                out[name] = group
            self.paused.pop(name, None)
        if failed:
            raise NemesisError(f"could not resume {'; '.join(failed)}")
        return out
