"""The transactional workload's schema, settings and coordinator targets (no cluster)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from compose.releases import setup_releases
from contract.history import INIT_TXN, PLANNED_ABORT, HistoryWriter
from contract.manifest import Manifest
from systems.kafka.scenario import KafkaScenario
from systems.kafka.targets import (
    Metadata,
    PartitionState,
    TargetError,
    coordinator_of,
    coordinator_partition,
    java_string_hash,
)
from systems.registry import parse_scenario
from systems.scenario import ScenarioError
from tests.helpers import ROOT
from workloads.kafka import java_client, transactions
from workloads.kafka.base import ProducerConfig, wait_to_start
from workloads.kafka.transactions import (
    TransactionalProducer,
    TransactionConfig,
    _send_error,
    java_properties,
    run_java_producer,
    transactional_settings,
)


def scenario(producer: str, nemesis: str = "[]", readers: str = "[{id: r}]") -> str:
    return f"""
id: t
expect: safe
cluster: {{system: kafka, brokers: 3}}
workload: {{producers: [{producer}], readers: {readers}}}
nemesis: {nemesis}
"""


@pytest.mark.parametrize(
    ("producer", "line"),
    [
        ("{id: P, count: 1, acks: '1', transaction: {}}", "needs acks: all"),
        ("{id: P, count: 1, enable_idempotence: false, transaction: {}}", "is idempotent"),
        ("{id: P, count: 1, max_in_flight: 6, transaction: {}}", "max_in_flight of 5"),
        (
            "{id: P, count: 1, delivery_timeout_ms: 90000, transaction: {timeout_ms: 60000}}",
            "outlives the transaction",
        ),
        ("{id: P, count: 1, transaction: {abort_ratio: 1.5}}", "less than or equal to 1"),
        (
            "{id: P, count: 1, transaction: {}, config: {transaction.timeout.ms: 5}}",
            "transaction.timeout.ms",
        ),
    ],
)
def test_a_transactional_producer_refuses_what_transactions_cannot_have(
    producer: str, line: str
) -> None:
    with pytest.raises(ScenarioError, match=line):
        parse_scenario(scenario(producer))


def test_coordinator_targets_need_the_client_they_coordinate() -> None:
    step = "[{at: 1, op: kill, target: transaction-coordinator}]"
    with pytest.raises(
        ScenarioError, match="transaction-coordinator needs a transactional producer"
    ):
        parse_scenario(scenario("{id: P, count: 1}", step))
    step = "[{at: 1, op: isolate, target: group-coordinator}]"
    with pytest.raises(ScenarioError, match="group-coordinator needs a reader in mode group"):
        parse_scenario(scenario("{id: P, count: 1}", step))
    ok = parse_scenario(
        scenario(
            "{id: P, count: 1, transaction: {transactional_id: shared}}",
            step,
            "[{id: g, mode: group}]",
        )
    )
    assert isinstance(ok, KafkaScenario)
    assert ok.workload.coordinated() == {
        "transaction-coordinator": "shared",
        "group-coordinator": "g",
    }


def test_transactional_settings_bound_a_record_by_its_transaction() -> None:
    cfg = ProducerConfig("P1", "t", 10, deadline=0, delivery_timeout_ms=30000)
    settings = transactional_settings(cfg, TransactionConfig(timeout_ms=10000), "b:9092")
    assert settings["transactional.id"] == "P1"
    assert settings["transaction.timeout.ms"] == 10000
    assert settings["delivery.timeout.ms"] == 10000
    assert settings["enable.idempotence"] is True
    shared = transactional_settings(cfg, TransactionConfig(transactional_id="x"), "b:9092")
    assert shared["transactional.id"] == "x" and shared["delivery.timeout.ms"] == 30000


def test_a_records_error_says_why_it_is_not_committed() -> None:
    assert _send_error("ok", False, "x", "y") is None
    assert _send_error("fail", True, "_PURGE_QUEUE: purged", None) == PLANNED_ABORT
    assert _send_error("fail", False, "_MSG_TIMED_OUT: t", "abort") == "_MSG_TIMED_OUT: t"
    assert _send_error("info", False, None, "_FATAL: fenced") == "_FATAL: fenced"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0), ("P1", 2529), ("hello world", 1794106052), ("polygenelubricants", -2147483648)],
)
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_coordinator_partition_is_kafkas() -> None:
    # Integer.MIN_VALUE has no absolute value: Kafka places it on partition 0.
    assert coordinator_partition("polygenelubricants", 50) == 0
    assert coordinator_partition("P1", 50) == 2529 % 50
    assert coordinator_partition("hello world", 7) == 1794106052 % 7


def test_the_coordinator_is_the_leader_of_the_ids_partition() -> None:
    state = tuple(
        PartitionState(
            "__transaction_state", p, leader=1 + p % 3, replicas=(1, 2, 3), isr=(1, 2, 3)
        )
        for p in range(50)
    )
    md = Metadata({1: "kafka1", 2: "kafka2", 3: "kafka3"}, None, state)
    partition = coordinator_partition("P1", 50)
    assert coordinator_of(md, "transaction-coordinator", "P1") == [f"kafka{1 + partition % 3}"]
    with pytest.raises(TargetError, match="__consumer_offsets does not exist yet"):
        coordinator_of(md, "group-coordinator", "g")
    leaderless = Metadata(
        md.brokers,
        None,
        tuple(PartitionState(s.topic, s.partition, -1, s.replicas, ()) for s in state),
    )
    with pytest.raises(TargetError, match="has no leader"):
        coordinator_of(leaderless, "transaction-coordinator", "P1")


@pytest.mark.parametrize(
    "name",
    [
        "T2",
        "T3",
        "T3-zombie",
        "T3-zombie-java",
        "T4",
        "T4-java",
        "T4-java-tv1",
        "chaos/kafka-txn-isolation",
        "kafka-mock-transactions",
    ],
)
def test_the_transactional_scenarios_validate(name: str) -> None:
    parse_scenario((ROOT / f"scenarios/{name}.yaml").read_text())


def test_the_java_client_takes_the_same_knobs_in_its_own_names() -> None:
    cfg = ProducerConfig("P1", "t", 10, deadline=0, request_timeout_ms=3000, linger_ms=7)
    txn = TransactionConfig(timeout_ms=15000, client="java", java_version="4.4.0")
    props = java_properties(cfg, txn, "b:9092")
    assert props["bootstrap.servers"] == "b:9092"
    assert props["transactional.id"] == "P1" and props["enable.idempotence"] == "true"
    assert props["delivery.timeout.ms"] == "15000" and props["request.timeout.ms"] == "3000"
    assert props["linger.ms"] == "7" and props["acks"] == "all"
    assert "log_level" not in props and "debug" not in props


@pytest.mark.parametrize(
    ("producer", "line"),
    [
        (
            "{id: P, count: 1, transaction: {client: java, timeout_ms: 10000}}",
            "at least linger_ms \\+ request_timeout_ms",
        ),
        (
            "{id: P, count: 1, request_timeout_ms: 3000, config: {linger.ms: 5},"
            " transaction: {client: java}}",
            "the java client takes none",
        ),
    ],
)
def test_the_java_client_refuses_what_it_cannot_take(producer: str, line: str) -> None:
    with pytest.raises(ScenarioError, match=line):
        parse_scenario(scenario(producer))


def test_the_mock_tier_has_no_java_client() -> None:
    text = """
id: m
expect: safe
cluster: {system: kafka-mock}
workload:
  producers: [{id: P, count: 1, request_timeout_ms: 3000, transaction: {client: java}}]
  readers: [{id: r}]
"""
    with pytest.raises(ScenarioError, match="the java client needs a real cluster"):
        parse_scenario(text)


def test_the_java_client_builds_for_each_release_setup_builds() -> None:
    """make setup builds it; here it is found built (or built again, from Maven's cache)."""
    for release in setup_releases("kafka"):
        d = java_client.ensure(release)
        assert (d / "classes" / f"{java_client.MAIN_CLASS}.class").exists()
        assert any(p.name == f"kafka-clients-{release}.jar" for p in (d / "lib").iterdir())


def test_transaction_version_is_a_kafka_4_feature() -> None:
    s = parse_scenario((ROOT / "scenarios/T4-java-tv1.yaml").read_text())
    assert isinstance(s, KafkaScenario) and s.cluster.transaction_version == 1
    assert s.line_refusal("4.4") is None
    assert (
        s.line_refusal("3.9") == "T4-java-tv1 sets transaction_version, a feature of Kafka 4.0 on"
    )


def test_a_call_blocked_past_its_timeout_is_hung_and_left_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # librdkafka's send_offsets_to_transaction can block for ever once the group coordinator
    # died: the copier must notice, give the instance up and go on, not block with it.
    monkeypatch.setattr(transactions, "HUNG_GRACE", 0.2)
    release = threading.Event()
    started = time.monotonic()
    with pytest.raises(transactions.Hung, match="CLIENT_HUNG"):
        transactions.within(lambda timeout: release.wait(30), 0.1)
    assert time.monotonic() - started < 5
    release.set()


def test_a_call_within_its_time_returns_or_raises_its_own_error() -> None:
    transactions.within(lambda timeout: None, 1.0)
    with pytest.raises(KafkaException):
        transactions.within(lambda timeout: (_ for _ in ()).throw(KafkaException()), 1.0)


# ---- a producer that starts late, and the marks of each instance's init ------------------------


def test_start_at_is_a_producers_and_within_the_workload() -> None:
    late = parse_scenario(scenario("{id: P, count: 1, start_at: 25, transaction: {}}"))
    assert isinstance(late, KafkaScenario) and late.workload.producers[0].start_at == 25
    with pytest.raises(
        ScenarioError,
        match="workload.producers.0: start_at 600 is not before the workload ends "
        "\\(timeouts.workload 600\\)",
    ):
        parse_scenario(scenario("{id: P, count: 1, start_at: 600}"))
    mock = """
id: m
expect: safe
cluster: {system: kafka-mock}
workload: {producers: [{id: P, count: 1, start_at: 9}], readers: [{id: r}]}
timeouts: {workload: 5}
"""
    with pytest.raises(ScenarioError, match="start_at 9 is not before the workload ends"):
        parse_scenario(mock)


def test_a_late_producer_is_told_when_its_first_transaction_may_start() -> None:
    from systems.kafka.clients_run import KafkaClientsRun

    class Recorded(KafkaClientsRun):
        bootstrap_servers = "b:9092"  # type: ignore[assignment]

    run = object.__new__(Recorded)
    run.scenario = parse_scenario((ROOT / "scenarios/T3-zombie.yaml").read_text())
    run.manifest = Manifest()
    spawned: dict[str, dict[str, Any]] = {}
    run._spawn = lambda role, name, cfg: spawned.__setitem__(name, cfg)  # type: ignore[method-assign]
    run._start_clients(1000.0)
    assert (spawned["P1"]["not_before"], spawned["P2"]["not_before"]) == (1000.0, 1025.0)
    data = {k: v for k, v in spawned["P2"].items() if k not in ("bootstrap_servers", "transaction")}
    cfg = ProducerConfig(process="P2", **data)  # the client reads its config as it was written
    assert cfg.not_before == 1025.0 and cfg.deadline == 1060.0
    assert "start_at" not in spawned["P2"]
    # The settings shown in the manifest are Kafka's only: start_at is no client property.
    assert "start_at" not in json.dumps(run.client_settings())


def test_waiting_to_start_ends_at_the_start_or_the_deadline() -> None:
    now = time.time()
    started = time.monotonic()
    wait_to_start(ProducerConfig("P", "t", 1, deadline=now + 60, not_before=now + 0.3))
    assert 0.25 <= time.monotonic() - started < 2
    started = time.monotonic()
    wait_to_start(ProducerConfig("P", "t", 1, deadline=now, not_before=now + 60))
    assert time.monotonic() - started < 0.5


class FakeInstance:
    """A producer instance's init_transactions: returns, or raises `error`."""

    def __init__(self, error: KafkaError | None = None) -> None:
        self.error = error

    def init_transactions(self, timeout: float) -> None:
        if self.error is not None:
            raise KafkaException(self.error)


def _marks(history: Path) -> list[tuple[str, Any, Any]]:
    rows = [json.loads(line) for line in history.read_text().splitlines()]
    return [(r["type"], r["value"], r["error"]) for r in rows if r["f"] == INIT_TXN]


def test_each_instances_init_is_marked_and_a_late_one_inits_only_at_its_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = time.time()
    cfg = ProducerConfig("P2", "t", 10, deadline=now + 0.6, not_before=now + 0.3)
    txn = TransactionConfig(transactional_id="shared")
    inits: list[float] = []

    def start(self: TransactionalProducer) -> None:
        inits.append(time.time())
        fenced = KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True)
        for instance in (FakeInstance(), FakeInstance(fenced)):
            try:
                self.initialise(instance, self.transactional_id)  # type: ignore[arg-type]
            except transactions.Fatal:
                pass
        raise transactions.Fatal("the test's instance goes no further")

    monkeypatch.setattr(TransactionalProducer, "start", start)
    with HistoryWriter(tmp_path, "P2", "kafka") as history:
        TransactionalProducer(cfg, txn, "b:9092", history).run()
    assert inits and inits[0] >= cfg.not_before
    mark = {"transactional_id": "shared"}
    assert _marks(tmp_path / "P2.jsonl")[:4] == [
        ("invoke", mark, None),
        ("ok", mark, None),
        ("invoke", mark, None),
        ("info", mark, "_FENCED: fenced by a newer instance"),
    ]


def test_the_java_client_is_told_when_to_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(java_client, "ensure", lambda version: tmp_path)
    monkeypatch.setattr(java_client, "classpath", lambda version: "cp")
    argv: list[str] = []

    def run(args: list[str], **kw: Any) -> Any:
        argv.extend(args)
        return type("Done", (), {"returncode": 0})()

    monkeypatch.setattr(transactions.subprocess, "run", run)
    cfg = ProducerConfig("P2", "t", 10, deadline=time.time() + 5, not_before=1025.5)
    txn = TransactionConfig(client="java", java_version="4.4.0")
    assert run_java_producer(cfg, txn, "b:9092", tmp_path / "P2.jsonl", tmp_path) == 0
    # TransactionalProducer.java's arguments, in its usage's order: NOT_BEFORE last.
    assert argv[:4] == ["java", "-cp", "cp", java_client.MAIN_CLASS]
    assert len(argv[4:]) == 11 and argv[-1] == "1025.5"


class FakeCommit:
    """A producer instance's commit: returns, or raises `error`; its abort returns."""

    def __init__(self, error: KafkaError | None = None) -> None:
        self.error = error
        self.aborted = False

    def commit_transaction(self, timeout: float) -> None:
        if self.error is not None:
            raise KafkaException(self.error)

    def abort_transaction(self, timeout: float) -> None:
        self.aborted = True

    def purge(self) -> None:
        pass

    def flush(self, timeout: float) -> int:
        return 0


@pytest.mark.parametrize(
    ("error", "outcome", "aborted"),
    [
        (None, ("ok", None, False), False),
        (
            KafkaError(KafkaError._STATE, "a record not delivered", txn_requires_abort=True),
            ("fail", "_STATE: a record not delivered", False),
            True,
        ),
        (
            KafkaError(KafkaError._FENCED, "fenced", fatal=True),
            ("info", "_FENCED: fenced", False),
            False,
        ),
    ],
)
def test_a_commit_is_marked_then_ok_aborted_when_refused_or_unknown_when_the_instance_is_lost(
    tmp_path: Path, error: KafkaError | None, outcome: tuple[str, Any, bool], aborted: bool
) -> None:
    instance = transactions.OneInstance()
    producer = FakeCommit(error)
    instance.producer = producer  # type: ignore[assignment]
    instance.deadline = time.time() + 5
    instance.cfg = ProducerConfig("P", "t", 1, deadline=instance.deadline)
    with HistoryWriter(tmp_path, "P", "kafka") as instance.history:
        assert instance.commit("P-1") == outcome
    assert producer.aborted is aborted
    assert (instance.producer is None) is (outcome[0] == "info")
    marks = [json.loads(line) for line in (tmp_path / "P.jsonl").read_text().splitlines()]
    assert [(m["type"], m["value"]) for m in marks] == [("info", {"txn": "P-1", "commit": True})]
