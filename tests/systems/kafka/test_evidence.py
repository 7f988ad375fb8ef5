"""A Kafka node's evidence: which of its data files are copied out, and how Kafka's own tool is
asked to decode them (the real copy and decode run in the end-to-end tests)."""

from __future__ import annotations

import io
import tarfile
import time
from pathlib import Path

import pytest

from systems.kafka.evidence import (
    chunk_reader,
    decode_script,
    dump_commands,
    filter_archive,
    split_by_node,
    topic_of,
    wanted_member,
)

pytestmark = pytest.mark.unit
TOPICS = ["jepsen", "jepsen-copy"]


def test_only_the_runs_partitions_and_the_checkpoints_are_evidence() -> None:
    assert wanted_member("data/jepsen-0/00000000000000000000.log", TOPICS)
    assert wanted_member("data/jepsen-copy-2/leader-epoch-checkpoint", TOPICS)
    assert wanted_member("data/__transaction_state-17/00000000000000000000.log", TOPICS)
    assert wanted_member("data/__cluster_metadata-0/quorum-state", TOPICS)
    assert wanted_member("data/replication-offset-checkpoint", TOPICS)
    assert not wanted_member("data/__consumer_offsets-3/00000000000000000000.log", TOPICS)
    assert not wanted_member("data/other-0/00000000000000000000.log", TOPICS)
    assert not wanted_member("data/jepsen-x/00000000000000000000.log", TOPICS)
    assert not wanted_member("data", TOPICS)
    assert not wanted_member("data/jepsen-0/00000000000000000000.index", TOPICS)
    assert not wanted_member("data/jepsen-0/00000000000000000000.timeindex", TOPICS)
    assert wanted_member("data/jepsen-0/00000000000000000000.txnindex", TOPICS)
    assert wanted_member("data/jepsen-0/00000000000000006489.snapshot", TOPICS)
    assert topic_of("jepsen-copy-12") == "jepsen-copy" and topic_of("jepsen") is None


def archive_of(files: dict[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, body in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return raw.getvalue()


def test_a_docker_archive_is_filtered_as_it_streams_and_stops_at_its_cap() -> None:
    source = archive_of(
        {
            "data/meta.properties": b"node.id=1\n",
            "data/jepsen-0/00000000000000000000.log": b"x" * 1000,
            "data/__consumer_offsets-0/00000000000000000000.log": b"y" * 5000,
            "data/jepsen-1/00000000000000000000.log": b"z" * 1000,
        }
    )
    chunks = [source[i : i + 700] for i in range(0, len(source), 700)]
    sink = io.BytesIO()
    kept, size, stopped = filter_archive(
        chunk_reader(chunks), sink, TOPICS, 10_000, time.monotonic() + 60
    )
    assert kept == ["jepsen-0", "jepsen-1"] and size == 2010 and stopped is None
    with tarfile.open(fileobj=io.BytesIO(sink.getvalue())) as tar:
        assert sorted(tar.getnames()) == [
            "data/jepsen-0/00000000000000000000.log",
            "data/jepsen-1/00000000000000000000.log",
            "data/meta.properties",
        ]
    capped = io.BytesIO()
    kept, size, stopped = filter_archive(
        chunk_reader([source]), capped, TOPICS, 1500, time.monotonic() + 60
    )
    assert kept == ["jepsen-0"] and stopped is not None and "cap" in stopped


def test_each_log_is_decoded_with_the_flags_its_kind_needs(tmp_path: Path) -> None:
    for node in ("kafka1", "kafka2"):
        for part, segments in {
            "jepsen-0": ["00000000000000000000.log", "00000000000000000120.log"],
            "__transaction_state-3": ["00000000000000000000.log"],
            "__cluster_metadata-0": ["00000000000000000000.log"],
            "__consumer_offsets-0": ["00000000000000000000.log"],
        }.items():
            (tmp_path / node / part).mkdir(parents=True)
            for name in segments:
                (tmp_path / node / part / name).write_bytes(b"")
            (tmp_path / node / part / "00000000000000000000.txnindex").write_bytes(b"")
    commands = dump_commands(tmp_path, TOPICS)
    assert set(commands) == {"jepsen", "transaction-state", "cluster-metadata"}
    jepsen = commands["jepsen"]
    assert jepsen[:3] == ["--deep-iteration", "--print-data-log", "--files"]
    assert jepsen[3].split(",") == [
        "/data/kafka1/jepsen-0/00000000000000000000.log",
        "/data/kafka1/jepsen-0/00000000000000000120.log",
        "/data/kafka2/jepsen-0/00000000000000000000.log",
        "/data/kafka2/jepsen-0/00000000000000000120.log",
    ]
    assert commands["transaction-state"][0] == "--transaction-log-decoder"
    assert commands["cluster-metadata"][0] == "--cluster-metadata-decoder"
    script = decode_script(commands)
    # Both homes of the tool are tried, the release's own first; the three dumps side by side.
    assert script.count("org.apache.kafka.tools.DumpLogSegments") == 3
    assert script.count("kafka.tools.DumpLogSegments ") == 6
    assert ">/out/transaction-state.txt" in script and script.rstrip().endswith("wait")


def test_one_dump_of_every_node_is_cut_per_node() -> None:
    dump = (
        "Dumping /data/kafka1/jepsen-0/00000000000000000000.log\n"
        "Log starting offset: 0\nbaseOffset: 0 lastOffset: 2 count: 3\n"
        "Dumping /data/kafka2/jepsen-0/00000000000000000000.log\n"
        "Log starting offset: 0\nbaseOffset: 0 lastOffset: 1 count: 2\n"
        "Dumping /data/kafka1/jepsen-1/00000000000000000000.log\nLog starting offset: 0\n"
    )
    by_node = split_by_node("a JVM warning before any dump\n" + dump)
    assert set(by_node) == {"kafka1", "kafka2"}
    assert by_node["kafka1"].count("Dumping") == 2 and "count: 3" in by_node["kafka1"]
    assert "count: 2" in by_node["kafka2"] and "count: 3" not in by_node["kafka2"]
