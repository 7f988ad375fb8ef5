"""A Kafka scenario's settings as Kafka spells them: the server properties every node gets, the
workload topic's configs, and each client's configuration.

The user's own keys (`cluster.broker_config`, `cluster.broker_overrides`, `cluster.topic_config`,
a producer's or reader's `config`) pass straight through, as kafkatest's property overrides do;
the short typed knobs the claims grew up with (`min_insync_replicas`, `acks`, ...) are the same
properties under friendlier names. Each property has one source: a passthrough key that a typed
knob the scenario set explicitly also sets is refused, and a passthrough key alone overrides the
knob's default. Keys that wire the cluster together (listeners, node ids, log directories) are
the harness's and are refused with the reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from systems.kafka.config import KafkaClusterConfig, PropertyValue
from systems.kafka.configdefs import Kind
from systems.kafka.key_check import check_setting, owned_refusal, setting_refusal
from workloads.kafka.properties import properties

# YAML scalars a property may take; a list is written comma-joined (a list-typed property).
Value = PropertyValue

# Typed knob -> the properties it sets.
TYPED_BROKER: dict[str, tuple[str, ...]] = {
    "min_insync_replicas": ("min.insync.replicas",),
    "unclean_leader_election": ("unclean.leader.election.enable",),
    "replica_lag_time_max_ms": ("replica.lag.time.max.ms",),
    "session_timeout_ms": ("zookeeper.session.timeout.ms", "broker.session.timeout.ms"),
    "auto_leader_rebalance": ("auto.leader.rebalance.enable",),
    "leader_imbalance_check_interval_seconds": ("leader.imbalance.check.interval.seconds",),
    "flush_messages": ("log.flush.interval.messages",),
}
TYPED_TOPIC: dict[str, tuple[str, ...]] = {
    "min_insync_replicas": ("min.insync.replicas",),
    "unclean_leader_election": ("unclean.leader.election.enable",),
    "flush_messages": ("flush.messages",),
}
TYPED_PRODUCER: dict[str, tuple[str, ...]] = {
    "acks": ("acks", "request.required.acks"),
    "enable_idempotence": ("enable.idempotence",),
    "retries": ("retries", "message.send.max.retries"),
    "delivery_timeout_ms": ("delivery.timeout.ms", "message.timeout.ms"),
    "request_timeout_ms": ("request.timeout.ms",),
    "max_in_flight": ("max.in.flight.requests.per.connection", "max.in.flight"),
    "linger_ms": ("linger.ms", "queue.buffering.max.ms"),
    "compression": ("compression.type", "compression.codec"),
    "transaction": ("transaction.timeout.ms",),
}
TYPED_READER: dict[str, tuple[str, ...]] = {
    "group_protocol": ("group.protocol",),
    "isolation": ("isolation.level",),
}
# Client keys the harness's own clients depend on to record what happened.
OWNED_CLIENT: dict[str, str] = {
    "bootstrap.servers": "the harness points clients at the cluster it started",
    "metadata.broker.list": "the harness points clients at the cluster it started",
    "group.id": "a reader's group is its id in the scenario",
    "enable.auto.commit": "a reader in group mode commits itself and records each commit",
    "enable.auto.offset.store": "a reader in group mode commits itself and records each commit",
    "auto.offset.reset": "readers read from the first offset to see every acknowledged record",
    "transactional.id": "transactions are the transactional workload's",
    "delivery.report.only.error": "every acknowledgement is recorded from its delivery report",
    "debug": "set BJ_RDKAFKA_DEBUG for librdkafka's debug contexts",
    "log_level": "the client's log level is the harness's",
}


def typed_conflict(
    key: str, typed: Mapping[str, tuple[str, ...]], set_fields: Iterable[str]
) -> str | None:
    """Why a passthrough key may not be set when a typed knob the scenario set explicitly sets
    the same property; None when no such knob is set."""
    chosen = set(set_fields)
    for knob, names in typed.items():
        if key in names and knob in chosen:
            return f'"{key}" is set by {knob} too: keep one (the typed knob, or the key alone)'
    return None


def passthrough_refusals(
    kind: Kind, values: Mapping[str, Value], set_fields: Iterable[str], release: str | None
) -> dict[str, str]:
    """Each key of a broker or topic map the scenario may not set, with why: the harness's, a
    typed knob's the scenario set too, one the images' environment cannot carry, or one the
    release does not take (or not with this value). `release` None: the release's definitions
    are not here, and the run judges its keys against its image's."""
    typed = TYPED_BROKER if kind == "broker" else TYPED_TOPIC
    set_fields = set(set_fields)
    refused: dict[str, str] = {}
    for key, value in values.items():
        if reason := owned_refusal(key, kind):
            refused[key] = f'"{key}" is set by the harness ({reason})'
        elif why := typed_conflict(key, typed, set_fields):
            refused[key] = why
        elif kind == "broker" and (why := _environment_refusal(key)):
            refused[key] = why
        elif release is not None and (why := setting_refusal(kind, key, value, release)):
            refused[key] = why
    return refused


def _environment_refusal(key: str) -> str | None:
    try:
        env_name(key)
    except ValueError as e:
        return str(e)
    return None


def release_refusals(
    version: str,
    broker_config: Mapping[str, Value],
    broker_overrides: Mapping[int, Mapping[str, Value]],
    topic_config: Mapping[str, Value],
) -> list[str]:
    """Each key or value the release itself does not take, one line each."""
    checks: list[tuple[Kind, str, Mapping[str, Value]]] = [
        ("broker", "broker_config", broker_config),
        *(("broker", f"broker_overrides.{n}", o) for n, o in broker_overrides.items()),
        ("topic", "topic_config", topic_config),
    ]
    return [
        line
        for kind, where, values in checks
        for key, value in values.items()
        if (line := check_setting(kind, key, value, version, where))
    ]


def client_config_refusals(
    role: str,
    set_fields: Iterable[str],
    config: Mapping[str, Value],
    harness_keys: Mapping[str, Value] | None = None,
) -> dict[str | None, str]:
    """Each key of a producer's or reader's config that the harness owns, that a typed knob the
    scenario set also sets, or that librdkafka refuses, with why; under None, why librdkafka
    refuses keys it takes one by one but not together."""
    typed = TYPED_PRODUCER if role == "producer" else TYPED_READER
    set_fields = set(set_fields)
    refused: dict[str | None, str] = {}
    for key, value in config.items():
        if key in OWNED_CLIENT:
            refused[key] = f'"{key}" is set by the harness ({OWNED_CLIENT[key]})'
        elif why := typed_conflict(key, typed, set_fields):
            refused[key] = why
        elif why := client_refusal(role, {key: value}, harness_keys):
            refused[key] = why
    if not refused and (why := client_refusal(role, config, harness_keys)):
        refused[None] = why
    return refused


def client_refusal(
    role: str, config: Mapping[str, Value], harness_keys: Mapping[str, Value] | None = None
) -> str | None:
    """One line when librdkafka itself refuses a client key or value (an unknown key, a value of
    the wrong kind), found by configuring a client that never connects."""
    if not config:
        return None
    from confluent_kafka import Consumer, KafkaException, Producer

    # Beside the keys the client will run with that decide what else it takes (a reader of
    # the consumer group protocol refuses the classic protocol's session settings).
    settings: dict[str, Any] = {
        "log_level": 0,
        **properties(harness_keys or {}),
        **properties(config),
    }
    try:
        if role == "producer":
            Producer(settings).flush(0)
        else:
            settings["group.id"] = "brokerjepsen-check"
            Consumer(settings).close()
    except (KafkaException, ValueError, TypeError) as e:
        text = str(e.args[0].str() if e.args and hasattr(e.args[0], "str") else e)
        return f"{text} (librdkafka)"
    return None


def broker_properties(
    cfg: KafkaClusterConfig,
    node_id: int,
    zookeeper: bool | None = None,
    kraft: bool | None = None,
) -> dict[str, str]:
    """The tunable server properties of one Kafka node, every one explicit (never an image's
    default): the harness's, the typed knobs', then the scenario's broker_config, then its
    overrides for this node. Derived properties follow what was finally chosen. `zookeeper`,
    `kraft`: whether the node talks to ZooKeeper, to a KRaft quorum (by default as the cluster's
    mode says; a node in a migration does both)."""
    zookeeper = cfg.mode == "zk" if zookeeper is None else zookeeper
    kraft = cfg.mode != "zk" if kraft is None else kraft
    rf = min(3, cfg.brokers)
    props = {
        "min.insync.replicas": str(cfg.min_insync_replicas),
        "unclean.leader.election.enable": str(cfg.unclean_leader_election).lower(),
        "replica.lag.time.max.ms": str(cfg.replica_lag_time_max_ms),
        "auto.leader.rebalance.enable": str(cfg.auto_leader_rebalance).lower(),
        "leader.imbalance.check.interval.seconds": str(cfg.leader_imbalance_check_interval_seconds),
        "default.replication.factor": str(rf),
        "offsets.topic.replication.factor": str(rf),
        "transaction.state.log.replication.factor": str(rf),
        "group.initial.rebalance.delay.ms": "0",
    }
    if zookeeper:
        props["zookeeper.session.timeout.ms"] = str(cfg.session_timeout_ms)
        # Brokers may start before the ensemble has a leader: wait rather than exit.
        props["zookeeper.connection.timeout.ms"] = "120000"
    if kraft:
        props["broker.session.timeout.ms"] = str(cfg.session_timeout_ms)
    if cfg.flush_messages is not None:
        props["log.flush.interval.messages"] = str(cfg.flush_messages)
    props |= properties(cfg.broker_config) | properties(cfg.broker_overrides.get(node_id, {}))
    if kraft:
        session = _int(props["broker.session.timeout.ms"], cfg.session_timeout_ms)
        props.setdefault("broker.heartbeat.interval.ms", str(max(500, session // 6)))
    min_isr = _int(props["min.insync.replicas"], cfg.min_insync_replicas)
    props.setdefault("transaction.state.log.min.isr", str(min(min_isr, rf)))
    return props


def _int(text: str, fallback: int) -> int:
    # A value the release refuses never reaches a cluster (it is refused before the run); this
    # keeps rendering total for the compose file a user may render without running.
    try:
        return int(text)
    except ValueError:
        return fallback


def broker_to_topic(
    broker_config: Mapping[str, Value], set_fields: Iterable[str]
) -> dict[str, Value]:
    """The broker keys of broker_config that stand for a typed topic knob the scenario left
    unset, under their topic names (min.insync.replicas, unclean.leader.election.enable,
    log.flush.interval.messages -> flush.messages)."""
    chosen = set(set_fields)
    out: dict[str, Value] = {}
    for knob, (topic_key,) in TYPED_TOPIC.items():
        if knob in chosen:
            continue
        for broker_key in TYPED_BROKER[knob]:
            if broker_key in broker_config:
                out[topic_key] = broker_config[broker_key]
    return out


def topic_properties(
    min_insync_replicas: int,
    unclean_leader_election: bool,
    flush_messages: int | None,
    topic_config: Mapping[str, Value],
) -> dict[str, str]:
    """The workload topic's configs: the typed knobs', then the scenario's topic_config."""
    props = {
        "min.insync.replicas": str(min_insync_replicas),
        "unclean.leader.election.enable": str(unclean_leader_election).lower(),
    }
    if flush_messages is not None:
        props["flush.messages"] = str(flush_messages)
    return props | properties(topic_config)


def env_name(key: str) -> str:
    """A server property as the images' environment variable (KAFKA_FOO_BAR -> foo.bar, "__"
    -> "_", "___" -> "-"), refused when the encoding cannot carry it back unchanged."""
    name = "KAFKA_" + key.replace("_", "__").replace("-", "___").replace(".", "_").upper()
    if env_key(name) != key:
        raise ValueError(f'"{key}" cannot be passed through the environment the images read')
    return name


def env_value(value: str) -> str:
    """A property's value as the compose file carries it to the broker unchanged: Compose reads
    `$` as interpolation (`$$` is one `$`), and the images' entrypoint writes the value into a
    properties file raw, which Java reads with `\\` as one backslash."""
    return value.replace("\\", "\\\\").replace("$", "$$")


def env_key(name: str) -> str:
    """The inverse of env_name, as the images' entrypoint decodes it."""
    body = name.removeprefix("KAFKA_")
    return body.replace("___", "-").replace("__", "\0").replace("_", ".").replace("\0", "_").lower()


def chosen_keys(
    typed: Mapping[str, tuple[str, ...]],
    set_fields: Iterable[str],
    passthrough: Mapping[str, Value],
    shown: Mapping[str, str],
) -> list[str]:
    """The keys of `shown` that a scenario chose: its passthrough keys and the properties of the
    typed knobs it set explicitly."""
    chosen = set(passthrough)
    chosen |= {p for knob in set_fields for p in typed.get(knob, ())}
    return sorted(k for k in shown if k in chosen)
