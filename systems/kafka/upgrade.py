"""Rolling upgrades of a real Kafka cluster: each node's container stopped and recreated, one at
a time, on another release's image with its log directory kept (`upgrade`), and a feature
raised with Kafka's own tool once the nodes run a release that has it (`finalize-feature`).

An operator upgrades a node, waits until it is back in sync, then the next: a broker is back
when it is registered and in the ISR of every partition it replicates, a dedicated controller
when the quorum's leader has seen it caught up since it started again. Dedicated controllers go
first. Each node's upgrade is one event in the history (its node down from the invoke to the
ok), saying the release it left and the release it runs now; the ok says whether the wait ended
in sync (`in_sync`) or at `within`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, Protocol

from contract.topology import Topology
from contract.wait import wait_until
from nemesis.containers import NemesisError
from systems.kafka.config import Node
from systems.kafka.node_steps import NodeSteps

# How often an upgraded node is asked whether it is back.
POLL_SECONDS = 1.0


class UpgradeControl(Protocol):
    """What the upgrade steps ask of the cluster (systems.kafka.cluster.KafkaCluster)."""

    @property
    def nodes(self) -> list[Node]: ...

    def release_of(self, node: str) -> str: ...

    def release_of_spec(self, spec: str) -> str: ...

    def upgrade_node(self, node: str, spec: str, timeout: float = 180) -> Topology: ...

    def finalize(self, feature: str, level: str, via: str) -> str: ...

    def feature_levels(self, via: str | None = None) -> dict[str, str]: ...

    def controller_caught_up(self, controller: str, since_ms: int, via: str) -> bool: ...


class UpgradeSteps(NodeSteps, Protocol):
    """What the upgrade steps use of the Kafka nemesis (systems.kafka.nemesis dispatches to
    them: a protocol, so that neither module imports the other)."""

    upgrades: UpgradeControl | None

    def _resolved(self, step: Any, also: Iterable[str] = ()) -> dict[str, list[str]]: ...


def upgrade_order(nodes: Iterable[Node], named: Iterable[str] = ()) -> list[str]:
    """The Kafka nodes to upgrade (the named ones, else every one but the spares), dedicated
    controllers first, then by id."""
    wanted = set(named)
    chosen = [
        n for n in nodes if n.role != "zookeeper" and (n.name in wanted if wanted else not n.spare)
    ]
    return [n.name for n in sorted(chosen, key=lambda n: (n.role != "controller", n.node_id))]


def _control(k: UpgradeSteps) -> UpgradeControl:
    if k.upgrades is None:
        raise NemesisError("this run's nemesis cannot upgrade the cluster")
    return k.upgrades


def _running_broker(control: UpgradeControl, down: Iterable[str], avoid: str = "") -> str:
    """A broker that runs now, on the newest release the brokers run: Kafka's tools there know
    every feature a node of the cluster may have."""
    skip = set(down) | {avoid}
    brokers = [
        n.name
        for n in control.nodes
        if n.role in ("broker", "combined") and not n.spare and n.name not in skip
    ]
    if not brokers:
        raise NemesisError("no running broker to run Kafka's tools in")
    newest = max(_release_key(control.release_of(b)) for b in brokers)
    return next(b for b in brokers if _release_key(control.release_of(b)) == newest)


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(p) for p in release.split(".") if p.isdigit())


def upgrade(k: UpgradeSteps, step: Any) -> None:
    """Each node in turn onto the step's release, back in sync before the next; a node that
    runs that release already is left as it is."""
    control = _control(k)
    named = k._resolved(step).get("target", [])
    to = control.release_of_spec(step.release)
    for name in upgrade_order(control.nodes, named):
        if control.release_of(name) != to:
            _upgrade_one(k, control, name, step.release, to, step.within)


def _upgrade_one(
    k: UpgradeSteps, control: UpgradeControl, name: str, spec: str, to: str, within: float
) -> None:
    node = next(n for n in control.nodes if n.name == name)
    value = {"nodes": [name], "from": control.release_of(name), "to": to, "within": within}

    def back(since_ms: int) -> bool:
        if node.role == "controller":
            via = _running_broker(control, k.net.down, avoid=name)
            return control.controller_caught_up(name, since_ms, via)
        return k._rejoined(node.node_id)

    if k.history:  # each node faulted afresh: what it holds as its turn comes
        k._log_resolution("upgrade", {}, {"target": [name]}, None, now=k.roles_now())

    def act() -> dict[str, Any]:
        started = time.monotonic()
        k.net.replaced(name, control.upgrade_node(name, spec))
        since_ms = int(time.time() * 1000)
        in_sync = wait_until(lambda: back(since_ms), within, interval=POLL_SECONDS)
        return {
            "in_sync": in_sync,
            "ended_by": "in sync" if in_sync else f"bound ({within:g} s)",
            "waited_s": round(time.monotonic() - started, 1),
        }

    k.net.logged("upgrade", value, act)


def finalize_feature(k: UpgradeSteps, step: Any) -> None:
    """The feature raised to the step's level by Kafka's tool in a running broker of the
    newest release; the ok has the tool's last line and the levels the cluster has after."""
    control = _control(k)
    value = {"feature": step.feature, "level": step.level}

    def act() -> dict[str, Any]:
        via = _running_broker(control, k.net.down)
        said = control.finalize(step.feature, step.level, via)
        lines = [ln for ln in said.strip().splitlines() if ln.strip()]
        return {"via": via, "tool": lines[-1:], "levels": control.feature_levels(via)}

    k.net.logged("finalize-feature", value, act)
