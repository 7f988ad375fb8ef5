"""The rehearsal's entry points without a JVM: make setup's archive is not written again, and
only the process write_archive starts is a training check."""

from __future__ import annotations

from pathlib import Path

import pytest

from checkers import rehearsal
from checkers.engine import jvm

pytestmark = pytest.mark.unit


def test_setup_leaves_an_archive_present_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BJ_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(jvm.ARCHIVE_TO, raising=False)
    jvm.archive_path().write_bytes(b"")
    assert rehearsal.main() == 0
    assert capsys.readouterr().out == f"setup: Spark class archive present: {jvm.archive_path()}\n"


def test_only_the_training_process_is_told_where_to_write_the_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(jvm.ARCHIVE_TO, raising=False)
    assert jvm.archive_to() is None
    monkeypatch.setenv(jvm.ARCHIVE_TO, str(tmp_path / "classes.partial"))
    assert jvm.archive_to() == tmp_path / "classes.partial"


@pytest.mark.parametrize("argv", [["warm-up"], ["warm-up", "sc://a:1", "x"], ["train", "x"]])
def test_a_command_it_does_not_know_is_refused(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert rehearsal.main(argv) == 2
    assert "usage: python -m checkers.rehearsal [warm-up URL]" in capsys.readouterr().err
