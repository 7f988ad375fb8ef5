"""The join of anomalies with the brokers' evidence, on small planted run directories."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import zstandard

from checkers.explain import EXPLANATIONS, UNEXPLAINED, explain_run, summary_lines
from contract.rundir import RunDir

pytestmark = pytest.mark.unit

START = 1_800_000_000.0
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"
TRUNCATED = "[UnifiedLog partition=jepsen-0, dir=/var/lib/kafka/data] Truncating to offset {} (x)"
ELECTED = (
    "[Broker id=2] Leader jepsen-0 with topic id Some(x) starts at leader epoch 1 from offset 8 "
    "with partition epoch 1"
)


def _batch(
    base: int, last: int, epoch: int, pid: int = -1, txn: bool = False, control: bool = False
) -> str:
    return (
        f"baseOffset: {base} lastOffset: {last} count: {last - base + 1} baseSequence: -1 "
        f"lastSequence: -1 producerId: {pid} producerEpoch: 0 partitionLeaderEpoch: {epoch} "
        f"isTransactional: {str(txn).lower()} isControl: {str(control).lower()} "
        f"position: 0 CreateTime: {int(START * 1000) + base} size: 80 magic: 2"
    )


def _record(offset: int, seq: int | None = None, marker: str | None = None) -> str:
    at = int(START * 1000) + offset
    line = f"| offset: {offset} CreateTime: {at} keySize: -1 valueSize: 25 sequence: {offset} "
    line += "headerKeys: []"
    if marker:
        return line + f" endTxnMarker: {marker} coordinatorEpoch: 0"
    return line + (f' payload: {{"producer":"P1","seq":{seq}}}' if seq is not None else "")


def _metadata(leaders: tuple[tuple[float, int], ...]) -> str:
    brokers = [
        {
            "type": "REGISTER_BROKER_RECORD",
            "version": 4,
            "data": {
                "brokerId": b,
                "endPoints": [{"name": "INTERNAL", "host": f"kafka{b}", "port": 9092}],
            },
        }
        for b in (1, 2)
    ]
    topic = {"type": "TOPIC_RECORD", "version": 0, "data": {"name": "jepsen", "topicId": TOPIC_ID}}
    first_at, first = leaders[0]
    partition = {
        "type": "PARTITION_RECORD",
        "version": 2,
        "data": {
            "partitionId": 0,
            "topicId": TOPIC_ID,
            "isr": [1, 2],
            "leader": first,
            "leaderEpoch": 0,
        },
    }
    changes = [
        (
            at,
            {
                "type": "PARTITION_CHANGE_RECORD",
                "version": 2,
                "data": {"partitionId": 0, "topicId": TOPIC_ID, "isr": [leader], "leader": leader},
            },
        )
        for at, leader in leaders[1:]
    ]
    payloads = [(START - 5, r) for r in [*brokers, topic]] + [(first_at, partition), *changes]
    lines = ["Dumping /data/kafka1/__cluster_metadata-0/00000000000000000000.log"]
    for i, (at, payload) in enumerate(payloads):
        body = json.dumps(payload, separators=(",", ":"))
        lines.append(f"| offset: {i} CreateTime: {int(at * 1000)} headerKeys: [] payload: {body}")
    return "\n".join(lines) + "\n"


def _docker_line(at: float, text: str) -> str:
    from datetime import UTC, datetime

    stamp = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"
    return f"{stamp} [{datetime.fromtimestamp(at, UTC):%Y-%m-%d %H:%M:%S},000] INFO {text}"


def _plant(
    tmp_path: Path,
    dumps: dict[str, list[str]],
    logs: dict[str, list[str]],
    ids: dict[str, list[str]],
    history: list[dict[str, object]],
    leaders: tuple[tuple[float, int], ...] = ((START - 1, 1), (START + 20, 2)),
) -> RunDir:
    run = RunDir(tmp_path / "run")
    index: dict[str, list[dict[str, object]]] = {"nodes": []}
    for node, lines in dumps.items():
        (run.evidence / node).mkdir(parents=True)
        text = f"Dumping /data/{node}/jepsen-0/00000000000000000000.log\n" + "\n".join(lines) + "\n"
        compress = zstandard.ZstdCompressor().compress
        (run.evidence / node / "jepsen.dump.txt.zst").write_bytes(compress(text.encode()))
        (run.evidence / node / "cluster-metadata.dump.txt.zst").write_bytes(
            compress(_metadata(leaders).encode())
        )
        index["nodes"].append(
            {
                "node": node,
                "dumps": {
                    "jepsen": f"{node}/jepsen.dump.txt.zst",
                    "cluster-metadata": f"{node}/cluster-metadata.dump.txt.zst",
                },
                "missing": [],
            }
        )
    (run.evidence / "evidence.json").write_text(json.dumps(index))
    run.logs.mkdir(parents=True)
    for node, lines in logs.items():
        (run.logs / f"{node}.log").write_text("\n".join(lines) + "\n")
    for group_metric, keys in ids.items():
        group, metric = group_metric.split("/")
        (run.ids / group).mkdir(parents=True, exist_ok=True)
        (run.ids / group / f"{metric}.txt").write_text("".join(f"{k}\n" for k in keys))
    run.history.mkdir(parents=True)
    by_process: dict[str, list[str]] = {}
    for e in history:
        by_process.setdefault(str(e["process"]), []).append(json.dumps(e))
    for process, lines in by_process.items():
        (run.history / f"{process}.jsonl").write_text("\n".join(lines) + "\n")
    return run


def _send(
    seq: int, offset: int, at: float, node: str = "kafka1", txn: str | None = None
) -> dict[str, object]:
    return {
        "time": at, "process": "P1", "type": "ok", "f": "send", "stream": "jepsen",
        "producer": "P1", "seq": seq, "msg_id": f"P1:{seq}", "partition": 0, "offset": offset,
        "node": node, "value": {"txn": txn} if txn else None,
    }  # fmt: skip


def _receive(seq: int, offset: int, at: float) -> dict[str, object]:
    return {
        "time": at, "process": "reader", "type": "ok", "f": "receive", "stream": "jepsen",
        "group": "reader", "producer": "P1", "seq": seq, "msg_id": f"P1:{seq}", "partition": 0,
        "offset": offset,
    }  # fmt: skip


NEMESIS = [
    {"time": START + 5, "process": "nemesis", "type": "invoke", "f": "kill",
     "value": {"nodes": ["kafka1"]}},
]  # fmt: skip


def _rows(run: RunDir) -> list[dict[str, str]]:
    with (run.path / EXPLANATIONS).open() as fh:
        return list(csv.DictReader(fh))


def test_a_lost_record_is_explained_by_its_truncation_and_the_election(tmp_path: Path) -> None:
    run = _plant(
        tmp_path,
        dumps={
            "kafka1": [_batch(0, 7, 0), *(_record(o, o + 1) for o in range(8))],
            "kafka2": [
                _batch(0, 7, 0),
                *(_record(o, o + 1) for o in range(8)),
                _batch(8, 8, 1),
                _record(8, 99),
            ],
        },
        logs={
            "kafka1": [
                _docker_line(
                    START + 30,
                    TRUNCATED.format(8),
                ),
                # Before the acknowledgement: it removed nothing the run was told was written.
                _docker_line(
                    START,
                    TRUNCATED.format(0),
                ),
            ],
            "kafka2": [
                _docker_line(
                    START + 21,
                    ELECTED,
                )
            ],
        },
        ids={"reader/lost": ["P1:11"], "final/lost": ["P1:11"]},
        history=[_send(11, 10, START + 10), _receive(1, 0, START + 11), *NEMESIS],
    )
    section, missing = explain_run(run, START)
    assert missing is None and section is not None
    assert (section["messages"], section["explained"], section["unexplained"]) == (1, 1, 0)
    cause = section["causes"][0]
    assert cause["count"] == 1 and cause["anomaly"] == "lost"
    assert cause["cause"] == (
        "acknowledged by kafka1 in leader epoch 0, truncated on kafka1 at +30.0 s after kafka2 was "
        "elected (leader epoch 1, +21.0 s)"
    )
    assert cause["samples"] == [
        "P1:11 acknowledged at jepsen-0@10 by kafka1 during 1. kill kafka1 at +5.0 s"
    ]
    rows = _rows(run)
    assert [r["group"] for r in rows] == ["final", "reader"]  # a row per group, counted once
    row = rows[0]
    assert (row["node"], row["offset"], row["leader_epoch"], row["time"]) == (
        "kafka1",
        "10",
        "0",
        "30.000",
    )
    assert (
        "Truncating to offset 8" in row["evidence"]
        and "starts at leader epoch 1" in row["evidence"]
    )
    assert row["step"] == "1. kill kafka1 at +5.0 s"


def test_an_unexplainable_lost_record_is_counted_not_dropped(tmp_path: Path) -> None:
    run = _plant(
        tmp_path,
        dumps={"kafka1": [_batch(0, 1, 0), _record(0, 1), _record(1, 2)]},
        # A truncation above the record's offset removed other records, not this one.
        logs={
            "kafka1": [
                _docker_line(
                    START + 30,
                    TRUNCATED.format(12),
                )
            ]
        },
        ids={"reader/lost": ["P1:11"]},
        history=[_send(11, 10, START + 10)],
    )
    section, _ = explain_run(run, START)
    assert section is not None
    assert (section["messages"], section["explained"], section["unexplained"]) == (1, 0, 1)
    assert section["causes"][0]["cause"] == UNEXPLAINED and not section["causes"][0]["explained"]
    assert _rows(run)[0]["explained"] == "False"
    line = summary_lines({"explanations": section})[0]
    assert (
        line.startswith("explanations: 0 of 1 anomalous messages explained")
        and "1 unexplained" in line
    )


def test_a_clean_run_explains_nothing(tmp_path: Path) -> None:
    run = _plant(
        tmp_path,
        dumps={"kafka1": [_batch(0, 0, 0), _record(0, 1)]},
        logs={"kafka1": []},
        ids={"reader/lost": [], "reader/duplicated": []},
        history=[_send(1, 0, START + 1), _receive(1, 0, START + 2)],
    )
    section, missing = explain_run(run, START)
    assert missing is None
    assert section == {
        "messages": 0,
        "explained": 0,
        "unexplained": 0,
        "file": EXPLANATIONS,
        "causes": [],
    }
    assert _rows(run) == []
    assert summary_lines({"explanations": section}) == []


def test_a_run_without_evidence_says_why(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    section, missing = explain_run(run, START)
    assert section is None and missing is not None and "evidence.json" in missing
    anomalous = {
        "explanations": None,
        "explanations_missing": missing,
        "groups": {"g": {"lost": 2}},
    }
    assert summary_lines(anomalous) == [f"explanations: none ({missing})"]
    assert summary_lines(anomalous | {"groups": {"g": {"lost": 0}}}) == []


def test_a_duplicate_names_its_two_batches(tmp_path: Path) -> None:
    run = _plant(
        tmp_path,
        dumps={
            "kafka1": [_batch(0, 0, 0, pid=7), _record(0, 1), _batch(1, 1, 1, pid=8), _record(1, 1)]
        },
        logs={"kafka1": []},
        ids={"reader/duplicated": ["P1:1"]},
        history=[_send(1, 0, START + 1), _receive(1, 0, START + 2), _receive(1, 1, START + 3)],
    )
    section, _ = explain_run(run, START)
    assert section is not None and section["explained"] == 1
    assert section["causes"][0]["cause"].startswith("written twice (two producer ids")
    row = _rows(run)[0]
    assert row["replicas"] == "kafka1@0 kafka1@1"
    assert "producer 7" in row["evidence"] and "producer 8" in row["evidence"]


def test_an_aborted_read_names_the_marker_on_each_replica(tmp_path: Path) -> None:
    held = [_batch(0, 1, 0, pid=3, txn=True), _record(0, 1), _record(1, 2)]
    run = _plant(
        tmp_path,
        dumps={
            "kafka1": [
                *held,
                _batch(2, 2, 0, pid=3, txn=True, control=True),
                _record(2, marker="ABORT"),
            ],
            "kafka2": [
                *held,
                _batch(2, 2, 0, pid=3, txn=True, control=True),
                _record(2, marker="COMMIT"),
            ],
        },
        logs={},
        ids={"reader/aborted_reads": ["P1:2"]},
        history=[_receive(2, 1, START + 3)],
    )
    section, _ = explain_run(run, START)
    assert section is not None and section["explained"] == 1
    assert section["causes"][0]["cause"] == "its batch ended by ABORT on kafka1; COMMIT on kafka2"


def _idempotent_batch(base: int, last: int, sequence: int, at: float) -> str:
    """A transactional producer's batch (producer id 0, epoch 0) written at `at`."""
    return (
        f"baseOffset: {base} lastOffset: {last} count: {last - base + 1} "
        f"baseSequence: {sequence} lastSequence: {sequence + last - base} producerId: 0 "
        "producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: false "
        f"position: 0 CreateTime: {int(at * 1000)} size: 163 magic: 2"
    )


@pytest.mark.parametrize("sequence", [170, -1])
def test_a_record_answered_with_an_earlier_batchs_offsets_is_explained_as_deduplicated(
    tmp_path: Path, sequence: int
) -> None:
    """T2 on 3.9.2 (2026-11-29): P1:522 of a committed transaction was acknowledged at
    jepsen-0@221, where every replica holds P1:513 of the aborted transaction before it, in a
    batch of the same producer id and epoch at sequences 170-172. Without sequence numbers (a
    producer that is not idempotent) the broker deduplicates nothing: no such explanation."""
    batch = [
        _idempotent_batch(221, 223, sequence, START + 1)
        if sequence >= 0
        else _batch(221, 223, 0, pid=0),
        *(_record(221 + i, 513 + 3 * i) for i in range(3)),
    ]
    run = _plant(
        tmp_path,
        dumps={"kafka1": batch, "kafka2": batch},
        logs={"kafka1": [], "kafka2": []},
        ids={"committed/lost": ["P1:522"]},
        history=[_send(522, 221, START + 10, txn="P1:t53")],
    )
    section, _ = explain_run(run, START)
    assert section is not None
    (cause,) = section["causes"]
    if sequence < 0:
        assert cause["cause"] == UNEXPLAINED
        return
    assert cause["explained"] and cause["cause"].startswith(
        "answered with the offsets of an earlier batch of its producer, jepsen-0@221-223 "
        "(producer id 0, epoch 0, sequences 170-172) on kafka1, kafka2"
    )
    assert _rows(run)[0]["evidence"] == "jepsen-0@221 holds P1:513 (sequence 221)"
