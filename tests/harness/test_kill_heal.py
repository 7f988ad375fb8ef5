"""kill -9 of the harness at each point of a real run, then `harness heal`: nothing of ours is
left, and what the run recorded up to the kill is there and checkable."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from compose.disks import leftover_mounts
from harness.orphans import PROC, clients
from nemesis.containers import HELPER_LABEL
from tests.helpers import ROOT

pytestmark = [pytest.mark.cluster, pytest.mark.e2e, pytest.mark.root]

SCENARIO = ROOT / "tests/scenarios/kill-points.yaml"


class Harness:
    """`harness run` of the kill-points scenario, its stderr collected as it goes."""

    def __init__(self, results: Path) -> None:
        self.results = results
        self.proc = subprocess.Popen(
            # A Spark of the check's own, even beside the session's warm server: the kill
            # point "check" is the harness killed while its checker JVM runs.
            [
                *[sys.executable, "-m", "harness.cli", "run", str(SCENARIO)],
                *["--results", str(results), "--master", "local[*]"],
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.stderr: list[str] = []
        threading.Thread(target=self._collect, daemon=True).start()

    def _collect(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip("\n"))

    def said(self, text: str) -> bool:
        return any(text in line for line in list(self.stderr))

    @property
    def run_dir(self) -> Path | None:
        made = sorted((self.results / "kill-points").glob("*")) if self.results.exists() else []
        return made[-1] if made else None

    def nemesis_done(self, f: str, type_: str = "ok") -> bool:
        if self.run_dir is None:
            return False
        path = self.run_dir / "history" / "nemesis.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        events = [json.loads(x) for x in lines if x.endswith("}")]
        return any(e["f"] == f and e["type"] == type_ for e in events)

    def checking(self) -> bool:
        """The checker's JVM has started (the run's cluster is down by then)."""
        return any(_is_spark(p) and _parent(p) == self.proc.pid for p in _pids())


def _pids() -> list[int]:
    return [int(d.name) for d in PROC.iterdir() if d.name.isdigit()]


def _parent(pid: int) -> int:
    try:
        return int((PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _argv(pid: int) -> str:
    try:
        return (PROC / str(pid) / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def _is_spark(pid: int) -> bool:
    return "pyspark-shell" in _argv(pid) or "pyspark.daemon" in _argv(pid)


def _lazyfs_daemons() -> list[int]:
    return [p for p in _pids() if "\0lazyfs\0" in _argv(p)]


# Each point: the moment the harness is killed, and whether the clients had started by then.
KILL_POINTS: dict[str, tuple[Callable[[Harness], bool], bool]] = {
    "cluster-forming": (lambda h: h.said("phase cluster_up") and _containers_exist(h), False),
    "partition": (lambda h: h.nemesis_done("start-partition"), True),
    "paused-node": (lambda h: h.nemesis_done("pause"), True),
    "killed-node": (lambda h: h.nemesis_done("kill"), True),
    "power-loss": (lambda h: h.nemesis_done("power-loss", "invoke"), True),
    "drain": (lambda h: h.said("phase drain"), True),
    "check": (Harness.checking, True),
}


def _containers_exist(h: Harness) -> bool:
    import docker

    run_dir = h.run_dir
    if run_dir is None:
        return False
    project = json.loads((run_dir / "manifest.json").read_text()).get("compose_project")
    if not project:
        return False
    label = f"com.docker.compose.project={project}"
    # sparse: no inspect of each, which a container removed meanwhile would fail
    containers = docker.from_env().containers.list(all=True, sparse=True, filters={"label": label})
    return bool(containers)


def _histories(run_dir: Path) -> dict[str, str]:
    return {p.name: p.read_text(errors="replace") for p in (run_dir / "history").glob("*.jsonl")}


def _our_spark_leftovers() -> list[int]:
    # The suite's own Spark session (a child of this pytest process) and its Python workers
    # (children of that JVM, left by an earlier test's UDFs) are not leftovers.
    return [p for p in _pids() if _is_spark(p) and not _descends_from(p, os.getpid())]


def _descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1:
        pid = _parent(pid)
        if pid == ancestor:
            return True
    return False


def _heal() -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "heal"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture
def healed_after() -> Iterator[None]:
    """A test that fails before its own heal leaves nothing to the next one."""
    yield
    _heal()


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_kill_9_then_heal_leaves_nothing_and_keeps_the_history(
    point: str, docker_client: Any, tmp_path: Path, healed_after: None
) -> None:
    reached, clients_started = KILL_POINTS[point]
    harness = Harness(tmp_path)
    try:
        deadline = time.monotonic() + 400
        while not reached(harness):
            assert harness.proc.poll() is None, "\n".join(harness.stderr[-20:])
            assert time.monotonic() < deadline, f"{point} never came"
            time.sleep(0.2)
        harness.proc.send_signal(signal.SIGKILL)
        harness.proc.wait(timeout=30)
    finally:
        if harness.proc.poll() is None:
            harness.proc.kill()
    run_dir = harness.run_dir
    assert run_dir is not None
    at_kill = _histories(run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert bool(manifest.get("client_pids")) == clients_started

    heal = _heal()
    print(f"{point}: harness heal said:\n{heal.stdout}")  # for the record (pytest -rP)
    assert heal.returncode == 0, heal.stderr
    assert "Traceback" not in heal.stdout + heal.stderr

    project = manifest.get("compose_project")
    label = {"label": f"com.docker.compose.project={project}"}
    assert docker_client.containers.list(all=True, filters=label) == []
    assert docker_client.networks.list(filters=label) == []
    assert docker_client.containers.list(all=True, filters={"label": HELPER_LABEL}) == []
    assert leftover_mounts() == [] and _lazyfs_daemons() == []
    assert clients() == [], "client processes left"
    assert _our_spark_leftovers() == []

    # What the run recorded up to the kill is still there, untouched.
    after = _histories(run_dir)
    for name, text in at_kill.items():
        assert after[name].startswith(text), f"{name} changed after the kill"
    check = subprocess.run(
        [sys.executable, "-m", "harness.cli", "check", str(run_dir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "Traceback" not in check.stderr
    if not clients_started:
        assert check.returncode == 2
        assert check.stderr.strip().endswith("no history files (*.jsonl)")
        return
    assert check.returncode in (0, 1), check.stderr
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["sends"]["ok"] > 0
    torn = [f for f, text in after.items() if text and not text.endswith("\n")]
    assert len(verdict.get("truncated_lines") or []) == len(torn)
