"""Share groups (KIP-932) planted at known records: the checker finds exactly what was planted,
and a history of the protocol working (releases, lock expiries, refused stale acknowledgements,
acknowledgements of unknown outcome, archiving at the limit) has nothing to find."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from checkers.read import read_history
from checkers.share_groups import (
    ANOMALIES,
    FATES,
    ShareSettings,
    ShareSetup,
    broken_words,
    check_share_groups,
    share_section,
    story,
    summary_lines,
)
from checkers.verdict import Counts, claim_word, judge
from contract.history import FIELDS, SHARE_ACK, SHARE_ACQUIRE

TOPIC, GROUP, PARTITIONS = "t", "sg", 3
START = 1.7e9
KILL = {"op": "kill", "nodes": ["kafka2"]}


@dataclass(frozen=True)
class Record:
    msg_id: str
    partition: int
    offset: int


@dataclass
class Planted:
    """A share group's history, written as the clients write theirs: producer P's sends, each
    consumer's acquisitions and acknowledgements, the nemesis's steps. Times are seconds from
    START; every event gets a time of its own."""

    events: list[dict[str, Any]] = field(default_factory=list)
    offsets: dict[int, int] = field(default_factory=lambda: dict.fromkeys(range(PARTITIONS), 0))
    seq: int = 0

    def _event(self, process: str, type_: str, f: str, at: float, **kw: Any) -> None:
        e: dict[str, Any] = dict.fromkeys(FIELDS)
        e.update(time=START + at, process=process, type=type_, f=f, system="kafka", **kw)
        self.events.append(e)

    def send(self, at: float, outcome: str = "ok") -> Record:
        self.seq += 1
        partition = self.seq % PARTITIONS
        offset = self.offsets[partition]
        self.offsets[partition] += 1
        msg = {"producer": "P", "seq": self.seq, "msg_id": f"P:{self.seq}", "stream": TOPIC}
        self._event("P", "invoke", "send", at, **msg)
        placed = {"partition": partition, "offset": offset} if outcome == "ok" else {}
        self._event("P", outcome, "send", at + 0.001, **msg, **placed)
        return Record(f"P:{self.seq}", partition, offset)

    def _where(self, r: Record) -> dict[str, Any]:
        producer, seq = r.msg_id.split(":")
        return {
            "stream": TOPIC,
            "group": GROUP,
            "producer": producer,
            "seq": int(seq),
            "msg_id": r.msg_id,
            "partition": r.partition,
            "offset": r.offset,
        }

    def acquire(self, consumer: str, r: Record, at: float, count: int | None) -> None:
        said = {"delivery_count": count, "client": "java"}
        self._event(consumer, "ok", SHARE_ACQUIRE, at, value=said, **self._where(r))

    def ask(self, consumer: str, r: Record, at: float, outcome: str) -> None:
        """The consumer acknowledges `r` (share-ack invoke)."""
        said = {"outcome": outcome, "delivery_count": None}
        self._event(consumer, "invoke", SHARE_ACK, at, value=said, **self._where(r))

    def answer(
        self,
        consumer: str,
        r: Record,
        at: float,
        outcome: str,
        end: str = "ok",
        error: str | None = None,
    ) -> None:
        """The answer to the consumer's oldest unanswered acknowledgement of `r`."""
        said = {"outcome": outcome, "delivery_count": None}
        self._event(consumer, end, SHARE_ACK, at, value=said, error=error, **self._where(r))

    def ack(
        self,
        consumer: str,
        r: Record,
        at: float,
        outcome: str,
        end: str | None = "ok",
        error: str | None = None,
    ) -> None:
        self.ask(consumer, r, at, outcome)
        if end is not None:
            self.answer(consumer, r, at + 0.01, outcome, end, error)

    def open(self, consumer: str, at: float) -> None:
        """The consumer (re)started: its `open` event."""
        said = {"client": "java", "share": {"acknowledgement": "implicit"}}
        self._event(consumer, "ok", "open", at, stream=TOPIC, group=GROUP, value=said)

    def delivered(
        self, consumer: str, r: Record, at: float, count: int | None, outcome: str
    ) -> None:
        """One delivery acknowledged at once and confirmed."""
        self.acquire(consumer, r, at, count)
        self.ack(consumer, r, at + 0.1, outcome)

    def step(self, at: float, f: str, value: dict[str, Any]) -> None:
        for type_ in ("invoke", "ok"):
            self._event("nemesis", type_, f, at, value=value)

    def write(self, history: Path) -> None:
        history.mkdir(parents=True)
        by_process: dict[str, list[str]] = {}
        for e in sorted(self.events, key=lambda e: e["time"]):
            by_process.setdefault(e["process"], []).append(json.dumps(e))
        for process, lines in by_process.items():
            (history / f"{process}.jsonl").write_text("\n".join(lines) + "\n")


LIMIT_3 = ShareSetup.of({GROUP: {"topics": [TOPIC], "delivery_count_limit": 3}})
LOCK_2S = ShareSetup.of({GROUP: {"topics": [TOPIC], "lock_duration_ms": 2000}})


def _checked(spark: Any, tmp_path: Path, h: Planted, setup: ShareSetup) -> dict[str, Any]:
    h.write(tmp_path / "history")
    events = read_history(spark, tmp_path / "history").events
    nemesis = [
        {"time": e["time"], "type": e["type"], "f": e["f"], "value": json.dumps(e["value"])}
        for e in h.events
        if e["process"] == "nemesis"
    ]
    section = check_share_groups(events, tmp_path / "ids", nemesis, START, setup)
    assert section is not None
    return section


def _quiet(h: Planted, first: int, count: int) -> list[Record]:
    """`count` messages sent from `first` s, each delivered once and accepted: the background
    a planted anomaly stands out from."""
    out = []
    for i in range(count):
        r = h.send(first + i)
        h.delivered(f"c{i % 3}", r, first + i + 0.5, 1, "accept")
        out.append(r)
    return out


def _ids(tmp_path: Path, anomaly: str) -> list[str]:
    path = tmp_path / "ids" / GROUP / f"share_{anomaly}.txt"
    return path.read_text().split("\n")[:-1] if path.exists() else []


def _record_id(r: Record) -> str:
    return f"{TOPIC}/{r.partition}@{r.offset} {r.msg_id}"


# ---- planted anomalies (Spark) -----------------------------------------------------------------


@pytest.mark.spark
def test_accepted_twice_past_the_limit_and_redelivered_after_a_reject_are_found_alone(
    spark: Any, tmp_path: Path
) -> None:
    """The issue's planted history: exactly these three anomalies, each at its record, tied to
    the fault step before it and to the consumer that showed it; nothing else."""
    h = Planted()
    _quiet(h, 0, 12)
    h.step(20.0, "kill", KILL)
    twice = h.send(21)
    h.delivered("c1", twice, 22, 1, "accept")
    h.delivered("c2", twice, 23, 2, "accept")  # delivered and accepted again: duplicated
    past = h.send(24)
    for n in (1, 2, 3):
        h.delivered(f"c{n % 3}", past, 24 + n, n, "release")  # the 3rd release archives it
    h.delivered("c1", past, 28, 4, "accept")  # a 4th delivery, at count 4: past the limit of 3
    rejected = h.send(30)
    h.delivered("c0", rejected, 31, 1, "reject")
    h.delivered("c2", rejected, 32, 2, "accept")  # delivered again after a confirmed reject
    _quiet(h, 40, 6)

    section = _checked(spark, tmp_path, h, LIMIT_3)

    g = section["groups"][GROUP]
    planted = {"duplicated": 1, "over_limit": 1, "rejected_redelivered": 1}
    assert section["anomalies"] == dict.fromkeys(ANOMALIES, 0) | planted
    assert _ids(tmp_path, "duplicated") == [_record_id(twice)]
    assert _ids(tmp_path, "over_limit") == [_record_id(past)]
    assert _ids(tmp_path, "rejected_redelivered") == [_record_id(rejected)]
    assert _ids(tmp_path, "lost") == [] and _ids(tmp_path, "backwards") == []
    assert g["acked"] == 21 and g["fates"]["accepted"] == 21 and g["lost"] == 0
    assert g["delivery_count_limit"] == 3 and g["settings_from"] == "the manifest"
    assert g["redelivered"]["released"] == 3  # the past-limit record's: the protocol at work
    step = "1. kill kill kafka2 at +20.0 s"
    assert g["by_step"] == {a: {step: 1} for a in planted}
    assert (g["consumers"]["c2"]["duplicated"], g["consumers"]["c1"]["over_limit"]) == (1, 1)
    assert g["consumers"]["c2"]["rejected_redelivered"] == 1
    assert g["partitions"][f"{TOPIC}/{twice.partition}"]["duplicated"] == 1
    # Each sample tells its record's story, delivery by delivery.
    (dup,) = g["samples"]["duplicated"]
    assert [(d["consumer"], d["delivery_count"], d["ack"]) for d in dup["deliveries"]] == [
        ("c1", 1, "accept"),
        ("c2", 2, "accept"),
    ]
    assert len(g["samples"]["over_limit"][0]["deliveries"]) == 4
    # The verdict: a share group broken is an anomaly whatever the expectation.
    verdict = judge(Counts.of({}, {"ok": 21}, share_groups=section), "safe")
    assert (verdict.outcome, verdict.matched) == ("anomalies", False)
    assert "1 record accepted twice or delivered after a confirmed accept" in verdict.reason


@pytest.mark.spark
def test_releases_lock_expiries_refused_stale_acks_and_archiving_are_no_anomaly(
    spark: Any, tmp_path: Path
) -> None:
    """The protocol at work: a released record delivered again, a lock that expired (the
    record redelivered 2.5 s after, its first consumer's late accept refused), a record
    archived at the limit, a confirmed reject never delivered again. Nothing is an anomaly;
    the redeliveries are counted by cause, and the coverage's situations are there."""
    h = Planted()
    _quiet(h, 0, 6)
    released = h.send(10)
    h.delivered("c0", released, 10.5, 1, "release")
    h.delivered("c1", released, 11, 2, "accept")
    expired = h.send(12)
    h.acquire("c0", expired, 12.5, 1)  # c0 paused past its lock: never acknowledged in time
    h.acquire("c1", expired, 15.0, 2)
    h.ack("c0", expired, 15.2, "accept", "fail", "InvalidRecordStateException: lock expired")
    h.ack("c1", expired, 15.3, "accept")
    archived = h.send(16)
    for n in range(1, 6):  # the default limit, 5: the 5th release archives it
        h.delivered(f"c{n % 3}", archived, 16 + n, n, "release")
    rejected = h.send(23)
    h.delivered("c2", rejected, 23.5, 1, "reject")
    dropped = h.send(24)
    h.acquire("c2", dropped, 24.5, 1)  # c2 left the group: released by the broker at once
    h.delivered("c0", dropped, 25.0, 2, "accept")

    setup = ShareSetup.of({GROUP: {"topics": [TOPIC], "lock_duration_ms": 2000}})
    section = _checked(spark, tmp_path, h, setup)

    g = section["groups"][GROUP]
    assert section["anomalies"] == dict.fromkeys(ANOMALIES, 0)
    assert g["fates"] == dict.fromkeys(FATES, 0) | {"accepted": 9, "archived": 1, "rejected": 1}
    assert g["redelivered"] == {
        "released": 1 + 4,
        "lock_expired": 1,
        "dropped": 1,
        "after_unknown_ack": 0,
    }
    assert (section["released_redelivered"], section["lock_expired_redelivered"]) == (5, 1)
    assert g["acks"]["accept"]["fail"] == 1 and g["consumers"]["c0"]["refused"] == 1
    assert g["left_at_end"] == dict.fromkeys(("acquired", "available", "unknown"), 0)
    verdict = judge(Counts.of({}, {"ok": 11}, share_groups=section), "safe")
    assert verdict.matched, verdict.reason


@pytest.mark.spark
def test_an_acknowledgement_of_unknown_outcome_then_a_redelivery_is_no_anomaly(
    spark: Any, tmp_path: Path
) -> None:
    """An accept whose answer never came (the consumer killed, a timeout) may not have taken
    effect: the record's next delivery is a redelivery, not a duplicate; an unknown accept never
    followed by a delivery settles its message as unknown, not lost."""
    h = Planted()
    _quiet(h, 0, 3)
    again = h.send(5)
    h.acquire("c0", again, 5.5, 1)
    h.ack("c0", again, 5.6, "accept", "info", "timed out")
    h.delivered("c1", again, 9.0, 2, "accept")
    maybe = h.send(10)
    h.acquire("c0", maybe, 10.5, 1)
    h.ack("c0", maybe, 10.6, "accept", None)  # killed before the answer: no end at all
    rejected = h.send(11)
    h.acquire("c1", rejected, 11.5, 1)
    h.ack("c1", rejected, 11.6, "reject", "info")
    h.delivered("c2", rejected, 14.0, 2, "reject")

    section = _checked(spark, tmp_path, h, LOCK_2S)

    g = section["groups"][GROUP]
    assert section["anomalies"] == dict.fromkeys(ANOMALIES, 0)
    assert g["redelivered"]["lock_expired"] == 2 and g["redelivered"]["after_unknown_ack"] == 2
    assert (g["fates"]["unknown"], g["fates"]["rejected"], g["lost"]) == (1, 1, 0)
    assert g["left_at_end"]["unknown"] == 1
    assert g["acks"]["accept"]["info"] == 2


@pytest.mark.spark
def test_answers_pair_with_acknowledgements_oldest_first_within_a_consumer_s_life(
    spark: Any, tmp_path: Path
) -> None:
    """As both clients answer: a record's n-th answer is its consumer's n-th acknowledgement of
    it. The Java implicit consumer's callbacks come a poll late: asked twice before the first
    answer, the first answer is the first delivery's, so a confirmed accept then a redelivery
    is a duplicate. A consumer restarted (a new `open`) never hears of what it asked before."""
    h = Planted()
    _quiet(h, 0, 3)
    late = h.send(5)
    h.acquire("c0", late, 5.5, 1)
    h.ask("c0", late, 6.0, "accept")  # the next poll accepts it...
    h.acquire("c0", late, 6.1, 2)  # ...and returns it again before the accept's answer
    h.ask("c0", late, 6.6, "accept")
    h.answer("c0", late, 6.7, "accept")  # the first accept confirmed: then a duplicate
    h.answer("c0", late, 6.8, "accept", "fail", "InvalidRecordStateException")
    killed = h.send(7)
    h.open("c1", 0.1)
    h.acquire("c1", killed, 7.5, 1)
    h.ask("c1", killed, 8.0, "accept")  # killed before its answer: unknown
    h.open("c1", 9.0)  # restarted
    h.acquire("c1", killed, 9.5, 2)
    h.ack("c1", killed, 10.0, "accept")  # this life's answer, to this life's accept

    section = _checked(spark, tmp_path, h, LOCK_2S)

    g = section["groups"][GROUP]
    assert section["anomalies"] == dict.fromkeys(ANOMALIES, 0) | {"duplicated": 1}
    assert _ids(tmp_path, "duplicated") == [_record_id(late)]
    assert g["acks"]["accept"] == {"ok": 3 + 1 + 1, "fail": 1, "info": 1}
    (dup,) = g["samples"]["duplicated"]
    assert [(d["ack"], d["status"]) for d in dup["deliveries"]] == [
        ("accept", "ok"),
        ("accept", "fail"),
    ]
    assert g["redelivered"]["after_unknown_ack"] == 1 and g["fates"]["accepted"] == 5


@pytest.mark.spark
def test_lost_tells_a_message_never_delivered_from_one_left_unsettled(
    spark: Any, tmp_path: Path
) -> None:
    """Lost: never delivered, or delivered and left below the limit (released and never
    delivered again; acquired and never acknowledged; its accept refused). A send never
    acknowledged is nobody's loss, and a message the group got but nobody sent is counted."""
    h = Planted()
    _quiet(h, 0, 4)
    never = h.send(6)
    released = h.send(7)
    h.delivered("c0", released, 7.5, 1, "release")
    held = h.send(8)
    h.acquire("c1", held, 8.5, 1)
    refused = h.send(9)
    h.acquire("c2", refused, 9.5, 1)
    h.ack("c2", refused, 9.6, "accept", "fail", "InvalidRecordStateException")
    h.send(10, outcome="info")  # never acknowledged: not expected anywhere
    stranger = Record("Q:1", 0, 99)
    h.delivered("c0", stranger, 11, 1, "accept")

    section = _checked(spark, tmp_path, h, LOCK_2S)

    g = section["groups"][GROUP]
    assert (g["lost"], g["never_delivered"], g["unsettled"]) == (4, 1, 3)
    assert section["anomalies"]["lost"] == 4
    assert _ids(tmp_path, "lost") == sorted(
        [never.msg_id, released.msg_id, held.msg_id, refused.msg_id]
    )
    assert g["left_at_end"] == {"acquired": 1, "available": 2, "unknown": 0}
    assert g["consumers"]["never delivered"]["lost"] == 1
    assert g["consumers"]["c1"]["lost"] == 1 and g["unexpected"] == 1
    assert [len(s["deliveries"]) for s in g["samples"]["lost"]] == [0, 1, 1, 1]
    verdict = judge(Counts.of({}, {"ok": 8}, share_groups=section), "safe")
    assert (verdict.outcome, verdict.matched) == ("loss", False)
    assert "in share group sg" in verdict.reason


@pytest.mark.spark
def test_the_limit_is_judged_by_the_client_s_delivery_count_not_by_acquisitions(
    spark: Any, tmp_path: Path
) -> None:
    """A leader's move forgets an acquisition (KIP-932: the count is not exact), so a record may
    be acquired more than L times within the limit: over_limit and archiving go by the count
    each delivery carried, acquisitions beyond L are information, and where a client gave no
    count the checker says so rather than judge (archiving alone falls back to acquisitions)."""
    h = Planted()
    _quiet(h, 0, 3)
    moved = h.send(5)
    h.acquire("c0", moved, 5.5, 1)  # the leader moved: the acquisition forgotten, count kept
    h.delivered("c1", moved, 6, 1, "release")
    h.delivered("c2", moved, 7, 2, "release")
    h.delivered("c0", moved, 8, 3, "accept")  # a 4th acquisition, at count 3: within the limit
    uncounted = h.send(10)
    for n in range(4):  # a client without counts: delivered a 4th time, not judged
        h.delivered(f"c{n % 3}", uncounted, 10.5 + n, None, "release" if n < 3 else "accept")
    counted_out = h.send(15)
    for n in range(3):  # no counts: its 3rd release archives it, by acquisitions
        h.delivered(f"c{n % 3}", counted_out, 15.5 + n, None, "release")
    archived = h.send(19)
    for n in (1, 2, 3):  # the 3rd release at count 3 archives it
        h.delivered(f"c{n % 3}", archived, 19 + n, n, "release")
    short = h.send(23)
    h.acquire("c0", short, 23.5, 1)  # forgotten too: its 3rd release is at count 2, below 3
    h.delivered("c1", short, 24, 1, "release")
    h.delivered("c2", short, 25, 2, "release")  # available again, and never delivered: lost

    section = _checked(spark, tmp_path, h, LIMIT_3)

    g = section["groups"][GROUP]
    assert section["anomalies"] == dict.fromkeys(ANOMALIES, 0) | {"lost": 1}
    assert _ids(tmp_path, "lost") == [short.msg_id] and g["unsettled"] == 1
    assert g["beyond_limit"] == {"acquisitions": 2, "records": 2, "uncounted": 1}
    assert g["archived_by"] == {"delivery_count": 1, "acquisitions": 1}
    assert (g["fates"]["accepted"], g["fates"]["archived"]) == (5, 2)
    lines = summary_lines(section)
    said = "beyond the limit: 2 acquisitions of 2 records (1 without a delivery count, not judged)"
    assert any(said in line for line in lines), lines
    assert any("archived by count 1, by acquisitions (no count) 1" in line for line in lines)


@pytest.mark.spark
def test_delivery_counts_going_backwards_are_reported_not_judged(
    spark: Any, tmp_path: Path
) -> None:
    h = Planted()
    r = h.send(1)
    h.delivered("c0", r, 1.5, 3, "release")
    h.delivered("c1", r, 2.0, 2, "accept")  # below the count the first delivery had
    same = h.send(3)
    h.delivered("c0", same, 3.5, 1, "release")
    h.delivered("c1", same, 4.0, 1, "accept")  # the same count again: imprecise, not backwards

    section = _checked(spark, tmp_path, h, ShareSetup())

    assert section["anomalies"] == dict.fromkeys(ANOMALIES, 0) | {"backwards": 1}
    assert _ids(tmp_path, "backwards") == [_record_id(r)]
    assert judge(Counts.of({}, {"ok": 2}, share_groups=section), "safe").matched


# ---- the plain parts -----------------------------------------------------------------------------


def test_the_settings_come_from_the_group_then_the_brokers_then_kafka() -> None:
    declared = {
        "a": {"topics": ["t"], "delivery_count_limit": 3},
        "b": {"topics": ["u", "v"], "config": {"share.record.lock.duration.ms": "5000"}},
        "c": {"topics": ["t"]},
    }
    broker = {"group.share.delivery.count.limit": "7"}
    setup = ShareSetup.of(declared, broker)
    assert setup.settings("a") == ShareSettings(3, 30_000, "the manifest")
    assert setup.settings("b") == ShareSettings(7, 5000, "the manifest")
    assert setup.settings("c") == ShareSettings(7, 30_000, "the brokers' settings")
    assert setup.settings("other") == setup.default
    assert setup.topics() == [("a", "t"), ("b", "u"), ("b", "v"), ("c", "t")]
    assert ShareSetup.of(None).default == ShareSettings(5, 30_000, "Kafka's defaults")
    assert (
        ShareSetup.of({"x": {"delivery_count_limit": "many"}}).settings("x").delivery_count_limit
        == 5
    )


def _rows(**parts: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    return {
        k: parts.get(k, [])
        for k in (
            "groups",
            "fates",
            "acks",
            "consumers",
            "partitions",
            "placed",
            "samples",
            "unmatched",
            "unplaced",
        )
    }


def test_the_section_is_assembled_from_the_counted_rows() -> None:
    """share_section's arithmetic on rows as Spark would return them: lost is never delivered
    plus unsettled, each anomaly by step, consumer and partition, and a declared group that got
    nothing still has its row."""
    counted = {
        "group": "g",
        "records": 10,
        "acquisitions": 14,
        "duplicated": 1,
        "over_limit": 0,
        "rejected_redelivered": 0,
        "backwards": 0,
        "redelivered_released": 2,
        "redelivered_lock_expired": 1,
        "redelivered_dropped": 1,
        "redelivered_after_unknown": 0,
        "left_acquired": 1,
        "left_available": 0,
        "left_unknown": 0,
        "unexpected": 0,
        "topics": ["t"],
    }
    placed = [
        {
            "group": "g",
            "anomaly": "lost",
            "step": "before any fault",
            "consumer": "never delivered",
            "stream": "t",
            "partition": 0,
            "count": 2,
        },
        {
            "group": "g",
            "anomaly": "lost",
            "step": "2. kill kill k1 at +9.0 s",
            "consumer": "c1",
            "stream": "t",
            "partition": 1,
            "count": 1,
        },
        {
            "group": "g",
            "anomaly": "duplicated",
            "step": "2. kill kill k1 at +9.0 s",
            "consumer": "c1",
            "stream": "t",
            "partition": 1,
            "count": 1,
        },
    ]
    rows = _rows(
        groups=[counted],
        fates=[
            {"group": "g", "fate": "accepted", "count": 9},
            {"group": "g", "fate": "never_delivered", "count": 2},
            {"group": "g", "fate": "unsettled", "count": 1},
        ],
        acks=[{"group": "g", "outcome": "accept", "status": "ok", "count": 9}],
        consumers=[
            {
                "group": "g",
                "process": "c1",
                "client": "java",
                "acquired": 14,
                "accepted": 9,
                "released": 2,
                "rejected": 0,
                "refused": 0,
                "unknown": 0,
                "unacknowledged": 3,
            }
        ],
        partitions=[
            {"group": "g", "stream": "t", "partition": 1, "records": 6, "acquisitions": 9},
            {"group": "g", "stream": "t", "partition": 0, "records": 4, "acquisitions": 5},
        ],
        placed=placed,
    )
    setup = ShareSetup.of({"g": {"topics": ["t"]}, "idle": {"topics": ["t"]}})
    section = share_section(rows, setup)
    g = section["groups"]["g"]
    assert (g["acked"], g["lost"], g["never_delivered"], g["unsettled"]) == (12, 3, 2, 1)
    assert section["anomalies"] == {
        "lost": 3,
        "duplicated": 1,
        "over_limit": 0,
        "rejected_redelivered": 0,
        "backwards": 0,
    }
    assert g["by_step"]["lost"] == {"before any fault": 2, "2. kill kill k1 at +9.0 s": 1}
    assert g["consumers"]["c1"]["lost"] == 1 and g["consumers"]["never delivered"]["lost"] == 2
    assert list(g["partitions"]) == ["t/0", "t/1"] and g["partitions"]["t/1"]["duplicated"] == 1
    assert g["acks"]["accept"] == {"ok": 9, "fail": 0, "info": 0}
    assert section["groups"]["idle"]["acked"] == 0 and section["groups"]["idle"]["topics"] == ["t"]
    assert section["lock_expired_redelivered"] == 1 and section["released_redelivered"] == 2
    lines = summary_lines(section, 0.0)
    assert any("lost 3 (never delivered 2, unsettled 1)" in line for line in lines)
    assert any(line.startswith("share duplicated in g by fault step") for line in lines)


def test_the_verdict_counts_a_share_group_s_loss_and_its_anomalies() -> None:
    none = {"groups": {"g": {"lost": 0}}, "anomalies": dict.fromkeys(ANOMALIES, 0)}
    assert judge(Counts.of({}, {"ok": 5}, share_groups=none), "safe").matched
    lost = {"groups": {"g": {"lost": 2}}, "anomalies": dict.fromkeys(ANOMALIES, 0) | {"lost": 2}}
    j = judge(Counts.of({}, {"ok": 5}, share_groups=lost), "loss")
    assert j.matched and "2 acknowledged messages lost in share group g" in j.reason
    verdict = {
        "outcome": "loss",
        "matched": False,
        "expect": "safe",
        "groups": {},
        "share_groups": lost,
    }
    assert claim_word(verdict) == "refuted"
    over = {
        "groups": {"g": {"lost": 0}},
        "anomalies": dict.fromkeys(ANOMALIES, 0) | {"over_limit": 2, "backwards": 4},
    }
    assert (
        broken_words(over)
        == "share groups broken: 2 records delivered past the delivery count limit"
    )
    j = judge(Counts.of({}, {"ok": 5}, share_groups=over), None)
    assert not j.matched and "2 share records delivered past the delivery count limit" in j.reason
    assert "backwards" not in j.reason  # reported, never judged


def test_a_story_says_each_delivery_as_its_consumer_saw_it() -> None:
    sample = {
        "id": "t/0@5 P:6",
        "at": 10.0,
        "deliveries": [
            {
                "record": "t/0@5 P:6",
                "n": 1,
                "consumer": "c1",
                "at": 3.25,
                "delivery_count": 1,
                "ack": "accept",
                "status": "ok",
                "error": None,
                "redelivery": None,
            },
            {
                "record": "t/0@5 P:6",
                "n": 2,
                "consumer": "c2",
                "at": 9.0,
                "delivery_count": None,
                "ack": None,
                "status": None,
                "error": None,
                "redelivery": None,
            },
        ],
    }
    assert story(sample, 0.0) == (
        "t/0@5 P:6: 1. c1 +3.2 s (count 1) accept ok; 2. c2 +9.0 s not acknowledged"
    )
    assert story({"id": "P:7", "deliveries": []}) == "P:7: never delivered"


@pytest.mark.spark
def test_a_checked_run_judges_its_share_groups_by_the_manifest_s_settings(
    spark: Any, tmp_path: Path
) -> None:
    """Through `harness check`'s path: the manifest's share group and settings, the verdict's
    section and judgement, the coverage's situation, the refused acknowledgement among the
    clients' errors, the summary and the ids."""
    from checkers.run import check_run

    h = Planted()
    _quiet(h, 0, 4)
    h.step(5.0, "pause-client", {"op": "pause-client", "clients": ["c0"]})
    expired = h.send(6)
    h.acquire("c0", expired, 6.5, 1)
    h.acquire("c1", expired, 9.0, 2)
    h.ack("c0", expired, 9.2, "accept", "fail", "InvalidRecordStateException: lock expired")
    h.ack("c1", expired, 9.3, "accept")
    past = h.send(10)
    for n in range(1, 5):  # a limit of 3: the 4th delivery, at count 4, is past it
        h.delivered("c2", past, 10 + n, n, "release" if n < 4 else "accept")
    run = tmp_path / "run"
    h.write(run / "history")
    manifest = {
        "expect": "safe",
        "share_groups": {
            GROUP: {"topics": [TOPIC], "delivery_count_limit": 3, "lock_duration_ms": 2000}
        },
        "scenario_spec": {"requires": ["share-lock-expired-redelivered"]},
    }
    (run / "manifest.json").write_text(json.dumps(manifest))

    verdict = check_run(run, spark=spark)

    section = verdict["share_groups"]
    assert section["anomalies"]["over_limit"] == 1 and section["lock_expired_redelivered"] == 1
    assert (verdict["outcome"], verdict["matched"]) == ("anomalies", False)
    assert verdict["coverage"]["situations"]["share-lock-expired-redelivered"] == 1
    assert verdict["coverage"]["missing"] == []
    assert verdict["errors"]["share-ack"] == {"InvalidRecordStateException": 1}
    summary = (run / "summary.txt").read_text()
    assert (
        "share group sg on t (delivery count limit 3, lock 2000 ms, from the manifest)" in summary
    )
    assert "share over_limit in sg by fault step: 1. pause-client pause-client c0" in summary
    assert (run / "ids" / GROUP / "share_over_limit.txt").read_text() == f"{_record_id(past)}\n"
