"""One scenario end to end: cluster up, workload and nemesis, heal, drain, check, verdict.

Every phase has a timeout, and whatever happens (failure, SIGINT, SIGTERM) the nemesis heals
and resumes every node and the cluster comes down before the run returns.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from compose.rabbitmq import LOCAL_IMAGE, ClusterConfig, RabbitMQCluster
from harness import __version__
from harness.history import HistoryWriter
from harness.results import make_run_dir, new_run_id, write_manifest
from harness.scenario import Consumer, NemesisStep, Scenario
from nemesis.faults import Nemesis, wait_until
from workloads.rabbitmq import declare_topology

log = logging.getLogger("harness")

CONSUMER_DRAIN_TIMED_OUT = 3  # exit code of a consumer whose drain hit its timeout


class Interrupted(Exception):
    """SIGINT or SIGTERM during a run."""


class RunError(Exception):
    """A run that could not complete; one line for the user."""


@dataclass(frozen=True)
class RunOptions:
    results_root: Path
    keep_cluster: bool = False
    spark_master: str = "local[*]"
    net_prefix: str = os.environ.get("BJ_NET_PREFIX", "172.29.57")
    tools_image: str = os.environ.get("BJ_TOOLS_IMAGE", LOCAL_IMAGE)


@contextmanager
def _signals_interrupt() -> Iterator[None]:
    def handler(signum: int, _frame: FrameType | None) -> None:
        raise Interrupted(signal.Signals(signum).name)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _sleep_until(t: float) -> None:
    while (left := t - time.time()) > 0:
        time.sleep(min(left, 0.5))


class ScenarioRun:
    def __init__(self, scenario: Scenario, scenario_file: Path | None, opts: RunOptions) -> None:
        self.scenario = scenario
        self.opts = opts
        self.run_id = new_run_id()
        self.run_dir = make_run_dir(opts.results_root, scenario.id, self.run_id)
        self.history_dir = self.run_dir / "history"
        self.clients: dict[str, subprocess.Popen[bytes]] = {}
        self.nemesis: Nemesis | None = None
        self.cluster: RabbitMQCluster | None = None
        self.manifest: dict[str, Any] = {
            "scenario": scenario.id,
            "claim": scenario.claim,
            "expect": scenario.expect,
            "description": scenario.description,
            "scenario_file": str(scenario_file) if scenario_file else None,
            "scenario_spec": scenario.model_dump(mode="json", by_alias=True),
            "run_id": self.run_id,
            "system": scenario.cluster.system,
            "tier": "real-cluster",
            "harness_version": __version__,
            # Nothing in a RabbitMQ run is drawn at random: the schedule is the scenario's.
            "seed": None,
            "groups": list(scenario.workload.queues),
            "started": time.time(),
            "ended": None,
            "phases": {},
            "nemesis_steps_done": 0,
            "drain_complete": False,
            "cluster_recovered": None,
            "error": None,
        }
        write_manifest(self.run_dir, self.manifest)

    # ---- phases --------------------------------------------------------------------------

    def execute(self) -> None:
        """Runs the cluster phases; the caller checks the history afterwards."""
        with _signals_interrupt():
            try:
                self._phase("cluster_up", self._cluster_up)
                self._phase("workload", self._workload)
                self._phase("recovery", self._recover)
                self._phase("drain", self._drain)
            except BaseException as e:
                self.manifest["error"] = f"{type(e).__name__}: {e}"
                raise
            finally:
                self._teardown()

    def _phase(self, name: str, fn: Any) -> None:
        started = time.time()
        log.info("phase %s", name)
        try:
            fn()
        finally:
            self.manifest["phases"][name] = {"start": started, "end": time.time()}
            write_manifest(self.run_dir, self.manifest)

    def _cluster_up(self) -> None:
        c = self.scenario.cluster
        self.cluster = RabbitMQCluster(
            ClusterConfig(
                partition_handling=c.partition_handling,
                net_ticktime=c.net_ticktime,
                pause_if_all_down_nodes=tuple(c.pause_if_all_down_nodes),
                pause_if_all_down_recover=c.pause_if_all_down_recover,
                image=c.image,
            ),
            workdir=self.run_dir / "cluster",
            project=f"{self.scenario.id}-{self.run_id}".lower(),
            net_prefix=self.opts.net_prefix,
        )
        self.manifest["images"] = {"rabbitmq": self.cluster.image_info()}
        self.manifest["compose_project"] = self.cluster.project
        write_manifest(self.run_dir, self.manifest)
        self.cluster.up(self.scenario.timeouts.cluster_up)
        self.manifest["images"]["rabbitmq"]["version"] = self.cluster.server_version()
        self.manifest["images"]["nemesis_tools"] = {"name": self.opts.tools_image}
        w = self.scenario.workload
        if c.queue_type == "mirrored":
            self.cluster.set_mirroring_policy(
                "^(" + "|".join(re.escape(q) for q in w.queues) + ")$"
            )
        self.endpoints = {e.node: e for e in self.cluster.endpoints()}
        declare_topology(list(self.endpoints.values()), w.exchange, w.queues, c.queue_type)
        self.nemesis = Nemesis(
            self.cluster.topology(),
            self.opts.tools_image,
            HistoryWriter(self.history_dir, "nemesis", c.system),
        )
        self.manifest["topology"] = asdict(self.cluster.topology())

    def _workload(self) -> None:
        w, t = self.scenario.workload, self.scenario.timeouts
        start = time.time()
        publish_deadline = start + t.workload
        consume_deadline = publish_deadline + t.recovery + w.drain.timeout + 30
        for i, c in enumerate(w.consumers, 1):
            self._spawn_consumer(f"consumer{i}-{c.queue}", c, consume_deadline, drain_now=False)
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
                },
            )
        assert self.nemesis is not None
        for step in self.scenario.nemesis:
            _sleep_until(start + step.at)
            self._apply(step)
            self.manifest["nemesis_steps_done"] += 1
        for p in w.publishers:
            self._wait_client(p.id, publish_deadline + 30)

    def _recover(self) -> None:
        """Final heal, then wait until every node runs in one cluster again."""
        assert self.nemesis is not None and self.cluster is not None
        self.nemesis.heal_all()
        cluster = self.cluster
        everyone = {f"rabbit@{n}" for n in self.nemesis.topology.names}

        def reunited() -> bool:
            try:
                return all(set(cluster.running_nodes(n)) == everyone for n in self.nemesis_names())
            except Exception:  # noqa: BLE001 - a node still starting answers with errors
                return False

        ok = wait_until(reunited, self.scenario.timeouts.recovery, interval=2)
        self.manifest["cluster_recovered"] = ok
        if not ok:
            log.warning("cluster not reunited after %.0f s", self.scenario.timeouts.recovery)

    def nemesis_names(self) -> tuple[str, ...]:
        assert self.nemesis is not None
        return self.nemesis.topology.names

    def _spawn_consumer(self, process: str, c: Consumer, deadline: float, drain_now: bool) -> None:
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
            },
        )

    def _drain(self) -> None:
        """Consumers read until quiet; then the broker is asked, and until the drain timeout,
        any queue that still holds messages gets a fresh consumer.

        A consumer hearing nothing for its quiet period does not prove the queue empty (a
        mirror synchronising after a heal blocks its queue): the queue's depth does.
        """
        w = self.scenario.workload
        deadline = time.time() + w.drain.timeout
        consumers = [name for name in self.clients if name.startswith("consumer")]
        for name in consumers:
            self.clients[name].send_signal(signal.SIGUSR1)
        codes: dict[str, int] = {}
        rounds = 0
        while True:
            for name in consumers:
                codes[name] = self._wait_client(name, deadline + 30)
            undrained = self._undrained_queues()
            if not undrained or time.time() >= deadline:
                break
            rounds += 1
            consumers = []
            for i, c in enumerate(w.consumers, 1):
                if c.queue in undrained:
                    name = f"consumer{i}-{c.queue}-drain{rounds}"
                    self._spawn_consumer(name, c, deadline, drain_now=True)
                    consumers.append(name)
        self.manifest["consumer_exit_codes"] = codes
        self.manifest["drain_rounds"] = rounds + 1
        self.manifest["drain_complete"] = not undrained

    def _undrained_queues(self) -> set[str]:
        """Queues that still hold messages, are not running, or could not be asked.

        A queue that no longer exists is drained: its messages went with it (that is loss,
        and the checker reports it).
        """
        assert self.cluster is not None
        queues = set(self.scenario.workload.queues)
        try:
            depths = self.cluster.queue_depths()
        except Exception as e:  # noqa: BLE001 - no answer means we cannot say it drained
            self.manifest["queues_after_drain"] = {"error": str(e)}
            return queues
        self.manifest["queues_after_drain"] = depths
        undrained = {
            q
            for q in queues
            if q in depths and (depths[q]["messages"] != 0 or depths[q]["state"] != "running")
        }
        for q in sorted(undrained):
            log.warning("queue %s not drained yet: %s", q, depths[q])
        return undrained

    def _apply(self, step: NemesisStep) -> None:
        n = self.nemesis
        assert n is not None
        match step.op:
            case "isolate":
                n.isolate(step.nodes)
            case "partition":
                n.partition(step.groups)
            case "cut":
                n.cut(step.from_, step.to)
            case "cut-clients":
                n.cut_clients(step.nodes)
            case "heal":
                n.heal(step.nodes or None)
            case "kill" | "stop" | "start" | "pause" | "resume" | "restart":
                getattr(n, step.op)(step.nodes)

    # ---- clients -------------------------------------------------------------------------

    def _endpoints_for(self, nodes: list[str]) -> list[dict[str, Any]]:
        return [asdict(self.endpoints[n]) for n in nodes]

    def _spawn(self, role: str, process: str, config: dict[str, Any]) -> None:
        config = {"process": process, "history_dir": str(self.history_dir), **config}
        cfg_path = self.run_dir / "logs" / f"{process}.config.json"
        cfg_path.write_text(json.dumps(config, indent=2))
        log_file = open(self.run_dir / "logs" / f"{process}.log", "wb")  # noqa: SIM115
        self.clients[process] = subprocess.Popen(
            [sys.executable, "-m", "workloads.rabbitmq", role, str(cfg_path)],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=Path(__file__).resolve().parent.parent,
        )

    def _wait_client(self, name: str, deadline: float) -> int:
        proc = self.clients[name]
        try:
            return proc.wait(timeout=max(1.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            log.warning("client %s overran its deadline: killed", name)
            proc.kill()
            return proc.wait()

    # ---- teardown ------------------------------------------------------------------------

    def _teardown(self) -> None:
        # Signals would interrupt the cleanup itself: hold them until it is done.
        held = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            for proc in self.clients.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            if self.nemesis is not None:
                try:
                    self.nemesis.heal_all()
                except Exception as e:  # noqa: BLE001 - keep tearing down; say what failed
                    log.error("heal failed: %s (run `harness heal`)", e)
                    self.manifest["heal_error"] = str(e)
                if self.nemesis.history:
                    self.nemesis.history.close()
            if self.cluster is not None:
                self.cluster.save_logs(self.run_dir / "logs")
                if not self.opts.keep_cluster:
                    try:
                        self.cluster.down()
                    except Exception as e:  # noqa: BLE001
                        log.error("cluster down failed: %s (run `harness heal`)", e)
            self.manifest["ended"] = time.time()
            write_manifest(self.run_dir, self.manifest)
        finally:
            for s, h in held.items():
                signal.signal(s, h)
