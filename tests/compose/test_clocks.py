"""The fake clocks' files: the line libfaketime reads, replaced whole, readable by the broker's
user; and, in a container of our image, that libfaketime reads our line as we mean it."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from compose import clocks
from compose.clocks import FakeClocks, faketime_line, write_offset
from systems.rabbitmq.cluster import LOCAL_IMAGE
from tests.conftest import missing


@pytest.mark.parametrize(
    ("offset", "line"),
    [(3600, "+3600\n"), (-3600, "-3600\n"), (0, "+0\n"), (-0.25, "-0.25\n"), (1e-7, "+0\n")],
)
def test_an_offset_is_a_signed_number_of_seconds_with_no_unit(offset: float, line: str) -> None:
    assert faketime_line(offset) == line


@pytest.mark.parametrize("offset", [float("nan"), float("inf"), 400 * 86400, -400 * 86400])
def test_an_offset_past_a_year_or_not_a_number_is_refused(offset: float) -> None:
    with pytest.raises(ValueError, match="at most 31622400 s either way"):
        faketime_line(offset)


def test_the_file_is_replaced_by_a_rename_and_readable_by_others(tmp_path: Path) -> None:
    write_offset(tmp_path / "k1", 10)
    path = tmp_path / "k1" / clocks.FILE
    before = path.stat().st_ino
    write_offset(tmp_path / "k1", -20)
    assert path.read_text() == "-20\n"
    assert path.stat().st_ino != before  # a new file renamed over the old, never rewritten
    assert path.stat().st_mode & 0o777 == 0o644
    assert os.listdir(tmp_path / "k1") == [clocks.FILE]  # no temporary left


def test_a_failed_write_leaves_the_old_offset_and_no_temporary(tmp_path: Path) -> None:
    write_offset(tmp_path, 5)
    with pytest.raises(ValueError):
        write_offset(tmp_path, float("nan"))
    assert (tmp_path / clocks.FILE).read_text() == "+5\n"
    assert os.listdir(tmp_path) == [clocks.FILE]


def test_fake_clocks_set_and_reset_each_nodes_own_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slept: list[float] = []
    monkeypatch.setattr(clocks.time, "sleep", slept.append)
    fake = FakeClocks(tmp_path, ["k1", "k2", "k3"])
    fake.prepare()
    assert fake.set_offset(["k1", "k2"], 3600) == {"k1": 3600, "k2": 3600}
    assert fake.set_offset(["k2"], -60) == {"k2": -60}  # from true time, not added
    read = {n: (tmp_path / "clocks" / n / clocks.FILE).read_text() for n in ("k1", "k2", "k3")}
    assert read == {"k1": "+3600\n", "k2": "-60\n", "k3": "+0\n"}
    assert fake.skewed() == ["k1", "k2"]
    fake.reset(["k1"])
    assert fake.skewed() == ["k2"]
    fake.reset()
    assert fake.skewed() == [] and (tmp_path / "clocks/k2" / clocks.FILE).read_text() == "+0\n"
    assert slept == [clocks.SETTLE_S] * 4  # once a step, after every node's file


def test_the_environment_leaves_the_monotonic_clock_alone_and_reads_the_file_each_second() -> None:
    env = clocks.environment()
    assert env["LD_PRELOAD"] == clocks.LIBRARY
    assert env["FAKETIME_TIMESTAMP_FILE"] == f"{clocks.CONTAINER_DIR}/{clocks.FILE}"
    assert env["FAKETIME_DONT_FAKE_MONOTONIC"] == "1" and env["FAKETIME_CACHE_DURATION"] == "0"
    assert not any(k == "FAKETIME" or k == "FAKETIME_XRESET" for k in env)


@pytest.mark.cluster
def test_an_images_libfaketime_reads_our_line_ahead_and_behind(tmp_path: Path) -> None:
    """In a container of the local RabbitMQ image (every image carries the same Debian package),
    with the environment and mounts a fake-clock node gets: `date` reads the file's offset, a
    second later too, ahead and behind; the host's clock is untouched."""
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "image", "inspect", LOCAL_IMAGE],
                                        capture_output=True).returncode != 0:  # fmt: skip
        missing(f"no Docker engine or no image {LOCAL_IMAGE} (make setup)")
    fake = FakeClocks(tmp_path, ["n1"])
    fake.prepare()
    env = [f"--env={k}={v}" for k, v in clocks.environment().items()]
    mounts = [f"--volume={v}" for v in fake.volumes("n1")]
    script = "date +%s; sleep 1.5; date +%s"
    argv = [docker, "run", "--rm", *env, *mounts, "--entrypoint", "sh", LOCAL_IMAGE, "-c", script]

    def run_with(offset: float) -> list[float]:
        fake.set_offset(["n1"], offset)
        started = time.time()
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
        return [int(x) - started for x in out.stdout.split()]

    first, later = run_with(3600)
    assert 3597 < first < 3605 and 3597 < later < 3607
    first, _ = run_with(-7200.5)
    assert -7204 < first < -7195
    assert abs(int(subprocess.check_output(["date", "+%s"], text=True)) - time.time()) < 2
