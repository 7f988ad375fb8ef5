"""The brokers' error lines counted by template, against the allow-list of the benign ones."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from checkers.broker_errors import (
    ALLOW_LIST,
    AllowListError,
    broker_errors,
    counted,
    kafka_entries,
    rabbitmq_entries,
    read_allow_list,
    summary_lines,
    template_of,
)
from contract.manifest import Manifest

pytestmark = pytest.mark.unit

# As `docker logs --timestamps` saves a Kafka node's log (3.9.2, a run under faults).
KAFKA_LOG = """\
2026-11-29T05:53:54.719349603Z [2026-11-29 05:53:54,718] INFO Registered signal handlers \
(org.apache.kafka.common.utils.LoggingSignalHandler)
2026-11-29T05:53:59.213163640Z 	advertised.listeners = INTERNAL://kafka1:9092
2026-11-29T05:54:01.100000000Z [2026-11-29 05:54:01,100] WARN [RaftManager id=3] Connection to \
node 1 (kafka1/172.29.57.21:9093) could not be established. (org.apache.kafka.clients.NetworkClient)
2026-11-29T05:54:02.000000000Z [2026-11-29 05:54:02,000] ERROR [ReplicaManager broker=1] Error \
processing append operation on partition jepsen-0 (kafka.server.ReplicaManager)
2026-11-29T05:54:02.000100000Z org.apache.kafka.common.errors.NotEnoughReplicasException: The size \
of the current ISR Set(1) is insufficient to satisfy the min.isr requirement of 2 for partition \
jepsen-0
2026-11-29T05:54:03.000000000Z [2026-11-29 05:54:03,000] ERROR [KafkaApi-1] Unexpected error \
handling request from kafka2/172.29.57.22:41234 for topicId=AbCdEfGhIjKlMn0pQrStUv \
(kafka.server.KafkaApis)
2026-11-29T05:54:03.000100000Z java.lang.IllegalStateException: offset 17 out of range
2026-11-29T05:54:03.000200000Z 	at kafka.log.UnifiedLog.read(UnifiedLog.scala:1234)
2026-11-29T05:54:03.000300000Z 	at kafka.server.KafkaApis.handle(KafkaApis.scala:99)
2026-11-29T05:54:03.000400000Z Caused by: java.io.IOException: Input/output error
2026-11-29T05:54:03.000500000Z 	... 12 more
2026-11-29T05:54:04.000000000Z [2026-11-29 05:54:04,000] INFO [ReplicaManager broker=1] fine \
(kafka.server.ReplicaManager)
"""
# The same error on another node, with other numbers, addresses and ids.
KAFKA_LOG_2 = """\
2026-11-29T05:54:09.500000000Z [2026-11-29 05:54:09,500] ERROR [KafkaApi-3] Unexpected error \
handling request from kafka1/172.29.57.21:50001 for topicId=ZyXwVuTs9rQpOnMlKjIh_g \
(kafka.server.KafkaApis)
2026-11-29T05:54:09.500100000Z java.lang.IllegalStateException: offset 4242 out of range
2026-11-29T05:54:09.500200000Z 	at kafka.log.UnifiedLog.read(UnifiedLog.scala:1234)
2026-11-29T05:54:10.000000000Z [2026-11-29 05:54:10,000] FATAL [KafkaServer id=3] Fatal error \
during startup. Prepare to shutdown (kafka.server.KafkaServer)
"""

# RabbitMQ 3.9+: each line of a multi-line message written with the same prefix.
RABBIT_LOG = """\
2026-11-29T05:10:00.000000001Z 2026-11-29 05:10:00.123456+00:00 [info] <0.222.0> Server startup \
complete
2026-11-29T05:10:01.000000001Z 2026-11-29 05:10:01.000001+00:00 [error] <0.1395.0>   crasher:
2026-11-29T05:10:01.000000002Z 2026-11-29 05:10:01.000001+00:00 [error] <0.1395.0>     initial \
call: rabbit_amqqueue_process:init/1
2026-11-29T05:10:01.000000003Z 2026-11-29 05:10:01.000001+00:00 [error] <0.1395.0>     pid: \
<0.1395.0>
2026-11-29T05:10:01.000000004Z 2026-11-29 05:10:01.000001+00:00 [error] <0.1395.0>     \
exception exit: {badmatch,{error,not_found}}
2026-11-29T05:10:01.000000005Z 2026-11-29 05:10:01.000001+00:00 [error] <0.1395.0>       in \
function  rabbit_amqqueue_process:init_it2/3
2026-11-29T05:10:02.000000001Z 2026-11-29 05:10:02.000002+00:00 [warning] <0.300.0> Mirrored \
queue 'jepsen' in vhost '/': Stopping all nodes on master shutdown
2026-11-29T05:10:03.000000001Z 2026-11-29 05:10:03.000003+00:00 [error] <0.2001.0> ** Node \
rabbit@rabbit2 not responding **
2026-11-29T05:10:03.000000002Z 2026-11-29 05:10:03.000003+00:00 [error] <0.2001.0> ** Removing \
(timedout) connection **
2026-11-29T05:10:04.000000001Z 2026-11-29 05:10:04.000004+00:00 [error] <0.2100.0> ** Generic \
server <0.2100.0> terminating
2026-11-29T05:10:04.000000002Z 2026-11-29 05:10:04.000004+00:00 [error] <0.2100.0> ** Last \
message in was {'$gen_cast',go}
2026-11-29T05:10:04.000000003Z 2026-11-29 05:10:04.000004+00:00 [error] <0.2100.0> ** Reason \
for termination ==
2026-11-29T05:10:04.000000004Z 2026-11-29 05:10:04.000004+00:00 [error] <0.2100.0> ** \
{timeout,{gen_server,call,[<0.99.0>,stop]}}
2026-11-29T05:10:05.000000001Z 2026-11-29 05:10:05.000005+00:00 [error] <0.3000.0> closing AMQP \
connection <0.3000.0> (172.29.57.1:53952 -> 172.29.57.22:5672):
2026-11-29T05:10:05.000000002Z 2026-11-29 05:10:05.000005+00:00 [error] <0.3000.0> missed \
heartbeats from client, timeout: 60s
"""


def kafka(version: str = "3.9.2", topology: list[str] | None = None) -> Manifest:
    nodes = [{"name": n} for n in topology] if topology else None
    return Manifest(
        system="kafka",
        images={"kafka": {"version": version}},
        topology={"nodes": nodes} if nodes else None,
    )


def logs_dir(tmp_path: Path, files: dict[str, str]) -> Path:
    logs = tmp_path / "logs"
    logs.mkdir(parents=True)
    for name, text in files.items():
        (logs / f"{name}.log").write_text(text)
    return logs


def test_repeats_differing_in_numbers_nodes_and_ids_are_one_template(tmp_path: Path) -> None:
    logs = logs_dir(tmp_path, {"kafka1": KAFKA_LOG, "kafka3": KAFKA_LOG_2})
    section = broker_errors(logs, kafka())
    assert section is not None
    by_template = {t["template"]: t for t in section["templates"]}
    api = by_template[
        "ERROR [KafkaApi-<n>] Unexpected error handling request from <node>/<addr> for "
        "topicId=<id> (kafka.server.KafkaApis) | java.lang.IllegalStateException"
    ]
    assert api["count"] == 2 and api["nodes"] == ["kafka1", "kafka3"]
    # The earliest of them, in Docker's UTC time, with its own words.
    assert api["first"] == datetime(2026, 11, 29, 5, 54, 3, tzinfo=UTC).timestamp()
    assert "kafka2/172.29.57.22:41234" in api["sample"]
    assert section["lines"] == 4  # INFO, WARN and a config listing are not errors
    assert section["unexplained"] == 3  # the append refusal is benign under a fault
    assert [t["allowed"] for t in section["templates"]] == [False, False, True]
    assert section["release_line"] == "3.9" and section["logs"] == ["kafka1", "kafka3"]


def test_a_stack_trace_is_one_entry_with_its_exception_and_root_cause() -> None:
    entries = list(kafka_entries("kafka1", KAFKA_LOG))
    assert [e.level for e in entries] == ["ERROR", "ERROR"]
    section = counted(entries, [])
    api = next(t for t in section["templates"] if "KafkaApi" in t["template"])
    assert api["count"] == 1
    assert api["sample"].splitlines() == [
        "[KafkaApi-1] Unexpected error handling request from kafka2/172.29.57.22:41234 for "
        "topicId=AbCdEfGhIjKlMn0pQrStUv (kafka.server.KafkaApis)",
        "java.lang.IllegalStateException: offset 17 out of range",
        "Caused by: java.io.IOException: Input/output error",
    ]


def test_the_same_words_with_another_exception_are_another_template() -> None:
    other = KAFKA_LOG.replace("NotEnoughReplicasException", "CorruptRecordException")
    templates = {template_of(e) for e in kafka_entries("kafka1", KAFKA_LOG + other)}
    assert len(templates) == 3
    allowed = read_allow_list("kafka", "3.9.2")
    corrupt = next(t for t in templates if "CorruptRecordException" in t)
    assert not any(a.covers(corrupt) for a in allowed)


def test_rabbitmq_crash_reports_and_multi_line_errors_are_one_entry_each() -> None:
    entries = list(rabbitmq_entries("rabbit1", RABBIT_LOG))
    templates = [template_of(e) for e in entries]
    assert templates == [
        "ERROR crasher: | initial call: rabbit_amqqueue_process:init/<n> | exception exit: "
        "{badmatch,{error,not_found}}",
        "ERROR ** Node rabbit@<node> not responding **",
        "ERROR ** Generic server <pid> terminating | reason: ** {timeout,{gen_server,call,[<pid>,"
        "stop]}}",
        "ERROR closing AMQP connection <pid> (<addr> -> <addr>): | missed heartbeats from client, "
        "timeout: <n>s",
    ]
    assert entries[0].at == datetime(2026, 11, 29, 5, 10, 1, 1, tzinfo=UTC).timestamp()
    section = counted(entries, read_allow_list("rabbitmq", "3.10.8"))
    assert {t["template"][:20]: t["allowed"] for t in section["templates"]} == {
        "ERROR crasher: | ini": False,
        "ERROR ** Generic ser": False,
        "ERROR ** Node rabbit": True,
        "ERROR closing AMQP c": True,
    }
    assert section["unexplained"] == 2


def test_indented_continuation_lines_without_a_prefix_belong_to_their_entry() -> None:
    log = (
        "2026-11-29 05:10:01.000001+00:00 [error] <0.1395.0> Error on AMQP connection:\n"
        "    {inet_error,etimedout}\n"
        "2026-11-29 05:10:02.000001+00:00 [critical] <0.1396.0> Mnesia is overloaded\n"
    )
    entries = list(rabbitmq_entries("rabbit2", log))
    assert [(e.level, e.rest) for e in entries] == [
        ("error", ["{inet_error,etimedout}"]),
        ("critical", []),
    ]
    assert template_of(entries[0]) == "ERROR Error on AMQP connection: | {inet_error,etimedout}"


ALLOW = """
kafka:
  "*":
    - template: "FATAL [KafkaServer id=<n>] Fatal error during startup. Prepare to shutdown \
(kafka.server.KafkaServer)"
      why: every release
  "3.9":
    - match: 'Unexpected error handling request'
      why: the 3.9 line only
  "4.1.0":
    - match: 'Error processing append'
      why: one release only
rabbitmq:
  "*":
    - match: 'crasher'
      why: not Kafka's
"""


@pytest.mark.parametrize(
    ("version", "allowed"),
    [
        ("3.9.2", {"every release", "the 3.9 line only"}),
        ("4.1.0", {"every release", "one release only"}),
        ("4.1.2", {"every release"}),
        (None, {"every release"}),
    ],
)
def test_the_allow_list_applies_per_release_line(
    tmp_path: Path, version: str | None, allowed: set[str]
) -> None:
    path = tmp_path / "allow.yaml"
    path.write_text(ALLOW)
    logs = logs_dir(tmp_path, {"kafka1": KAFKA_LOG, "kafka3": KAFKA_LOG_2})
    manifest = kafka(version or "")
    section = broker_errors(logs, manifest, path)
    assert section is not None
    assert {t["why"] for t in section["templates"] if t["allowed"]} == allowed


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("kafka: [1, 2", "allow.yaml: "),
        ("- a list", "not a mapping of system"),
        ("kafka: {'*': [{'match': 'x'}]}", "kafka: *: entry 1: needs a `why`"),
        ("kafka: {'*': [{'match': 'x', 'template': 'y', 'why': 'z'}]}", "exactly one of"),
        ("kafka: {'*': [{'match': '(', 'why': 'z'}]}", "`match` is not a regex"),
        ("kafka: {'*': {'match': 'x'}}", "kafka: *: not a list of entries"),
    ],
)
def test_a_bad_allow_list_is_one_line_naming_the_entry(
    tmp_path: Path, text: str, said: str
) -> None:
    path = tmp_path / "allow.yaml"
    path.write_text(text)
    with pytest.raises(AllowListError, match=r"allow\.yaml") as e:
        read_allow_list("kafka", "3.9.2", path)
    assert said in str(e.value) and "\n" not in str(e.value)


def test_the_shipped_allow_list_reads_for_every_system_and_release() -> None:
    for system in ("kafka", "rabbitmq"):
        assert read_allow_list(system, "3.9.2", ALLOW_LIST)
        assert all(a.why and " " in a.why for a in read_allow_list(system, None))


def test_only_broker_nodes_are_read_never_a_client_log(tmp_path: Path) -> None:
    client = KAFKA_LOG_2  # a Java client logs in the same log4j layout
    logs = logs_dir(tmp_path, {"kafka1": KAFKA_LOG, "P1": client, "controller1": KAFKA_LOG_2})
    topology = broker_errors(logs, kafka(topology=["kafka1", "kafka2"]))
    assert topology is not None and topology["logs"] == ["kafka1"]
    by_name = broker_errors(logs, kafka())
    assert by_name is not None and by_name["logs"] == ["controller1", "kafka1"]


def test_a_system_without_broker_logs_has_no_section(tmp_path: Path) -> None:
    logs = logs_dir(tmp_path, {"P1": KAFKA_LOG})
    assert broker_errors(logs, Manifest(system="kafka-mock")) is None


def test_the_summary_says_what_is_unexplained_and_nothing_when_all_is_benign(
    tmp_path: Path,
) -> None:
    logs = logs_dir(tmp_path, {"kafka1": KAFKA_LOG, "kafka3": KAFKA_LOG_2})
    section = broker_errors(logs, kafka())
    assert summary_lines(section) == [
        "3 broker error lines of 2 templates not known to be benign: see report"
    ]
    benign = KAFKA_LOG.split("2026-11-29T05:54:03")[0]
    assert summary_lines(broker_errors(logs_dir(tmp_path / "b", {"kafka1": benign}), kafka())) == []
    assert summary_lines(None) == []


def test_a_zookeeper_nodes_errors_are_read_in_its_own_layout(tmp_path: Path) -> None:
    zk = (
        "2026-11-29T05:54:05.000000000Z 2026-11-29 05:54:05,000 [myid:1] INFO  [main] "
        "QuorumPeer: started\n"
        "2026-11-29T05:54:06.000000000Z 2026-11-29 05:54:06,000 [myid:1] ERROR "
        "[QuorumPeer[myid=1](plain=0.0.0.0:2181):Follower@129] Follower: Unexpected exception\n"
        "2026-11-29T05:54:06.000000001Z java.net.SocketTimeoutException: Read timed out\n"
    )
    logs = logs_dir(tmp_path, {"zk1": zk, "kafka1": ""})
    section = broker_errors(logs, kafka(topology=["zk1", "kafka1"]))
    assert section is not None
    assert [(t["template"], t["nodes"]) for t in section["templates"]] == [
        (
            "ERROR [QuorumPeer[myid=<n>](plain=<addr>):Follower@<n>] Follower: Unexpected "
            "exception | java.net.SocketTimeoutException",
            ["zk1"],
        )
    ]
