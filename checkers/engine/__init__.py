"""The checker's engine: a Spark session and its JVM for a check to run on (a local Spark, the
warm Spark Connect server, a remote one), their tuning, profiling and warm-up, and the keeper
that starts a warm server for the next checks and stops it once idle.

The engine imports nothing of the analyses beside it in checkers/: a check that it must run
(the class archive's training, the warm-up's) is handed to it (checkers.rehearsal). What the
analyses, the entry point (checkers.run) and the commands use of it is named here.
"""

from checkers.engine.autostart import living_keeper, stop_keeper, stop_when_idle
from checkers.engine.errors import HistoryError
from checkers.engine.idle import last_used
from checkers.engine.jvm import archive_to, write_archive
from checkers.engine.jvm_cpu import measured
from checkers.engine.jvm_cpu import said as cpu_said
from checkers.engine.kind import (
    CONNECT_MARK,
    cancel_all,
    forget_connect_mark,
    is_connect,
    on_this_machine,
    release,
)
from checkers.engine.local import archiving_session, spark_session
from checkers.engine.parallel import together
from checkers.engine.profile import Phase, Profile, in_phase, phase, profiling, watching
from checkers.engine.session import (
    Where,
    checker_session,
    listening,
    recorded_server,
    session_of,
    start_server,
    stop_server,
    warm_server,
    warm_url,
)
from checkers.engine.tuning import ONE_PARTITION_CONF, SMALL_HISTORY_BYTES, session_conf
from checkers.engine.warming import WARM_UP_CHECKS, WARM_UP_SECONDS, warm_up

__all__ = [
    "CONNECT_MARK",
    "ONE_PARTITION_CONF",
    "SMALL_HISTORY_BYTES",
    "WARM_UP_CHECKS",
    "WARM_UP_SECONDS",
    "HistoryError",
    "Phase",
    "Profile",
    "Where",
    "archive_to",
    "archiving_session",
    "cancel_all",
    "checker_session",
    "cpu_said",
    "forget_connect_mark",
    "in_phase",
    "is_connect",
    "last_used",
    "listening",
    "living_keeper",
    "measured",
    "on_this_machine",
    "phase",
    "profiling",
    "recorded_server",
    "release",
    "session_conf",
    "session_of",
    "spark_session",
    "start_server",
    "stop_keeper",
    "stop_server",
    "stop_when_idle",
    "together",
    "warm_server",
    "warm_up",
    "warm_url",
    "watching",
    "write_archive",
]
