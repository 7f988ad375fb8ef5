"""The faults of the clients' path to the brokers, through the run's Toxiproxy (compose.proxy):
one proxy per broker (a Kafka broker, a RabbitMQ node), named after it, carrying only the
workload's clients' traffic. The run starts the proxy (start_proxy), gives its clients the
proxies' addresses, and hangs a ClientPath on its nemesis, whose heals end its faults too.

Each fault is a toxic on the targets' proxies, recorded in the nemesis's history like every
other fault; a heal removes the toxics of its targets (or all). The toxics in effect are known
here, so that a heal of some nodes leaves the others' and says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from compose.proxy import (
    DOWNSTREAM,
    HOLD_MS,
    UPSTREAM,
    ProxyError,
    ProxyServer,
    Toxic,
    bandwidth,
    blackhole,
    delay,
    released,
)
from faults.registry import OPS
from nemesis.containers import Nemesis, NemesisError
from systems.scenario import ScenarioError

PROXY_LOG = "toxiproxy.log"  # the clients' proxy's own log, beside the nodes'
# The ops of the fault registry that fault the clients' path, as apply_client_fault takes them.
CLIENT_PATH_OPS = tuple(op.name for op in OPS if op.needs_proxy)
# Runs `act` between the nemesis's invoke and ok events of one history name.
Logged = Callable[[str, dict[str, Any], Callable[[], Any]], None]


class ClientPath:
    def __init__(self, proxy: ProxyServer, logged: Logged) -> None:
        self.proxy = proxy
        self.logged = logged
        self.toxics: dict[str, dict[str, Toxic]] = {}  # node -> its toxics in effect, by name
        # node -> toxics healed in place (released: they pass everything), removed only when a
        # fault of their kind comes again
        self.spent: dict[str, set[str]] = {}

    def _put(self, nodes: list[str], toxics: list[Toxic]) -> dict[str, Any]:
        for node in nodes:
            if node not in self.proxy.proxies:
                raise NemesisError(f"{node} has no proxy on the clients' path")
            held = self.toxics.setdefault(node, {})
            spent = self.spent.setdefault(node, set())
            for toxic in toxics:
                # A second fault of the kind replaces the first (or what is left of it).
                if toxic.name in held or toxic.name in spent:
                    self._call(self.proxy.remove, node, toxic.name)
                    spent.discard(toxic.name)
                self._call(self.proxy.add, node, toxic)
                held[toxic.name] = toxic
        return {}

    @staticmethod
    def _call(act: Callable[..., None], *args: Any) -> None:
        try:
            act(*args)
        except ProxyError as e:
            raise NemesisError(str(e)) from None

    def delay(self, nodes: list[str], delay_ms: int, jitter_ms: int, both_ways: bool) -> None:
        """The clients' requests to `nodes` (and their answers: both_ways) arrive later."""
        toxics = [delay("delay-up", delay_ms, jitter_ms, UPSTREAM)]
        if both_ways:
            toxics.append(delay("delay-down", delay_ms, jitter_ms, DOWNSTREAM))
        value = {
            "op": "delay",
            "nodes": nodes,
            "delay_ms": delay_ms,
            "jitter_ms": jitter_ms,
            "both_ways": both_ways,
        }
        self.logged("start-delay", value, lambda: self._put(nodes, toxics))

    def slow(self, nodes: list[str], rate_kbit: int, both_ways: bool) -> None:
        """The clients' traffic to `nodes` (and back: both_ways) at `rate_kbit` at most."""
        kb_per_s = max(1, rate_kbit // 8)  # Toxiproxy's bandwidth toxic counts KB/s
        toxics = [bandwidth("slow-up", kb_per_s, UPSTREAM)]
        if both_ways:
            toxics.append(bandwidth("slow-down", kb_per_s, DOWNSTREAM))
        value = {"op": "slow-link", "nodes": nodes, "rate_kbit": rate_kbit, "both_ways": both_ways}
        self.logged("start-slow-link", value, lambda: self._put(nodes, toxics))

    def hold(self, nodes: list[str], both_ways: bool) -> None:
        """What the clients send `nodes` (and their answers: both_ways) held until the heal,
        which delivers it in order: a latency no step outlasts, ended by removing the toxic."""
        toxics = [delay("hold-up", HOLD_MS, 0, UPSTREAM)]
        if both_ways:
            toxics.append(delay("hold-down", HOLD_MS, 0, DOWNSTREAM))
        value = {"op": "hold", "nodes": nodes, "both_ways": both_ways}
        self.logged("start-hold", value, lambda: self._put(nodes, toxics))

    def blackhole(self, nodes: list[str]) -> None:
        """The clients' requests to `nodes` dropped, their connections left open."""
        value = {"op": "blackhole", "nodes": nodes}
        self.logged("start-blackhole", value, lambda: self._put(nodes, [blackhole("blackhole")]))

    def reset(self, nodes: list[str]) -> None:
        """Every client connection to `nodes` closed."""

        def act() -> None:
            for node in nodes:
                self._call(self.proxy.reset_connections, node)

        self.logged("reset-clients", {"op": "reset-clients", "nodes": nodes}, act)

    def heal(self, nodes: Iterable[str] | None = None) -> None:
        """The toxics of `nodes` (None: every node's) removed, in the history as
        `release-clients` with the toxics each node had (what a hold held is delivered as its
        toxic goes), what is left, and `undelivered_chunks` when Toxiproxy dropped held data no
        reader took (a connection its client had given up reading); nothing is written when
        none of them had a toxic."""
        chosen = sorted(self.toxics if nodes is None else set(nodes) & set(self.toxics))
        removed = {node: sorted(self.toxics[node]) for node in chosen if self.toxics[node]}
        if not removed:
            return

        def act() -> dict[str, Any]:
            dropped = self.proxy.undelivered()
            for node, names in removed.items():
                # The requests first: what a hold held reaches the brokers before their answers.
                for name in sorted(names, key=lambda n: not n.endswith("-up")):
                    self._release(node, self.toxics[node].pop(name))
            left = {n: sorted(t) for n, t in sorted(self.toxics.items()) if t}
            out: dict[str, Any] = {"remaining_toxics": left}
            if undelivered := self.proxy.undelivered() - dropped:
                out["undelivered_chunks"] = undelivered
            return out

        value = {"op": "heal", "nodes": "all" if nodes is None else chosen, "toxics": removed}
        self.logged("release-clients", value, act)

    def _release(self, node: str, toxic: Toxic) -> None:
        """A toxic ended: made to pass everything in place when it may hold data (see
        compose.proxy.released), else removed."""
        attributes = released(toxic)
        if attributes is None:
            self._call(self.proxy.remove, node, toxic.name)
            return
        self._call(self.proxy.update, node, toxic.name, attributes)
        self.spent.setdefault(node, set()).add(toxic.name)

    @property
    def in_effect(self) -> bool:
        return any(self.toxics.values())


def start_proxy(log: Path, routes: dict[str, tuple[int, str]]) -> ProxyServer:
    """Toxiproxy started, with a proxy per node: `routes` gives, by node, the 127.0.0.1 port its
    proxy listens on (0: any free one) and the address it forwards to. It ends with the run."""
    proxy = ProxyServer(log)
    try:
        proxy.start()
        for node, (listen, upstream) in sorted(routes.items()):
            proxy.create(node, upstream, listen)
    except ProxyError as e:
        proxy.stop()
        raise ScenarioError(f"the clients' proxy: {e}") from None
    return proxy


def path_of(net: Nemesis) -> ClientPath:
    if not isinstance(net.client_path, ClientPath):
        raise NemesisError("this run has no proxy on the clients' path")
    return net.client_path


def apply_client_fault(net: Nemesis, op: str, nodes: list[str], step: Any) -> None:
    """A step of a clients' path op (delay, hold, slow-link, blackhole, reset-clients) on its
    resolved nodes; `step` carries the op's arguments, as both systems' steps name them."""
    path = path_of(net)
    if op == "delay":
        path.delay(nodes, step.delay_ms, step.jitter_ms, step.both_ways)
    elif op == "hold":
        path.hold(nodes, step.both_ways)
    elif op == "slow-link":
        path.slow(nodes, step.rate_kbit, step.both_ways)
    elif op == "blackhole":
        path.blackhole(nodes)
    elif op == "reset-clients":
        path.reset(nodes)
    else:
        raise NemesisError(f"{op} is not a fault of the clients' path")
