"""A Kafka scenario's workload: its producers (transactional or not), readers and exactly-once
copiers, each client's own settings, and the final read."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from systems.kafka.config import PropertyValue
from systems.kafka.targets import SHARE_COORDINATOR, share_partition_key
from systems.scenario import MessageCount, NumberWord, Strict
from workloads.kafka.properties import properties


class KafkaTransactionSpec(Strict):
    """A transactional producer (confluent-kafka, the TV1 protocol): `size` records per
    transaction spread over the topic's partitions, a share `abort_ratio` aborted on purpose."""

    size: Annotated[int, Field(ge=1, le=10_000)] = 10
    """Records per transaction."""
    abort_ratio: Annotated[float, Field(ge=0, le=1)] = 0.1
    """Share of transactions aborted on purpose."""
    timeout_ms: Annotated[int, Field(ge=1000, le=900_000)] = 60000
    """transaction.timeout.ms."""
    transactional_id: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]*$")] = ""
    """default: the producer's id (two producers with one id fence each other: zombie fencing)."""
    client: Literal["confluent-kafka", "java"] = "confluent-kafka"
    """confluent-kafka (librdkafka: transaction protocol version 1 everywhere), or Kafka's own Java
    client of the release under test (version 2 on a 4.x cluster whose transaction.version is 2,
    KIP-890)."""


class KafkaProducerSpec(Strict):
    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]+$")]
    """The producer's name in the history (and its transactional id's default)."""
    count: MessageCount
    """Messages to send: a number, or 60k, 1M."""
    rate: Annotated[float, Field(ge=0)] = 0.0
    """Messages per second; 0: as fast as the client sends."""
    acks: Annotated[Literal["0", "1", "all"], NumberWord] = "all"
    """Which replicas must have a record before it is acknowledged: 0, 1 or all."""
    enable_idempotence: bool = False
    """The idempotent producer: the broker drops a retried duplicate."""
    retries: Annotated[int, Field(ge=0)] = 2147483647
    """How often a failed send is retried."""
    delivery_timeout_ms: Annotated[int, Field(ge=1)] = 30000
    """How long a send may take, retries included, before it fails."""
    request_timeout_ms: Annotated[int, Field(ge=1)] = 10000
    """How long one produce request may wait for its answer."""
    max_in_flight: Annotated[int, Field(ge=1, le=1000)] = 5
    """Unacknowledged requests per connection."""
    linger_ms: Annotated[int, Field(ge=0, le=900_000)] = 5
    """How long a batch waits for more records."""
    compression: Literal["none", "gzip", "snappy", "lz4", "zstd"] = "none"
    """The batches' compression codec."""
    config: dict[str, PropertyValue] = Field(default_factory=dict)
    """Any other librdkafka producer key (systems.kafka.settings: how it meets the knobs above)."""
    transaction: KafkaTransactionSpec | None = None
    """Send in transactions (needs enable_idempotence and acks: all)."""
    start_at: Annotated[float, Field(ge=0, le=7200)] = 0.0
    """Seconds after the workload starts before its first send; a transactional producer's instance
    initialises only then, fencing a running instance of its transactional id (the replacement of a
    zombie, KIP-98)."""

    @model_validator(mode="after")
    def _transactions_need_idempotence(self) -> KafkaProducerSpec:
        if self.transaction is None:
            return self
        if self.acks != "all":
            raise ValueError("a transactional producer needs acks: all")
        if "enable_idempotence" in self.model_fields_set and not self.enable_idempotence:
            raise ValueError("a transactional producer is idempotent (enable_idempotence: true)")
        if self.transaction.client == "java":
            if self.config:
                raise ValueError("config holds librdkafka keys: the java client takes none (yet)")
            delivery = min(self.delivery_timeout_ms, self.transaction.timeout_ms)
            if delivery < self.linger_ms + self.request_timeout_ms:
                raise ValueError(
                    f"the java client needs a delivery timeout ({delivery} ms, bounded by the "
                    "transaction's) of at least linger_ms + request_timeout_ms"
                )
        if self.max_in_flight > 5:
            raise ValueError("a transactional producer needs max_in_flight of 5 or fewer")
        timeout = self.transaction.timeout_ms
        if "delivery_timeout_ms" in self.model_fields_set and self.delivery_timeout_ms > timeout:
            raise ValueError(
                f"delivery_timeout_ms {self.delivery_timeout_ms} outlives the transaction "
                f"(transaction.timeout_ms {timeout})"
            )
        return self


class KafkaCopierSpec(Strict):
    """An exactly-once copier (workloads.kafka.copier): it reads the input topic read_committed
    in consumer group `group` and copies each record into the same partition of the output topic
    (`<topic>-copy`), `size` records per transaction committed with their input offsets. Copiers
    sharing a group share the input's partitions."""

    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]+$")]
    """The copier's name in the history."""
    group: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]+$")] = "copy"
    """The consumer group it reads the input in."""
    size: Annotated[int, Field(ge=1, le=10_000)] = 50
    """Records per transaction."""
    abort_ratio: Annotated[float, Field(ge=0, le=1)] = 0.0
    """Share of transactions aborted on purpose."""
    timeout_ms: Annotated[int, Field(ge=1000, le=900_000)] = 60000
    """transaction.timeout.ms."""
    transactional_id: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]*$")] = ""
    """default: the copier's id."""
    delivery_timeout_ms: Annotated[int, Field(ge=1)] = 30000
    """delivery.timeout.ms of its producer."""
    request_timeout_ms: Annotated[int, Field(ge=1)] = 10000
    """request.timeout.ms of its producer."""
    client: Literal["confluent-kafka", "java"] = "confluent-kafka"
    """confluent-kafka (librdkafka: transaction protocol version 1 everywhere), or Kafka's own Java
    client of the release under test (workloads/kafka/java/TransactionalCopier.java: version 2 on a
    4.x cluster whose transaction.version is 2, KIP-890)."""

    @model_validator(mode="after")
    def _records_outlive_no_transaction(self) -> KafkaCopierSpec:
        # Left at its default, the delivery timeout is the transaction's when that is shorter
        # (effective_delivery_timeout_ms): only one the scenario wrote can be refused.
        if "delivery_timeout_ms" in self.model_fields_set and (
            self.delivery_timeout_ms > self.timeout_ms
        ):
            raise ValueError(
                f"copier {self.id}: delivery_timeout_ms {self.delivery_timeout_ms} outlives "
                f"the transaction (timeout_ms {self.timeout_ms})"
            )
        # The Java producer refuses a delivery timeout under linger.ms + request.timeout.ms
        # (the copier's linger.ms: the producer's default, 5).
        if self.client == "java" and self.effective_delivery_timeout_ms() < 5 + (
            self.request_timeout_ms
        ):
            raise ValueError(
                f"copier {self.id}: the java client needs delivery_timeout_ms of at least "
                "request_timeout_ms + 5 (linger.ms)"
            )
        return self

    def effective_delivery_timeout_ms(self) -> int:
        """The delivery timeout the copier runs with: a record may not outlive its
        transaction, so a default longer than the transaction's timeout gives way to it."""
        if "delivery_timeout_ms" in self.model_fields_set:
            return self.delivery_timeout_ms
        return min(self.delivery_timeout_ms, self.timeout_ms)


def output_topic(topic: str) -> str:
    """The exactly-once copy's output topic: the input's name with `-copy`."""
    return f"{topic}-copy"


class KafkaReaderSpec(Strict):
    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]+$")]
    """The reader's name in the history (in group mode, its group)."""
    topic: Literal["input", "output"] = "input"
    """input: the workload's topic; output: the exactly-once copy's output topic (<topic>-copy)."""
    mode: Literal["assign", "group"] = "assign"
    """assign: every partition from the earliest offset, nothing committed. group: a consumer group
    member (rebalances), committing offsets synchronously every `commit_every` records; every
    commit's outcome goes to the history (f: commit)."""
    commit_every: Annotated[int, Field(ge=1, le=100_000)] = 100
    group_protocol: Literal["classic", "consumer"] = "classic"
    """group mode: the classic rebalance protocol, or KIP-848's (group.protocol=consumer: the broker
    assigns partitions; Kafka 4.0 on)."""
    delay: Annotated[float, Field(ge=0, le=10)] = 0.0
    """Seconds spent on each record before the next poll: a reader that must lag behind its
    producers (so that it still reads, and commits, while a fault holds them back)."""
    isolation: Literal["read_committed", "read_uncommitted"] = "read_committed"
    """read_committed: only committed transactions' records, up to the last stable offset
    (librdkafka's default); read_uncommitted: every record written, aborted ones too."""
    config: dict[str, PropertyValue] = Field(default_factory=dict)
    """Any other librdkafka consumer key."""

    @model_validator(mode="after")
    def _protocol_is_a_groups(self) -> KafkaReaderSpec:
        if self.group_protocol != "classic" and self.mode != "group":
            raise ValueError("group_protocol is for readers in mode group")
        return self


class KafkaShareOutcomes(Strict):
    """How an explicitly acknowledging share consumer ends each record it processed, as shares
    drawn per record (by a seed of the consumer's name): they add up to 1."""

    accept: Annotated[float, Field(ge=0, le=1)] = 1.0
    """Processed: the record is done, never delivered again."""
    release: Annotated[float, Field(ge=0, le=1)] = 0.0
    """Not processed: the record goes back for another delivery (its delivery count grows)."""
    reject: Annotated[float, Field(ge=0, le=1)] = 0.0
    """Unprocessable: the record is archived, never delivered again."""

    @model_validator(mode="after")
    def _whole(self) -> KafkaShareOutcomes:
        total = self.accept + self.release + self.reject
        if abs(total - 1.0) > 1e-9:
            raise ValueError(f"outcomes accept, release and reject add up to {total:g}, not 1")
        return self


# The share group configs (Kafka 4.2 on, ConfigResource GROUP) the typed knobs set.
SHARE_GROUP_KNOBS = {
    "delivery_count_limit": "share.delivery.count.limit",
    "record_lock_duration_ms": "share.record.lock.duration.ms",
    "auto_offset_reset": "share.auto.offset.reset",
}
# The client and group keys each typed knob of the share consumers sets.
TYPED_SHARE: dict[str, tuple[str, ...]] = {
    "acknowledgement": ("share.acknowledgement.mode",),
    "max_poll_records": ("max.poll.records",),
    **{knob: (key,) for knob, key in SHARE_GROUP_KNOBS.items()},
}
# Seconds a draining share consumer waits past its group's lock duration for a record before it
# calls the group idle: a record whose lock expired in another consumer comes back within it.
SHARE_IDLE_MARGIN = 5.0


class KafkaShareSpec(Strict):
    """Share consumers (KIP-932, Kafka 4.2 on): `consumers` members of one share group read the
    workload's topic cooperatively, each record acquired by one of them for the group's lock
    duration and acknowledged one by one. Every acquisition and acknowledgement goes to the
    history (f: share-acquire, share-ack)."""

    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]+$")] = "share-consumer"
    """The consumers' names in the history: `<id>-0`, `<id>-1`, ..."""
    group: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]+$")] = "share"
    """The share group they are members of."""
    consumers: Annotated[int, Field(ge=1, le=16)] = 3
    """How many share consumers, each a process of its own."""
    client: Literal["python", "java"] = "python"
    """python: confluent-kafka's ShareConsumer (librdkafka); java: Kafka's own KafkaShareConsumer
    of the release under test (workloads/kafka/java/ShareConsumer.java)."""
    acknowledgement: Literal["implicit", "explicit"] = "implicit"
    """implicit: a poll's records are accepted by the next poll (share.acknowledgement.mode);
    explicit: each record acknowledged with an outcome drawn from `outcomes`."""
    outcomes: KafkaShareOutcomes | None = None
    """explicit: the shares of accept, release and reject (none: every record accepted)."""
    delay: Annotated[float, Field(ge=0, le=600)] = 0.0
    """Seconds spent on each record before it is acknowledged: longer than the lock duration,
    its lock expires first (its acknowledgement then fails, and the record comes back)."""
    max_poll_records: Annotated[int, Field(ge=1, le=10_000)] = 100
    """max.poll.records: the most records one poll acquires (the Java client in record_limit
    acquire mode, so that it is a bound)."""
    delivery_count_limit: Annotated[int, Field(ge=2, le=25)] = 5
    """share.delivery.count.limit of the group: deliveries after which a record is archived
    (Kafka's default 5; the brokers bound it by group.share.min/max.delivery.count.limit)."""
    record_lock_duration_ms: Annotated[int, Field(ge=1000, le=3_600_000)] = 30000
    """share.record.lock.duration.ms of the group: how long an acquired record stays locked to
    its consumer (Kafka's default 30000; the brokers bound it by
    group.share.min/max.record.lock.duration.ms, 15000..60000 unless broker_config says)."""
    auto_offset_reset: Literal["earliest", "latest"] = "earliest"
    """share.auto.offset.reset of the group: where a new share group starts reading (Kafka's
    default is latest, which would skip what was written before the group began)."""
    group_config: dict[str, PropertyValue] = Field(default_factory=dict)
    """Any other share group config (share.*), set on the group before its consumers start."""

    @model_validator(mode="after")
    def _knobs_fit(self) -> KafkaShareSpec:
        if self.outcomes is not None and self.acknowledgement != "explicit":
            raise ValueError(
                "outcomes are for acknowledgement: explicit (implicit accepts every record)"
            )
        typed = {v: k for k, v in SHARE_GROUP_KNOBS.items()}
        for key in self.group_config:
            if key in typed:
                raise ValueError(f"group_config: {key} is the typed knob {typed[key]}'s")
            if not key.startswith("share."):
                raise ValueError(f"group_config: {key} is no share group config (share.*)")
        return self

    def processes(self) -> list[str]:
        """Each consumer's process name, in order."""
        return [f"{self.id}-{i}" for i in range(self.consumers)]

    def outcome_shares(self) -> dict[str, float]:
        """The shares of accept, release and reject (implicit: accept alone)."""
        return (self.outcomes or KafkaShareOutcomes()).model_dump()

    def drain_idle_s(self) -> float:
        """How long a draining consumer waits for another record before it calls the group
        idle: a lock duration and a margin."""
        return self.record_lock_duration_ms / 1000 + SHARE_IDLE_MARGIN

    def group_configs(self) -> dict[str, str]:
        """Every share group config the run sets on the group, as Kafka reads them."""
        typed = {SHARE_GROUP_KNOBS[k]: str(getattr(self, k)) for k in SHARE_GROUP_KNOBS}
        return typed | properties(self.group_config)

    def requested(self) -> dict[str, int | str]:
        """The group settings the workload asks of the brokers, named as the manifest names the
        ones the brokers apply (`lock_duration_ms` is record_lock_duration_ms)."""
        return {
            "delivery_count_limit": self.delivery_count_limit,
            "lock_duration_ms": self.record_lock_duration_ms,
            "auto_offset_reset": self.auto_offset_reset,
        }

    def settings(self, topic: str) -> dict[str, object]:
        """What the checker needs of the share group, resolved (the manifest's share_groups):
        the group settings asked under `requested`, apart from the ones the brokers apply."""
        return {
            "group": self.group,
            "topic": topic,
            "consumers": self.processes(),
            "client": self.client,
            "acknowledgement": self.acknowledgement,
            "outcomes": self.outcome_shares(),
            "delay": self.delay,
            "requested": self.requested(),
        }


FINAL_READER = "final"  # the group of the final read (a reader id no scenario may take)


class KafkaWorkload(Strict):
    producers: Annotated[list[KafkaProducerSpec], Field(min_length=1)]
    """Who writes: at least one producer."""
    readers: Annotated[list[KafkaReaderSpec], Field(min_length=1)]
    """Who reads while the faults run: at least one reader."""
    copiers: list[KafkaCopierSpec] = Field(default_factory=list)
    """The exactly-once copy from the topic to <topic>-copy; with copiers, the final read reads the
    output topic (what the copy promises: every acknowledged input record there once)."""
    drain_timeout: Annotated[float, Field(gt=0, le=3600)] = 60.0
    """Seconds the readers may take to catch up after the producers finish."""
    final_read: bool = True
    """After the drain, a fresh reader reads the whole log from its first offset: what a reader saw
    during a fault (a stale leader's writes, truncated later) is no proof the log kept it."""
    share_consumers: KafkaShareSpec | None = None
    """Consumers of one share group (KIP-932, Kafka 4.2 on) reading the workload's topic."""

    def client_ids(self) -> list[str]:
        """Every client process the run starts for this workload, by its id."""
        shares = self.share_consumers.processes() if self.share_consumers else []
        return (
            [p.id for p in self.producers]
            + [r.id for r in self.readers]
            + [c.id for c in self.copiers]
            + shares
        )

    def late_start_refusal(self, workload_seconds: float) -> str | None:
        """One line when a producer would start at or after the workload's end."""
        for i, p in enumerate(self.producers):
            if p.start_at >= workload_seconds:
                return (
                    f"workload.producers.{i}: start_at {p.start_at:g} is not before the "
                    f"workload ends (timeouts.workload {workload_seconds:g})"
                )
        return None

    def coordinated(self, topic_id: str = "", partitions: int = 1) -> dict[str, str]:
        """Per coordinator role, the id whose coordinator it names: the first transactional
        producer's transactional id, the first group-mode reader's group, the share group's
        state of the topic's partition 0."""
        out: dict[str, str] = {}
        for role, key in self.coordinator_keys(topic_id, partitions):
            out.setdefault(role, key)
        return out

    def coordinator_keys(self, topic_id: str = "", partitions: int = 1) -> list[tuple[str, str]]:
        """(role, id) of every id a coordinator serves in this workload, once each: the
        transactional producers' and copiers' transactional ids, then the group-mode readers',
        the copiers' and the share consumers' groups, then the share group's state of each
        partition of the topic (`topic_id`, Kafka's: known once the topic exists)."""
        keys: list[tuple[str, str]] = []
        for p in self.producers:
            if p.transaction is not None:
                keys.append(("transaction-coordinator", p.transaction.transactional_id or p.id))
        for c in self.copiers:
            keys.append(("transaction-coordinator", c.transactional_id or c.id))
        for r in self.readers:
            if r.mode == "group":
                keys.append(("group-coordinator", r.id))
        for c in self.copiers:
            keys.append(("group-coordinator", c.group))
        if (share := self.share_consumers) is not None:
            keys.append(("group-coordinator", share.group))
            keys += [
                (SHARE_COORDINATOR, share_partition_key(share.group, topic_id, p))
                for p in range(partitions)
            ]
        return list(dict.fromkeys(keys))

    @model_validator(mode="after")
    def _copy_is_whole(self) -> KafkaWorkload:
        if any(r.topic == "output" for r in self.readers) and not self.copiers:
            raise ValueError("a reader of the output topic needs copiers")
        ids = self.client_ids()
        if len(ids) != len(set(ids)):
            raise ValueError("producers, readers and copiers each need an id of their own")
        reader_groups = {r.id for r in self.readers if r.mode == "group"}
        if clash := reader_groups & {c.group for c in self.copiers}:
            raise ValueError(f"group {sorted(clash)[0]} is both a reader's and the copiers'")
        share = self.share_consumers
        if share is not None and share.group in reader_groups | {c.group for c in self.copiers}:
            # One group id is one group: a share group cannot be a consumer group too.
            raise ValueError(
                f"group {share.group} is both the share consumers' and a consumer group"
            )
        return self

    @model_validator(mode="after")
    def _drain_outlasts_a_lock(self) -> KafkaWorkload:
        share = self.share_consumers
        if share is not None and self.drain_timeout < share.drain_idle_s():
            raise ValueError(
                f"drain_timeout {self.drain_timeout:g} is shorter than the share consumers' idle "
                f"wait ({share.drain_idle_s():g} s: a lock duration and {SHARE_IDLE_MARGIN:g} s, "
                "for records whose locks expire to come back): raise it"
            )
        return self

    @model_validator(mode="after")
    def _final_reader_id_is_reserved(self) -> KafkaWorkload:
        if self.final_read and any(r.id == FINAL_READER for r in self.readers):
            raise ValueError(f"reader id {FINAL_READER!r} is the final read's own")
        return self
