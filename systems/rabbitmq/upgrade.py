"""RabbitMQ's rolling upgrade steps: `upgrade`, each target node moved onto another release's
image with its data, one node at a time; and `finalize-feature`, a feature flag enabled as an
operator does once an upgrade is done (or `khepri_db`, which moves the metadata store from
Mnesia to Khepri on a running 4.0 or 4.1 cluster).

upgrade writes one event per node (f `upgrade`, value `{nodes: [node], from, to}`), the node
down from its invoke to its ok. For each node:

1. its container is stopped (SIGTERM: RabbitMQ's own shutdown), its logs retired (the run's
   saved log of the node holds every container it had), and compose recreates it on the new
   image: the same host name, address, port, configuration and data (a volume of its own, or
   its lazy disk);
2. the nemesis is told of the new container (its network rules, gone with the old one's
   namespace, are put back);
3. the step waits, at most `within` seconds, until the node is back in the cluster (every
   running member lists it) and its quorum queue members are in sync: each reports a Raft state
   of leader or follower, and the node's has committed as far as the leader had when the node
   came back. RabbitMQ has no rolling-restart command to copy; this is what its upgrade guide
   asks to see before the next node is stopped (`rabbitmq-upgrade await_online_quorum_plus_one`
   waits for the same majority-plus-one from the other side).

The ok says `booted`, `back`, `in_sync`, `waited_s`, `queues` (those checked) and `lagging`
(each queue whose member had not caught up, with why).

A node that does not boot (its container exits, as RabbitMQ does when the release requires
feature flags the node's data has off, or it is not healthy within `within`) is recreated on
the release it ran before, in the same event: its ok says `booted: false`, the tool's `error`,
the last lines of its log (`refused`: RabbitMQ names the flag) and `rolled_back` (the same
account of the node on its old release). A node that refused, or did not come back in sync in
time, ends the rollout: the step's later targets are left on their release (`stopped_rollout`
names them), since a rolling upgrade goes on only while every queue keeps a majority plus one.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from contract.topology import Topology
from nemesis.containers import Nemesis, NemesisError
from systems.rabbitmq.membership import Membership, erlang
from systems.rabbitmq.upgrade_path import ALL_FLAGS

log = logging.getLogger("harness")

LOG_TAIL = 25  # lines of a refusing node's log the ok keeps
# Seconds an `enable_feature_flag` may take: khepri_db copies the whole metadata store over.
FINALIZE_TIMEOUT = 600.0
# The Raft states of a member that takes part in its queue.
SERVING = ("leader", "follower")
# What `rabbit_khepri:get_feature_state()` answers, as the store a node uses.
STORES = {"enabled": "khepri", "disabled": "mnesia", "state_changing": "migrating"}


class UpgradeControl(Protocol):
    """What the upgrade steps ask of the cluster (systems.rabbitmq.cluster.RabbitMQCluster)."""

    membership: Membership
    node_images: dict[str, str]  # the image each node's container runs

    def node_release(self, node: str) -> str: ...

    def image_for(self, release: str) -> str: ...

    def release_of(self, image: str) -> str | None: ...

    def replace_node(self, node: str, image: str, timeout: float) -> None: ...

    def topology(self) -> Topology: ...

    def running_nodes(self, node: str) -> list[str]: ...

    def quorum_members(self) -> dict[str, list[str]]: ...

    def quorum_status(self, queue: str, via: str) -> list[dict[str, Any]]: ...

    def log_tail(self, node: str, lines: int) -> list[str]: ...

    def rabbitmqctl(self, node: str, *args: str, timeout: float = 60) -> str: ...


class UpgradeStep(Protocol):
    @property
    def nodes(self) -> list[str]: ...
    @property
    def release(self) -> str | None: ...
    @property
    def within(self) -> float: ...
    @property
    def feature(self) -> str | None: ...


# ---- upgrade ------------------------------------------------------------------------------


def upgrade(net: Nemesis, control: UpgradeControl, step: UpgradeStep, poll: float = 1.0) -> None:
    """The step's targets (none: every member) onto its release, one node at a time."""
    if step.release is None:
        raise NemesisError("upgrade needs release")
    members = [n for n in control.membership.nodes if n not in control.membership.forgotten]
    targets = list(step.nodes) or members
    if out := [n for n in targets if n not in members]:
        raise NemesisError(f"upgrade: {out[0]} is out of the cluster (add-node it first)")
    image = control.image_for(step.release)
    to = control.release_of(image) or image
    for i, node in enumerate(targets):
        if not _upgrade_node(net, control, node, image, to, step.within, targets[i + 1 :], poll):
            return


def _upgrade_node(
    net: Nemesis,
    control: UpgradeControl,
    node: str,
    image: str,
    to: str,
    within: float,
    rest: list[str],
    poll: float,
) -> bool:
    """One node onto `image`, as one event; whether the rollout may go on."""
    old_image, start = control.node_images[node], control.node_release(node)
    went_well = False

    def act() -> dict[str, Any]:
        nonlocal went_well
        net.take_down(node)
        out = _recreate(net, control, node, image, within, poll)
        if not out["booted"]:
            out["refused"] = control.log_tail(node, LOG_TAIL)
            out["rolled_back"] = {
                "to": start,
                **_recreate(net, control, node, old_image, within, poll),
            }
        went_well = out["booted"] and out["back"] and out["in_sync"]
        if not went_well and rest:
            out["stopped_rollout"] = rest
        return out

    net.logged("upgrade", {"nodes": [node], "from": start, "to": to}, act)
    return went_well


def _recreate(
    net: Nemesis, control: UpgradeControl, node: str, image: str, within: float, poll: float
) -> dict[str, Any]:
    """The node's container recreated on `image`, the nemesis told, and the wait's account."""
    try:
        control.replace_node(node, image, within)
    except Exception as e:  # noqa: BLE001 - a node that does not boot is what the ok records
        net.replaced(node, control.topology(), running=False)
        return {"booted": False, "back": False, "in_sync": False, "error": str(e)}
    net.replaced(node, control.topology())
    others = [n for n in control.membership.nodes if _answers(net, control, n) and n != node]
    return {"booted": True, **wait_rejoined(control, node, others, within, poll)}


def _answers(net: Nemesis, control: UpgradeControl, node: str) -> bool:
    """Whether the node can be asked: a member neither down nor paused."""
    gone = control.membership.forgotten | net.down | net.paused
    return node not in gone


def wait_rejoined(
    control: UpgradeControl,
    node: str,
    others: Iterable[str],
    within: float,
    poll: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Waits, at most `within` seconds, until every other running member lists the node as
    running, then until its quorum queue members are in sync; says what it found."""
    started = clock()
    deadline = started + within
    others = list(others)
    while not _back(control, node, others):
        if clock() >= deadline:
            return {"back": False, "in_sync": False, "waited_s": round(clock() - started, 1)}
        sleep(poll)
    queues: list[str] = []
    marks: dict[str, int] = {}
    lagging: dict[str, Any] = {}
    while True:
        try:
            queues = sorted(q for q, ms in control.quorum_members().items() if node in ms)
            lagging = _lagging(control, node, queues, marks)
        except Exception as e:  # noqa: BLE001 - no node answered: not in sync as far as known
            lagging = {"(members)": f"not read: {e}"}
        if not lagging or clock() >= deadline:
            break
        sleep(poll)
    out = {"back": True, "in_sync": not lagging, "waited_s": round(clock() - started, 1)}
    return {**out, "queues": queues, **({"lagging": lagging} if lagging else {})}


def _back(control: UpgradeControl, node: str, others: list[str]) -> bool:
    """The node runs, and lists itself and every other member as running, as they list it."""
    try:
        seen = set(control.running_nodes(node))
        if not {erlang(n) for n in [node, *others]} <= seen:
            return False
        return all(erlang(node) in control.running_nodes(n) for n in others)
    except Exception:  # noqa: BLE001 - a node still starting answers with errors
        return False


def _lagging(
    control: UpgradeControl, node: str, queues: list[str], marks: dict[str, int]
) -> dict[str, Any]:
    """The queues whose member on the node is not in sync yet, each with why. `marks`: the
    commit index each queue's leader had when first asked (the node must reach it: a queue
    under load commits on, and a moving mark would never be met)."""
    lagging: dict[str, Any] = {}
    for queue in queues:
        try:
            rows = {str(r.get("Node Name")): r for r in control.quorum_status(queue, node)}
        except Exception as e:  # noqa: BLE001 - asked again on the next round
            lagging[queue] = f"no status: {e}"
            continue
        leader = next((r for r in rows.values() if r.get("Raft State") == "leader"), None)
        own = rows.get(erlang(node))
        if leader is None or own is None:
            lagging[queue] = "no leader" if leader is None else "no member on the node"
            continue
        mark = marks.setdefault(queue, _index(leader.get("Commit Index")))
        state, membership = own.get("Raft State"), own.get("Membership") or "voter"
        committed = _index(own.get("Commit Index"))
        if state not in SERVING or membership != "voter":
            lagging[queue] = {"raft_state": state, "membership": membership}
        elif committed < mark:
            lagging[queue] = {"commit_index": committed, "leader_had": mark}
    return lagging


def _index(value: object) -> int:
    """A Raft index as quorum_status prints it (empty where the member did not answer)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


# ---- finalize-feature ---------------------------------------------------------------------


def finalize_feature(net: Nemesis, control: UpgradeControl, step: UpgradeStep) -> None:
    """The feature flag enabled (`all`: every stable one) from a running member; the ok says
    every flag's state after and, for khepri_db or all, the store each member uses."""
    feature = step.feature
    if feature is None:
        raise NemesisError("finalize-feature needs feature")
    via = _running_member(net, control)
    # RabbitMQ's flags have no levels (Kafka's features do): the shape is the same for both.
    value: dict[str, Any] = {"feature": feature, "level": None}

    def act() -> dict[str, Any]:
        args = ["enable_feature_flag", feature]
        opted_in = False
        if feature != ALL_FLAGS:
            flags = feature_flags(control, via)
            if feature not in flags:
                known = ", ".join(sorted(flags))
                raise NemesisError(
                    f"finalize-feature: {via} knows no feature flag {feature!r} (it has: {known})"
                )
            # An experimental flag (khepri_db on 4.0 and 4.1) is enabled only with --opt-in:
            # the scenario named it, which is the opting in.
            opted_in = flags[feature].get("stability") == "experimental"
        if opted_in:
            args.insert(1, "--opt-in")
        control.rabbitmqctl(via, *args, timeout=FINALIZE_TIMEOUT)
        after = feature_flags(control, via)
        out: dict[str, Any] = {"via": via, "opted_in": opted_in}
        out["flags"] = {name: flag.get("state") for name, flag in sorted(after.items())}
        if feature in (ALL_FLAGS, "khepri_db"):
            members = [n for n in control.membership.nodes if _answers(net, control, n)]
            out["metadata_store"] = {n: metadata_store(control, n) for n in members}
        return out

    net.logged("finalize-feature", value, act)


def feature_flags(control: UpgradeControl, via: str) -> dict[str, dict[str, Any]]:
    """Every feature flag the node knows, by name: its state and stability."""
    argv = ["list_feature_flags", "name", "state", "stability", "--formatter", "json"]
    rows = json.loads(control.rabbitmqctl(via, *argv, timeout=60))
    return {str(r["name"]): r for r in rows}


def metadata_store(control: UpgradeControl, node: str) -> str:
    """The metadata store the node uses, as it says: khepri, mnesia, or migrating. A release
    without Khepri (before 3.13) has no rabbit_khepri module to ask: Mnesia."""
    try:
        said = control.rabbitmqctl(node, "eval", "rabbit_khepri:get_feature_state().", timeout=30)
    except Exception as e:  # noqa: BLE001 - said in the ok, never the step's failure
        return "mnesia" if "undef" in str(e) else f"no answer: {e}"
    return STORES.get(said.strip(), said.strip())


def _running_member(net: Nemesis, control: UpgradeControl) -> str:
    """A member whose RabbitMQ runs (it lists itself as running): where the CLI is run."""
    for node in control.membership.nodes:
        if not _answers(net, control, node):
            continue
        try:
            if erlang(node) in control.running_nodes(node):
                return node
        except Exception:  # noqa: BLE001 - a node stopped, paused or cut: try the next
            continue
    raise NemesisError("finalize-feature: no member of the cluster answers")
