"""A run checked whole (checkers.run, and `harness check`): its exit codes, its timeout, the
Parquet copy of its history, a quiet local check, and answers that do not depend on how Spark
partitions the history."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from checkers import read
from checkers.read import HistoryError
from checkers.run import check_run
from checkers.synthetic import GROUPS, synth
from tests.checkers.histories import recv, send, write
from tests.helpers import ROOT

pytestmark = pytest.mark.spark


def test_cli_check_exit_codes(spark: Any, tmp_path: Path) -> None:
    run = tmp_path / "run"
    ev = send("A", 1, 1, "ok") + send("A", 2, 2, "ok") + [recv("g", "A", 1, 5)]
    write(run / "history", ev)
    cmd = [sys.executable, "-m", "harness.cli", "check", str(run)]
    lost = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert lost.returncode == 1, lost.stderr
    assert "lost 1" in lost.stdout
    verdict = json.loads((run / "verdict.json").read_text())
    assert verdict["groups"]["g"]["lost"] == 1
    assert (run / "ids" / "g" / "lost.txt").read_text() == "A:2\n"
    assert (run / "ids" / "g" / "acked.txt").read_text() == "A:1\nA:2\n"
    assert (run / "ids" / "g" / "received.txt").read_text() == "A:1\n"
    loss = subprocess.run(
        cmd + ["--expect", "loss"], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert loss.returncode == 0 and "reproduced" in loss.stdout
    missing = subprocess.run(
        cmd[:-1] + [str(tmp_path / "nope")], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert missing.returncode == 2 and "Traceback" not in missing.stderr


def test_the_check_is_bounded_by_its_timeout(spark: Any, tmp_path: Path) -> None:
    run = tmp_path / "run"
    synth(run / "history", 20000)
    with pytest.raises(HistoryError, match="did not finish in 0 s"):
        check_run(run, spark=spark, timeout=0.01)


def test_the_history_is_checked_from_parquet_while_that_is_fresh(
    spark: Any, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    write(run / "history", send("A", 1, 1, "ok") + send("A", 2, 2, "ok") + [recv("g", "A", 1, 5)])
    verdict = check_run(run, spark=spark)
    assert verdict["checker"]["history"] == "parquet" and verdict["groups"]["g"]["lost"] == 1
    assert (run / "history.parquet" / "_SUCCESS").exists()
    reader = run / "history" / "c-g.jsonl"
    # Other content, the same size: the Parquet copy is what is read.
    reader.write_text(reader.read_text().replace('"A:1"', '"A:9"'))
    assert check_run(run, spark=spark)["groups"]["g"]["unexpected"] == 0
    # A history that changed size is read again from its JSONL, and copied again.
    with open(reader, "a") as fh:
        fh.write(json.dumps(recv("g", "A", 2, 6)) + "\n")
    again = check_run(run, spark=spark)["groups"]["g"]
    assert (again["unexpected"], again["lost"], again["received"]) == (1, 1, 2)


def test_a_local_check_prints_no_line_of_spark_s_own(tmp_path: Path) -> None:
    """The JVM's launcher notes (an incubator module, the shell's log level) go to its log."""
    import os

    run = tmp_path / "run"
    write(run / "history", send("A", 1, 1, "ok") + [recv("g", "A", 1, 2)])
    cache = tmp_path / "cache"
    checked = subprocess.run(
        [sys.executable, "-m", "harness.cli", "check", str(run), "--master", "local[1]"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "BJ_CACHE_DIR": str(cache)},
    )
    assert checked.returncode == 0, checked.stderr
    said = checked.stderr.strip().splitlines()
    # Ours: the check's time, and (a history without a manifest) the report it cannot build.
    assert said[0].startswith("checked on Spark master local[1] in "), said
    assert all(line.startswith(("checked on ", "no report: ")) for line in said), said
    assert "incubator" in (cache / "checker-jvm.log").read_text()


def test_the_answers_do_not_depend_on_the_shuffle_partitions(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small history is read as one partition and never shuffled; a large one, or a Spark
    that is not ours (SPARK_REMOTE, a cluster), shuffles into its own number of partitions:
    every count, and every ids file in its order, are those of the same history in one task."""
    run = tmp_path / "run"
    synth(run / "history", 2000)
    (run / "manifest.json").write_text(json.dumps({"groups": list(GROUPS)}) + "\n")
    answers = []
    # Not coalesced back into a partition or two: each of the 7 gets rows of its own.
    settings = ("spark.sql.shuffle.partitions", "spark.sql.adaptive.coalescePartitions.enabled")
    before = {k: spark.conf.get(k) for k in settings}
    for partitions, one_task in ((2, True), (7, False)):
        monkeypatch.setattr(read, "SMALL_HISTORY_BYTES", 1 << 40 if one_task else -1)
        spark.conf.set(settings[0], str(partitions))
        spark.conf.set(settings[1], "false")
        shutil.rmtree(run / "ids", ignore_errors=True)
        try:
            verdict = check_run(run, spark=spark)
        finally:
            for k, v in before.items():
                spark.conf.set(k, v)
        ids = {p.relative_to(run): p.read_text() for p in sorted((run / "ids").rglob("*.txt"))}
        answers.append(
            (
                # As JSON: the order of every answer's keys is part of it.
                json.dumps({k: verdict[k] for k in ANSWERS}),
                ids,
            )
        )
    assert answers[0][1] and answers[0] == answers[1]


ANSWERS = ("groups", "log", "readers", "producers", "attribution", "unavailability", "stalls")
