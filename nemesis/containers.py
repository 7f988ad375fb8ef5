"""The nemesis: applies network, process, disk and clock faults to a cluster and logs each to
the history.

Network rules run in each node's own network namespace from a short-lived helper container
(`--network container:<node>`, NET_ADMIN), so nodes built from official images, which have no
iptables, can be cut too, on Linux and on Docker Desktop alike.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import docker
import docker.errors
from docker.models.containers import Container
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_fixed

from contract.history import HistoryWriter
from contract.topology import Topology
from nemesis import network
from nemesis.network import CLIENTS, NetworkState

log = logging.getLogger(__name__)
# On every short-lived helper container: `remove=True` is the client's, not the engine's, and an
# engine that goes away between the helper's end and its removal leaves it (`harness heal`
# removes what carries this label).
HELPER_LABEL = "org.brokerjepsen.helper"
HELPER_LABELS = {HELPER_LABEL: "nemesis"}


class NemesisError(Exception):
    """A fault that could not be applied; one line for the user."""


class Corruption(Protocol):
    """What a corrupt step changes (lazyfs.corrupt.Corruption; the nemesis only carries it)."""

    @property
    def path(self) -> str: ...
    @property
    def seed(self) -> int: ...
    @property
    def files(self) -> int: ...
    @property
    def length(self) -> int: ...
    @property
    def offset(self) -> int | None: ...
    @property
    def how(self) -> str: ...

    def for_node(self, node: str) -> Corruption:
        """The same corruption from the node's own seed."""
        ...


class Disks(Protocol):
    """Nodes whose data directory can lose power or fail (compose.disks.LazyDisks)."""

    def has(self, node: str) -> bool: ...

    def power_loss(self, node: str) -> dict[str, Any]:
        """Drops what the node's disk never fsynced (its container down); returns the toll."""
        ...

    def disk_error(self, nodes: list[str], on: str, path: str, probability: float) -> None:
        """The nodes' disks fail those calls with EIO, until disk_ok."""
        ...

    def disk_full(self, nodes: list[str]) -> None:
        """The nodes' disks are full (ENOSPC, no space free), until disk_ok."""
        ...

    def disk_ok(self, nodes: list[str] | None = None) -> None:
        """The nodes' disks (None: every one) fail nothing any more."""
        ...

    def torn_write(self, nodes: list[str], path: str, keep: float) -> None:
        """The nodes' power losses tear the last unsynced write of matching files, until
        disk_ok."""
        ...

    # spec: a lazyfs.corrupt.Corruption, which the nemesis carries without importing lazyfs (a
    # layer it does not stand on); typed loosely here so that the disks may take the concrete one.
    def corrupt(self, node: str, spec: Any) -> list[dict[str, Any]]:
        """Changes bytes of the node's data files; returns each change (old and new bytes)."""
        ...


class Clocks(Protocol):
    """Nodes whose clock can be set off true time (compose.clocks.FakeClocks)."""

    def has(self, node: str) -> bool: ...

    def set_offset(self, nodes: list[str], offset: float) -> dict[str, float]:
        """The nodes' clocks read `offset` s off true time; returns each node's offset."""
        ...

    def reset(self, nodes: list[str] | None = None) -> None:
        """The nodes' clocks (None: every one) true again."""
        ...


class ClientPathFaults(Protocol):
    """The faults of the clients' path through a proxy (systems.client_path)."""

    @property
    def in_effect(self) -> bool: ...

    def heal(self, nodes: Iterable[str] | None = None) -> None: ...


class Nemesis:
    def __init__(
        self,
        topology: Topology,
        tools_image: str,
        history: HistoryWriter | None = None,
        client: docker.DockerClient | None = None,
        disks: Disks | None = None,
        clocks: Clocks | None = None,
    ) -> None:
        self.topology = topology
        self.tools_image = tools_image
        self.history = history
        self.docker = client or docker.from_env()
        self.state = NetworkState()
        self.paused: set[str] = set()
        self.down: set[str] = set()
        self.disks = disks
        self.disk_faulted: set[str] = set()  # nodes whose disk fails calls until a disk-ok
        self.clocks = clocks
        self.clock_skewed: set[str] = set()  # nodes whose clock is off until a clock-ok
        # The faults of the clients' path through a proxy, when the run has one (set by the
        # system's run, which owns the proxy): healed with the network's.
        self.client_path: ClientPathFaults | None = None
        # A system's own faults' heals (RabbitMQ's membership), run last by heal_all: they need
        # the nodes up and the network whole. Each is idempotent and says what it left.
        self.system_heals: list[Callable[[], Any]] = []

    # ---- network -------------------------------------------------------------------------

    @property
    def addresses(self) -> dict[str, str]:
        addresses = {n.name: n.address for n in self.topology.nodes}
        addresses[CLIENTS] = self.topology.client_address
        return addresses

    def isolate(self, nodes: Iterable[str]) -> None:
        nodes = list(nodes)
        cuts = network.isolate(nodes, self.topology.names)
        self.logged("start-partition", {"op": "isolate", "nodes": nodes}, lambda: self._cut(cuts))

    def partition(self, groups: Iterable[Iterable[str]]) -> None:
        groups = [list(g) for g in groups]
        cuts = network.partition(groups, self.topology.names)
        self.logged(
            "start-partition", {"op": "partition", "groups": groups}, lambda: self._cut(cuts)
        )

    def cut(self, sources: Iterable[str], destinations: Iterable[str]) -> None:
        sources, destinations = list(sources), list(destinations)
        cuts = network.one_way(sources, destinations)
        value = {"op": "cut", "from": sources, "to": destinations}
        self.logged("start-partition", value, lambda: self._cut(cuts))

    def cut_clients(self, nodes: Iterable[str]) -> None:
        nodes = list(nodes)
        cuts = network.cut_clients(nodes)
        self.logged(
            "start-partition", {"op": "cut-clients", "nodes": nodes}, lambda: self._cut(cuts)
        )

    def degrade(
        self,
        sources: Iterable[str],
        destinations: Iterable[str],
        loss_pct: float = 0.0,
        delay_ms: int = 0,
        jitter_ms: int = 0,
        rate_kbit: int = 0,
    ) -> None:
        """Links from sources to destinations lose, delay or rate-limit what they carry."""
        sources, destinations = list(sources), list(destinations)
        links = network.degrade(sources, destinations, loss_pct, delay_ms, jitter_ms, rate_kbit)
        value = {
            "op": "degrade",
            "from": sources,
            "to": destinations,
            "loss_pct": loss_pct,
            "delay_ms": delay_ms,
            "jitter_ms": jitter_ms,
            "rate_kbit": rate_kbit,
        }
        self.logged("start-degrade", value, lambda: self._change(self.state.with_degraded(links)))

    def heal(self, nodes: Iterable[str] | None = None) -> None:
        """The network's faults of `nodes` (None: every node's) ended, their clients' path's
        first (what a hold held is delivered then)."""
        names = list(nodes) if nodes else None
        if self.client_path is not None:
            self.client_path.heal(names)

        def apply() -> dict[str, Any]:
            self._change(self.state.healed(names))
            return {
                "remaining_cuts": _cut_list(self.state.cuts),
                "remaining_degraded": len(self.state.degraded),
            }

        self.logged("stop-partition", {"op": "heal", "nodes": names or "all"}, apply)

    def _cut(self, cuts: set[network.Cut]) -> dict[str, Any]:
        self._change(self.state.with_cuts(cuts))
        return {"cuts": _cut_list(cuts)}

    def _change(self, new: NetworkState) -> None:
        """Moves to `new`, rewriting the rules of every node whose rules differ."""
        before, self.state = self.state, new

        def rules(state: NetworkState, n: str) -> tuple[object, ...]:
            return (state.rules_on(n), state.losses_on(n), state.shaped_from(n))

        nodes = before.nodes_with_rules() | new.nodes_with_rules()
        changed = sorted(n for n in nodes if rules(before, n) != rules(new, n))
        try:
            self._apply_rules(changed)
        except NemesisError:
            # A fault that could not be applied must not linger half-applied: back to before.
            self.state = before
            self._apply_rules(changed)
            raise

    def _apply_rules(self, nodes: Iterable[str]) -> None:
        for name in nodes:
            if name in self.down:
                continue  # a stopped node has no namespace; its rules go on when it starts
            script = network.iptables_restore_script(name, self.state, self.addresses)
            shaping = network.tc_script(name, self.state, self.addresses)
            self._in_namespace(name, f"{network.apply_command(script)} && {{ {shaping}; }}")

    def _in_namespace(self, name: str, command: str) -> None:
        node = self.topology.node(name)
        try:
            self.docker.containers.run(
                self.tools_image,
                entrypoint=["sh", "-c", command],
                network_mode=f"container:{node.container}",
                cap_add=["NET_ADMIN"],
                labels=HELPER_LABELS,
                remove=True,
                stdout=True,
                stderr=True,
            )
        except docker.errors.ContainerError as e:
            err = (e.stderr or b"").decode(errors="replace").strip().splitlines()
            raise NemesisError(f"network rules on {name} failed: {err[-1] if err else e}") from None
        except docker.errors.APIError as e:
            raise NemesisError(
                f"cannot enter {name}'s network namespace: {e.explanation}"
            ) from None

    # ---- processes -----------------------------------------------------------------------

    def kill(self, nodes: Iterable[str]) -> None:
        def kill_one(c: Container, n: str) -> None:
            c.kill(signal=signal.SIGKILL)
            self._stopped(n)

        self._each("kill", nodes, kill_one)

    def stop(self, nodes: Iterable[str]) -> None:
        def stop_one(c: Container, n: str) -> None:
            c.stop(timeout=30)
            self._stopped(n)

        self._each("stop", nodes, stop_one)

    def start(self, nodes: Iterable[str]) -> None:
        self._each("start", nodes, lambda c, n: self._started(n, c))

    def restart(self, nodes: Iterable[str]) -> None:
        def restart_one(c: Container, n: str) -> None:
            c.stop(timeout=30)
            self._stopped(n)
            self._started(n, c)

        self._each("restart", nodes, restart_one)

    def power_loss(self, nodes: Iterable[str]) -> None:
        """The nodes lose power together: each killed (-9), then every write their disks never
        fsynced is dropped, then they start again."""
        names = list(nodes)
        disks = self._lazy_disks("power-loss", names)

        def apply() -> dict[str, Any]:
            containers = {n: self._container(n) for n in names}
            for name, container in containers.items():
                container.kill(signal=signal.SIGKILL)
                self._stopped(name)
            for container in containers.values():
                container.wait(timeout=60)  # nothing may hold the disk when it is unmounted
            dropped = {name: disks.power_loss(name) for name in names}
            for name, container in containers.items():
                self._started(name, container)
            return {"dropped": dropped}

        self.logged("power-loss", {"nodes": names}, apply)

    def _lazy_disks(self, f: str, names: list[str]) -> Disks:
        disks = self.disks
        if disks is None or not all(disks.has(n) for n in names):
            on = f" on {', '.join(names)}" if names else ""
            raise NemesisError(f"{f}{on} needs lazy disks")
        return disks

    def pause(self, nodes: Iterable[str]) -> None:
        def pause_one(c: Container, n: str) -> int | None:
            attempts = freeze(c, n)
            self.paused.add(n)
            return attempts if attempts > 1 else None

        self._each("pause", nodes, pause_one, noted_as="freeze_attempts")

    def resume(self, nodes: Iterable[str]) -> None:
        def resume_one(c: Container, n: str) -> None:
            c.unpause()
            self.paused.discard(n)

        self._each("resume", nodes, resume_one)

    def take_down(self, name: str) -> None:
        """A graceful stop within another op's events (Kafka's remove-broker), not logged as a
        step of its own; down until a start, as after stop (heal_all starts it)."""
        self._container(name).stop(timeout=30)
        self._stopped(name)

    def replaced(self, name: str, topology: Topology, running: bool = True) -> None:
        """The node's container was replaced by another (an upgrade recreates it on a new
        image): `topology` names the new one; running, the node is up again, with the network
        rules it had (they went with the old container's namespace); not running, it is down
        until a start."""
        self.topology = topology
        self.paused.discard(name)
        if not running:
            self.down.add(name)
            return
        self.down.discard(name)
        if name in self.state.nodes_with_rules():
            self._apply_rules([name])

    def _stopped(self, name: str) -> None:
        self.down.add(name)
        self.paused.discard(name)

    def _started(self, name: str, container: Container) -> None:
        container.start()
        self.down.discard(name)
        # A restarted container has a new network namespace: the node's rules are gone.
        if name in self.state.nodes_with_rules():
            self._apply_rules([name])

    def _each(
        self,
        f: str,
        nodes: Iterable[str],
        act: Callable[[Container, str], Any],
        noted_as: str | None = None,
    ) -> None:
        """`act` on each node in turn, logged as one op; what it returns for a node, when not
        None, goes into the op's ok under `noted_as`."""
        names = list(nodes)

        def apply() -> dict[str, Any] | None:
            noted = {}
            for name in names:
                out = act(self._container(name), name)
                if out is not None:
                    noted[name] = out
            return {noted_as: noted} if noted_as and noted else None

        self.logged(f, {"nodes": names}, apply)

    def _container(self, name: str) -> Container:
        try:
            return self.docker.containers.get(self.topology.node(name).container)
        except docker.errors.NotFound:
            raise NemesisError(f"node {name} has no container") from None

    # ---- disks ---------------------------------------------------------------------------

    def disk_error(self, nodes: Iterable[str], on: str, path: str, probability: float) -> None:
        """The nodes' disks fail `on` calls (write, fsync, read) on files matching `path` with
        EIO, each with `probability`, until a disk_ok."""
        names = list(nodes)
        disks = self._lazy_disks("disk-error", names)
        value = {"nodes": names, "on": on, "path": path, "probability": probability}
        self._disk_fault(
            "disk-error", value, lambda: disks.disk_error(names, on, path, probability)
        )

    def disk_full(self, nodes: Iterable[str]) -> None:
        """The nodes' disks are full (ENOSPC on what needs space), until a disk_ok."""
        names = list(nodes)
        disks = self._lazy_disks("disk-full", names)
        self._disk_fault("disk-full", {"nodes": names}, lambda: disks.disk_full(names))

    def torn_write(self, nodes: Iterable[str], path: str, keep: float) -> None:
        """The nodes' next power losses, until a disk_ok, keep `keep` of the last unsynced
        write of each file matching `path` rather than none of it."""
        names = list(nodes)
        disks = self._lazy_disks("torn-write", names)
        value = {"nodes": names, "path": path, "keep": keep}
        self._disk_fault("torn-write", value, lambda: disks.torn_write(names, path, keep))

    def corrupt(self, nodes: Iterable[str], spec: Corruption, stopped: bool = True) -> None:
        """Changes bytes of each node's data files matching spec.path (lazyfs.corrupt), each
        node from its own seed drawn from spec.seed. `stopped`: the nodes are killed first,
        so that nothing the broker holds in memory or has open masks the damage, and started
        again after, reading what the disk now holds; else under the running broker. The ok
        records every byte changed; nothing ever mends it."""
        names = list(nodes)
        disks = self._lazy_disks("corrupt", names)
        value = {
            "nodes": names,
            "path": spec.path,
            "files": spec.files,
            "length": spec.length,
            "offset": spec.offset,
            "corruption": spec.how,
            "seed": spec.seed,
            "while": "stopped" if stopped else "running",
        }

        def apply() -> dict[str, Any]:
            # A node already down stays down: its files are at rest already, and its start is
            # a later step's.
            up = [n for n in names if n not in self.down] if stopped else []
            containers = {n: self._container(n) for n in up}
            for name, container in containers.items():
                container.kill(signal=signal.SIGKILL)
                self._stopped(name)
            for container in containers.values():
                container.wait(timeout=60)  # nothing writes the files while they change
            changed = {name: disks.corrupt(name, spec.for_node(name)) for name in names}
            for name, container in containers.items():
                self._started(name, container)
            return {"changed": changed}

        self.logged("corrupt", value, apply)

    def _disk_fault(self, f: str, value: dict[str, Any], act: Callable[[], None]) -> None:
        # Counted as faulted before it is written: a fault that failed half-way is mended too.
        self.disk_faulted.update(value["nodes"])
        self.logged(f, value, act)

    def disk_ok(self, nodes: Iterable[str] | None = None) -> None:
        """The disk faults of `nodes` (None: every disk's) ended; the ok says whose remain."""
        names = list(nodes) if nodes else None
        disks = self._lazy_disks("disk-ok", names or [])

        def apply() -> dict[str, Any]:
            disks.disk_ok(names)
            if names is None:
                self.disk_faulted.clear()
            else:
                self.disk_faulted -= set(names)
            return {"remaining": sorted(self.disk_faulted)}

        self.logged("disk-ok", {"nodes": names or "all"}, apply)

    # ---- clocks --------------------------------------------------------------------------

    def clock(self, nodes: Iterable[str], offset: float) -> None:
        """The nodes' clocks read `offset` seconds off true time (from true time, not from what
        they read before), until a clock_ok; the ok records each node's offset."""
        names = list(nodes)
        clocks = self._fake_clocks("clock", names)
        # Counted as skewed before it is written: a step that failed half-way is set back too.
        self.clock_skewed.update(names)
        self.logged(
            "clock",
            {"nodes": names, "offset": offset},
            lambda: {"offsets": clocks.set_offset(names, offset)},
        )

    def clock_ok(self, nodes: Iterable[str] | None = None) -> None:
        """The clocks of `nodes` (None: every node's) true again; the ok says whose are not."""
        names = list(nodes) if nodes else None
        clocks = self._fake_clocks("clock-ok", names or [])

        def apply() -> dict[str, Any]:
            clocks.reset(names)
            if names is None:
                self.clock_skewed.clear()
            else:
                self.clock_skewed -= set(names)
            return {"remaining": sorted(self.clock_skewed)}

        self.logged("clock-ok", {"nodes": names or "all"}, apply)

    def _fake_clocks(self, f: str, names: list[str]) -> Clocks:
        clocks = self.clocks
        if clocks is None or not all(clocks.has(n) for n in names):
            on = f" on {', '.join(names)}" if names else ""
            raise NemesisError(f"{f}{on} needs cluster.fake_clock: true")
        return clocks

    # ---- recovery ------------------------------------------------------------------------

    def heal_all(self) -> None:
        """End every fault: clocks true, disks mended, network healed, paused nodes resumed,
        stopped nodes started (on disks that work again, to true clocks), then the system's own
        (system_heals).

        Idempotent; used at the end of a run, on failure and on SIGINT/SIGTERM.
        """
        if self.clock_skewed:
            self.clock_ok()
        if self.disk_faulted:
            self.disk_ok()
        if self.paused:
            self.resume(sorted(self.paused))
        if self.down:
            self.start(sorted(self.down))
        if self.client_path is not None and self.client_path.in_effect:
            self.client_path.heal()
        if self.state.cuts or self.state.degraded:
            self.heal()
        for heal in self.system_heals:
            heal()

    def logged(self, f: str, value: dict[str, Any], act: Callable[[], Any]) -> None:
        """Runs `act` between an invoke and its ok (with what act returns) or fail."""
        if self.history:
            self.history.write("invoke", f, value=value)
        try:
            extra = act()
        except Exception as e:  # noqa: BLE001 - every failure is logged, then re-raised
            if self.history:
                self.history.write("fail", f, value=value, error=str(e))
            raise
        if self.history:
            self.history.write("ok", f, value={**value, **(extra or {})})
        log.info("nemesis %s %s", f, value)


FREEZE_ATTEMPTS = 3


def freeze(container: Container, name: str) -> int:
    """Pauses one container; returns the attempts it took.

    On cgroup v1 (this machine's) the kernel cannot reliably freeze a cgroup while processes
    keep appearing in it: runc retries for a while, then thaws the cgroup back and reports
    "unable to freeze". The node was never paused then, so trying again is the same fault a
    moment later; the history's ok says how many attempts it took.
    """

    def unable_to_freeze(e: BaseException) -> bool:
        return isinstance(e, docker.errors.APIError) and "unable to freeze" in str(e.explanation)

    try:
        for attempt in Retrying(
            stop=stop_after_attempt(FREEZE_ATTEMPTS),
            wait=wait_fixed(0.5),
            retry=retry_if_exception(unable_to_freeze),
            reraise=True,
        ):
            with attempt:
                container.pause()
    except docker.errors.APIError as e:
        raise NemesisError(f"cannot pause {name}: {e.explanation}") from None
    return attempt.retry_state.attempt_number


def _cut_list(cuts: Iterable[network.Cut]) -> list[list[str]]:
    return [list(c) for c in sorted(cuts)]


def clean_container(client: docker.DockerClient, container: Container, tools_image: str) -> None:
    """Remove every trace of the nemesis from one node (used by `harness heal`)."""
    container.reload()
    if container.status == "paused":
        container.unpause()
        container.reload()
    if container.status != "running":
        return
    client.containers.run(
        tools_image,
        entrypoint=["sh", "-c", network.remove_command()],
        network_mode=f"container:{container.id}",
        cap_add=["NET_ADMIN"],
        labels=HELPER_LABELS,
        remove=True,
    )
