"""How the checker's driver JVM starts: from a class-data archive of Spark's classes, and with
the quick compiler alone for a run-sized history.

A check is one short-lived JVM that loads thousands of Spark classes and compiles a few dozen
queries before it has read much. Two JDK features cut that (figures: README, "The checker"):
  class-data sharing  the classes a check loads, parsed and verified once into an archive
                      (`make setup` writes it by checking a small synthetic history:
                      checkers.rehearsal); a JVM that cannot use it (another JDK or
                      Spark) ignores it, silently
  C1 alone            the JIT's quick tier: warm sooner, but slower code, so only where the
                      history is small enough that warming up is most of the work
A JVM that keeps C2 (a big history's, and the warm server's) gets a smaller inlining budget.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

# Up to SMALL_HISTORY_BYTES, C1 alone pays (README, "The checker").
from checkers.engine.tuning import SMALL_HISTORY_BYTES
from contract.cache import cache_root

_QUIET = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off"]  # an archive of another JDK: no warning
# C1 alone gets the JDK's code cache for an untiered JIT, 48 MB: a JVM that checks many
# histories (a test session's Spark) fills it by its fourth run-sized check, the JDK turns the
# compiler off, and every later check runs interpreted code, half again slower. The tiered
# size: reserved, committed only as compiled code fills it.
C1_ALONE = ["-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m"]
# A checker JVM with C2 (the warm server; a check of its own of a big history) inlines less than
# the JDK's defaults (325 bytes of bytecode for a hot callee, 2 500 of compiled code). Spark's
# code is deep chains of small Scala calls, and C2 inlining them whole made each compilation
# long: a warm server still compiled for seconds in every run-sized check after dozens of
# them, and a 1M-message check on a server warmed by run-sized checks spent a third of its CPU
# in the compiler. With this budget that first 1M check took 71 s instead of 101 s, and a warm
# run-sized check 7.1 CPU-s instead of 8.6 (figures: docs/checker.md); verdicts the same.
SMALL_INLINING = ["-XX:FreqInlineSize=100", "-XX:InlineSmallCode=1000"]
# In the training check's environment: where its JVM writes the archive as it exits.
ARCHIVE_TO = "BJ_ARCHIVE_TO"


def cache_dir() -> Path:
    return cache_root()


def archive_path() -> Path:
    """The archive for this JDK and this PySpark: its name says which they are."""
    import pyspark

    java = shutil.which("java") or ""
    home = os.environ.get("JAVA_HOME", "")
    key = f"{pyspark.__version__}|{os.path.realpath(java)}|{home}|{pyspark.__file__}"
    return cache_dir() / f"spark-classes-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


def checker_memory() -> str:
    """The heap of a checker's JVM, a check's own or the warm server's."""
    return os.environ.get("BJ_CHECKER_MEMORY", "6g")


def archive_options() -> list[str]:
    """The options that start a checker's JVM from the archive, when there is one."""
    archive = archive_path()
    return [f"-XX:SharedArchiveFile={archive}", *_QUIET] if archive.is_file() else []


def driver_options(history_bytes: int | None) -> str:
    """The JVM options for a check of a history of `history_bytes` (None: unknown size)."""
    options = archive_options()
    if history_bytes is not None and history_bytes <= SMALL_HISTORY_BYTES:
        options += C1_ALONE
    else:
        options += SMALL_INLINING
    return " ".join(options)


def write_archive(training: list[str], timeout: float = 600.0) -> str:
    """Writes the archive, unless it is there: the command `training` checks a small synthetic
    history in a JVM of its own (checkers.engine.local.archiving_session, where archive_to()
    says) that dumps the classes it loaded when it exits. Returns what it did."""
    archive = archive_path()
    if archive.is_file():
        return f"present: {archive}"
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    env = os.environ | {ARCHIVE_TO: str(partial)}
    try:
        done = subprocess.run(
            training,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        partial.unlink(missing_ok=True)
        return f"not written: the training check took over {timeout:.0f} s"
    if done.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"not written: {last}"
    partial.replace(archive)
    return f"written: {archive}"


def archive_to() -> Path | None:
    """In the training check's process (write_archive's command): where its JVM writes the
    archive; None in any other."""
    partial = os.environ.get(ARCHIVE_TO)
    return Path(partial) if partial else None
