"""How the checker's JVM starts: the class archive where there is one, C1 for small histories,
a smaller inlining budget for the others."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from checkers.engine import jvm

pytestmark = pytest.mark.unit


def test_options_follow_the_archive_and_the_history_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BJ_CACHE_DIR", str(tmp_path))
    assert jvm.driver_options(None).split() == jvm.SMALL_INLINING
    assert jvm.driver_options(jvm.SMALL_HISTORY_BYTES).split() == jvm.C1_ALONE
    assert jvm.driver_options(jvm.SMALL_HISTORY_BYTES + 1).split() == jvm.SMALL_INLINING
    archive = jvm.archive_path()
    assert archive.parent == tmp_path
    archive.write_bytes(b"")
    options = jvm.driver_options(10).split()
    assert f"-XX:SharedArchiveFile={archive}" in options
    assert "-XX:TieredStopAtLevel=1" in options
    assert "-XX:ReservedCodeCacheSize=240m" in options


def test_this_machines_java_starts_with_every_option_a_checker_jvm_gets() -> None:
    """A JDK that refused one would fail every check's start, and the warm server's."""
    java = shutil.which("java")
    assert java is not None, "no java on PATH: make setup installs OpenJDK 17"
    options = [*jvm.C1_ALONE, *jvm.SMALL_INLINING]
    done = subprocess.run(
        [java, *options, "-version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


def test_an_archive_present_is_not_written_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BJ_CACHE_DIR", str(tmp_path))
    jvm.archive_path().write_bytes(b"")
    assert jvm.write_archive(["false"]).startswith("present: ")
