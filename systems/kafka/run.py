"""A Kafka scenario on a real cluster under Docker Compose: ZooKeeper mode, KRaft combined, or
KRaft with dedicated controllers (the run's mode: the scenario's first, or --mode)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from compose.cli import ComposeError
from contract.history import WATCH_PROCESS, HistoryWriter
from contract.rundir import RunDir
from contract.wait import wait_until
from nemesis.clients import ClientGroups
from nemesis.containers import Nemesis
from systems.client_path import ClientPath
from systems.evidence import write_index
from systems.kafka import evidence
from systems.kafka.admin import ADMIN_LOG, KafkaAdmin
from systems.kafka.clients_run import KafkaClientsRun
from systems.kafka.cluster import POLL, KafkaCluster
from systems.kafka.config import KafkaClusterConfig, mode_refusal, version_tuple
from systems.kafka.configdefs import has_definitions
from systems.kafka.membership import Membership
from systems.kafka.nemesis import KafkaNemesis
from systems.kafka.quorum import Quorum
from systems.kafka.scenario import KafkaClusterSpec, KafkaScenario, KafkaStep
from systems.kafka.settings import (
    TYPED_BROKER,
    TYPED_PRODUCER,
    TYPED_READER,
    TYPED_TOPIC,
    broker_properties,
    chosen_keys,
    properties,
    release_refusals,
)
from systems.kafka.watch import PartitionWatch
from systems.kafka.workload_spec import TYPED_SHARE, KafkaShareSpec, output_topic
from systems.run import PhaseProgress, RunOptions
from systems.scenario import ScenarioError

log = logging.getLogger("harness")


def run_mode(scenario: KafkaScenario, requested: str | None, line: str) -> str:
    """The mode a run uses: the requested one, else the scenario's first that `line` runs."""
    modes = scenario.cluster.modes
    if refusal := scenario.line_refusal(line):
        raise ScenarioError(refusal)
    if requested is None:
        runnable = [m for m in modes if mode_refusal(line, m) is None]
        if not runnable:
            raise ScenarioError(
                f"{scenario.id} runs only in {', '.join(modes)}: {mode_refusal(line, modes[0])}"
            )
        chosen = runnable[0]
    elif requested not in modes:
        raise ScenarioError(
            f"{scenario.id} does not apply to mode {requested} (its modes: {', '.join(modes)})"
        )
    else:
        chosen = requested
    if refusal := mode_refusal(line, chosen) or scenario.upgrade_mode_refusal(chosen):
        raise ScenarioError(refusal)
    return chosen


def check_release_keys(cluster: KafkaClusterSpec, image: str, version: str | None) -> None:
    """The scenario's own broker and topic keys against the definitions of the release the
    image holds, before any container starts. An image whose release's definitions cannot be
    had here (an official image of a release not committed) is said in a line, not refused:
    the brokers' own start judges its keys."""
    keys = cluster.broker_config or cluster.broker_overrides or cluster.topic_config
    if not keys:
        return
    if version is None or not has_definitions(version, image):
        log.warning(
            "%s: no config definitions of its release (%s) here: the scenario's broker and "
            "topic keys are left to the brokers to judge",
            image,
            version or "unknown",
        )
        return
    lines = release_refusals(
        version, cluster.broker_config, cluster.broker_overrides, cluster.topic_config
    )
    if lines:
        more = f" (and {len(lines) - 1} more)" if len(lines) > 1 else ""
        raise ScenarioError(lines[0] + more, lines)


class KafkaRun(KafkaClientsRun):
    scenario: KafkaScenario
    nemesis: KafkaNemesis | None
    tier = "real-cluster"

    def __init__(
        self,
        scenario: KafkaScenario,
        scenario_file: Path | None,
        opts: RunOptions,
        progress: Callable[[Path], PhaseProgress] | None = None,
    ) -> None:
        self.kafka_line = scenario.kafka_line(opts.kafka_line)
        self.mode = run_mode(scenario, opts.kafka_mode, self.kafka_line)
        super().__init__(scenario, scenario_file, opts, progress)
        self.manifest.kafka_mode = self.mode
        self.manifest.kafka_line = self.kafka_line
        self.cluster: KafkaCluster | None = None
        self.admin: KafkaAdmin | None = None
        self.watch: PartitionWatch | None = None

    @property
    def bootstrap_servers(self) -> str:
        assert self.cluster is not None
        return self.cluster.bootstrap_servers

    def _cluster_up(self) -> None:
        c, t = self.scenario.cluster, self.scenario.timeouts
        self.cluster = KafkaCluster(
            c.config(self.mode, self.kafka_line),  # type: ignore[arg-type]
            workdir=self.run_dir / "cluster",
            project=f"{self.scenario.id}-{self.mode}-{self.run_id}".lower().replace(".", "-"),
            net_prefix=self.opts.net_prefix,
            proxied=self.scenario.uses_proxy(),
            upgrades=self.scenario.upgrade_releases(),
        )
        cluster = self.cluster
        self._start_proxy(cluster.proxy_routes())
        self.manifest.images = cluster.image_info()
        self.manifest.settings = self._settings(cluster.config)
        self.manifest.settings_from_scenario = self._chosen(self.manifest.settings)
        self.manifest.compose_project = cluster.project
        self.manifest.bootstrap_servers = cluster.bootstrap_servers
        self.manifest.write(self.run_dir)
        self.admin = admin = KafkaAdmin(cluster, c.topic, self.paths.logs / ADMIN_LOG)
        expected = self._first_brokers()
        cluster.up(t.cluster_up, lambda: admin.registered_brokers() >= expected, self._mark)
        self.manifest.cluster_network = f"{cluster.net_prefix}.0/24"
        self.manifest.images["kafka"]["version"] = cluster.kafka_version()
        if c.transaction_version is not None:
            try:
                cluster.set_feature("transaction.version", c.transaction_version)
            except ComposeError as e:
                raise ScenarioError(str(e)) from None
        self.manifest.kafka_features = cluster.feature_levels()
        self._mark("features read")
        topic_config = c.topic_properties()
        for topic in self.topics():
            admin.create_topic(
                c.partitions,
                c.replication_factor,
                c.replica_assignment,
                topic_config,
                t.cluster_up,
                name=topic,
            )
        self._mark("topics created")
        if not wait_until(admin.fully_in_sync, t.cluster_up, interval=POLL):
            raise ScenarioError(f"topic {c.topic} never had a leader and full ISR everywhere")
        self._mark("leaders and ISR settled")
        self.manifest.topic_config = topic_config
        topic_id = self._share_group(admin)
        w = self.scenario.workload
        coordinated = w.coordinated(topic_id, c.partitions)
        coordinator_keys = w.coordinator_keys(topic_id, c.partitions)
        net = Nemesis(
            cluster.topology(),
            self.opts.tools_image,
            HistoryWriter(self.history_dir, "nemesis", "kafka", keep_going=True),
            disks=cluster.disks,
            clocks=cluster.clocks,
        )
        if self.proxy is not None:
            net.client_path = ClientPath(self.proxy, net.logged)
        self.nemesis = KafkaNemesis(
            net,
            admin,
            c.topic,
            c.partitions,
            coordinated,
            ClientGroups(self.running_clients, restart=self.restart_client),
            coordinator_keys=coordinator_keys,
            membership=Membership(
                admin,
                members={cluster.node_of[b]: b for b in self._first_brokers()},
                spares={n.name: n.node_id for n in cluster.nodes if n.spare and n.role == "broker"},
                topics=tuple(self.topics()),
            ),
            upgrades=cluster,
            quorum=self._quorum(cluster),
            migrations=cluster,
        )
        self.watch = PartitionWatch(
            admin.admin,
            c.topic,
            cluster.node_of,
            HistoryWriter(self.history_dir, WATCH_PROCESS, "kafka"),
            coordinator_keys,
        )
        self.manifest.topology = {
            "nodes": [n.__dict__ for n in cluster.nodes],
            "quorum": list(cluster.quorum),
            "controller_quorum": cluster.config.controller_quorum if self.mode != "zk" else "zk",
        }
        if cluster.directory_ids:  # a dynamic quorum's first voters, as formatted
            self.manifest.topology["directory_ids"] = dict(cluster.directory_ids)
        self._mark("nemesis and watch ready")

    def _share_group(self, admin: KafkaAdmin) -> str:
        """Share consumers' group configured before they start (its configs set on the group,
        as the brokers then say them: the manifest's share_groups); the topic's id, which keys
        the group's state of each partition ("" without share consumers)."""
        share = self.scenario.workload.share_consumers
        if share is None:
            return ""
        features = self.manifest.kafka_features or {}
        if features.get("share.version", "1") in ("0", "UNKNOWN"):
            raise ScenarioError(
                f"share.version is {features['share.version']} on this cluster: its share groups "
                "are off (a cluster formatted on Kafka 4.2 or later has them on)"
            )
        topic = self.scenario.cluster.topic
        wanted = share.group_configs()
        try:
            topic_id = admin.topic_id(topic)
            said = admin.set_group_configs(share.group, wanted)
        except ComposeError as e:
            raise ScenarioError(str(e)) from None
        if differ := sorted(k for k in wanted if said.get(k) != wanted[k]):
            log.warning(
                "share group %s: the brokers say %s",
                share.group,
                ", ".join(f"{k}={said.get(k)} (not {wanted[k]})" for k in differ),
            )
        self.manifest.share_groups = {share.group: share_group_entry(share, topic, said, topic_id)}
        self._mark("share group configured")
        return topic_id

    @staticmethod
    def _quorum(cluster: KafkaCluster) -> Quorum | None:
        """The controllers the quorum ops change: a dynamic quorum's; None for a static one."""
        if cluster.config.mode == "zk" or cluster.config.controller_quorum != "dynamic":
            return None
        controllers = [n for n in cluster.nodes if n.role in ("controller", "combined")]
        return Quorum(
            cluster,
            ids={n.name: n.node_id for n in controllers},
            spares=[n.name for n in controllers if n.spare],
            brokers_too={n.name for n in controllers if n.role == "combined"},
            # KIP-996's pre-vote, Kafka 4.0 on: a removed voter may run on harmlessly.
            pre_vote=version_tuple(cluster.config.kafka_line) >= (4,),
        )

    def _first_brokers(self) -> set[int]:
        """The brokers the cluster starts with: every one but the spares."""
        assert self.cluster is not None
        return {
            n.node_id
            for n in self.cluster.nodes
            if n.role != "zookeeper" and not n.spare and n.node_id in self.cluster.node_of
        }

    def _settings(self, cfg: KafkaClusterConfig) -> dict[str, dict[str, str]]:
        """Every setting of the run as Kafka spells it: each node's server properties (those
        the harness wires apart), the topic's configs and each client's."""
        c = self.scenario.cluster
        settings = {"broker": broker_properties(cfg, node_id=0), "topic": c.topic_properties()}
        for node_id, overrides in sorted(c.broker_overrides.items()):
            settings[f"broker {node_id}"] = properties(overrides)
        return settings | self.client_settings()

    def _chosen(self, settings: dict[str, dict[str, str]]) -> dict[str, list[str]]:
        c, w = self.scenario.cluster, self.scenario.workload
        chosen = {
            "broker": chosen_keys(
                TYPED_BROKER, c.model_fields_set, c.broker_config, settings["broker"]
            ),
            "topic": chosen_keys(
                TYPED_TOPIC, c.model_fields_set, c.topic_config, settings["topic"]
            ),
        }
        chosen |= {f"broker {n}": sorted(o) for n, o in c.broker_overrides.items()}
        for p in w.producers:
            scope = f"producer {p.id}"
            chosen[scope] = chosen_keys(
                TYPED_PRODUCER, p.model_fields_set, p.config, settings[scope]
            )
        for r in w.readers:
            scope = f"reader {r.id}"
            chosen[scope] = chosen_keys(TYPED_READER, r.model_fields_set, r.config, settings[scope])
        if (share := w.share_consumers) is not None:
            scopes = [f"share group {share.group}"]
            scopes += [f"share consumer {p}" for p in share.processes()]
            for scope in scopes:
                chosen[scope] = chosen_keys(
                    TYPED_SHARE, share.model_fields_set, share.group_config, settings[scope]
                )
        return chosen

    def _workload(self) -> None:
        # Leader and ISR as clients see them, from the first send until the cluster is whole.
        if self.watch is not None:
            self.watch.start()
        super()._workload()

    def _teardown(self) -> None:
        if self.watch is not None:
            self.watch.stop()
        super()._teardown()

    def _cluster_down(self) -> None:
        """The nodes' evidence copied out while their containers exist (a killed node's too),
        then the cluster down, then Kafka's own tool decodes what was copied."""
        if self.cluster is None:
            return
        started = time.monotonic()
        topics = [self.scenario.cluster.topic, output_topic(self.scenario.cluster.topic)]
        out = RunDir(self.run_dir).evidence
        spares_up = self.cluster.started_spares  # a spare never started has nothing to copy
        nodes = [
            n.name
            for n in self.cluster.nodes
            if n.role != "zookeeper" and (not n.spare or n.name in spares_up)
        ]
        found: list[evidence.NodeEvidence] = []
        try:
            found = evidence.collect(
                self.cluster.containers(), nodes, topics, out, self.opts.data_cap_mib
            )
            self._mark("evidence copied")
            if self._transactional():
                self._find_hanging(self.cluster, out, found)
                self._mark("hanging transactions listed")
            # ZooKeeper's transactions even after a migration finalized: the ensemble still runs,
            # and it holds what the ZooKeeper-mode controller and then the dual writes put there.
            zookeepers = [n.name for n in self.cluster.nodes if n.role == "zookeeper"]
            if zookeepers:
                found += evidence.collect_zookeeper(self.cluster, zookeepers, out)
        except Exception as e:  # noqa: BLE001 - evidence must never keep a cluster up
            log.error("the nodes' evidence was not copied: %s", e)
        super()._cluster_down()
        try:
            evidence.decode_all(self.cluster.newest_image(), topics, out, found)
            write_index(out, found, time.monotonic() - started)
            self._mark("evidence decoded")
        except Exception as e:  # noqa: BLE001
            log.error("the nodes' evidence was not decoded: %s", e)

    def _transactional(self) -> bool:
        w = self.scenario.workload
        return bool(w.copiers) or any(p.transaction is not None for p in w.producers)

    @staticmethod
    def _find_hanging(cluster: KafkaCluster, out: Path, found: list[evidence.NodeEvidence]) -> None:
        """Each running broker's open transactions that nothing will end, the brokers in
        parallel."""
        running = {n for n, c in cluster.containers().items() if c.status == "running"}
        brokers = [(i, n) for i, n in cluster.node_of.items() if n in running]
        with ThreadPoolExecutor(max_workers=max(1, len(brokers))) as pool:
            said = dict(
                zip(
                    [n for _, n in brokers],
                    pool.map(lambda b: evidence.find_hanging(cluster, b[1], b[0], out), brokers),
                    strict=True,
                )
            )
        for e in found:
            if e.node in said:
                if said[e.node] is None:
                    e.dumps["find-hanging"] = f"{e.node}/find-hanging.txt"
                else:
                    e.missing.append(f"find-hanging: {said[e.node]}")

    def _apply(self, step: KafkaStep) -> None:
        assert self.nemesis is not None
        self.nemesis.apply(step)

    def _recover(self) -> None:
        """Final heal, then wait until every broker of the cluster now is back and every
        replica in sync: the brokers it started with as add-broker and remove-broker changed
        them (a decommissioned broker the heal started again is one). The controller quorum is
        the one the quorum ops left (the cluster's voters): a removed controller stays out."""
        assert self.nemesis is not None and self.admin is not None and self.cluster is not None
        self.nemesis.heal_all()
        admin = self.admin
        expected = self.nemesis.expected_brokers(self._first_brokers())
        ok = wait_until(
            lambda: admin.registered_brokers() >= expected and admin.fully_in_sync(),
            self.scenario.timeouts.recovery,
            interval=2,
        )
        self.manifest.cluster_recovered = ok
        if self.nemesis.quorum is not None and self.manifest.topology is not None:
            self.manifest.topology["voters_at_end"] = list(self.cluster.quorum)
        if self.watch is not None:
            self.watch.stop()
        if not ok:
            log.warning(
                "cluster not whole and in sync after %.0f s", self.scenario.timeouts.recovery
            )


def share_group_entry(
    share: KafkaShareSpec, topic: str, said: dict[str, str], topic_id: str
) -> dict[str, object]:
    """A share group as the manifest's share_groups holds it for the checker: its topics and the
    delivery count limit and lock duration the brokers said they apply (the workload's own where
    they said none), its configs as said, and the rest of the workload's settings beside (what it
    asked of the group under `requested`: checkers.share_groups.ShareSetup reads only the
    applied ones)."""
    requested = share.requested()
    limit = said.get("share.delivery.count.limit", requested["delivery_count_limit"])
    lock = said.get("share.record.lock.duration.ms", requested["lock_duration_ms"])
    return share.settings(topic) | {
        "topics": [topic],
        "delivery_count_limit": int(str(limit)),
        "lock_duration_ms": int(str(lock)),
        "config": said,
        "topic_id": topic_id,
    }
