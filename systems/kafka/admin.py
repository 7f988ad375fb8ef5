"""The admin-API side of a running Kafka cluster: metadata, topics, leader elections, and the
membership ops' moves (Kafka's reassignment tool, its throttles, a broker's registration)."""

from __future__ import annotations

import json
import logging
import re
import shlex
import time
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from compose.cli import ComposeError
from contract.topology import Topology
from systems.kafka.cluster import INTERNAL_PORT, KafkaCluster
from systems.kafka.membership import Placement, reassignment_json

# What a reassignment's throttle sets (kafka-reassign-partitions --throttle): a rate on each
# broker, and on each topic the replicas it applies to. A heal deletes all four.
BROKER_THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
TOPIC_THROTTLES = (
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
)


def reassign_command(plan: Placement, throttle: int | None) -> str:
    """The shell command that starts the plan's moves inside a broker: the plan written to a
    file there (the tool reads none from its input), then --execute; --additional, so that a
    move still under way from an earlier step does not refuse this one."""
    document = shlex.quote(json.dumps(reassignment_json(plan)))
    path = "/tmp/brokerjepsen-reassign.json"
    rate = f" --throttle {throttle}" if throttle is not None else ""
    return (
        f"printf '%s' {document} > {path} && kafka-reassign-partitions.sh "
        f"--bootstrap-server localhost:{INTERNAL_PORT} --reassignment-json-file {path} "
        f"--execute --additional{rate} 2>&1"
    )


def election_outcome(err: Any) -> str:
    """One partition's election result: "ok", or the error's name. confluent-kafka 2.16 gives a
    KafkaError (or None) per partition; a KafkaException carries its KafkaError in args."""
    if err is None:
        return "ok"
    if not hasattr(err, "name") and getattr(err, "args", None):
        err = err.args[0]
    return str(err.name()) if hasattr(err, "name") else str(err)


def election_tool_outcome(text: str) -> str:
    """kafka-leader-election's answer for one partition, in the admin API's words."""
    if "Successfully completed leader election" in text:
        return "ok"
    if "Valid replica already elected" in text or "ELECTION_NOT_NEEDED" in text:
        return "ELECTION_NOT_NEEDED"
    if m := re.search(r"(ELIGIBLE_LEADERS_NOT_AVAILABLE|PREFERRED_LEADER_NOT_AVAILABLE)", text):
        return m.group(1)
    if m := re.search(r"(\w+(?:Exception|Error)): ([^\n]{0,160})", text):
        return f"{m.group(1)}: {m.group(2)}"
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "no answer"


def new_topic(
    topic: str,
    partitions: int,
    replication_factor: int,
    assignment: list[list[int]] | None,
    config: dict[str, str],
) -> Any:
    """The NewTopic to create. With an explicit assignment librdkafka wants the partition count
    to match it and no replication factor (-1): the assignment says it."""
    from confluent_kafka.admin import NewTopic

    if assignment:
        return NewTopic(topic, len(assignment), -1, replica_assignment=assignment, config=config)
    return NewTopic(topic, partitions, replication_factor, config=config)


METADATA_TIMEOUT = 5.0  # seconds for one metadata request
GROUP_CONFIG_POLL_S = 0.5  # between two reads of a group's configs just set


def _said(e: BaseException, timeout: float) -> str:
    """An admin request's failure in words: its error, or (a future's wait, which says nothing)
    that no answer came."""
    return str(e) or f"no answer within {timeout:g} s ({type(e).__name__})"


class _AppendingHandler(logging.Handler):
    """Each record appended to a file opened for it alone: nothing held open between the
    rare lines of an admin client, however many runs one process makes."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.setFormatter(logging.Formatter("%(asctime)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            with self.path.open("a", encoding="utf-8") as f:
                f.write(self.format(record) + "\n")
        except OSError:
            self.handleError(record)


# In a run's logs/: what the harness's own admin client (metadata, the partition watch, the
# nemesis's elections) heard from librdkafka.
ADMIN_LOG = "harness-admin.log"


def librdkafka_log(path: Path) -> logging.Logger:
    """A logger for a librdkafka client of the harness's own process (`logger` in its config):
    its lines (a broker refusing connections while a fault holds it) go to the run's logs, not
    to the console the user reads."""
    log = logging.Logger(f"librdkafka:{path.name}")  # unregistered: it goes with its client
    log.addHandler(_AppendingHandler(path))
    return log


class KafkaAdmin:
    """The admin-API side of a running cluster: metadata, topics, elections (KafkaControl)."""

    def __init__(self, cluster: KafkaCluster, topic: str, log: Path | None = None) -> None:
        from confluent_kafka.admin import AdminClient

        self.cluster = cluster
        self.topic = topic
        config: dict[str, str | int | float | bool] = {
            "bootstrap.servers": cluster.admin_servers,
            "log_level": 3,
            "socket.timeout.ms": 5000,
        }
        self.admin = AdminClient(config, **({"logger": librdkafka_log(log)} if log else {}))

    def metadata(self, need_controller: bool = False, topic: str | None = None) -> Any:
        from systems.kafka.targets import from_cluster_metadata

        cm = self.topic_metadata(topic=topic or self.topic)
        md = from_cluster_metadata(cm, self.cluster.node_of, self.cluster.quorum)
        if need_controller and self.cluster.kraft_controller:
            # Brokers' metadata names a random broker as controller in KRaft (and ZooKeeper-mode
            # brokers under a KRaft controller, in a migration): ask the quorum.
            name = self.cluster.active_controller(sorted(md.brokers.values()))
            ids = {n.name: n.node_id for n in self.cluster.nodes}
            md = replace(md, controller=ids.get(name) if name else None)
            if name and md.controller not in md.brokers:
                md = replace(md, brokers={**md.brokers, ids[name]: name})
        return md

    def topic_metadata(self, within: float = 30, topic: str | None = None) -> Any:
        """The topic's metadata from a broker that knows it: a KRaft broker applies a new topic
        a moment after the one that created it, and one answer of "no partitions" would aim a
        fault at nothing. A request that timed out is asked again while `within` allows."""
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + within
        topic = topic or self.topic
        while True:
            try:
                cm = self.admin.list_topics(topic, timeout=METADATA_TIMEOUT)
            except KafkaException:
                # librdkafka asks one broker; the one it picked may be the one a fault slows
                # (a degrade towards the clients throttles the harness too): ask again.
                if time.monotonic() + METADATA_TIMEOUT > deadline:
                    raise
                time.sleep(0.5)
                continue
            tm = cm.topics.get(topic)
            if (tm is not None and tm.error is None and tm.partitions) or (
                time.monotonic() >= deadline
            ):
                return cm
            time.sleep(0.5)

    def registered_brokers(self) -> set[int]:
        self.admin.poll(0)  # serves the client's queued log lines to its logger
        try:
            return set(self.admin.list_topics(timeout=5).brokers)
        except Exception:  # noqa: BLE001 - not up yet
            return set()

    def create_topic(
        self,
        partitions: int,
        replication_factor: int,
        assignment: list[list[int]] | None,
        config: dict[str, str],
        timeout: float,
        name: str | None = None,
    ) -> None:
        """The workload's topic (or `name`, another topic of the workload, made alike)."""
        topic = name or self.topic
        new = new_topic(topic, partitions, replication_factor, assignment, config)
        try:
            future = self.admin.create_topics([new], request_timeout=timeout)[topic]
            future.result(timeout=timeout)
        except Exception as e:  # noqa: BLE001 - KafkaException, ValueError: one line
            raise ComposeError(f"cannot create topic {topic}: {e}") from None

    def _elect_via(
        self, node: str, election: str, partitions: list[int], wait: float
    ) -> dict[str, str]:
        out: dict[str, str] = {}
        for p in partitions:
            command = (
                f"kafka-leader-election.sh --bootstrap-server localhost:{INTERNAL_PORT} "
                f"--election-type {election.upper()} --topic {self.topic} --partition {p}"
            )
            try:
                # The tool exits 1 on a failed election: its text says why, so read it anyway.
                text = self.cluster.exec(node, command + " 2>&1; true", timeout=wait + 30)
            except ComposeError as e:
                text = str(e)
            out[str(p)] = election_tool_outcome(text)
        return out

    def fully_in_sync(self, topics: tuple[str, ...] = ()) -> bool:
        """Every partition of the topic (and of `topics`) has a leader and its full ISR."""
        try:
            for topic in (self.topic, *topics):
                md = self.admin.list_topics(topic, timeout=5)
                tm = md.topics.get(topic)
                if tm is None or tm.error is not None or not tm.partitions:
                    return False
                for pm in tm.partitions.values():
                    if pm.leader < 0 or set(pm.isrs) != set(pm.replicas):
                        return False
        except Exception:  # noqa: BLE001 - a broker still starting
            return False
        return True

    # ---- share groups (KIP-932) -------------------------------------------------------------

    def topic_id(self, topic: str, timeout: float = 30) -> str:
        """The topic's id as Kafka writes it: what a share-partition's state is keyed by."""
        from confluent_kafka import TopicCollection

        from systems.kafka.targets import kafka_uuid

        try:
            future = self.admin.describe_topics(TopicCollection([topic]), request_timeout=timeout)
            uuid = future[topic].result(timeout=timeout).topic_id
        except Exception as e:  # noqa: BLE001 - KafkaException, a timeout: one line
            raise ComposeError(f"cannot describe topic {topic}: {_said(e, timeout)}") from None
        return kafka_uuid(uuid.get_most_significant_bits(), uuid.get_least_significant_bits())

    def set_group_configs(
        self, group: str, configs: dict[str, str], timeout: float = 30
    ) -> dict[str, str]:
        """Sets a group's configs (incrementalAlterConfigs on its GROUP resource, which a group
        may have before it exists), then reads them back: each key's value as the brokers now
        say it (a key they do not say is left out)."""
        from confluent_kafka.admin import (
            AlterConfigOpType,
            ConfigEntry,
            ConfigResource,
            ResourceType,
        )

        entries = [
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in sorted(configs.items())
        ]
        deadline = time.monotonic() + timeout
        try:
            resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
            (future,) = self.admin.incremental_alter_configs(
                [resource], request_timeout=timeout
            ).values()
            future.result(timeout=timeout)
            # A broker answers from its own copy of the metadata, which takes the change a
            # moment after the controller: read until one says what was set (or the time is
            # up, and what it said is what the run records and warns of).
            while True:
                said = self._group_configs(group, configs, timeout)
                if said == configs or time.monotonic() >= deadline:
                    return said
                time.sleep(GROUP_CONFIG_POLL_S)
        except Exception as e:  # noqa: BLE001 - KafkaException, a timeout: one line
            raise ComposeError(f"cannot set group {group}'s configs: {_said(e, timeout)}") from None

    def _group_configs(self, group: str, keys: dict[str, str], timeout: float) -> dict[str, str]:
        """The group's configs of `keys` as one broker says them now."""
        from confluent_kafka.admin import ConfigResource, ResourceType

        (described,) = self.admin.describe_configs(
            [ConfigResource(ResourceType.GROUP, group)], request_timeout=timeout
        ).values()
        said = described.result(timeout=timeout)
        return {k: str(said[k].value) for k in sorted(keys) if k in said}

    # ---- membership (systems.kafka.membership.MembershipControl) ----------------------------

    @property
    def kraft(self) -> bool:
        """Whether the brokers are KRaft's (their registrations its to remove): in KRaft modes,
        and once a migration has moved them all."""
        return self.cluster.kraft_brokers

    def reassign(self, plan: Placement, throttle: int | None, via: str) -> str:
        """Starts the plan's moves with Kafka's tool inside `via` (its answer, or a
        ComposeError with its last line)."""
        return self.cluster.run_in(
            via, ["sh", "-c", reassign_command(plan, throttle)], "reassignment", timeout=120
        )

    def clear_throttles(self, brokers: Iterable[int], topics: Iterable[str]) -> None:
        """Every throttle a reassignment set, deleted (a key not set is deleted all the same)."""
        from confluent_kafka.admin import (
            AlterConfigOpType,
            ConfigEntry,
            ConfigResource,
            ResourceType,
        )

        def deleted(names: tuple[str, ...]) -> list[Any]:
            op = AlterConfigOpType.DELETE
            return [ConfigEntry(n, None, incremental_operation=op) for n in names]

        resources = [
            ConfigResource(
                ResourceType.BROKER, str(b), incremental_configs=deleted(BROKER_THROTTLES)
            )
            for b in brokers
        ] + [
            ConfigResource(ResourceType.TOPIC, t, incremental_configs=deleted(TOPIC_THROTTLES))
            for t in topics
        ]
        failed = []
        # One resource a call: librdkafka refuses two brokers' in one ("Only one ConfigResource
        # of type BROKER is allowed per call").
        for resource in resources:
            try:
                (future,) = self.admin.incremental_alter_configs([resource]).values()
                future.result(timeout=30)
            except Exception as e:  # noqa: BLE001 - each said; a broker down keeps its own
                failed.append(f"{resource.name}: {e}")
        if failed:
            raise ComposeError(f"throttles not cleared on {'; '.join(failed)}")

    def unregister(self, broker: int, via: str) -> str:
        return self.cluster.unregister(broker, via)

    def start_broker(self, name: str) -> Topology:
        self.cluster.start_spare(name)
        return self.cluster.topology()

    def elect(
        self, election: str, partitions: list[int], via: str | None = None, wait: float = 15
    ) -> dict[str, str]:
        """Per partition: "ok" or the error's name. With `via`, Kafka's own election tool runs
        inside that broker, bootstrapped on itself: its view of who leads the quorum is that of
        a broker the nemesis has not cut."""
        if via is not None:
            return self._elect_via(via, election, partitions, wait)
        from confluent_kafka import ElectionType, TopicPartition

        kind = ElectionType.UNCLEAN if election == "unclean" else ElectionType.PREFERRED
        tps = [TopicPartition(self.topic, p) for p in partitions]
        # No request_timeout: confluent-kafka 2.16's elect_leaders raises SystemError on any
        # timeout keyword (a format bug in its C binding); the future's wait bounds it instead.
        result = self.admin.elect_leaders(kind, tps).result(timeout=wait)
        return {str(tp.partition): election_outcome(err) for tp, err in result.items()}
