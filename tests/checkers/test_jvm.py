"""How the checker's JVM starts: the class archive where there is one, C1 for small histories."""

from __future__ import annotations

from pathlib import Path

import pytest

from checkers import jvm

pytestmark = pytest.mark.unit


def test_options_follow_the_archive_and_the_history_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BJ_CACHE_DIR", str(tmp_path))
    assert jvm.driver_options(None) == ""
    assert jvm.driver_options(jvm.SMALL_HISTORY_BYTES) == jvm.C1_ALONE
    assert jvm.driver_options(jvm.SMALL_HISTORY_BYTES + 1) == ""
    archive = jvm.archive_path()
    assert archive.parent == tmp_path
    archive.write_bytes(b"")
    options = jvm.driver_options(10).split()
    assert f"-XX:SharedArchiveFile={archive}" in options
    assert "-XX:TieredStopAtLevel=1" in options
    assert "-XX:ReservedCodeCacheSize=240m" in options


def test_an_archive_present_is_not_written_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BJ_CACHE_DIR", str(tmp_path))
    jvm.archive_path().write_bytes(b"")
    assert jvm.write_archive().startswith("present: ")
