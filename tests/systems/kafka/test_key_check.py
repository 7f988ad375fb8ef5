"""The check of a scenario's Kafka key and value against its release's own config definitions
(the committed files): the one line a scenario is answered with when it sets one the release
does not take, or one the harness sets itself."""

from __future__ import annotations

import pytest

import systems.kafka.configdefs as configdefs
import systems.kafka.key_check as key_check
from systems.kafka.configdefs import KafkaConfigDefsError, definitions
from systems.kafka.key_check import (
    HARNESS_OWNED_BROKER,
    HARNESS_OWNED_TOPIC,
    check_setting,
    owned_refusal,
)
from workloads.kafka.properties import to_property

RELEASES = ("3.9.2", "4.1.2", "4.4.0")

GOOD_BROKER: dict[str, object] = {
    "num.replica.fetchers": 2,
    "log.retention.ms": "60000",
    "unclean.leader.election.enable": True,
    "auto.leader.rebalance.enable": "False",
    "compression.type": "zstd",
    "log.cleaner.min.cleanable.ratio": 0.3,
    "sasl.enabled.mechanisms": ["PLAIN", "SCRAM-SHA-512"],
    "ssl.client.auth": "required",
    "min.insync.replicas": "+2",
}
GOOD_TOPIC: dict[str, object] = {
    "min.insync.replicas": 2,
    "cleanup.policy": ["delete", "compact"],
    "retention.ms": -1,
    "compression.gzip.level": -1,
    "min.cleanable.dirty.ratio": "0.5",
    "message.timestamp.type": "LogAppendTime",
    "leader.replication.throttled.replicas": "0:1,1:2",
}


@pytest.mark.parametrize("release", RELEASES)
def test_good_keys_and_values_pass_on_each_release(release: str) -> None:
    for key, value in GOOD_BROKER.items():
        assert check_setting("broker", key, value, release, "broker_config") is None, key
    for key, value in GOOD_TOPIC.items():
        assert check_setting("topic", key, value, release, "topic_config") is None, key


@pytest.mark.parametrize("release", RELEASES)
def test_every_key_takes_its_own_default(release: str) -> None:
    for kind in configdefs.KINDS:
        for name, d in definitions(release, kind).items():
            if d.default is not None and owned_refusal(name, kind) is None:
                assert check_setting(kind, name, d.default, release, "x") is None, name


def test_a_typo_is_answered_with_the_key_meant() -> None:
    assert check_setting("broker", "num.replica.fetcher", 2, "4.4.0", "broker_config") == (
        'broker_config: "num.replica.fetcher" is not a Kafka 4.4.0 broker setting '
        "(did you mean num.replica.fetchers?)"
    )
    assert check_setting("topic", "retention.msec", 1, "3.9.2", "topic_config") == (
        'topic_config: "retention.msec" is not a Kafka 3.9.2 topic config '
        "(did you mean retention.ms?)"
    )
    assert check_setting("broker", "no.such.thing", 1, "4.4.0", "broker_config") == (
        'broker_config: "no.such.thing" is not a Kafka 4.4.0 broker setting'
    )


def test_a_key_of_the_other_kind_is_named_as_such() -> None:
    line = check_setting("broker", "retention.ms", 1000, "4.4.0", "broker_config")
    assert line is not None and line.endswith(
        "(a topic config; the brokers' default for it is log.retention.ms)"
    )
    line = check_setting("topic", "log.retention.ms", 1000, "4.4.0", "topic_config")
    assert line is not None and line.endswith(
        "(a broker setting; the topic config is retention.ms)"
    )


@pytest.mark.parametrize(
    ("kind", "key", "value", "takes"),
    [
        ("topic", "min.insync.replicas", "two", "takes an int of at least 1"),
        ("topic", "min.insync.replicas", True, "takes an int of at least 1"),
        ("topic", "min.insync.replicas", 2.0, "takes an int of at least 1"),
        ("broker", "num.replica.alter.log.dirs.threads", 2**31, "takes an int (from -2147483648"),
        ("broker", "log.retention.ms", 2**63, "takes a long (from -9223372036854775808"),
        ("topic", "retention.ms", "1_000", "takes a long of at least -1"),
        ("broker", "unclean.leader.election.enable", "yes", "takes true or false"),
        ("broker", "unclean.leader.election.enable", 1, "takes true or false"),
        ("broker", "log.cleaner.min.cleanable.ratio", "half", "takes a number from 0 to 1"),
        ("broker", "sasl.enabled.mechanisms", 5, "takes a list (a string of comma-separated"),
        ("broker", "sasl.enabled.mechanisms", ["A,B"], "takes a list of strings (without commas"),
        ("broker", "ssl.protocol", ["TLS"], "takes a string"),
        ("broker", "message.max.bytes", "1\n2", "takes an int on one line"),
        ("broker", "remote.log.storage.manager.class.name", " ", "takes a non-empty string"),
    ],
)
def test_a_value_of_the_wrong_type_says_what_the_key_takes(
    kind: configdefs.Kind, key: str, value: object, takes: str
) -> None:
    line = check_setting(kind, key, value, "4.4.0", "cluster.x")
    assert line is not None and line.startswith(f'cluster.x: "{key}" {takes}'), line
    assert line.endswith(f" on Kafka 4.4.0, not {key_check._shown(value)}")
    assert "\n" not in line


def test_a_range_violation_names_the_range() -> None:
    assert check_setting("topic", "min.insync.replicas", 0, "4.4.0", "topic_config") == (
        'topic_config: "min.insync.replicas" takes an int of at least 1 on Kafka 4.4.0, not 0'
    )
    assert check_setting("topic", "min.insync.replicas", "two", "4.4.0", "topic_config") == (
        'topic_config: "min.insync.replicas" takes an int of at least 1 on Kafka 4.4.0, not "two"'
    )
    line = check_setting("broker", "log.cleaner.min.cleanable.ratio", 1.5, "4.1.2", "b")
    assert (
        line
        == 'b: "log.cleaner.min.cleanable.ratio" takes a number from 0 to 1 on Kafka 4.1.2, not 1.5'
    )
    for level, ok in ((-1, True), (1, True), (9, True), (0, False), (10, False)):
        line = check_setting("topic", "compression.gzip.level", level, "4.4.0", "t")
        assert (line is None) == ok, level
    assert line is not None and "takes an int from 1 to 9 or -1" in line


def test_a_range_is_the_releases_own() -> None:
    # 4.x raised the smallest segment from 14 bytes to 1 MiB.
    assert check_setting("broker", "log.segment.bytes", 1000, "3.9.2", "b") is None
    line = check_setting("broker", "log.segment.bytes", 1000, "4.4.0", "b")
    assert (
        line == 'b: "log.segment.bytes" takes an int of at least 1048576 on Kafka 4.4.0, not 1000'
    )


def test_an_enumeration_violation_lists_what_is_taken() -> None:
    line = check_setting("topic", "compression.type", "brotli", "4.4.0", "topic_config")
    assert line == (
        'topic_config: "compression.type" takes one of [uncompressed, zstd, lz4, snappy, gzip, '
        'producer] on Kafka 4.4.0, not "brotli"'
    )
    line = check_setting("topic", "cleanup.policy", ["compact", "remove"], "3.9.2", "t")
    assert line is not None and "takes a list of items from [compact, delete]" in line
    assert check_setting("topic", "cleanup.policy", "compact , delete", "3.9.2", "t") is None
    # Kafka compares these case-insensitively, and says so.
    assert (
        check_setting("broker", "group.consumer.migration.policy", "downgrade", "4.4.0", "b")
        is None
    )
    assert (
        check_setting("broker", "group.consumer.migration.policy", "up", "4.4.0", "b") is not None
    )


def test_only_rules_that_parse_unambiguously_are_enforced() -> None:
    # The versions' validator takes a line alone, which its printed list does not show.
    ibp = definitions("3.9.2", "broker")["inter.broker.protocol.version"]
    assert "3.9" not in ibp.valid.strip("[]").split(", ")
    assert check_setting("broker", "inter.broker.protocol.version", "3.9", "3.9.2", "b") is None
    # Prose in place of a rule.
    assert definitions("3.9.2", "broker")["remote.log.manager.copier.thread.pool.size"].valid
    assert (
        check_setting("broker", "remote.log.manager.copier.thread.pool.size", -1, "3.9.2", "b")
        is None
    )
    assert (
        check_setting("topic", "leader.replication.throttled.replicas", "*", "4.4.0", "t") is None
    )


@pytest.mark.parametrize("release", ["4.1.2", "4.4.0"])
def test_a_key_removed_in_4_says_which_release_had_it(release: str) -> None:
    for key in ("zookeeper.connect", "log.message.format.version", "inter.broker.protocol.version"):
        assert check_setting("broker", key, "x", release, "broker_config") == (
            f'broker_config: "{key}" is not a Kafka {release} broker setting '
            "(a Kafka 3.9.2 setting removed since)"
        )
    line = check_setting("topic", "message.format.version", "3.0", release, "topic_config")
    assert line is not None and line.endswith("(a Kafka 3.9.2 setting removed since)")
    assert check_setting("broker", "log.message.format.version", "3.0", "3.9.2", "b") is None


def test_a_key_newer_than_the_release_names_the_first_that_has_it() -> None:
    assert check_setting("broker", "share.coordinator.threads", 1, "3.9.2", "b") == (
        'b: "share.coordinator.threads" is not a Kafka 3.9.2 broker setting '
        "(a Kafka 4.1.2 setting, not yet in 3.9.2)"
    )
    assert check_setting("broker", "share.coordinator.threads", 1, "4.1.2", "b") is None


def test_harness_owned_keys_are_refused_with_the_reason() -> None:
    assert check_setting("broker", "listeners", "PLAINTEXT://:9092", "4.4.0", "broker_config") == (
        'broker_config: "listeners" is set by the harness (the harness wires the listeners)'
    )
    assert owned_refusal("broker.rack") == "set cluster.racks"
    line = check_setting(
        "broker", "listener.name.internal.ssl.keystore.location", "/k", "4.4.0", "b"
    )
    assert line == (
        'b: "listener.name.internal.ssl.keystore.location" is set by the harness '
        "(the harness wires the listeners)"
    )
    assert check_setting("broker", "zookeeper.connect", "zk:2181", "3.9.2", "b") is not None
    # Typed knobs' keys are the scenario's to set; the harness owns none of a topic's configs.
    assert owned_refusal("min.insync.replicas") is None
    assert owned_refusal("min.insync.replicas", "topic") is None and not HARNESS_OWNED_TOPIC
    # Every owned key is a key of some release (no misspelt ownership).
    known = {k for r in RELEASES for k in definitions(r, "broker")}
    assert set(HARNESS_OWNED_BROKER) <= known


def test_a_line_stands_for_its_newest_committed_release() -> None:
    assert check_setting("broker", "num.replica.fetcher", 1, "3.9", "b") == (
        'b: "num.replica.fetcher" is not a Kafka 3.9.2 broker setting '
        "(did you mean num.replica.fetchers?)"
    )
    with pytest.raises(KafkaConfigDefsError, match="names no release"):
        definitions("2.8", "broker")


def test_to_property_writes_what_kafka_reads() -> None:
    assert to_property(True) == "true" and to_property(False) == "false"
    assert to_property(["compact", "delete"]) == "compact,delete"
    assert to_property(5) == "5" and to_property(0.5) == "0.5" and to_property("a b") == "a b"
    assert to_property([]) == ""
