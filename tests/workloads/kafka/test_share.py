"""Share consumers (KIP-932) without a cluster: their settings, the outcomes they draw, the
history they write (contract.history: share-acquire, share-ack) against a fake ShareConsumer
that answers as the broker would, and the Java consumer built and run against no broker."""

from __future__ import annotations

import json
import random
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    AcknowledgeType,
    IllegalStateException,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from contract.history import FIELDS, SHARE_ACK, SHARE_ACQUIRE, HistoryWriter, encode_body
from workloads.kafka import java_client
from workloads.kafka.clients import READER_NOT_CAUGHT_UP
from workloads.kafka.share import (
    _REFUSED,
    UNANSWERED,
    AckBook,
    PythonShareConsumer,
    ShareConfig,
    ack_outcome,
    draw_outcome,
    java_argv,
    run_java_share_consumer,
    share_java_properties,
    share_settings,
)

RELEASE = "4.4.0"
TOPIC, GROUP = "jepsen", "share"


class FakeMessage:
    def __init__(self, partition: int, offset: int, seq: int, delivery_count: int = 1) -> None:
        self._partition, self._offset, self._count = partition, offset, delivery_count
        self._value = encode_body("P1", seq)

    def value(self) -> bytes:
        return self._value

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def delivery_count(self) -> int:
        return self._count

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return TOPIC


class FakeShareConsumer:
    """Answers as a share group's leaders would: what a poll, commit_async or close sends is
    answered at once through the commit callback, a partition in `refuse` with its error."""

    def __init__(
        self,
        batches: list[list[FakeMessage]],
        explicit: bool,
        refuse: dict[int, KafkaException] | None = None,
        refuse_ack: set[int] | None = None,
    ) -> None:
        self.batches, self.explicit = list(batches), explicit
        self.refuse = refuse or {}
        self.refuse_ack = refuse_ack or set()  # offsets acknowledge() itself refuses
        self.callback: Any = None
        self.last: list[FakeMessage] = []
        self.marked: list[tuple[FakeMessage, int]] = []
        self.acknowledged: list[tuple[int, int, int]] = []  # partition, offset, ack type
        self.calls: list[str] = []

    def set_acknowledgement_commit_callback(self, callback: Any) -> None:
        self.callback = callback

    def subscribe(self, topics: list[str]) -> None:
        self.calls.append(f"subscribe {topics}")

    def poll(self, timeout: float) -> list[FakeMessage]:
        self.calls.append("poll")
        self._send()
        self.last = self.batches.pop(0) if self.batches else []
        return self.last

    def acknowledge(self, msg: FakeMessage, ack_type: int) -> None:
        if msg.offset() in self.refuse_ack:
            raise IllegalStateException("the record is not in flight")
        self.marked.append((msg, ack_type))

    def commit_async(self) -> None:
        self.calls.append("commit_async")
        self._send()

    def commit_sync(self, timeout: float) -> None:
        self.calls.append("commit_sync")
        self._send()

    def close(self) -> None:
        self.calls.append("close")
        self._send()

    def _send(self) -> None:
        if self.explicit:
            sent, self.marked = self.marked, []
        else:
            sent, self.last = [(m, int(AcknowledgeType.ACCEPT)) for m in self.last], []
        by_partition: dict[int, set[int]] = {}
        for m, ack_type in sent:
            self.acknowledged.append((m.partition(), m.offset(), int(ack_type)))
            by_partition.setdefault(m.partition(), set()).add(m.offset())
        for partition, offsets in sorted(by_partition.items()):
            self.callback({TopicPartition(TOPIC, partition): offsets}, self.refuse.get(partition))


def config(**kw: Any) -> ShareConfig:
    fields: dict[str, Any] = {"deadline": time.time() + 30, "idle_s": 0.05} | kw
    return ShareConfig("share-consumer-0", TOPIC, GROUP, **fields)


def consume(tmp_path: Path, cfg: ShareConfig, fake: FakeShareConsumer) -> list[dict[str, Any]]:
    with HistoryWriter(tmp_path, cfg.process, "kafka") as history:
        assert PythonShareConsumer(cfg, "b:9092", history, lambda: True, fake).run()
    return events(tmp_path / f"{cfg.process}.jsonl")


def events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def shares_of(evs: list[dict[str, Any]]) -> list[tuple[str, str, int, int]]:
    return [
        (e["f"], e["type"], e["partition"], e["offset"])
        for e in evs
        if e["f"] in (SHARE_ACQUIRE, SHARE_ACK)
    ]


def test_an_implicit_consumer_accepts_a_polls_records_as_it_polls_again(tmp_path: Path) -> None:
    batches = [[FakeMessage(0, 0, 1), FakeMessage(0, 1, 2)], [FakeMessage(1, 0, 3, 2)]]
    fake = FakeShareConsumer(batches, explicit=False)
    evs = consume(tmp_path, config(), fake)
    assert shares_of(evs) == [
        (SHARE_ACQUIRE, "ok", 0, 0),
        (SHARE_ACQUIRE, "ok", 0, 1),
        (SHARE_ACK, "invoke", 0, 0),  # written before the poll that sends them
        (SHARE_ACK, "invoke", 0, 1),
        (SHARE_ACK, "ok", 0, 0),
        (SHARE_ACK, "ok", 0, 1),
        (SHARE_ACQUIRE, "ok", 1, 0),
        (SHARE_ACK, "invoke", 1, 0),
        (SHARE_ACK, "ok", 1, 0),
    ]
    assert fake.acknowledged == [(0, 0, 1), (0, 1, 1), (1, 0, 1)]
    assert "commit_sync" not in fake.calls  # nothing left unacknowledged at the close
    opened = evs[0]
    assert (opened["f"], opened["stream"], opened["group"]) == ("open", TOPIC, GROUP)
    assert opened["value"]["client"].startswith("confluent-kafka ")
    assert opened["value"]["share"]["acknowledgement"] == "implicit"
    for e in evs:
        assert tuple(e) == FIELDS
        assert (e["system"], e["stream"], e["group"]) == ("kafka", TOPIC, GROUP)
    acquired = [e for e in evs if e["f"] == SHARE_ACQUIRE]
    assert [e["value"] for e in acquired] == [
        {"delivery_count": 1, "client": "python"},
        {"delivery_count": 1, "client": "python"},
        {"delivery_count": 2, "client": "python"},
    ]
    assert [e["msg_id"] for e in acquired] == ["P1:1", "P1:2", "P1:3"]
    last = [e for e in evs if e["f"] == SHARE_ACK][-1]
    assert (last["msg_id"], last["value"]) == ("P1:3", {"outcome": "accept", "delivery_count": 2})


def test_an_explicit_consumer_sends_the_outcomes_it_draws_and_records_refusals(
    tmp_path: Path,
) -> None:
    """Every record acknowledged with the outcome its invoke says; the partition whose leader
    refuses (a lock that expired) gets fail with the broker's error, the other ok."""
    batch = [FakeMessage(p, o, 10 * p + o) for p in (0, 1) for o in range(6)]
    expired = KafkaException(KafkaError(KafkaError.INVALID_RECORD_STATE))
    fake = FakeShareConsumer([batch], explicit=True, refuse={1: expired})
    cfg = config(acknowledgement="explicit", accept=0.5, release=0.25, reject=0.25)
    evs = consume(tmp_path, cfg, fake)
    invoked = {(e["partition"], e["offset"]): e for e in evs if e["type"] == "invoke"}
    sent = {(p, o): t for p, o, t in fake.acknowledged}
    assert set(invoked) == set(sent) == {(m.partition(), m.offset()) for m in batch}
    types = {"accept": AcknowledgeType.ACCEPT, "release": AcknowledgeType.RELEASE}
    types["reject"] = AcknowledgeType.REJECT
    for key, e in invoked.items():
        assert sent[key] == types[e["value"]["outcome"]]
    assert len({e["value"]["outcome"] for e in invoked.values()}) > 1  # drawn, not fixed
    done = [e for e in evs if e["f"] == SHARE_ACK and e["type"] != "invoke"]
    assert {(e["partition"], e["type"]) for e in done} == {(0, "ok"), (1, "fail")}
    refused = [e for e in done if e["type"] == "fail"]
    assert len(refused) == 6
    assert all(e["error"].startswith("INVALID_RECORD_STATE: ") for e in refused)
    for e in done:  # each completion repeats its invoke's record and outcome
        key = (e["partition"], e["offset"])
        assert (e["msg_id"], e["value"]) == (invoked[key]["msg_id"], invoked[key]["value"])
    assert fake.calls.count("commit_async") == 1


def test_an_acknowledgement_the_client_refuses_fails_and_one_never_answered_is_unknown(
    tmp_path: Path,
) -> None:
    batch = [FakeMessage(0, 0, 1), FakeMessage(0, 1, 2)]
    fake = FakeShareConsumer([batch], explicit=True, refuse_ack={1})
    fake._send = lambda: None  # type: ignore[method-assign]  # nothing sent is ever answered
    evs = consume(tmp_path, config(acknowledgement="explicit"), fake)
    acks = [(e["type"], e["offset"], e["error"]) for e in evs if e["f"] == SHARE_ACK]
    assert acks == [
        ("invoke", 0, None),
        ("invoke", 1, None),
        ("fail", 1, "IllegalStateException: the record is not in flight"),
        ("info", 0, UNANSWERED),
    ]


def test_a_consumer_not_asked_to_drain_stops_at_its_deadline(tmp_path: Path) -> None:
    fake = FakeShareConsumer([], explicit=False)
    cfg = config(deadline=time.time() + 0.3)
    with HistoryWriter(tmp_path, cfg.process, "kafka") as history:
        drained = PythonShareConsumer(cfg, "b", history, lambda: False, fake).run()
    assert drained is False and fake.calls[-1] == "close"


def test_the_drain_waits_for_a_whole_idle_window(tmp_path: Path) -> None:
    fake = FakeShareConsumer([], explicit=False)
    cfg = config(idle_s=0.6)
    started = time.monotonic()
    consume(tmp_path, cfg, fake)
    assert time.monotonic() - started >= 0.6


def test_a_record_acknowledged_twice_before_an_answer_is_answered_oldest_first(
    tmp_path: Path,
) -> None:
    with HistoryWriter(tmp_path, "c", "kafka") as history:
        book = AckBook(history, TOPIC, GROUP)
        first, again = FakeMessage(0, 7, 1, 1), FakeMessage(0, 7, 1, 2)
        book.invoked(first, "release")  # type: ignore[arg-type]
        book.invoked(again, "accept")  # type: ignore[arg-type]
        book.completed(0, [7], KafkaError(KafkaError.INVALID_RECORD_STATE))
        book.completed(0, [7], None)
        book.completed(0, [8], None)  # never acknowledged: no event
        book.unanswered()
    acks = [(e["type"], e["value"]) for e in events(tmp_path / "c.jsonl")]
    assert acks[2:] == [
        ("fail", {"outcome": "release", "delivery_count": 1}),
        ("ok", {"outcome": "accept", "delivery_count": 2}),
    ]


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (None, "ok"),
        (KafkaError.INVALID_RECORD_STATE, "fail"),
        (KafkaError.NOT_LEADER_FOR_PARTITION, "fail"),
        (KafkaError.SHARE_SESSION_NOT_FOUND, "fail"),
        (KafkaError._TIMED_OUT, "info"),
        (KafkaError._TRANSPORT, "info"),
        (KafkaError.REQUEST_TIMED_OUT, "info"),
    ],
)
def test_an_acknowledgement_is_failed_only_when_known_not_applied(
    code: int | None, expected: str
) -> None:
    err = None if code is None else KafkaError(code)
    type_, error = ack_outcome(err)
    assert type_ == expected and (error is None) == (code is None)


# The protocol errors (Kafka's Errors) whose Java exception is not named after them, and the
# ones librdkafka spells otherwise.
PROTOCOL_NAME = {
    "GroupAuthorizationException": "GROUP_AUTHORIZATION_FAILED",
    "TopicAuthorizationException": "TOPIC_AUTHORIZATION_FAILED",
}
LIBRDKAFKA_NAME = {
    "NOT_LEADER_OR_FOLLOWER": "NOT_LEADER_FOR_PARTITION",
    "UNKNOWN_TOPIC_OR_PARTITION": "UNKNOWN_TOPIC_OR_PART",
}


def java_refused() -> list[str]:
    """The exceptions ShareConsumer.java's completionType calls refused, in its source."""
    source = (Path(java_client.__file__).parent / "java" / "ShareConsumer.java").read_text()
    body = re.search(r"static String completionType\(Exception e\) \{(.*?)\n    \}", source, re.S)
    assert body is not None, "ShareConsumer.java has no completionType(Exception e)"
    return re.findall(r"instanceof (\w+)", body.group(1))


def librdkafka_code(exception: str) -> int:
    """A Java exception's error as librdkafka numbers it."""
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", exception.removesuffix("Exception")).upper()
    name = PROTOCOL_NAME.get(exception, snake)
    name = LIBRDKAFKA_NAME.get(name, name)
    code = getattr(KafkaError, name, None)
    assert isinstance(code, int), f"{exception}: librdkafka has no error {name} (a superclass?)"
    return code


def test_both_clients_call_the_same_errors_refused() -> None:
    """An acknowledgement one client calls refused (fail) and the other unknown (info) would
    make the same broker answer judged two ways."""
    java = java_refused()
    assert len(java) >= 5, java  # the source read as expected
    assert {librdkafka_code(e) for e in java} == set(_REFUSED)


def test_outcomes_follow_their_shares() -> None:
    cfg = config(acknowledgement="explicit", accept=0.7, release=0.2, reject=0.1)
    rng = random.Random(1)
    drawn = Counter(draw_outcome(rng, cfg) for _ in range(20_000))
    assert abs(drawn["accept"] / 20_000 - 0.7) < 0.02
    assert abs(drawn["release"] / 20_000 - 0.2) < 0.02
    assert abs(drawn["reject"] / 20_000 - 0.1) < 0.02
    only_reject = config(accept=0.0, release=0.0, reject=1.0)
    assert {draw_outcome(rng, only_reject) for _ in range(100)} == {"reject"}
    assert {draw_outcome(rng, config()) for _ in range(100)} == {"accept"}


def test_both_clients_are_given_the_same_settings_in_their_own_names() -> None:
    cfg = config(acknowledgement="explicit", max_poll_records=20)
    librdkafka = share_settings(cfg, "b:9092")
    java = share_java_properties(cfg, "b:9092")
    for settings in (librdkafka, java):
        assert settings["group.id"] == GROUP and settings["client.id"] == "share-consumer-0"
        assert settings["share.acknowledgement.mode"] == "explicit"
        assert str(settings["max.poll.records"]) == "20"
    assert java["share.acquire.mode"] == "record_limit"
    # The group's own settings are set on the group, never on a client (librdkafka refuses them).
    for key in ("auto.offset.reset", "session.timeout.ms", "enable.auto.commit"):
        assert key not in librdkafka and key not in java


def test_the_java_consumers_command_line_is_its_usage(tmp_path: Path) -> None:
    cfg = config(client="java", java_version=RELEASE, delay=0.5, idle_s=20.0, accept=0.9)
    argv = java_argv(cfg, "CP", tmp_path / "p", tmp_path / "h.jsonl")
    assert argv[:4] == ["java", "-cp", "CP", java_client.SHARE_CLASS]
    usage = "PROPERTIES HISTORY PROCESS TOPIC GROUP DEADLINE DELAY IDLE ACCEPT RELEASE REJECT"
    assert len(argv[4:]) == len(usage.split()) + 1  # and CLIENT_VERSION
    assert argv[6:9] == ["share-consumer-0", TOPIC, GROUP]
    assert argv[10:13] == ["0.5", "20.0", "0.9"] and argv[-1] == RELEASE


def test_the_java_client_builds_the_share_consumer() -> None:
    d = java_client.ensure(RELEASE)
    assert (d / "classes" / f"{java_client.SHARE_CLASS}.class").exists()
    assert java_client.SHARE_CLASS in {s.stem for s in java_client.SOURCES}


@pytest.mark.parametrize(("draining", "code"), [(True, 0), (False, READER_NOT_CAUGHT_UP)])
def test_the_java_consumer_runs_without_a_cluster(
    tmp_path: Path, draining: bool, code: int
) -> None:
    """No broker at 127.0.0.1:1: the consumer announces itself and gets nothing; asked to
    drain, it leaves once idle for idle_s; not asked, at its deadline."""
    cfg = ShareConfig(
        "share-consumer-1",
        TOPIC,
        GROUP,
        deadline=time.time() + 8,
        client="java",
        acknowledgement="explicit",
        idle_s=1.0,
        java_version=RELEASE,
    )
    history = tmp_path / "history" / "share-consumer-1.jsonl"
    started = time.monotonic()
    assert run_java_share_consumer(cfg, "127.0.0.1:1", history, tmp_path, lambda: draining) == code
    assert time.monotonic() - started < 40
    (opened,) = events(history)
    assert (opened["f"], opened["type"], opened["process"]) == ("open", "ok", "share-consumer-1")
    assert (opened["stream"], opened["group"]) == (TOPIC, GROUP)
    assert opened["value"]["client"] == f"kafka-clients {RELEASE} (Java)"
    assert opened["value"]["share"]["acknowledgement"] == "explicit"
    assert tuple(opened) == FIELDS
    props = (tmp_path / "share-consumer-1.java.properties").read_text()
    assert "share.acquire.mode=record_limit" in props


def test_an_implicit_consumer_closing_on_a_polls_records_accepts_them_by_a_commit_first(
    tmp_path: Path,
) -> None:
    """At its deadline a consumer may close holding its last poll's records: a commit accepts
    them (as implicit mode documents), a close alone is not documented to."""
    fake = FakeShareConsumer([], explicit=False)
    cfg = config()
    with HistoryWriter(tmp_path, cfg.process, "kafka") as history:
        consumer = PythonShareConsumer(cfg, "b:9092", history, lambda: True, fake)
        fake.set_acknowledgement_commit_callback(consumer.book.on_commit)  # as run() does
        fake.last = [FakeMessage(0, 0, 1)]
        consumer._process(fake.last)
        consumer._close()
    assert fake.calls[-2:] == ["commit_sync", "close"]
    assert fake.acknowledged == [(0, 0, 1)]
    evs = shares_of(events(tmp_path / f"{cfg.process}.jsonl"))
    assert evs[-2:] == [(SHARE_ACK, "invoke", 0, 0), (SHARE_ACK, "ok", 0, 0)]
