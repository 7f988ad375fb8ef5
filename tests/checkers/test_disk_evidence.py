"""The brokers' own signs of a disk fault, named: lines as Kafka 4.4 and RabbitMQ 4.3 logged
them in the first disk-fault runs (results disk-full-leader/20261129T130809Z-09ef and
disk-error-rabbitmq/20261129T131434Z-fc0b), the alarm as RabbitMQ's rabbit_alarm words it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from checkers.disk_evidence import SIGNS, disk_evidence, disk_faults_in, signs_in, summary_lines
from contract.manifest import read_manifest

D = "2026-11-29T13:08:37.{:06d}Z "
KAFKA2 = "".join(
    D.format(i * 1000) + line + "\n"
    for i, line in enumerate(
        [
            "[2026-11-29 13:08:30,000] INFO [ReplicaManager broker=2] nothing to see "
            "(kafka.server.ReplicaManager)",
            "[2026-11-29 13:08:37,793] ERROR Error while appending records to jepsen-0 in dir "
            "/var/lib/kafka/data (org.apache.kafka.storage.internals.log.LogDirFailureChannel)",
            "java.io.IOException: No space left on device",
            "[2026-11-29 13:08:37,801] WARN [ReplicaManager broker=2] Stopping serving replicas "
            "in dir /var/lib/kafka/data with uuid Optional[owy-oS8JDEn5F3SAKOQLnw] because the "
            "log directory has failed. (kafka.server.ReplicaManager)",
            "[2026-11-29 13:08:37,802] ERROR Error while writing to checkpoint file "
            "/var/lib/kafka/data/replication-offset-checkpoint "
            "(org.apache.kafka.storage.internals.log.LogDirFailureChannel)",
            "[2026-11-29 13:08:37,833] WARN Stopping serving logs in dir /var/lib/kafka/data "
            "(org.apache.kafka.storage.internals.log.LogManager)",
            "[2026-11-29 13:08:37,834] ERROR Shutdown broker because all log dirs in "
            "/var/lib/kafka/data have failed (org.apache.kafka.storage.internals.log.LogManager)",
        ],
        start=1,
    )
)
R = "2026-11-29T13:14:{:02d}.803511015Z 2026-11-29 13:14:{:02d}.795875+00:00 "
RABBIT1 = "".join(
    R.format(s, s) + line + "\n"
    for s, line in [
        (37, "[notice] <0.525.0> WAL in quorum_queues initialising with name ra_log_wal"),
        (40, "[warning] <0.470.0> disk resource limit alarm set on node rabbit@rabbit1."),
        (41, "[warning] <0.470.0> "),
        (41, "[warning] <0.470.0> **********************************************************"),
        (41, "[warning] <0.470.0> *** Publishers will be blocked until this alarm clears ***"),
        (53, "[error] <0.525.0>     initial call: ra_log_wal:init/1"),
        (53, "[error] <0.525.0>     registered_name: ra_log_wal"),
        (
            53,
            "[error] <0.525.0>     exception error: no match of right hand side value {error,eio}",
        ),
        (53, "[error] <0.524.0>     reason: {{badmatch,{error,eio}},"),
        (58, "[warning] <0.470.0> disk resource limit alarm cleared on node rabbit@rabbit1"),
    ]
)


def names(rows: list[dict[str, Any]]) -> list[str]:
    return [r["name"] for r in rows]


def test_kafkas_log_dir_failure_is_named_line_by_line_in_time_order() -> None:
    rows = signs_in("kafka2", KAFKA2, SIGNS["kafka"])
    assert names(rows) == [
        "log I/O error",
        "log dir offline",
        "checkpoint write failed",
        "all log dirs failed: broker shut down",
    ]
    offline = rows[1]
    assert offline["count"] == 2  # serving replicas, then logs
    assert offline["line"].startswith("[2026-11-29 13:08:37,801] WARN [ReplicaManager broker=2]")
    assert offline["first"] is not None and rows[0]["first"] < offline["first"]


def test_rabbitmqs_disk_alarm_and_the_ra_wal_crash_are_named() -> None:
    rows = signs_in("rabbit1", RABBIT1, SIGNS["rabbitmq"])
    assert names(rows) == [
        "disk alarm set",
        "Ra WAL crashed",
        "I/O error returned to the broker",
        "disk alarm cleared",
    ]
    crashed, eio = rows[1], rows[2]
    assert crashed["count"] == 1 and eio["count"] == 2  # the report names it once
    assert "{error,eio}" in eio["line"]
    # The WAL's start is no sign: only its crash report's lines are.
    assert all("initialising" not in r["line"] for r in rows)


# What rabbit2 (4.3.6) logged at each start after a torn write of its feature flags file.
TORN_FLAGS = (
    "2026-11-29T18:22:46.008Z 2026-11-29 18:22:46.008247+00:00 [error] <0.209.0> BOOT FAILED\n"
    "2026-11-29T18:22:46.008Z 2026-11-29 18:22:46.008247+00:00 [error] <0.209.0> "
    'throw:{feature_flags_file_read_error,"/var/lib/rabbitmq/mnesia/rabbit@rabbit2-feature_flags",'
    '{16,erl_scan,{unterminated,atom,"r"}}}\n'
)


def test_a_feature_flags_file_a_node_cannot_boot_from_is_named() -> None:
    assert names(signs_in("rabbit2", TORN_FLAGS, SIGNS["rabbitmq"])) == [
        "boot failed",
        "feature flags file unreadable at boot",
    ]


def test_only_a_run_with_a_disk_fault_gets_a_section(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "rabbit1.log").write_text(RABBIT1)
    (tmp_path / "logs" / "rabbit2.log").write_text(R.format(30, 30) + "[info] <0.1.0> calm\n")
    manifest = {
        "scenario": "disk-alarm-rabbitmq",
        "run_id": "r",
        "system": "rabbitmq",
        "tier": "real-cluster",
        "images": {"rabbitmq": {"name": "t", "version": "4.3.6"}},
        "topology": {"nodes": [{"name": "rabbit1"}, {"name": "rabbit2"}]},
    }
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    m = read_manifest(tmp_path)
    kill = [{"type": "invoke", "f": "kill", "value": {"nodes": ["rabbit1"]}}]
    assert disk_evidence(tmp_path / "logs", m, kill) is None
    full = [
        {"type": "invoke", "f": "disk-full", "value": {"nodes": ["rabbit1"]}},
        {"type": "ok", "f": "disk-full", "value": {"nodes": ["rabbit1"]}},
        {"type": "invoke", "f": "corrupt", "value": {"nodes": ["rabbit2"]}},
    ]
    section = disk_evidence(tmp_path / "logs", m, full)
    assert section is not None
    assert section["faults"] == ["disk-full", "corrupt"]
    assert section["logs"] == ["rabbit1", "rabbit2"]
    assert {r["node"] for r in section["signs"]} == {"rabbit1"}
    start = section["signs"][0]["first"] - 10.0
    said = summary_lines(section, start)
    assert said[0] == "disk evidence: rabbit1: disk alarm set, +10.0 s"
    assert "disk evidence: rabbit1: Ra WAL crashed, +23.0 s" in said


def test_a_disk_fault_no_broker_logged_is_said_so() -> None:
    section = {"faults": ["disk-error"], "logs": ["kafka1"], "signs": []}
    assert summary_lines(section) == [
        "disk faults (disk-error): no broker logged a known sign of them"
    ]
    assert summary_lines(None) == []


def test_the_disk_faults_of_a_run_are_its_failing_full_tearing_and_corrupting_invokes() -> None:
    events = [
        {"type": "invoke", "f": f}
        for f in ("kill", "disk-error", "power-loss", "torn-write", "disk-ok", "disk-error")
    ]
    assert disk_faults_in(events) == ["disk-error", "torn-write"]
