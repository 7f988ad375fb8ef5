"""What kind of Spark session a check holds: the few places where a Connect session (no
SparkContext in this process) and a classic one must be asked differently."""

from __future__ import annotations

import os
from typing import Any

# PySpark's mark, in the environment, of a process that has opened a Connect session: its
# functions build Connect plans while it is there, and no Spark of the process's own can start.
CONNECT_MARK = "SPARK_CONNECT_MODE_ENABLED"


def forget_connect_mark() -> None:
    """Drops the mark where no Connect session is open: one inherited from the process that
    started this one (a bench, a test session), or left by a session that never came up."""
    os.environ.pop(CONNECT_MARK, None)


def is_connect(spark: Any) -> bool:
    """A Connect session has no SparkContext in this process."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def on_this_machine(spark: Any) -> bool:
    """Whether the session reads files from this machine's file system as this process sees
    it: local mode, or a Connect server on loopback."""
    if is_connect(spark):
        host = str(spark.client.host)
        return host in ("localhost", "::1", "[::1]") or host.startswith("127.")
    return bool(spark.sparkContext.master.startswith("local"))


def cancel_all(spark: Any) -> None:
    """Cancels every job the session runs (the checker's timeout)."""
    if is_connect(spark):
        spark.interruptAll()
    else:
        spark.sparkContext.cancelAllJobs()


def release(frame: Any) -> None:
    """Frees what a frame kept: a cache, or the rows of a local checkpoint."""
    frame.unpersist()
    if is_connect(frame.sparkSession):
        # A Connect checkpoint's rows stay in the server's session until the client collects
        # its plan, and the warm server's session outlives the check (checkers.engine.kept_session):
        # freed now, as collecting it would, and never again.
        plan = frame._plan  # noqa: SLF001
        if type(plan).__name__ == "CachedRemoteRelation" and plan._relation_id is not None:  # noqa: SLF001
            plan.__del__()
            plan._relation_id = None  # noqa: SLF001
        return
    # A local checkpoint's rows are an RDD persisted beneath the frame's plan, which no
    # unpersist of the frame reaches.
    plan = frame._jdf.queryExecution().logical()  # noqa: SLF001
    if plan.getClass().getSimpleName() == "LogicalRDD":
        plan.rdd().unpersist(False)
