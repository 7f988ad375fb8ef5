"""The brokers' own words for a disk fault: in a run that had one, the lines of each broker
node's log that show what the broker made of it, each under a name (a Kafka log directory gone
offline and the broker shut down, a RabbitMQ disk alarm raised and cleared, Ra's write-ahead log
crashing on EIO), whatever their level: RabbitMQ raises its disk alarm at warning, Kafka takes a
directory offline at WARN, neither of which broker_errors reads.

A name, not a template: the report says "kafka2: all log dirs failed, broker shut down, +12.3 s"
beside the fault that caused it, the first line as a sample, and how many lines matched. It
judges nothing: the verdict is what the clients saw; this is where to look in the logs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkers.broker_errors import epoch_of, node_logs, without_docker_time
from contract.manifest import Manifest
from faults.registry import window_of

SAMPLE_CHARS = 400


@dataclass(frozen=True)
class Sign:
    """One thing a broker logs about its disk: a name for the report, a regex searched in each
    line of its log (its time stripped), and the faults it is a sign of."""

    name: str
    pattern: re.Pattern[str]


def _sign(name: str, pattern: str) -> Sign:
    return Sign(name, re.compile(pattern))


SIGNS: dict[str, tuple[Sign, ...]] = {
    # Kafka's LogDirFailureChannel and LogManager (KIP-112), as 4.4 words them:
    #   ERROR Error while appending records to jepsen-0 in dir /var/lib/kafka/data
    #   WARN [ReplicaManager broker=2] Stopping serving replicas in dir ... because the log
    #        directory has failed.
    #   ERROR Shutdown broker because all log dirs in /var/lib/kafka/data have failed
    "kafka": (
        _sign("all log dirs failed: broker shut down", r"Shutdown broker because all log dirs"),
        _sign(
            "log dir offline",
            r"Stopping serving (replicas|logs) in dir|because the log directory has failed"
            r"|in the failed log directory",
        ),
        _sign("checkpoint write failed", r"Error while writing to checkpoint file"),
        _sign(
            "log I/O error",
            r"Error while (appending|writing|flushing|rolling|deleting|renaming|reading|loading"
            r"|creating)\b.* in dir\b",
        ),
        # What a corrupted segment or index shows as a broker reads it back (recovery, fetch).
        _sign(
            "corrupt data found",
            r"CorruptRecordException|[Cc]orrupt(ed)? index|Found invalid messages"
            r"|[Rr]ecord is corrupt|[Ii]nvalid (magic|CRC|crc|checksum)",
        ),
    ),
    # RabbitMQ's disk monitor and alarm (rabbit_disk_monitor, rabbit_alarm) and Ra's log:
    #   [warning] disk resource limit alarm set on node rabbit@rabbit1.
    #   [error] exception error: no match of right hand side value {error,eio}
    #   [error] initial call: ra_log_wal:init/1
    "rabbitmq": (
        _sign("disk alarm set", r"disk resource limit alarm set"),
        _sign("disk alarm cleared", r"disk resource limit alarm cleared"),
        _sign("free disk space below the limit", r"[Ff]ree disk space is insufficient"),
        _sign("Ra WAL crashed", r"initial call: ra_log_wal:|supervisor: .*ra_log_wal_sup"),
        _sign("I/O error returned to the broker", r"\{error,\s*(eio|enospc)\}|\b(eio|enospc)\b"),
        _sign("corrupt data found", r"bad_crc|crc_mismatch|[Cc]hecksum (mismatch|failed)"),
        # Its persisted feature flags unreadable at boot: cut short (a parse error) or empty
        # (4.3's reader has no case for an empty file):
        #   throw:{feature_flags_file_read_error,".../rabbit@rabbit2-feature_flags",{16,erl_scan,...
        #   error:{case_clause,{ok,[]}} ... rabbit_feature_flags:try_to_read_enabled_feature_...
        _sign(
            "feature flags file unreadable at boot",
            r"feature_flags_file_read_error|case_clause,\{ok,\[\]\}\}.*feature_flags"
            r"|rabbit_feature_flags:try_to_read_enabled_feature_flags_list",
        ),
        _sign("boot failed", r"BOOT FAILED"),
    ),
}


def disk_faults_in(nemesis: Iterable[dict[str, Any]]) -> list[str]:
    """The disk faults the run's nemesis invoked (a failing, full or tearing disk, a
    corruption), in order, each once."""
    seen: list[str] = []
    for e in nemesis:
        f = str(e.get("f"))
        if e.get("type") == "invoke" and (window_of(f) == "disk-start" or f == "corrupt"):
            if f not in seen:
                seen.append(f)
    return seen


def signs_in(node: str, text: str, signs: tuple[Sign, ...]) -> list[dict[str, Any]]:
    """Each sign the node's log shows: how many lines, the first's time and the line."""
    found: dict[str, dict[str, Any]] = {}
    for raw in text.splitlines():
        line, at = without_docker_time(raw)
        for sign in signs:
            if sign.pattern.search(line):
                row = found.get(sign.name)
                if row is None:
                    row = found[sign.name] = {
                        "name": sign.name,
                        "node": node,
                        "count": 0,
                        "first": at if at is not None else _log_time(line),
                        "line": line.strip()[:SAMPLE_CHARS],
                    }
                row["count"] += 1
                break  # one name a line: the most telling, which comes first
    return sorted(found.values(), key=lambda r: (r["first"] is None, r["first"] or 0.0))


def _log_time(line: str) -> float | None:
    """A line's own time when Docker's is not there: Kafka's log4j, or RabbitMQ's."""
    if m := re.match(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]", line):
        return epoch_of(m[1], "%Y-%m-%d %H:%M:%S,%f")
    if m := re.match(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)", line):
        return epoch_of(m[1].replace(" ", "T"))
    return None


def disk_evidence(
    logs_dir: Path, manifest: Manifest, nemesis: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """verdict.json's disk_evidence: for a run with a disk fault on a real system, the faults
    and each node's signs of them, in time order; None otherwise."""
    faults = disk_faults_in(nemesis)
    system = manifest.system or next(iter(manifest.images), None)
    if not faults or system not in SIGNS:
        return None
    signs = SIGNS[system]
    logs = node_logs(logs_dir, manifest)
    lines = [
        row
        for node, path in logs.items()
        for row in signs_in(node, path.read_text(errors="replace"), signs)
    ]
    lines.sort(key=lambda r: (r["first"] is None, r["first"] or 0.0, r["node"]))
    return {"faults": faults, "logs": sorted(logs), "signs": lines}


def summary_lines(section: dict[str, Any] | None, run_start: float = 0.0) -> list[str]:
    """One line a sign: what the brokers logged of the run's disk faults."""
    if not section:
        return []
    if not section.get("signs"):
        said = ", ".join(section.get("faults") or [])
        return [f"disk faults ({said}): no broker logged a known sign of them"]
    out = []
    for row in section["signs"]:
        when = f", +{row['first'] - run_start:.1f} s" if row.get("first") is not None else ""
        times = f" ({row['count']} lines)" if row["count"] > 1 else ""
        out.append(f"disk evidence: {row['node']}: {row['name']}{when}{times}")
    return out
