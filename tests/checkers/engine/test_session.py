"""The warm checker on a real Spark Connect server: it counts what a local Spark counts, runs
the dependency cycles' one Python task, is found by `harness check` in another process, and
never outlives a command that did not ask it to."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from checkers.engine import CONNECT_MARK, kept_session, session
from checkers.read import HistoryError
from checkers.run import check_run
from checkers.synthetic import GROUPS, synth_run
from tests.checkers.test_cycles import TOPIC, write_history
from tests.helpers import ROOT

pytestmark = pytest.mark.spark
HARNESS = [sys.executable, "-m", "harness.cli"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A cache of the module's own: its state file names only the servers these tests start."""
    root = tmp_path_factory.mktemp("cache")
    before = os.environ.get("BJ_CACHE_DIR")
    os.environ["BJ_CACHE_DIR"] = str(root)
    yield root
    if before is None:
        os.environ.pop("BJ_CACHE_DIR")
    else:
        os.environ["BJ_CACHE_DIR"] = before


@pytest.fixture(scope="module")
def warm(cache: Path) -> Iterator[session.Server]:
    server = session.start_server(_free_port())
    yield server
    session.stop_server()


def _command(
    argv: list[str], env: dict[str, str], cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    """`argv` in `env` as it is (nothing of this process's environment added)."""
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )


def _harness(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return _command([*HARNESS, *argv], {**os.environ, **(env or {})})


# Nightly: measured over 90 s. The mock tier's checks run warm in the fast tier, against
# counts their tests know.
@pytest.mark.nightly
def test_a_warm_check_counts_what_a_local_check_counts(
    spark: Any, warm: session.Server, tmp_path: Path
) -> None:
    local = check_run(synth_run(tmp_path / "local", 20_000), spark=spark)
    checked = _harness("check", str(synth_run(tmp_path / "warm", 20_000)))
    assert checked.returncode in (0, 1) and "Traceback" not in checked.stderr, checked.stderr
    assert f"checked on warm Spark Connect at {warm.url}" in checked.stderr
    on_warm = json.loads((tmp_path / "warm" / "verdict.json").read_text())
    assert on_warm["checker"]["engine"] == "pyspark-connect"
    assert on_warm["checker"]["master"] == warm.url
    for key in ("groups", "sends", "log", "readers", "producers", "attribution", "stalls"):
        assert on_warm[key] == local[key], key
    assert local["groups"]["g1"]["lost"] > 0 and local["log"]["duplicate_offsets"] > 0
    for name in ("lost", "duplicated", "reordered"):  # the ids behind the counts, too
        for group in GROUPS:
            ids = Path("ids") / group / f"{name}.txt"
            assert (tmp_path / "warm" / ids).read_text() == (tmp_path / "local" / ids).read_text()


# Nightly (89 s in a loaded fast tier): the turns' rules have unit tests (test_kept_session), and
# every check of the fast tier runs on the warm session.
@pytest.mark.nightly
def test_checks_take_turns_on_one_kept_session(warm: session.Server, tmp_path: Path) -> None:
    """This machine's checks run in one server session, one at a time: the next check runs in
    the session the last one ran in, one the server closed is replaced, and a check that finds
    it taken runs in a session of its own."""
    run = synth_run(tmp_path / "run", 2_000)

    def checked() -> dict[str, Any]:
        done = _harness("check", str(run))
        assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
        assert f"checked on warm Spark Connect at {warm.url}" in done.stderr, done.stderr
        return dict(json.loads(kept_session.record_file().read_text()))

    first = checked()
    assert first["server"] == warm.pid and first["clean"] is True
    assert checked()["session"] == first["session"]
    # Released on the server, as it releases a session idle past its timeout (in a process of
    # its own: a Connect session would turn this one's PySpark to Connect mode).
    release = (
        "import sys; from checkers.engine.session import connect_session as c; "
        "c(*sys.argv[1:]).stop()"
    )
    argv = [sys.executable, "-c", release, warm.url, first["session"]]
    _command(argv, {**os.environ, "PYTHONPATH": str(ROOT)})
    renewed = checked()
    assert renewed["session"] != first["session"] and renewed["clean"] is True
    with kept_session.turn(warm.pid) as held:
        assert held is not None
        checked()
    assert checked()["session"] == renewed["session"]


def test_a_relative_run_directory_is_the_one_this_command_names(
    warm: session.Server, tmp_path: Path
) -> None:
    """The server has a working directory of its own: the check sends it absolute paths."""
    synth_run(tmp_path / "here", 2_000)
    checked = _command(
        [*HARNESS, "check", "here"], {**os.environ, "PYTHONPATH": str(ROOT)}, cwd=tmp_path
    )
    assert "checked on warm Spark Connect" in checked.stderr, checked.stderr
    assert json.loads((tmp_path / "here" / "verdict.json").read_text())["groups"]["g1"]["lost"] > 0


def test_a_warm_check_finds_a_dependency_cycle(warm: session.Server, tmp_path: Path) -> None:
    """The cycles' search is the check's one Python task: it runs in the server's Python."""
    run = tmp_path / "run"
    write_history(run / "history", {(TOPIC, 0): ["A:t1", "B:t1"], (TOPIC, 1): ["B:t1", "A:t1"]})
    (run / "manifest.json").write_text(json.dumps({"groups": ["g"]}) + "\n")
    checked = _harness("check", str(run), "--profile")
    assert "Traceback" not in checked.stderr, checked.stderr
    verdict = json.loads((run / "verdict.json").read_text())
    assert verdict["checker"]["engine"] == "pyspark-connect"
    assert verdict["transactions"]["cycles"]["G0"] == 1
    assert (run / "ids" / "cycles.txt").read_text().split() == ["G0", "A:t1", "B:t1"]
    phases = {p["name"] for p in verdict["checker"]["profile"]}
    assert {"read", "transactions", "cycles", "log"} <= phases
    assert any(line.startswith("total") for line in checked.stdout.splitlines())
    # The server is this machine's: where its CPU went is read from it.
    assert verdict["checker"]["jvm_cpu"]["process"] > 0
    assert "checker JVM CPU:" in checked.stdout


# Nightly (64 s in a loaded fast tier): a local Spark of its own beside the warm server.
@pytest.mark.nightly
def test_a_named_master_is_used_even_with_a_warm_session(
    warm: session.Server, tmp_path: Path
) -> None:
    run = synth_run(tmp_path / "run", 20_000)
    # As a process that opened a Connect session (a bench, a test session) passes it on.
    inherited = {CONNECT_MARK: "1"}
    checked = _harness("check", str(run), "--master", "local[2]", env=inherited)
    assert "checked on Spark master local[2]" in checked.stderr, checked.stderr
    verdict = json.loads((run / "verdict.json").read_text())
    assert verdict["checker"] == verdict["checker"] | {"engine": "pyspark", "master": "local[2]"}


def test_a_server_that_does_not_answer_is_one_line_and_leaves_no_connect_mark(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check then falls back on a Spark of its own, which PySpark's mark would forbid."""
    monkeypatch.delenv(CONNECT_MARK, raising=False)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        with pytest.raises(HistoryError, match="did not answer"):
            session.connect_session(f"sc://127.0.0.1:{_free_port()}")
    assert CONNECT_MARK not in os.environ
    assert [str(w.message) for w in warned] == []  # one line on the console: the check's own


def test_status_says_which_spark_a_check_would_use(warm: session.Server) -> None:
    up = _harness("spark", "status")
    assert up.returncode == 0 and warm.url in up.stdout
    none = _harness("spark", "status", env={"BJ_CACHE_DIR": str(Path(warm.log).parent / "none")})
    assert none.returncode == 1 and "none running" in none.stdout


def test_a_server_started_for_a_command_ends_with_it(tmp_path: Path) -> None:
    """Not detached: when the Python that started it dies, however it dies, the server does."""
    script = (
        "import os, sys\n"
        "from checkers.engine.session import start_server\n"
        f"server = start_server({_free_port()})\n"
        "print(server.pid, flush=True)\n"
        "os._exit(0)\n"
    )
    env = {**os.environ, "BJ_CACHE_DIR": str(tmp_path / "cache")}
    started = _command([sys.executable, "-c", script], env)
    assert started.returncode == 0, started.stderr
    pid = int(started.stdout.split()[0])
    assert _gone_within(pid, 60), f"the server {pid} outlived the command that started it"


def test_spark_up_outlives_its_command_until_spark_down(tmp_path: Path) -> None:
    env = {"BJ_CACHE_DIR": str(tmp_path / "cache")}
    port = _free_port()
    up = _harness("spark", "up", "--port", str(port), "--warm-checks", "0", env=env)
    assert up.returncode == 0 and f"sc://127.0.0.1:{port}" in up.stdout, up.stderr
    state = json.loads((tmp_path / "cache" / "spark-connect.json").read_text())
    try:
        again = _harness("spark", "up", env=env)
        assert again.returncode == 0 and "already up" in again.stdout
        assert _harness("spark", "status", env=env).returncode == 0  # the CLI that started it ended
    finally:
        down = _harness("spark", "down", env=env)
    assert down.returncode == 0 and "stopped" in down.stdout
    assert _gone_within(state["pid"], 10)
    assert not (tmp_path / "cache" / "spark-connect.json").exists()
    assert "no warm session" in _harness("spark", "down", env=env).stdout


def test_the_warm_up_checks_its_synthetic_history_on_the_server_it_warms(
    warm: session.Server,
) -> None:
    # In a process of its own: a Connect session would turn this one's PySpark to Connect mode.
    script = (
        "import json, sys\n"
        "from checkers import rehearsal\n"
        "rehearsal.MESSAGES = 2_000  # the queries of a run's size, sooner\n"
        "seen = []\n"
        "took = rehearsal.warm_up(sys.argv[1], checks=2, said=lambda n, _s: seen.append(n))\n"
        "none = rehearsal.warm_up(sys.argv[1], checks=2, budget=0.0)\n"
        "print(json.dumps([took, seen, none, str(rehearsal.history_run())]))\n"
    )
    done = _command(
        [sys.executable, "-c", script, warm.url], {**os.environ, "PYTHONPATH": str(ROOT)}
    )
    assert done.returncode == 0, done.stderr
    took, seen, none, run = json.loads(done.stdout.splitlines()[-1])
    assert len(took) == 2 and seen == [1, 2] and all(t > 0 for t in took)
    assert none == []  # no check begins after its budget
    verdict = json.loads((Path(run) / "verdict.json").read_text())
    assert verdict["checker"]["engine"] == "pyspark-connect"
    assert verdict["checker"]["master"] == warm.url
    assert verdict["sends"]["invoked"] == 2_000


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        stat = Path(f"/proc/{pid}/stat")
        if stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z":
            return True
        time.sleep(0.5)
    return False


# Nightly: 45-53 s of the gate for a Spark of its own started cold; the warm cycle test above
# runs the same Python task on the server's interpreter.
@pytest.mark.nightly
def test_a_local_check_of_transactions_runs_its_python_task_in_the_checkers_python(
    tmp_path: Path,
) -> None:
    """The cycles' task needs pyarrow and networkx: a Spark of the check's own runs it in the
    harness's interpreter, not whatever python3 PATH finds. And a run no group read (no
    reader at all) is checked, not failed."""
    run = tmp_path / "run"
    write_history(run / "history", {(TOPIC, 0): ["A:t1", "B:t1"], (TOPIC, 1): ["B:t1", "A:t1"]})
    (run / "manifest.json").write_text(json.dumps({"groups": []}) + "\n")
    bare = {"PATH": "/usr/bin:/bin", "PYSPARK_PYTHON": ""}
    env = {k: v for k, v in {**os.environ, **bare}.items() if v}
    checked = _command([*HARNESS, "check", str(run), "--master", "local[2]"], env)
    assert "Traceback" not in checked.stderr and "error" not in checked.stderr, checked.stderr
    verdict = json.loads((run / "verdict.json").read_text())
    assert verdict["transactions"]["cycles"]["G0"] == 1 and verdict["groups"] == {}
