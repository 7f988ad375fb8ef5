"""The skeleton of one scenario run: cluster up, workload and nemesis, recovery, drain.

Every phase has a timeout, and whatever happens (failure, SIGINT, SIGTERM) the nemesis heals
and resumes every node and the cluster comes down before the run returns. Each system
(systems/<name>/run.py) fills in its cluster, clients, faults and drain; the harness checks the
history afterwards.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

import docker

from compose.cli import ComposeError
from compose.engine import EngineLost, EngineWatch
from compose.proxy import ProxyServer
from contract import VERSION
from contract.manifest import Manifest
from contract.rundir import DATA_CAP_MIB, make_run_dir, new_run_id
from contract.sequence import SequenceSlot
from nemesis.containers import NemesisError
from systems.client_path import PROXY_LOG, start_proxy
from systems.kafka.targets import TargetError
from systems.rabbitmq.cluster import LOCAL_IMAGE
from systems.scenario import scenario_data, to_yaml
from workloads.lifeline import HARNESS_PID_ENV

# A run in a sequence waits this long at most, cluster up, for the run before to be checked
# (the sequence stops a run that overruns its own bound well before).
TURN_TIMEOUT = 3600.0
SCHEDULE_HEADER = ["A generated schedule (harness chaos); replay it with: harness run <this file>"]

log = logging.getLogger("harness")


class Interrupted(BaseException):
    """SIGINT or SIGTERM during a run. A BaseException, as KeyboardInterrupt is: the phases'
    waits on brokers still starting catch every Exception and ask again, and one of them took
    a SIGINT during cluster_up for a broker's refusal and went on with the run."""


class PhaseProgress(Protocol):
    """What shows a run's phases as they go (the harness's live status line)."""

    def phase(
        self, name: str, timeout: float | None, detail: Callable[[], str] | None
    ) -> AbstractContextManager[None]: ...


class _Quiet:
    @contextmanager
    def phase(
        self, name: str, timeout: float | None, detail: Callable[[], str] | None
    ) -> Iterator[None]:
        yield


@dataclass(frozen=True)
class RunOptions:
    results_root: Path
    keep_cluster: bool = False
    spark_master: str | None = None  # None: the warm checker session, else a local Spark
    net_prefix: str | None = os.environ.get("BJ_NET_PREFIX")  # None: a free /24, chosen per run
    tools_image: str = os.environ.get("BJ_TOOLS_IMAGE", LOCAL_IMAGE)
    kafka_mode: str | None = None  # zk | kraft | kraft-dedicated; None: the scenario's first
    kafka_line: str | None = None  # "3.9" | "4.1"; None: the default line (3.9)
    seed: int | None = None  # the steps' drawn targets; None: a generated schedule's, or drawn
    # What became of each key of the team's own files (--config), as the manifest keeps it.
    config_files: tuple[dict[str, str], ...] = ()
    data_cap_mib: int = DATA_CAP_MIB  # per node, the raw data files kept as evidence at most
    # Its place in a sequence of runs (contract.sequence): its workload waits for the turn.
    slot: SequenceSlot | None = None


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
    client_module: str  # the workloads module whose processes are the clients
    tier: str  # "real-cluster" or "kafka-mock"

    def __init__(
        self,
        scenario: Any,
        scenario_file: Path | None,
        opts: RunOptions,
        progress: Callable[[Path], PhaseProgress] | None = None,
    ) -> None:
        self.scenario = scenario
        self.opts = opts
        self.run_id = new_run_id()
        self.paths = make_run_dir(opts.results_root, scenario.id, self.run_id)
        self.run_dir = self.paths.path
        self.history_dir = self.paths.history
        generated = scenario.generated
        if generated is not None:
            # A generated schedule travels with its run: `harness run RUN_DIR/schedule.yaml`
            # replays it.
            self.paths.schedule.write_text(to_yaml(scenario_data(scenario), SCHEDULE_HEADER))
            scenario_file = self.paths.schedule
        self.clients: dict[str, subprocess.Popen[bytes]] = {}
        # A client restarted (restart-client) runs as a new process, C1.2, C1.3, ...: each such
        # instance's client, in the order they started.
        self.client_of: dict[str, str] = {}
        # The phase under way and when its last step ended (the phase's start at first).
        self._marked: tuple[str, float] = ("cluster_up", time.monotonic())
        self.nemesis: Any = None  # the system's nemesis: heal_all() and its history
        # Toxiproxy between the workload's clients and the nodes, when a step needs it.
        self.proxy: ProxyServer | None = None
        self.cluster: Any = None  # the system's cluster: save_logs() and down()
        self.manifest = Manifest(
            scenario=scenario.id,
            claim=scenario.claim,
            expect=scenario.expect,
            description=scenario.description,
            scenario_file=str(scenario_file) if scenario_file else None,
            # What the scenario set, as its file would say it: read again (a shrink, a replay)
            # it is the same scenario, typed knobs left at their defaults still unset.
            scenario_spec=scenario_data(scenario),
            run_id=self.run_id,
            system=scenario.cluster.system,
            tier=self.tier,
            harness_version=VERSION,
            seed=generated.seed if generated else None,
            pick_seed=self._pick_seed(),
            config_files=list(opts.config_files),
            chaos=generated.model_dump(mode="json") if generated else None,
            groups=self.groups(),
            started=time.time(),
            harness_pid=os.getpid(),
            ended=None,
            phases={},
            nemesis_steps_done=0,
            drain_complete=False,
            cluster_recovered=None,
            error=None,
        )
        self.manifest.write(self.run_dir)
        if opts.slot is not None:
            opts.slot.say_run_dir(self.run_dir)
        self.progress = progress(self.history_dir) if progress else _Quiet()

    # ---- what each system provides -------------------------------------------------------

    def _pick_seed(self) -> int | None:
        """The seed of what the run draws as it goes (a step's targets, a mixed consumer's
        mode), when it draws anything."""
        if not self.scenario.draws_targets():
            return None
        if self.opts.seed is not None:
            return self.opts.seed
        generated = self.scenario.generated
        return generated.seed if generated else secrets.randbelow(1_000_000)

    def groups(self) -> list[str]:
        """The reader groups that must each receive every acknowledged message."""
        raise NotImplementedError

    def _cluster_up(self) -> None:
        raise NotImplementedError

    def _start_clients(self, start: float) -> list[str]:
        """Starts every client; returns the names of the producers to wait for."""
        raise NotImplementedError

    def _apply(self, step: Any) -> None:
        raise NotImplementedError

    def _recover(self) -> None:
        """Final heal, then wait for the cluster to be whole again."""
        raise NotImplementedError

    def _drain(self) -> None:
        raise NotImplementedError

    def _start_proxy(self, routes: dict[str, tuple[int, str]]) -> None:
        """The clients' proxy, when the cluster gave routes for it (a step faults the clients'
        path): one per node, in the manifest; stopped at teardown."""
        if routes:
            self.proxy = start_proxy(self.paths.logs / PROXY_LOG, routes)
            self.manifest.client_proxy = dict(self.proxy.proxies)

    def _heal_all(self) -> None:
        """End every fault (idempotent); called at teardown whatever happened."""
        if self.nemesis is not None:
            try:
                self.nemesis.heal_all()
            finally:
                if self.nemesis.history:
                    self.nemesis.history.close()

    def _cluster_down(self) -> None:
        """Keeps the nodes' logs, then removes the cluster (unless --keep)."""
        if self.cluster is None:
            return
        try:
            self.cluster.save_logs(self.run_dir / "logs")
        except OSError as e:  # a full disk: the cluster still comes down
            log.error("the nodes' logs were not saved: %s", e)
        self._mark("logs saved")
        if not self.opts.keep_cluster:
            self.cluster.down()
            self._mark("cluster removed")

    # ---- the skeleton --------------------------------------------------------------------

    def execute(self) -> None:
        """Runs the cluster phases; the caller checks the history afterwards. A run whose
        Docker engine went away meanwhile raises EngineLost, whatever else failed with it."""
        engine = EngineWatch(docker.from_env()) if self.tier == "real-cluster" else None
        phases = (
            ("cluster_up", self._cluster_up),
            *((("turn", self._take_turn),) if self.opts.slot else ()),
            ("workload", self._workload),
            ("recovery", self._recover),
            ("drain", self._drain),
        )
        current = phases[0][0]
        with _signals_interrupt():
            try:
                for current, fn in phases:
                    self._phase(current, fn)
                    if engine and (gone := engine.lost(current)):
                        raise gone
                if self.opts.slot is not None:  # the sequence may bring the next cluster up
                    self.opts.slot.say_drained()
            except BaseException as e:
                self.manifest.error = f"{type(e).__name__}: {e}"
                expected = isinstance(e, (EngineLost, Interrupted))  # nothing to ask the engine
                if engine and not expected and (gone := engine.lost(current, 3.0)):
                    self.manifest.error = f"EngineLost: {gone} (then {self.manifest.error})"
                    raise gone from None
                raise
            finally:
                self._teardown()
                if engine:
                    engine.close()

    def _phase(self, name: str, fn: Any) -> None:
        started = time.time()
        self._marked = (name, time.monotonic())
        log.info("phase %s", name)
        detail = self._containers_line if name == "cluster_up" else None
        try:
            with self.progress.phase(name, self._phase_timeout(name), detail):
                fn()
        finally:
            self.manifest.phases[name] = {"start": started, "end": time.time()}
            self.manifest.write(self.run_dir)

    def _mark(self, step: str) -> None:
        """The end of one step of cluster_up or the teardown: its seconds since the step
        before (or since the phase began), in the manifest."""
        now = time.monotonic()
        phase, since = self._marked
        steps = self.manifest.phase_steps
        mine = {**steps.get(phase, {}), step: round(now - since, 2)}
        self.manifest.phase_steps = {**steps, phase: mine}
        self._marked = (phase, now)

    def _take_turn(self) -> None:
        """In a sequence: waits, cluster up, until the run before has been checked."""
        assert self.opts.slot is not None
        waited = self.opts.slot.take_turn(TURN_TIMEOUT)
        log.info("the run before was checked; waited %.1f s for it", waited)

    def _phase_timeout(self, name: str) -> float | None:
        t = self.scenario.timeouts
        bounds = {
            "turn": TURN_TIMEOUT,
            "cluster_up": t.cluster_up,
            "workload": t.workload,
            "recovery": t.recovery,
            "drain": getattr(self.scenario.workload, "drain_timeout", None),
        }
        return bounds.get(name)

    def _containers_line(self) -> str:
        """While the cluster comes up: its containers running, and healthy where they say."""
        project = self.manifest.compose_project
        if not project:
            return "preparing the cluster"
        label = f"com.docker.compose.project={project}"
        containers = docker.from_env().containers.list(all=True, filters={"label": label})
        running = [c for c in containers if c.status == "running"]
        health = [c.attrs["State"].get("Health", {}).get("Status") for c in running]
        healthy = health.count("healthy")
        return f"containers running {len(running)}/{len(containers)}, healthy {healthy}"

    def _workload(self) -> None:
        start = time.time()
        producers = self._start_clients(start)
        history = getattr(self.nemesis, "history", None)
        for i, step in enumerate(self.scenario.nemesis):
            _sleep_until(start + step.at)
            if history is not None:  # the step's fault says how late it began
                history.schedule_next_invoke(start + step.at)
            try:
                self._step(i, step)
            finally:  # a step that failed before its fault leaves nothing for the next invoke
                if history is not None:
                    history.schedule_next_invoke(None)
            self.manifest.nemesis_steps_done += 1
        deadline = start + self.scenario.timeouts.workload + 30
        self.manifest.producer_exit_codes = {
            name: self._wait_client(name, deadline) for name in producers
        }

    def _step(self, i: int, step: Any) -> None:
        """One nemesis step. A scripted step that fails ends the run: the scenario asked for
        exactly that fault. A generated one is recorded and the schedule goes on, as Jepsen's
        nemesis does: a role that named no node at that moment (no leader while a majority is
        down), the heal of a fault that never began, or a broker's tool refusing what the draw
        asked of it (rabbitmqctl forget_cluster_node), is the draw's, not the broker's; the
        history keeps the step's fail."""
        try:
            self._apply(step)
            self._raise_unrecorded()
        except (NemesisError, TargetError, ComposeError) as e:
            if self.scenario.generated is None:
                raise
            log.warning("nemesis step %d (%s) not applied: %s", i, step.op, e)
            skipped = {"step": i, "op": step.op, "error": str(e)}
            self.manifest.skipped_steps = [*self.manifest.skipped_steps, skipped]

    def _raise_unrecorded(self) -> None:
        """A fault the nemesis could not record (a full disk) ends the run: its history would
        not say what was done to the cluster."""
        history = getattr(self.nemesis, "history", None)
        if history is not None and history.failed is not None:
            raise history.failed

    def _spawn(self, role: str, process: str, config: dict[str, Any]) -> None:
        config = {"process": process, "history_dir": str(self.history_dir), **config}
        cfg_path = self.run_dir / "logs" / f"{process}.config.json"
        cfg_path.write_text(json.dumps(config, indent=2))
        log_file = open(self.run_dir / "logs" / f"{process}.log", "wb")  # noqa: SIM115
        self.clients[process] = proc = subprocess.Popen(
            [sys.executable, "-m", self.client_module, role, str(cfg_path)],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=Path(__file__).resolve().parent.parent,
            # Ctrl-C in a terminal reaches the harness alone, which stops clients in order;
            # a harness killed outright takes them with it (workloads.lifeline).
            start_new_session=True,
            env={**os.environ, HARNESS_PID_ENV: str(os.getpid())},
        )
        self.manifest.client_pids = {**self.manifest.client_pids, process: proc.pid}
        self.manifest.write(self.run_dir)

    def running_clients(self) -> dict[str, int]:
        """Each client process still running, by name: its pid, which is also its process
        group's (each starts in a session of its own)."""
        return {
            self.client_of.get(name, name): proc.pid
            for name, proc in self.clients.items()
            if proc.poll() is None
        }

    def current(self, client: str) -> str:
        """The process of a client's current instance (itself, until restarted)."""
        later = [process for process, of in self.client_of.items() if of == client]
        return later[-1] if later else client

    def _wait_client(self, name: str, deadline: float) -> int:
        proc = self.clients[self.current(name)]
        try:
            return proc.wait(timeout=max(1.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            log.warning("client %s overran its deadline: killed", name)
            proc.kill()
            return proc.wait()

    def _teardown(self) -> None:
        # Signals would interrupt the cleanup itself: hold them until it is done.
        held = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
        self._marked = ("teardown", time.monotonic())
        try:
            for proc in self.clients.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            self._mark("clients stopped")
            try:
                self._heal_all()
            except Exception as e:  # noqa: BLE001 - keep tearing down; say what failed
                log.error("heal failed: %s (run `harness heal`)", e)
                self.manifest.heal_error = str(e)
            self._mark("faults healed")
            try:
                self._cluster_down()
            except Exception as e:  # noqa: BLE001
                log.error("cluster down failed: %s (run `harness heal`)", e)
            self.manifest.ended = time.time()
            try:
                self.manifest.write(self.run_dir)
            except OSError as e:
                log.error("the manifest was not written: %s", e)
        finally:
            if self.proxy is not None:
                self.proxy.stop()
            for s, h in held.items():
                signal.signal(s, h)
