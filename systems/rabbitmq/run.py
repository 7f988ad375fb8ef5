"""A RabbitMQ scenario on a real three-node cluster under Docker Compose."""

from __future__ import annotations

import functools
import json
import logging
import signal
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from contract.history import HistoryWriter
from contract.rundir import RunDir
from contract.topology import Endpoint
from contract.wait import wait_until
from nemesis.containers import Nemesis
from systems.client_path import ClientPath
from systems.evidence import write_index
from systems.rabbitmq import confschema, evidence, key_check
from systems.rabbitmq.broker_log import mirror_story
from systems.rabbitmq.cluster import LOAD_BALANCER, ClusterConfig, RabbitMQCluster
from systems.rabbitmq.nemesis import StepTargets, apply_step
from systems.rabbitmq.run_settings import (
    chosen_settings,
    conf_of,
    effective_policies,
    settings_of,
)
from systems.rabbitmq.scenario import Consumer, NemesisStep, RabbitMQScenario
from systems.rabbitmq.settings import consumer_process, rendered
from systems.run import PhaseProgress, RunOptions, ScenarioRun
from systems.scenario import ScenarioError
from workloads.rabbitmq.topology import DeclareRefused, declare_topology

log = logging.getLogger("harness")


def _host_port(address: str) -> tuple[str, int]:
    host, port = address.rsplit(":", 1)
    return host, int(port)


def final_group(queue: str) -> str:
    """The group of a stream's final read."""
    return f"{queue}.final"


def stream_positions(history_dir: Path, groups: set[str]) -> dict[str, int]:
    """For each reader group, the offset after the highest one its receives recorded."""
    highest: dict[str, int] = {}
    for path in history_dir.glob("*.jsonl"):
        with path.open() as lines:
            for line in lines:
                if '"receive"' not in line:
                    continue
                try:
                    e = json.loads(line)
                except ValueError:  # a line cut short by a killed process
                    continue
                group, offset = e.get("group"), e.get("offset")
                if group in groups and isinstance(offset, int):
                    highest[group] = max(highest.get(group, -1), offset)
    return {g: o + 1 for g, o in highest.items()}


def upgrade_releases(steps: list[NemesisStep]) -> tuple[str, ...]:
    """The releases the schedule's upgrade steps name, each once, in their order."""
    named = (s.release for s in steps if s.op == "upgrade" and s.release is not None)
    return tuple(dict.fromkeys(named))


def recovery_members(names: tuple[str, ...], forgotten: set[str]) -> tuple[str, ...]:
    """The nodes the recovery waits for: the cluster's current members."""
    return tuple(n for n in names if n not in forgotten)


class RabbitMQRun(ScenarioRun):
    scenario: RabbitMQScenario
    nemesis: Nemesis | None
    client_module = "workloads.rabbitmq.clients"
    tier = "real-cluster"

    def __init__(
        self,
        scenario: RabbitMQScenario,
        scenario_file: Path | None,
        opts: RunOptions,
        progress: Callable[[Path], PhaseProgress] | None = None,
    ) -> None:
        super().__init__(scenario, scenario_file, opts, progress)
        self.cluster: RabbitMQCluster | None = None
        self.endpoints: dict[str, Endpoint] = {}
        # Where the workload's clients connect when a proxy is on their path (else endpoints).
        self.client_endpoints: dict[str, Endpoint] = {}
        self.targets = StepTargets(
            scenario.workload.queues[0],
            nodes=list(scenario.cluster.node_names()),
            seed=self.manifest.pick_seed or 0,
        )

    def groups(self) -> list[str]:
        queues = list(self.scenario.workload.queues)
        return queues + [final_group(q) for q in queues if self._streams]

    @property
    def _streams(self) -> bool:
        return self.scenario.cluster.queue_type == "stream"

    def _cluster_up(self) -> None:
        c = self.scenario.cluster
        cluster = RabbitMQCluster(
            ClusterConfig(
                partition_handling=c.partition_handling,
                net_ticktime=c.net_ticktime,
                pause_if_all_down_nodes=tuple(c.pause_if_all_down_nodes),
                pause_if_all_down_recover=c.pause_if_all_down_recover,
                image=c.image,
                lazy_disks=c.lazy_disks,
                fake_clock=c.fake_clock,
                nodes=c.node_names(),
                load_balancer=c.load_balancer,
                version=c.version,
                rabbitmq_conf=tuple(rendered(c.rabbitmq_conf).items()),
                advanced_config=c.advanced_config,
                upgrades=upgrade_releases(self.scenario.nemesis),
            ),
            workdir=self.run_dir / "cluster",
            project=f"{self.scenario.id}-{self.run_id}".lower(),
            net_prefix=self.opts.net_prefix,
        )
        self._check_conf_against_the_image(cluster)
        self.cluster = cluster
        self.manifest.images = {"rabbitmq": self.cluster.image_info()}
        self.manifest.compose_project = self.cluster.project
        self.manifest.settings = settings_of(self.scenario)
        self.manifest.settings_from_scenario = chosen_settings(
            self.scenario, self.manifest.settings
        )
        self.manifest.write(self.run_dir)
        self.cluster.up(self.scenario.timeouts.cluster_up)
        self._mark("nodes healthy and clustered")
        self.manifest.cluster_network = f"{self.cluster.net_prefix}.0/24"
        self.manifest.images["rabbitmq"]["version"] = self.cluster.server_version()
        self.manifest.images["nemesis_tools"] = {"name": self.opts.tools_image}
        w = self.scenario.workload
        # Before the queues exist, so that each is born under its policy.
        for p in effective_policies(c, w.queues):
            self.cluster.set_policy(
                p["name"], p["pattern"], p["definition"], p["apply_to"], p["priority"]
            )
        self.endpoints = {e.node: e for e in self.cluster.endpoints()}
        nodes = [e for n, e in self.endpoints.items() if n != LOAD_BALANCER]
        if self.scenario.uses_proxy():
            self._start_proxy({e.node: (0, f"{e.host}:{e.port}") for e in nodes})
            assert self.proxy is not None
            # The clients connect to each node's proxy; the harness's own requests go direct.
            self.client_endpoints = {
                node: Endpoint(node, *_host_port(listen))
                for node, listen in self.proxy.proxies.items()
            }
        try:
            declare_topology(
                nodes,
                w.exchange,
                w.queues,
                c.queue_type,
                w.declared_arguments(),
                unbound=list(w.dead_letter.values()),
            )
        except DeclareRefused as e:
            raise ScenarioError(f"workload.queue_arguments: {e}") from None
        self._mark("policies and queues declared")
        self.nemesis = Nemesis(
            self.cluster.topology(),
            self.opts.tools_image,
            HistoryWriter(self.history_dir, "nemesis", c.system, keep_going=True),
            disks=self.cluster.disks,
            clocks=self.cluster.clocks,
        )
        if self.proxy is not None:
            self.nemesis.client_path = ClientPath(self.proxy, self.nemesis.logged)
        # The end of the run puts forgotten nodes and removed queue members back.
        self.nemesis.system_heals.append(
            functools.partial(self.cluster.membership.restore, self.nemesis)
        )
        self.manifest.topology = asdict(self.cluster.topology())
        self._mark("nemesis ready")

    def _check_conf_against_the_image(self, cluster: RabbitMQCluster) -> None:
        """The rabbitmq.conf keys against the release of the image this run starts, and of
        each image an upgrade step moves nodes to, before any of its containers does: the
        scenario was checked against the release it names, and --rabbitmq, an image of its own
        or the official image may hold another."""
        conf = conf_of(self.scenario.cluster)
        for image in dict.fromkeys([cluster.image, *cluster.upgrade_images.values()]):
            try:
                schema = confschema.of_image(image, cluster.release_of(image))
            except confschema.ConfSchemaError as e:
                log.warning("rabbitmq.conf not checked against %s: %s", image, e)
                continue
            if refused := next(iter(key_check.refusals(schema, conf)), None):
                raise ScenarioError(f"cluster.rabbitmq_conf: {refused}")
            for key, note in key_check.ignored(schema, conf).items():
                log.warning("RabbitMQ %s ignores %s (its schema: %s)", schema.release, key, note)

    def _start_clients(self, start: float) -> list[str]:
        w, t = self.scenario.workload, self.scenario.timeouts
        publish_deadline = start + t.workload
        consume_deadline = publish_deadline + t.recovery + w.drain.timeout + 30
        for i, c in enumerate(w.consumers, 1):
            self._spawn_consumer(consumer_process(i, c.queue), c, consume_deadline, False)
        for p in w.publishers:
            self._spawn(
                "publisher",
                p.id,
                {
                    "endpoints": self._endpoints_for(p.nodes),
                    "exchange": w.exchange,
                    "count": p.count,
                    "deadline": publish_deadline,
                    "rate": p.rate,
                    "in_flight": p.in_flight,
                    "confirm_timeout": p.confirm_timeout,
                    "body_bytes": p.body_bytes,
                    "connection": p.connection.overrides(),
                },
            )
        return [p.id for p in w.publishers]

    def _recover(self) -> None:
        """Final heal, then wait until every member runs in one cluster again: every node, but
        one the heal could not add back (a forgotten node is no member to wait for), and, once
        a membership step ran, every quorum queue with its first members."""
        assert self.nemesis is not None and self.cluster is not None
        self.nemesis.heal_all()
        cluster, membership = self.cluster, self.cluster.membership
        names = recovery_members(self.nemesis.topology.names, membership.forgotten)
        everyone = {f"rabbit@{n}" for n in names}

        def reunited() -> bool:
            try:
                together = all(set(cluster.running_nodes(n)) == everyone for n in names)
                return together and (not membership.changed() or membership.whole())
            except Exception:  # noqa: BLE001 - a node still starting answers with errors
                return False

        ok = wait_until(reunited, self.scenario.timeouts.recovery, interval=2)
        self.manifest.cluster_recovered = ok
        # Ignore mode leaves a healed partition in place: say so, node by node.
        self.manifest.partitions_after_recovery = self._partitions(names)
        if not ok:
            log.warning("cluster not reunited after %.0f s", self.scenario.timeouts.recovery)
        try:  # where the declare steps' queues are now (a split cluster's sides may differ)
            cluster.declares.after_heal(self.nemesis)
        except Exception as e:  # noqa: BLE001 - the history keeps the fail; the run goes on
            log.warning("the declare steps' queues were not looked for: %s", e)

    def _cluster_down(self) -> None:
        if self.cluster is not None:
            self._collect_evidence(self.cluster)
            self._mark("evidence read")
        super()._cluster_down()
        if self.cluster is None or self.scenario.cluster.queue_type != "mirrored":
            return
        # The broker's word on its mirrors (R5): read from the logs just saved.
        logs = {
            n: path.read_text(errors="replace")
            for n in self.cluster.nodes
            if (path := self.run_dir / "logs" / f"{n}.log").exists()
        }
        self.manifest.mirrored_queues = mirror_story(logs)

    def _collect_evidence(self, cluster: RabbitMQCluster) -> None:
        """Each node's word on the cluster and the queues, while the nodes still run."""
        started = time.monotonic()
        w = self.scenario.workload
        queues = [*w.queues, *w.dead_letter.values()]
        out = RunDir(self.run_dir).evidence
        try:
            found = evidence.collect(
                cluster,
                list(cluster.nodes),
                self.scenario.cluster.queue_type,
                queues,
                out,
                cluster.release(),
            )
            write_index(out, found, time.monotonic() - started)
        except Exception as e:  # noqa: BLE001 - evidence must never keep a cluster up
            log.error("the nodes' evidence was not read: %s", e)

    def _partitions(self, names: tuple[str, ...]) -> dict[str, Any]:
        """Each node's view of the partitions it still reports (None: it did not answer)."""
        assert self.cluster is not None
        out: dict[str, Any] = {}
        for n in names:
            try:
                out[n] = self.cluster.cluster_status(n).get("partitions") or {}
            except Exception:  # noqa: BLE001 - a node that does not answer says nothing
                out[n] = None
        return out

    def _spawn_consumer(
        self,
        process: str,
        c: Consumer,
        deadline: float,
        drain_now: bool,
        group: str | None = None,
        start_offset: int | None = None,
    ) -> None:
        w = self.scenario.workload
        self._spawn(
            "consumer",
            process,
            {
                "endpoints": self._endpoints_for(c.nodes),
                "queue": c.queue,
                "deadline": deadline,
                "prefetch": c.prefetch,
                "delay": c.delay,
                "drain_quiet": w.drain.quiet,
                "drain_timeout": w.drain.timeout,
                "drain_at_start": drain_now,
                "stream": self._streams,
                "group": group or w.group_of(c.queue),
                "start_offset": start_offset,
                "connection": c.connection.overrides(),
                "mode": c.mode,
                "ack": c.ack,
                "seed": self.manifest.pick_seed or 0,
            },
        )

    def _drain(self) -> None:
        """Consumers read until quiet; then the broker is asked, and until the drain timeout,
        any queue that still holds messages gets a fresh consumer.

        A consumer hearing nothing for its quiet period does not prove the queue empty (a
        mirror synchronising after a heal blocks its queue): the queue's depth does. A stream
        keeps what was read: its reader group is drained once it has read up to the stream's
        end, and a fresh reader takes over from where the group stopped until it has.
        """
        deadline = time.time() + self.scenario.workload.drain.timeout
        consumers = [name for name in self.clients if name.startswith("consumer")]
        for name in consumers:
            self.clients[name].send_signal(signal.SIGUSR1)
        unread: Callable[[], dict[str, int | None]] = (
            functools.partial(self._unread_streams, final=False)
            if self._streams
            else self._undrained_queues
        )
        codes, undrained, rounds = self._read_in_rounds(consumers, unread, False, deadline)
        final_codes: dict[str, int] = {}
        final_unread: dict[str, int | None] = {}
        if self._streams:
            final_codes, final_unread = self._final_stream_reads(deadline)
        self.manifest.consumer_exit_codes = codes | final_codes
        self.manifest.drain_rounds = rounds + 1
        self.manifest.drain_complete = not undrained and not final_unread

    def _read_in_rounds(
        self,
        consumers: list[str],
        unread: Callable[[], dict[str, int | None]],
        final: bool,
        deadline: float,
    ) -> tuple[dict[str, int], dict[str, int | None], int]:
        """Waits for the consumers; while a queue is left unread (queue -> the offset to go on
        from, for a stream) and time is left, sends in a fresh consumer for it."""
        codes: dict[str, int] = {}
        rounds = 0
        while True:
            for name in consumers:
                codes[name] = self._wait_client(name, deadline + 30)
            left = unread()
            if not left or time.time() >= deadline:
                return codes, left, rounds
            rounds += 1
            consumers = []
            for i, c in enumerate(self.scenario.workload.consumers, 1):
                if c.queue in left:
                    name = f"consumer{i}-{c.queue}-{'final' if final else 'drain'}{rounds}"
                    group = final_group(c.queue) if final else None
                    self._spawn_consumer(name, c, deadline, True, group, left[c.queue])
                    consumers.append(name)

    def _final_stream_reads(self, deadline: float) -> tuple[dict[str, int], dict[str, int | None]]:
        """Each stream read again from its first offset by a fresh reader (its own group), to
        the stream's end: what the log holds once the faults are over, as Kafka's final read
        shows a topic's."""
        started = []
        for i, c in enumerate(self.scenario.workload.consumers, 1):
            name = f"consumer{i}-{c.queue}-final"
            self._spawn_consumer(name, c, deadline + 30, True, final_group(c.queue))
            started.append(name)
        unread = functools.partial(self._unread_streams, final=True)
        codes, left, _ = self._read_in_rounds(started, unread, True, deadline + 30)
        return codes, left

    def _unread_streams(self, final: bool) -> dict[str, int | None]:
        """Streams whose reader group (live or final) has not read up to the stream's end, each
        with the offset after the last one the group read (None: it read nothing)."""
        assert self.cluster is not None
        queues = self.scenario.workload.queues
        groups = {q: final_group(q) if final else q for q in queues}
        read = stream_positions(self.history_dir, set(groups.values()))
        # A stream keeps what was read: its depth is no message left unread, so it is not
        # recorded as queues_after_drain.
        try:
            depths = self.cluster.queue_depths()
        except Exception:  # noqa: BLE001 - no answer: nothing can be called read
            return {q: read.get(groups[q]) for q in queues}
        # A stream's offsets count its messages from 0: its end is its message count.
        return {
            q: read.get(groups[q])
            for q in queues
            if q in depths and (read.get(groups[q]) or 0) < int(depths[q]["messages"])
        }

    def _undrained_queues(self) -> dict[str, int | None]:
        """Queues that still hold messages, are not running, or could not be asked.

        A queue that no longer exists is drained: its messages went with it (that is loss,
        and the checker reports it).
        """
        assert self.cluster is not None
        w = self.scenario.workload
        queues = set(w.queues) | set(w.dead_letter.values())
        try:
            depths = self.cluster.queue_depths()
        except Exception as e:  # noqa: BLE001 - no answer means we cannot say it drained
            self.manifest.queues_after_drain = {"error": str(e)}
            return dict.fromkeys(queues)
        self.manifest.queues_after_drain = depths
        undrained: dict[str, int | None] = {
            q: None
            for q in queues
            if q in depths and (depths[q]["messages"] != 0 or depths[q]["state"] != "running")
        }
        for q in sorted(undrained):
            log.warning("queue %s not drained yet: %s", q, depths[q])
        return undrained

    def _apply(self, step: NemesisStep) -> None:
        assert self.nemesis is not None and self.cluster is not None
        apply_step(self.nemesis, self.cluster, step, self.targets)

    def _endpoints_for(self, nodes: list[str]) -> list[dict[str, Any]]:
        """The client's nodes in its order, those the cluster has; with a load balancer, it
        alone (the RabbitMQ reliability article's assumption 4: every client on the node it
        chooses)."""
        endpoints = self.client_endpoints or self.endpoints
        if LOAD_BALANCER in endpoints:
            return [asdict(endpoints[LOAD_BALANCER])]
        named = nodes or self.scenario.cluster.node_names()
        return [asdict(endpoints[n]) for n in named if n in endpoints]
