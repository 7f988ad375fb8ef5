"""The checker's engine: a Spark session and its JVM for a check to run on (a local Spark, the
warm Spark Connect server, a remote one), their tuning, profiling and warm-up."""

from checkers.engine.kind import (
    CONNECT_MARK,
    cancel_all,
    forget_connect_mark,
    is_connect,
    on_this_machine,
    release,
)

__all__ = [
    "CONNECT_MARK",
    "cancel_all",
    "forget_connect_mark",
    "is_connect",
    "on_this_machine",
    "release",
]
