"""`harness heal` finds the clients whose harness is gone, and only those."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from harness.cleanup import stop_orphans
from harness.orphans import clients, orphan_checker_jvms, orphan_clients, stop

pytestmark = pytest.mark.unit


def _fake_proc(root: Path, pid: int, parent: int, argv: list[str], cwd: Path) -> None:
    d = root / str(pid)
    d.mkdir(parents=True)
    (d / "cmdline").write_bytes(("\0".join(argv) + "\0").encode())
    (d / "stat").write_text(f"{pid} (py (thon)) S {parent} {pid} {pid} 0 -1\n")
    (d / "cwd").symlink_to(cwd)


def _run_dir(root: Path, harness_pid: int | None) -> Path:
    run_dir = root / "results" / "K4" / "run-1"
    (run_dir / "logs").mkdir(parents=True)
    manifest = {"scenario": "K4"} | ({"harness_pid": harness_pid} if harness_pid else {})
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    return run_dir


def test_clients_are_told_from_other_processes_and_orphans_from_live_runs(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    run_dir = _run_dir(tmp_path, harness_pid=100)
    config = str(run_dir / "logs" / "P1.config.json")
    py = sys.executable
    _fake_proc(proc, 101, 100, [py, "-m", "workloads.kafka.clients", "producer", config], tmp_path)
    _fake_proc(proc, 102, 1, [py, "-m", "workloads.kafka.clients", "reader", config], tmp_path)
    relative = "results/K4/run-1/logs/C1.config.json"
    _fake_proc(
        proc, 103, 1, [py, "-m", "workloads.rabbitmq.clients", "consumer", relative], tmp_path
    )
    _fake_proc(proc, 104, 1, [py, "-m", "harness.cli", "run", "K4"], tmp_path)
    _fake_proc(proc, 105, 1, ["sleep", "10"], tmp_path)
    (proc / "self").mkdir()

    found = {c.pid: c for c in clients(proc)}
    assert sorted(found) == [101, 102, 103]
    assert found[103].process == "C1" and found[103].run_dir == run_dir
    assert [c.pid for c in orphan_clients(proc)] == [102, 103]


def test_a_client_of_a_run_without_a_manifest_is_an_orphan(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    config = str(tmp_path / "elsewhere" / "P1.config.json")
    _fake_proc(
        proc, 7, 6, [sys.executable, "-m", "workloads.kafka.clients", "producer", config], tmp_path
    )
    (only,) = orphan_clients(proc)
    assert only.run_dir is None and only.process == "P1"


def test_a_checker_jvm_is_an_orphan_once_its_python_driver_is_gone(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    log4j = "-Dlog4j2.configurationFile=file:/src/brokerjepsen/checkers/log4j2.properties"
    java = ["/usr/lib/jvm/bin/java", "-cp", "x", log4j, "org.apache.spark.deploy.SparkSubmit"]
    _fake_proc(proc, 1, 0, ["/sbin/init"], tmp_path)
    _fake_proc(proc, 50, 1, [sys.executable, "-m", "harness.cli", "check", "r"], tmp_path)
    _fake_proc(proc, 51, 50, [*java, "pyspark-shell"], tmp_path)  # its driver is alive
    _fake_proc(proc, 61, 1, [*java, "pyspark-shell"], tmp_path)  # its driver was killed
    # Started from checkers/engine/, where the configuration is now.
    engine = [*java[:3], log4j.replace("/checkers/", "/checkers/engine/"), *java[4:]]
    _fake_proc(proc, 62, 1, [*engine, "pyspark-shell"], tmp_path)
    _fake_proc(proc, 71, 1, ["/usr/lib/jvm/bin/java", "-jar", "other.jar"], tmp_path)
    assert [j.pid for j in orphan_checker_jvms(proc)] == [61, 62]


def test_heal_stops_a_real_orphan_and_says_so(tmp_path: Path) -> None:
    # A process that looks like a client of a run whose harness (pid 1 is none) is gone, and
    # that ignores SIGTERM: heal must still end it.
    run_dir = _run_dir(tmp_path, harness_pid=None)
    config = run_dir / "logs" / "P9.config.json"
    config.write_text("{}")
    stubborn = tmp_path / "workloads" / "stub" / "clients.py"
    stubborn.parent.mkdir(parents=True)
    stubborn.write_text(
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)\n"
    )
    for d in (tmp_path / "workloads", stubborn.parent):
        (d / "__init__.py").write_text("")
    client = subprocess.Popen(
        [sys.executable, "-m", "workloads.stub.clients", "producer", str(config)],
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        time.sleep(0.5)
        said: list[str] = []
        assert stop_orphans(said.append, timeout=1.0) >= 1
        client.wait(timeout=5)
        mine = [s for s in said if f"(pid {client.pid})" in s]
        assert mine == [f"client P9 (pid {client.pid}) of {run_dir}: killed"]
    finally:
        if client.poll() is None:
            client.kill()


def test_a_paused_client_is_stopped_by_its_sigterm_not_left_stopped() -> None:
    # A client the nemesis paused (pause-client) holds a SIGTERM pending while it is stopped:
    # heal lets it run again, so it ends by that SIGTERM, not only by the SIGKILL after it.
    client = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    try:
        os.killpg(client.pid, signal.SIGSTOP)
        assert stop(client.pid, timeout=10.0) == "stopped"
        assert client.wait(timeout=5) == -signal.SIGTERM
    finally:
        if client.poll() is None:
            client.kill()


def test_the_warm_checker_is_no_orphan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`harness spark up` leaves its server without a Python parent on purpose: heal spares it."""
    import checkers.engine
    from checkers.engine import session

    proc = tmp_path / "proc"
    log4j = "-Dlog4j2.configurationFile=file:/src/brokerjepsen/checkers/log4j2.properties"
    java = ["/usr/lib/jvm/bin/java", "-cp", "x", log4j, "org.apache.spark.deploy.SparkSubmit"]
    _fake_proc(proc, 1, 0, ["/sbin/init"], tmp_path)
    _fake_proc(proc, 61, 1, [*java, "pyspark-shell"], tmp_path)
    _fake_proc(proc, 81, 1, [*java, session.SERVER_CLASS], tmp_path)
    warm = session.Server("sc://127.0.0.1:15002", 81, "log", 0.0, detached=True)
    monkeypatch.setattr(checkers.engine, "recorded_server", lambda: warm)
    assert [j.pid for j in orphan_checker_jvms(proc)] == [61]
    # One started for a command dies with it; if its command is gone and it is not, heal ends it.
    monkeypatch.setattr(checkers.engine, "recorded_server", lambda: replace(warm, detached=False))
    assert [j.pid for j in orphan_checker_jvms(proc)] == [61, 81]


def test_a_warm_server_a_check_started_is_no_orphan_nor_is_its_keeper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its parent is its keeper (a Python process, checkers.engine.keeper), no client; and it is
    recorded detached, as `harness spark up`'s is."""
    import checkers.engine
    from checkers.engine import autostart, session

    proc = tmp_path / "proc"
    log4j = "-Dlog4j2.configurationFile=file:/src/brokerjepsen/checkers/engine/log4j2.properties"
    keeper = ["/venv/bin/python", "-m", autostart.KEEPER_MODULE, "--idle-minutes", "30"]
    _fake_proc(proc, 1, 0, ["/sbin/init"], tmp_path)
    _fake_proc(proc, 71, 1, keeper, tmp_path)
    _fake_proc(proc, 81, 71, ["/usr/lib/jvm/bin/java", log4j, session.SERVER_CLASS], tmp_path)
    warm = session.Server("sc://127.0.0.1:15002", 81, "log", 0.0, detached=True, owner=71)
    monkeypatch.setattr(checkers.engine, "recorded_server", lambda: warm)
    assert orphan_checker_jvms(proc) == [] and orphan_clients(proc) == []
