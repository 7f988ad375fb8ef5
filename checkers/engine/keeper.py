"""The warm server's keeper: the small detached process a check starts (checkers.engine.autostart)
to start a warm server for the checks after it, warm it, and stop it once idle.

    python -m checkers.engine.keeper --idle-minutes 30 --after PID [--replace PID] [-- WARM-UP...]
    python -m checkers.engine.keeper --idle-minutes 30 --watch

It waits for the process `--after` (the check's command, whose local Spark ends with it), then,
with `--replace`, stops the server that did not answer that check unless it answers now, and
starts a server that dies with the keeper (the kernel's parent-death signal): a server started
for the checks never outlives its idle clock. The warm-up, a command handed to it (the engine
runs no check of its own: checkers.rehearsal), runs with the server's url as its last argument.
Then it watches the idle clock (checkers.engine.idle) and stops the server when no check has
used it for the idle time; it ends when the server is gone (`harness spark down`, or a crash).
`--watch` keeps the server running already (`harness spark up --idle-minutes`), started by
another command: that one outlives its keeper.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

from checkers.engine import autostart, idle
from checkers.engine.errors import HistoryError
from checkers.engine.session import (
    PORT,
    AlreadyRunning,
    Server,
    connect_session,
    recorded_server,
    start_server,
    stop_server,
)
from contract.process import alive, dies_with

PORT_ENV = "BJ_CHECKER_PORT"  # the port of a server the checks start (default Spark's 15002)
TICK = 5.0  # seconds between two looks at the idle clock and at the server
WARM_UP_TIMEOUT = 600.0
PROBE_TIMEOUT = 120.0
# The keeper, the server and the warm-up run behind everything else on the machine: the server
# starts and warms as the user's next run may be starting its cluster or injecting its faults on
# the same 2 cores, and that run's timing is what it measures. A check on the server runs when
# the machine is otherwise idle (a run's cluster is down by then), where its priority is moot.
NICENESS = 10


def keep(
    server: Server,
    idle_seconds: float,
    tick: float = TICK,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Watches `server` until it is gone or has been idle `idle_seconds` (then stops it); says
    which."""
    while recorded_server() == server:
        if stopped_if_idle(server, idle_seconds, clock()):
            return f"stopped after {idle_seconds / 60:g} min unused"
        sleep(tick)
    return "gone (harness spark down, or it ended)"


def stopped_if_idle(server: Server, idle_seconds: float, now: float) -> bool:
    """Stops `server` when no check uses it and none has for `idle_seconds` at `now`."""
    with idle.unused() as free:
        last = idle.last_used()
        if not free or last is None or not idle.is_idle(last, now, idle_seconds):
            return False
        stop_server(expected=server)
        return True


def replaced(pid: int, answers: Callable[[str], bool]) -> bool:
    """Whether a new server may take the place of the server `pid` that did not answer a check:
    it ended, or does not answer now either (then it is stopped, with its keeper). False when
    another server took its place already, or it answers again."""
    server = recorded_server()
    if server is None:
        return True
    if server.pid != pid:
        say(f"the server {pid} was replaced already, by {server.pid}")
        return False
    if answers(server.url):
        say(f"{server.url} answers again: kept")
        return False
    say(f"{server.url} does not answer: stopping it (pid {pid})")
    autostart.stop_keeper()
    stop_server(expected=server)
    return True


def started(port: int) -> Server | None:
    """A server of this keeper's (it dies with the keeper), None when one runs already or it
    did not start (recorded, so that checks do not try again at once)."""
    try:
        server = start_server(port, keeper=True)
    except AlreadyRunning as e:
        say(str(e))
        return None
    except HistoryError as e:
        autostart.record_failure(str(e))
        say(f"did not start: {e}")
        return None
    autostart.clear_failure()
    say(f"started {server.url} (pid {server.pid}, log {server.log})")
    return server


def warm(url: str, warm_up: Sequence[str]) -> None:
    """Runs the warm-up command on the server at `url`; a warm-up that fails leaves the server
    up, cold: a slower check is no wrong one."""
    if not warm_up:
        return
    try:
        done = subprocess.run(
            [*warm_up, url],
            stdin=subprocess.DEVNULL,
            timeout=WARM_UP_TIMEOUT,
            check=False,
            preexec_fn=dies_with(os.getpid()),
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        say(f"warm-up failed: {e}")
        return
    say("warmed" if done.returncode == 0 else f"warm-up failed: exit {done.returncode}")


def answers(url: str) -> bool:
    """Whether the server at `url` answers a new client, asked from a process of its own (a
    Connect session would turn this one's PySpark to Connect mode for good)."""
    probe = [sys.executable, "-m", autostart.KEEPER_MODULE, "--probe", url]
    try:
        done = subprocess.run(probe, stdin=subprocess.DEVNULL, timeout=PROBE_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def probe(url: str) -> int:
    """`--probe URL`: exit 0 when the server at `url` answers, else 1."""
    try:
        connect_session(url).stop()
    except HistoryError as e:
        say(str(e))
        return 1
    return 0


def wait_for_end(pid: int | None, poll: float = 0.5) -> None:
    while pid is not None and alive(pid):
        time.sleep(poll)


def port(env: dict[str, str]) -> int:
    text = env.get(PORT_ENV, "").strip()
    return int(text) if text.isdigit() and 1024 <= int(text) <= 65535 else PORT


def say(line: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    print(f"{stamp} keeper {os.getpid()}: {line}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parsed(argv)
    if args.probe:
        return probe(args.probe)
    if args.replace is not None:
        wait_for_end(args.after)
        if not replaced(args.replace, answers):
            return 0
    with autostart.keeping(args.idle_minutes) as mine:
        if not mine:
            say("another keeper is at work")
            return 0
        server = recorded_server() if args.watch else _started_after(args.after, args.warm_up)
        if server is None:
            return 0
        idle.touch()  # the idle time counts from now: the start and the warm-up are no use
        say(f"{server.url}: {keep(server, args.idle_minutes * 60, TICK)}")
    return 0


def _started_after(after: int | None, warm_up: Sequence[str]) -> Server | None:
    wait_for_end(after)
    server = started(port(dict(os.environ)))
    if server is not None:
        warm(server.url, warm_up)
    return server


def _parsed(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"python -m {autostart.KEEPER_MODULE}")
    parser.add_argument("--idle-minutes", type=float, default=idle.DEFAULT_IDLE_MINUTES)
    parser.add_argument("--after", type=int, help="start once this process has ended")
    parser.add_argument("--replace", type=int, help="the server that did not answer")
    parser.add_argument("--watch", action="store_true", help="keep the server up already")
    parser.add_argument("--probe", metavar="URL", help="exit 0 when the server answers")
    parser.add_argument("warm_up", nargs="*", help="after --: the warm-up command")
    return parser.parse_args(argv)


if __name__ == "__main__":
    os.nice(NICENESS)
    sys.exit(main())
