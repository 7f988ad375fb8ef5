"""When a fault was in effect, from the nemesis's own events (a few rows per run).

A fault window is a maximal span of time in which at least one fault was in effect. What each
history name does to it is the fault registry's (faults.registry.Window):
  network   from the invoke of a cut or degraded link until the ok of a heal that leaves no
            cut and no degraded link
  process   a node killed, stopped or paused, from that invoke until the ok of the start or
            resume that brings it back; a restart or a power loss, from its invoke to its ok
  injected  errors queued for the next requests (the kafka-mock tier's inject-errors), from
            that invoke until a heal: when the queue empties is the client's to see, not ours
  client    a workload client paused (SIGSTOP), from that invoke until the ok of the resume
            that lets it run again
  proxy     a node's clients' path delayed, held, blackholed or slowed, from that invoke until
            the ok of the `release-clients` that removes its last toxic
  disk      a node's disk failing calls (disk-error, disk-full), from that invoke until the ok
            of a disk-ok that mends it
  moving    Kafka's replicas reassigned (reassign, add-broker) or a controller joining the
            KRaft quorum (add-controller), from that invoke to its own ok when that ok says it
            settled (every move done, no throttle; a voter now), else to the ok of the
            `end-reassign` a heal writes; a decommissioned broker (remove-broker) is down, as
            after a stop, until a start
  member    a node out of the cluster (forget-node), a controller out of the KRaft quorum
            (remove-controller) or a queue's member removed (shrink-queue), from that invoke
            until the ok of the add-node, add-controller or grow-queue that leaves it in
  clock     a node's clock off true time (clock), from that invoke until the ok of a clock-ok
            that sets it back
Elections and leader-placement snapshots are not faults. A fault still in effect when the
history ends lasts to the end of the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from contract.history import event_value
from faults.registry import OPS, window_of

# The history names of the faults of the clients' path (through the proxy): a node's such
# fault lasts until a release-clients leaves it no toxic.
CLIENT_PATH_STARTS = frozenset(f for o in OPS if o.needs_proxy and o.healed_by for f in o.writes)
RELEASE = "release-clients"


@dataclass
class _State:
    network: bool = False
    injected: bool = False
    down: set[str] = field(default_factory=set)
    restarting: set[str] = field(default_factory=set)
    paused_clients: set[str] = field(default_factory=set)
    proxied: set[str] = field(default_factory=set)
    disks: set[str] = field(default_factory=set)
    moving: set[str] = field(default_factory=set)
    members_out: set[str] = field(default_factory=set)  # nodes, and queue members as q@node
    clocks: set[str] = field(default_factory=set)

    def faulty(self) -> bool:
        return (
            self.network
            or bool(self.proxied)
            or bool(self.disks)
            or bool(self.moving)
            or bool(self.members_out)
            or bool(self.clocks)
            or self.injected
            or bool(self.down)
            or bool(self.restarting)
            or bool(self.paused_clients)
        )


def fault_windows(nemesis: list[dict[str, Any]], run_end: float) -> list[tuple[float, float]]:
    """(start, end) of every fault window; nemesis: its events (time, type, f, value) in order."""
    state = _State()
    windows: list[tuple[float, float]] = []
    opened: float | None = None
    for e in nemesis:
        was = state.faulty()
        _apply(state, e["type"], e["f"], event_value(e.get("value")))
        now = state.faulty()
        if now and not was:
            opened = e["time"]
        elif was and not now and opened is not None:
            windows.append((opened, e["time"]))
            opened = None
    if opened is not None:
        windows.append((opened, max(run_end, opened)))
    return windows


def _apply(state: _State, type_: str, f: str, value: dict[str, Any]) -> None:
    nodes = value.get("nodes")
    # Real clusters name nodes; the kafka-mock tier names broker ids.
    named = nodes if isinstance(nodes, list) else value.get("brokers")
    names = {str(n) for n in named} if isinstance(named, list) else set()
    window = window_of(f)
    if f in CLIENT_PATH_STARTS or f == RELEASE:
        _apply_proxy(state, type_, f, value, names)
    elif window in ("disk-start", "disk-heal"):
        _apply_held(
            state.disks,
            type_ == "invoke" and window == "disk-start",
            type_ == "ok" and window == "disk-heal",
            value,
            names,
        )
    elif window in ("clock-start", "clock-heal"):
        _apply_held(
            state.clocks,
            type_ == "invoke" and window == "clock-start",
            type_ == "ok" and window == "clock-heal",
            value,
            names,
        )
    elif window == "membership-start":
        # The op's ok ends it when the ok says it settled; otherwise an end-reassign does. An ok
        # that says what is still out (an add-controller putting a removed one back) sets that.
        if type_ == "invoke":
            state.moving |= names or {f}
        elif type_ == "ok" and value.get("settled") is True:
            state.moving -= names or {f}
        if type_ == "ok" and isinstance(value.get("out"), list):
            state.members_out = {str(n) for n in value["out"]}
    elif type_ == "ok" and window == "membership-heal":
        state.moving.clear()
    elif window in ("member-out", "member-in"):
        _apply_members(state, type_, f, window, value, names)
    elif type_ == "invoke" and window == "network-start":
        state.network = True
    elif type_ == "ok" and window in ("network-heal", "heal-all"):
        # The heal reports what it left in place; a heal of some nodes may leave other cuts.
        remaining = value.get("remaining_cuts") or value.get("remaining_degraded")
        if not remaining and (nodes in (None, "all") or "remaining_cuts" in value):
            state.network = False
        if window == "heal-all":  # the mock tier's heal also brings every broker back
            state.proxied.clear()
            state.disks.clear()
            state.clocks.clear()
            state.down.clear()
            state.injected = False
    elif type_ == "invoke" and window == "injected":
        state.injected = True
    elif type_ == "invoke" and window == "node-down":
        state.down |= names
    elif type_ == "ok" and window == "node-up":
        state.down -= names
    elif window == "node-bounce":
        if type_ == "invoke":
            state.restarting |= names
        else:
            state.restarting -= names
    elif window in ("client-down", "client-up"):
        named_clients = _clients_named(value)
        if type_ == "invoke" and window == "client-down":
            state.paused_clients |= named_clients
        elif type_ == "ok" and window == "client-up":
            state.paused_clients -= named_clients


def _apply_proxy(state: _State, type_: str, f: str, value: dict[str, Any], names: set[str]) -> None:
    if type_ == "invoke" and f in CLIENT_PATH_STARTS:
        state.proxied |= names
    elif type_ == "ok" and f == RELEASE:
        remaining = value.get("remaining_toxics")
        state.proxied = set(remaining) if isinstance(remaining, dict) else set()


def _apply_held(
    held: set[str], starts: bool, heals: bool, value: dict[str, Any], names: set[str]
) -> None:
    """A fault a node holds until its own heal (a disk's, a clock's): `held` changed in place."""
    if starts:
        held |= names
    elif heals:
        # The heal says whose faults remain; read without that, it ends the nodes it names, or
        # every node's.
        remaining = value.get("remaining")
        if isinstance(remaining, list):
            held.clear()
            held.update(str(n) for n in remaining)
        elif names:
            held -= names
        else:
            held.clear()


def _apply_members(
    state: _State, type_: str, f: str, window: str, value: dict[str, Any], names: set[str]
) -> None:
    # A queue's members are `queue@node`; a node out of the cluster or of the quorum, its name.
    queues = value.get("queues")
    members = {f"{q}@{n}" for q in queues for n in names} if isinstance(queues, list) else names
    if type_ == "invoke" and window == "member-out":
        state.members_out |= members
    elif type_ == "ok" and window == "member-in":
        # The ok says what is still out; read without that, it puts back what it names.
        remaining = value.get("out")
        if isinstance(remaining, list):
            state.members_out = {str(n) for n in remaining}
        else:
            state.members_out -= members


@dataclass(frozen=True)
class PathSpell:
    """One node's clients' path under one proxy fault: from its invoke to the ok of the
    release-clients that removed it (what a hold held is delivered then), or the run's end;
    `roles`: what the node held as the step began (the step's resolve event)."""

    op: str
    node: str
    start: float
    end: float
    roles: tuple[str, ...]


def client_path_spells(nemesis: list[dict[str, Any]], run_end: float) -> list[PathSpell]:
    """Every spell of a node's clients' path under a proxy fault, in the order they began."""
    open_: dict[str, tuple[str, float, tuple[str, ...]]] = {}
    out: list[PathSpell] = []
    held: dict[str, Any] = {}
    for e in nemesis:
        v = event_value(e.get("value"))
        if e["type"] == "info" and e["f"] == "resolve":
            said = v.get("held")
            held = said if isinstance(said, dict) else {}
        elif e["type"] == "invoke" and e["f"] in CLIENT_PATH_STARTS:
            for node in v.get("nodes") or []:
                if node in open_:  # a second fault of the node replaces the first
                    op, start, roles = open_.pop(node)
                    out.append(PathSpell(op, node, start, e["time"], roles))
                roles = tuple(str(r) for r in held.get(node) or [])
                open_[str(node)] = (str(v.get("op")), e["time"], roles)
        elif e["type"] == "ok" and (e["f"] == RELEASE or window_of(e["f"]) == "heal-all"):
            toxics = v.get("toxics") if e["f"] == RELEASE else None
            ended = set(open_) if not isinstance(toxics, dict) else set(toxics) & set(open_)
            for node in sorted(ended):
                op, start, roles = open_.pop(node)
                out.append(PathSpell(op, node, start, e["time"], roles))
    out += [PathSpell(op, n, s, max(run_end, s), r) for n, (op, s, r) in open_.items()]
    return sorted(out, key=lambda s: (s.start, s.node))


def _clients_named(value: dict[str, Any]) -> set[str]:
    clients = value.get("clients")
    return {str(c) for c in clients} if isinstance(clients, list) else set()


def client_pauses(nemesis: list[dict[str, Any]], run_end: float) -> list[tuple[str, float, float]]:
    """(client, start, end) of every spell a workload client was paused: from the pause's
    invoke to its resume's ok (or the end of the run)."""
    since: dict[str, float] = {}
    out: list[tuple[str, float, float]] = []
    for e in nemesis:
        window = window_of(e["f"])
        named = _clients_named(event_value(e.get("value")))
        if e["type"] == "invoke" and window == "client-down":
            for c in named - set(since):
                since[c] = e["time"]
        elif e["type"] == "ok" and window == "client-up":
            out += [(c, since.pop(c), e["time"]) for c in sorted(named & set(since))]
    out += [(c, t, max(run_end, t)) for c, t in sorted(since.items())]
    return out


def overlap(start: float, end: float, windows: list[tuple[float, float]]) -> float:
    """Seconds of [start, end] inside the windows."""
    return sum(max(0.0, min(end, w_end) - max(start, w_start)) for w_start, w_end in windows)
