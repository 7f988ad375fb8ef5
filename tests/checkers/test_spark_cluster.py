"""The checker on a real Spark cluster: a standalone master and worker on 127.0.0.1, started from
PySpark's own bin/spark-class, check a history and must count what local mode counts."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from checkers.synthetic import synth
from tests.conftest import missing
from tests.helpers import ROOT

pytestmark = pytest.mark.spark


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def _start(argv: list[str], log: Path, ready: str, timeout: float) -> subprocess.Popen[bytes]:
    """A Spark daemon in its own process group, once its log says `ready`."""
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(_spark_class()), *argv],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready in log.read_text(errors="replace"):
            return proc
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    _stop(proc)
    tail = log.read_text(errors="replace").strip().splitlines()[-3:]
    raise AssertionError(f"{argv[0]} did not start within {timeout:.0f} s: {tail}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@pytest.fixture(scope="module")
def standalone_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        missing("Java is not installed (a Spark cluster needs Java 17+): run make setup")
    logs = tmp_path_factory.mktemp("spark-cluster")
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    master = _start(
        ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port)]
        + ["--webui-port", str(_free_port())],
        logs / "master.log",
        "I have been elected leader",
        120,
    )
    try:
        worker = _start(
            ["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", "2"]
            + ["--memory", "2g", "--webui-port", str(_free_port())],
            logs / "worker.log",
            "Successfully registered with master",
            120,
        )
        try:
            yield url
        finally:
            _stop(worker)
    finally:
        _stop(master)


def _check(run: Path, *master: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-m", "harness.cli", "check", str(run), "--expect", "loss", *master],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        env={**os.environ, **(env or {})},
    )
    assert result.returncode in (0, 1) and "Traceback" not in result.stderr, result.stderr[-2000:]
    return json.loads((run / "verdict.json").read_text())


# Nightly (88 s in a loaded fast tier): a standalone Spark cluster of its own beside the checks.
@pytest.mark.nightly
def test_a_standalone_cluster_counts_what_local_mode_counts(
    standalone_master: str, tmp_path: Path
) -> None:
    local_run, cluster_run = tmp_path / "local", tmp_path / "cluster"
    synth(local_run / "history", 20000)
    shutil.copytree(local_run / "history", cluster_run / "history")
    local = _check(local_run)
    # Executors get a Python that does not exist: any Python worker there fails the check. The
    # checker runs on the JVM alone, so a cluster needs none of our modules (nor Python).
    no_python = {"PYSPARK_PYTHON": "/nonexistent/python3"}
    on_cluster = _check(cluster_run, "--master", standalone_master, env=no_python)
    assert on_cluster["checker"]["master"] == standalone_master
    for key in ("groups", "sends", "log", "readers", "producers", "attribution", "unavailability"):
        assert on_cluster[key] == local[key], key
    assert local["groups"]["g1"]["lost"] > 0  # the synthetic loss is seen
    assert local["log"]["duplicate_offsets"] > 0
    for group in ("g1", "g2"):
        for metric in ("lost", "duplicated", "reordered"):
            ids = f"ids/{group}/{metric}.txt"
            assert (cluster_run / ids).read_text() == (local_run / ids).read_text()
