"""A Spark of this process's own for a check: local mode (or a cluster's master, spark://...),
its driver JVM started as checkers.engine.jvm says, its output in a log of its own; and the
local Spark whose JVM writes the class archive as it exits (make setup's training check)."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from checkers.engine.errors import HistoryError
from checkers.engine.jvm import checker_memory, driver_options
from checkers.engine.tuning import CHECKER_CONF
from contract.cache import cache_root

LOG4J = Path(__file__).parent / "log4j2.properties"


def spark_session(
    master: str = "local[*]", history_bytes: int | None = None, archive_to: Path | None = None
) -> Any:
    """The checker's Spark session (an existing one as it is); its driver JVM starts as
    checkers.engine.jvm says for a history of `history_bytes`, or writes the class archive
    `archive_to` when it exits."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise HistoryError("Java is not installed: PySpark needs Java 17 or newer (make setup)")

    # Local mode stays on loopback; for a cluster master the driver binds where Spark's own
    # rules say (SPARK_LOCAL_IP if set, else the host's address), so executors can reach it.
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # The one Python task of a transactional check (checkers.cycles) runs in a worker of
        # this interpreter, which has the checker's packages; PATH's python3 may have none.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    log4j = f"-Dlog4j2.configurationFile=file:{LOG4J}"
    if archive_to is not None:
        jvm = f"-XX:ArchiveClassesAtExit={archive_to}"
    else:
        jvm = driver_options(history_bytes)
    # A master named is a Spark of this process's own: SPARK_REMOTE would make it a Connect
    # one, so the builder does not see it (and the environment keeps it for the children).
    remote = os.environ.pop("SPARK_REMOTE", None)
    try:
        spark = _built(master, f"{log4j} {jvm}".strip())
    finally:
        if remote is not None:
            os.environ["SPARK_REMOTE"] = remote
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _built(master: str, java_options: str) -> Any:
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    settings = {
        "spark.master": master,
        "spark.app.name": "brokerjepsen-checker",
        **CHECKER_CONF,
        "spark.driver.memory": checker_memory(),
        "spark.driver.extraJavaOptions": java_options,
    }
    if SparkContext._active_spark_context is None:
        conf = SparkConf(loadDefaults=False).setAll(list(settings.items()))
        SparkContext(conf=conf, gateway=_quiet_gateway(conf))
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _quiet_gateway(conf: Any) -> Any:
    """The driver JVM, its stderr in jvm_log() rather than on the user's console: the launcher's
    own notes (an incubator module, the shell's log level) are no line of ours. A JVM that
    does not start says why in one line, from that file."""
    from pyspark.java_gateway import launch_gateway

    path = jvm_log()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as log:  # the JVM keeps its own descriptor: ours can close
        try:
            return launch_gateway(conf, popen_kwargs={"stderr": log})
        except Exception as e:  # noqa: BLE001 - PySpark's own error types vary by release
            said = path.read_text(errors="replace").strip().splitlines()
            last = said[-1] if said else (str(e).splitlines() or [type(e).__name__])[0]
            raise HistoryError(f"the checker's JVM did not start: {last} (see {path})") from e


def jvm_log() -> Path:
    """Where the last local checker JVM of this machine wrote its own output."""
    return cache_root() / "checker-jvm.log"


@contextlib.contextmanager
def archiving_session(archive_to: Path) -> Iterator[Any]:
    """A local Spark whose JVM writes the class archive `archive_to` when it exits: the block
    checks with it; as the block ends, Spark is stopped and its JVM waited for."""
    spark = spark_session(archive_to=archive_to)
    yield spark
    _stop_jvm(spark)


def _stop_jvm(spark: Any) -> None:
    """Stops Spark and waits for its JVM to exit, which is when the archive is written: the
    JVM exits when the end of its standard input tells it its Python is gone."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    spark.stop()
    proc = getattr(gateway, "proc", None)
    if gateway is not None:
        gateway.shutdown()
    if proc is not None:
        if proc.stdin:
            proc.stdin.close()
        proc.wait(timeout=300)
