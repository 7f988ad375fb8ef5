"""Reading Kafka's dumps and logs, on excerpts of real runs' (tests/checkers/fixtures/evidence/:
K1's acks=1 loss and T2's transactions, Kafka 4.4.0 KRaft; T2's violating run on 3.9.2 KRaft;
K1's segments read again by 4.1.2's own DumpLogSegments; ZooKeeper 3.8.0's transaction log)."""

from __future__ import annotations

from pathlib import Path

import pytest
import zstandard

from checkers.evidence_dumps import (
    LeaderChange,
    Truncation,
    dump_records,
    log_events,
    metadata_leader_changes,
    partition_of_dump,
    text_lines,
    zookeeper_leader_changes,
)

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).parent / "fixtures" / "evidence"


# 4.1.2's tool prints 4.4.0's segments line for line as 4.4.0's does (checked on the whole K1
# run's dump); both are read here, so a change of either's format fails this test.
@pytest.mark.parametrize("dump", ["k1-jepsen.dump.txt", "k1-4.1.2-jepsen.dump.txt"])
def test_records_carry_their_batch_and_their_payloads_message(dump: str) -> None:
    records = list(dump_records("kafka2", text_lines(FIXTURES / dump)))
    first, last = records[0], records[-1]
    assert (first.offset, first.msg_id, first.batch.partition) == (0, "P1:1", "jepsen-0")
    assert (first.batch.base_offset, first.batch.last_offset, first.batch.leader_epoch) == (
        0,
        110,
        0,
    )
    assert first.batch.producer_id == -1 and not first.batch.transactional
    # After the truncation, the new leader's epoch wrote other messages at the same offsets.
    assert (last.offset, last.msg_id, last.batch.leader_epoch) == (10055, "P1:12875", 1)
    assert last.batch.base_offset == 10052 and last.batch.time == pytest.approx(1795932849.495)


def test_transactional_batches_and_their_markers_and_no_payload() -> None:
    records = list(dump_records("kafka1", text_lines(FIXTURES / "t2-jepsen.dump.txt")))
    markers = [(r.offset, r.marker) for r in records if r.marker]
    assert markers == [(3, "ABORT"), (7, "ABORT"), (12, "COMMIT")]
    data = [r for r in records if not r.batch.control]
    assert all(r.msg_id is None for r in data)  # an older dump: no --print-data-log
    four = next(r for r in data if r.offset == 4)
    assert (four.sequence, four.batch.base_sequence, four.batch.producer_id) == (3, 3, 0)
    assert four.batch.transactional and four.batch.producer_epoch == 0


def test_keep_filters_as_it_streams() -> None:
    kept = list(
        dump_records("kafka2", text_lines(FIXTURES / "k1-jepsen.dump.txt"), lambda r: r.offset > 3)
    )
    assert [r.offset for r in kept] == [4, 5, 10052, 10053, 10054, 10055]


def test_the_dumps_partition_with_and_without_a_node() -> None:
    assert partition_of_dump("Dumping /data/kafka1/jepsen-0/00000000000000000000.log") == "jepsen-0"
    assert partition_of_dump("Dumping /data/jepsen-3/00000000000000000000.log") == "jepsen-3"


def test_metadata_leader_changes_name_nodes_and_count_epochs() -> None:
    changes = list(metadata_leader_changes(text_lines(FIXTURES / "k1-cluster-metadata.dump.txt")))
    jepsen = [(c.partition, c.leader, c.leader_epoch) for c in changes]
    # The last change record only grows the ISR back: it names no leader, and is left out.
    assert jepsen == [("jepsen-0", "kafka2", 0), ("jepsen-0", "kafka3", 1)]
    assert changes[1].isr == ("kafka3", "kafka1")
    assert changes[1].time == pytest.approx(1795932848.79)


def test_metadata_leader_changes_of_3_9_2() -> None:
    """3.9.2 writes version 1 partition records: the same fields the reader takes."""
    path = FIXTURES / "t2-3.9.2-cluster-metadata.dump.txt"
    changes = list(metadata_leader_changes(text_lines(path)))
    assert [(c.partition, c.leader, c.leader_epoch) for c in changes] == [
        ("jepsen-0", "kafka1", 0),
        ("jepsen-1", "kafka2", 0),
        ("jepsen-2", "kafka3", 0),
        ("jepsen-0", "kafka2", 1),  # kafka1 cut off: kafka2 leads, kafka1 out of the ISR
        ("jepsen-2", "kafka1", 1),
    ]
    assert changes[3].isr == ("kafka2", "kafka3")
    assert changes[3].time == pytest.approx(1795933760.870)


def test_broker_log_truncations_and_leaderships() -> None:
    events = list(log_events("kafka2", text_lines(FIXTURES / "k1-kafka2.log"), {"jepsen-0"}))
    cuts = [e for e in events if isinstance(e, Truncation)]
    assert [(t.node, t.partition, t.offset) for t in cuts] == [
        ("kafka2", "jepsen-0", 10052),
        ("kafka2", "jepsen-0", 10052),
    ]
    assert cuts[1].line.endswith(
        "Truncating to offset 10052 (org.apache.kafka.storage.internals.log.UnifiedLog)"
    )
    assert cuts[0].time == pytest.approx(1795932865.9997, abs=0.001)  # Docker's UTC time
    led = [
        (e.leader, e.leader_epoch, e.start_offset) for e in events if isinstance(e, LeaderChange)
    ]
    # The lines are logged by the node that takes the leadership; a follower's are not.
    assert led == [("kafka2", 0, 0), ("kafka2", 1, 10052)]


def test_no_effect_truncations_and_other_partitions_are_left_out() -> None:
    events = list(log_events("kafka2", text_lines(FIXTURES / "k1-kafka2.log")))
    partitions = {e.partition for e in events}
    assert "__consumer_offsets-1" in partitions and "__consumer_offsets-16" not in partitions


def test_compressed_text_reads_as_plain(tmp_path: Path) -> None:
    plain = (FIXTURES / "t2-jepsen.dump.txt").read_text()
    packed = tmp_path / "jepsen.dump.txt.zst"
    packed.write_bytes(zstandard.ZstdCompressor().compress(plain.encode()))
    assert list(text_lines(packed)) == plain.splitlines()


def test_a_3_9_2_dump_reads_as_4_4_0_does() -> None:
    """Kafka 3.9.2's DumpLogSegments (kafka.tools, in core) prints what 4.4.0's prints: the T2
    run on 3.9.2 whose committed transaction lost 3 records (docs/claims-findings.md)."""
    records = list(dump_records("kafka1", text_lines(FIXTURES / "t2-3.9.2-jepsen-0.dump.txt")))
    by_offset = {r.offset: r for r in records}
    aborted = by_offset[221]
    assert (aborted.msg_id, aborted.sequence) == ("P1:513", 170)
    assert (aborted.batch.base_offset, aborted.batch.last_offset) == (221, 223)
    assert (aborted.batch.producer_id, aborted.batch.producer_epoch) == (0, 0)
    assert (by_offset[224].marker, by_offset[225].marker) == ("ABORT", "COMMIT")
    # The next data batch continues at sequence 173: nothing else took 170-172.
    assert by_offset[226].batch.base_sequence == 173 and by_offset[226].msg_id == "P1:531"


def test_zookeeper_mode_leader_changes_from_its_transaction_log() -> None:
    """ZooKeeper 3.8.0's TxnLogToolkit --dump, on znodes written as Kafka's ZooKeeper-mode
    controller writes them: broker registrations, then a partition's state created, its ISR
    shrunk (no leader change), a new leader in epoch 1, and no leader at all."""
    changes = list(zookeeper_leader_changes(text_lines(FIXTURES / "zk-txns-3.8.0.txt")))
    assert [(c.partition, c.leader, c.leader_epoch, c.isr) for c in changes] == [
        ("jepsen-0", "kafka2", 0, ("kafka2", "kafka1", "kafka3")),
        ("jepsen-0", "kafka3", 1, ("kafka3",)),
        ("jepsen-0", "none", 2, ("kafka3",)),
    ]
    # 11/29/26, 8:28:37 AM UTC: seconds, the tool prints no milliseconds.
    assert changes[0].time == 1795940917.0
    assert changes[1].line.startswith("11/29/26, 8:28:37 AM UTC session")


def test_a_zookeeper_time_in_an_unknown_zone_is_no_time() -> None:
    line = (
        "11/29/26, 8:28:37\u202fAM CET session 0x1 cxid 0x1 zxid 0x2 setData "
        '/brokers/topics/t/partitions/3/state,{"leader":1,"leader_epoch":4,"isr":[1]},5'
    )
    (change,) = zookeeper_leader_changes([line])
    assert (change.partition, change.leader, change.leader_epoch, change.time) == (
        "t-3",
        "broker 1",
        4,
        None,
    )


def test_zookeeper_mode_leader_changes_of_a_real_run() -> None:
    """K1 in ZooKeeper mode on 3.9.2: the controller writes each partition's state in a `multi`
    (a check of the controller epoch, then the write), which the tool prints with its binary
    length prefixes; the brokers register in one too. kafka1 led jepsen-0 and was the controller;
    killed, the next controller set no leader, then kafka3 in epoch 2."""
    path = FIXTURES / "k1-zk-3.9.2-zookeeper-txns.txt.zst"
    changes = list(zookeeper_leader_changes(text_lines(path)))
    assert [(c.leader, c.leader_epoch, c.isr) for c in changes] == [
        ("kafka1", 0, ("kafka1", "kafka3", "kafka2")),
        ("none", 1, ("kafka3", "kafka2")),
        ("kafka3", 2, ("kafka3", "kafka2")),
    ]
    assert changes[2].time == 1795942040.0
    assert "\x00" not in changes[2].line and "/brokers/topics/jepsen/partitions/0/state" in (
        changes[2].line
    )
