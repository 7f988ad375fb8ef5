"""The KRaft controller quorum's membership (KIP-853, Kafka 3.9 on): a controller added to the
voters (`add-controller`) and one removed (`remove-controller`), on a cluster formed with a
dynamic quorum (`cluster.controller_quorum: dynamic`, kraft.version 1).

Both go through Kafka's own tool, kafka-metadata-quorum, run inside the nodes and bootstrapped
on the voters' controller listeners, as Kafka's operations guide does it:

- add-controller starts a controller formatted without initial controllers (a spare, or one a
  remove-controller stopped, with its data), waits until it fetches as an observer and has
  caught up with the leader (`describe --replication`: its lag), then runs `add-controller`
  inside it (the tool reads the new controller's id, directory id and endpoints from its own
  properties and metadata directory), asked again while the leader says it lags, until
  `describe` lists it among the voters or the step's `within` passes;
- remove-controller reads the target's directory id from `describe --status`, runs
  `remove-controller --controller-id N --controller-directory-id D`, waits until the voters no
  longer list it, and stops its container. Kafka 4.0 on has pre-vote (KIP-996): the controller
  is removed, then stopped. Before it, Kafka's guide says to stop the controller first (a
  removed voter still running could disrupt the quorum with its elections): 3.9 does that.

Each step's ok says what the tool said and the voters before and after (names, node ids,
directory ids, the leader). The end of a run puts nothing back: an added controller stays a
voter, a removed one stays stopped and out of the nemesis's reach until an add-controller names
it.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from contract.topology import Topology
from nemesis.containers import Nemesis, NemesisError

# How often a step asks the quorum whether its change is done (each ask is a JVM in a node).
POLL_SECONDS = 2.0
# An observer this few records behind the leader has caught up enough to be asked for: the
# leader itself checks it caught up recently, and refuses ("lagging behind") otherwise.
CAUGHT_UP_LAG = 100
# What the tool (or the leader, through it) says of a refusal a moment later may not repeat:
# an election under way, a voter change not yet committed, a newcomer still catching up.
TRANSIENT = re.compile(
    r"timed out|TimeoutException|lagging behind|not ready|NOT_LEADER|NotLeader|NotController|"
    r"not the leader|LeaderNotAvailable|Disconnect|establish HWM",
    re.IGNORECASE,
)
# AddRaftVoter's answer when the controller is a voter already (an earlier ask that took).
ALREADY_A_VOTER = re.compile(r"DUPLICATE_VOTER|already part of the set of voters", re.IGNORECASE)
# A line a tool logs (log4j's pattern in compose/images/kafka-config): not its answer.
LOG_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d[^]]*\] (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) ")


@dataclass(frozen=True)
class ToolRun:
    """One run of a Kafka tool inside a node: its exit code and what it wrote."""

    code: int
    out: str
    err: str

    @property
    def ok(self) -> bool:
        return self.code == 0

    @property
    def said(self) -> str:
        """Its answer in a line: the last line of its output when it succeeded; else the first
        line of its error that is neither a log line nor a stack frame (the tool prints the
        error's message, then the trace)."""
        if self.ok:
            lines = [ln.strip() for ln in self.out.splitlines() if ln.strip()]
            return lines[-1][:300] if lines else "ok"
        for text in (self.err, self.out):
            for line in text.splitlines():
                line = line.strip()
                if line and not LOG_LINE.match(line) and not line.startswith("at "):
                    return line[:300]
        return f"exit code {self.code}"


@dataclass(frozen=True)
class Replica:
    """A voter or an observer of the metadata partition, as kafka-metadata-quorum lists it."""

    node_id: int
    directory_id: str | None
    role: str = ""  # describe --replication's Status: Leader, Follower, Observer
    lag: int | None = None  # records behind the leader (describe --replication)


@dataclass(frozen=True)
class QuorumStatus:
    """describe --status: the leader and its epoch, the voters and the observers."""

    leader_id: int
    leader_epoch: int
    voters: tuple[Replica, ...]
    observers: tuple[Replica, ...] = ()

    def voter(self, node_id: int) -> Replica | None:
        return next((v for v in self.voters if v.node_id == node_id), None)

    @property
    def voter_ids(self) -> set[int]:
        return {v.node_id for v in self.voters}


class QuorumError(NemesisError):
    """A quorum tool's answer that cannot be read, or a change Kafka refused for good."""


def parse_status(text: str) -> QuorumStatus:
    """kafka-metadata-quorum describe --status: `CurrentVoters: [{"id": 101, "directoryId":
    "...", "endpoints": [...]}, ...]` (3.9 writes `"directoryId": null` for a voter without
    one, 4.x leaves the key out; releases before KIP-853 listed bare ids)."""
    fields = dict(re.findall(r"^(\w+):\s*(.*)$", text, re.M))
    try:
        return QuorumStatus(
            int(fields["LeaderId"]),
            int(fields["LeaderEpoch"]),
            _replicas(fields["CurrentVoters"]),
            _replicas(fields.get("CurrentObservers", "[]")),
        )
    except (KeyError, ValueError) as e:
        said = text.strip().splitlines()[-1][:200] if text.strip() else "nothing"
        raise QuorumError(f"kafka-metadata-quorum describe --status said {said!r} ({e})") from None


def _replicas(listed: str) -> tuple[Replica, ...]:
    out = []
    for entry in json.loads(listed):
        if isinstance(entry, int):
            out.append(Replica(entry, None))
        else:
            directory = entry.get("directoryId")
            out.append(Replica(int(entry["id"]), str(directory) if directory else None))
    return tuple(out)


def parse_replication(text: str) -> list[Replica]:
    """kafka-metadata-quorum describe --replication: one row per replica under a header
    (NodeId DirectoryId LogEndOffset Lag LastFetchTimestamp LastCaughtUpTimestamp Status)."""
    lines = [ln.split() for ln in text.splitlines() if ln.strip()]
    header = next((i for i, words in enumerate(lines) if words[:1] == ["NodeId"]), None)
    if header is None:
        said = text.strip().splitlines()[-1][:200] if text.strip() else "nothing"
        raise QuorumError(f"kafka-metadata-quorum describe --replication said {said!r}")
    column = {name: i for i, name in enumerate(lines[header])}
    out = []
    for words in lines[header + 1 :]:
        if len(words) != len(column):
            continue
        directory = words[column["DirectoryId"]] if "DirectoryId" in column else None
        out.append(
            Replica(
                int(words[column["NodeId"]]),
                directory,
                words[column["Status"]],
                int(words[column["Lag"]]),
            )
        )
    return out


# ---- the cluster's side ----------------------------------------------------------------------


class QuorumControl(Protocol):
    """What the quorum ops ask of the cluster (systems.kafka.cluster.KafkaCluster)."""

    voters: list[str]
    """The voters now, by node name: the ops change it, `quorum` targets read it."""

    def describe_quorum(self, via: str, bootstrap: list[str], replication: bool = False) -> ToolRun:
        """kafka-metadata-quorum describe (--status, or --replication) inside `via`."""
        ...

    def add_controller(self, node: str, bootstrap: list[str]) -> ToolRun:
        """kafka-metadata-quorum add-controller inside the new controller, on its own
        properties."""
        ...

    def remove_controller(
        self, via: str, bootstrap: list[str], node_id: int, directory_id: str
    ) -> ToolRun: ...

    def start_controller(self, name: str) -> Topology:
        """Starts a spare controller, or a removed one again; the cluster's topology with it."""
        ...

    def stop_controller(self, name: str) -> Topology:
        """Stops a controller out of the quorum; the topology without it."""
        ...


class QuorumSteps(Protocol):
    """What the quorum steps use of the Kafka nemesis (systems.kafka.nemesis, which dispatches
    to them: a protocol here, so that neither module imports the other's)."""

    quorum: Quorum | None
    net: Nemesis

    def _resolved(self, step: Any, also: Iterable[str] = ()) -> dict[str, list[str]]: ...


@dataclass
class Quorum:
    """The controllers as the quorum ops change them."""

    control: QuorumControl
    ids: dict[str, int]  # every controller's node id, by name (voters, spares, removed)
    spares: list[str]  # spare controllers not started yet, in the order add-controller takes
    brokers_too: set[str]  # voters that are brokers as well (combined mode): never stopped
    pre_vote: bool  # Kafka 4.0 on (KIP-996): a controller is removed, then stopped
    removed: set[str] = field(default_factory=set)  # removed by the run, stopped, out
    poll: float = POLL_SECONDS
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep

    @property
    def names(self) -> dict[int, str]:
        return {i: n for n, i in self.ids.items()}

    def running_voters(self, down: Iterable[str], avoid: Iterable[str] = ()) -> list[str]:
        """The voters not down (stopped, killed, paused: a tool run in one would wait its whole
        timeout), nor to `avoid`."""
        skip = set(down) | set(avoid) | self.removed
        return [v for v in self.control.voters if v not in skip]

    def via(self, down: Iterable[str], avoid: Iterable[str] = ()) -> tuple[str, list[str]]:
        """A running voter to run the tool in, and the running voters to bootstrap it on."""
        running = self.running_voters(down, avoid)
        if not running:
            raise NemesisError("no running voter to ask the controller quorum through")
        return running[0], running

    def status(self, via: str, bootstrap: list[str], within: float = 30) -> QuorumStatus:
        """describe --status, asked again for up to `within` seconds while the quorum does not
        answer (an election under way: the leader just removed, or a fault's)."""
        deadline = self.clock() + within
        while True:
            run = self.control.describe_quorum(via, bootstrap)
            if run.ok:
                return parse_status(run.out)
            if self.clock() >= deadline:
                raise QuorumError(f"kafka-metadata-quorum describe on {via}: {run.said}")
            self.sleep(self.poll)

    def replication(self, via: str, bootstrap: list[str]) -> list[Replica] | None:
        """The replicas and their lag; None while the quorum does not answer (an election)."""
        run = self.control.describe_quorum(via, bootstrap, replication=True)
        if not run.ok:
            return None
        try:
            return parse_replication(run.out)
        except QuorumError:
            return None

    def named(self, status: QuorumStatus) -> dict[str, Any]:
        """The voters and the leader of a status, by node name, with their directory ids."""
        names = self.names
        return {
            "voters": sorted(names.get(v.node_id, str(v.node_id)) for v in status.voters),
            "leader": names.get(status.leader_id, str(status.leader_id)),
            "leader_epoch": status.leader_epoch,
            "directory_ids": {
                names.get(v.node_id, str(v.node_id)): v.directory_id for v in status.voters
            },
        }

    def newcomer(self, named: list[str] | None) -> str:
        """The controller an add-controller starts: the one named (a spare, or one the run
        removed), else the first spare not started."""
        if not named:
            if not self.spares:
                raise NemesisError(
                    "add-controller needs a spare controller (cluster.spare_controllers) or a "
                    "removed one named: none is left"
                )
            return self.spares[0]
        if len(named) != 1 or (named[0] not in self.spares and named[0] not in self.removed):
            left = sorted([*self.spares, *self.removed])
            raise NemesisError(
                f"add-controller starts one spare controller or one a remove-controller removed; "
                f"{named} is not one (those left: {', '.join(left) or 'none'})"
            )
        return named[0]

    def join(self, name: str, bootstrap: list[str], via: str, within: float) -> dict[str, Any]:
        """Waits until the started controller has caught up as an observer, asks that it be
        added, and waits until the voters list it: the attempts, and what ended the wait."""
        node_id = self.ids[name]
        started = self.clock()
        deadline = started + within
        refused: list[str] = []
        caught_up: float | None = None
        added: str | None = None
        while True:
            replicas = self.replication(via, bootstrap) or []
            mine = [r for r in replicas if r.node_id == node_id]
            if any(r.role in ("Leader", "Follower") for r in mine):
                return {
                    "said": added or "already a voter",
                    "refused": refused[-5:],
                    "attempts": len(refused) + (1 if added else 0),
                    "caught_up_s": None if caught_up is None else round(caught_up - started, 1),
                    "waited_s": round(self.clock() - started, 1),
                }
            observer = next((r for r in mine if r.role == "Observer"), None)
            if added is None and observer is not None and (observer.lag or 0) <= CAUGHT_UP_LAG:
                caught_up = caught_up or self.clock()
                run = self.control.add_controller(name, bootstrap)
                if run.ok:
                    added = run.said
                elif not (TRANSIENT.search(run.said) or ALREADY_A_VOTER.search(run.said)):
                    raise QuorumError(f"add-controller: Kafka refused {name}: {run.said}")
                else:
                    refused.append(run.said)
            if self.clock() >= deadline:
                last = refused[-1] if refused else "nothing: it never caught up as an observer"
                raise QuorumError(
                    f"add-controller: {name} did not join the voters within {within:g} s "
                    f"(Kafka last said: {last})"
                )
            self.sleep(self.poll)

    def leave(
        self, name: str, directory_id: str, bootstrap: list[str], via: str, within: float
    ) -> dict[str, Any]:
        """Asks that the controller be removed until Kafka takes it, then waits until the voters
        no longer list it: what the tool said, and what ended the wait."""
        node_id = self.ids[name]
        started = self.clock()
        deadline = started + within
        refused: list[str] = []
        removed: str | None = None
        while True:
            if removed is None:
                run = self.control.remove_controller(via, bootstrap, node_id, directory_id)
                if run.ok:
                    removed = run.said
                elif not TRANSIENT.search(run.said):
                    raise QuorumError(f"remove-controller: Kafka refused {name}: {run.said}")
                else:
                    refused.append(run.said)
            if removed is not None:
                replicas = self.replication(via, bootstrap)
                voters = {r.node_id for r in replicas or [] if r.role in ("Leader", "Follower")}
                if replicas is not None and voters and node_id not in voters:
                    return {
                        "said": removed,
                        "refused": refused[-5:],
                        "attempts": len(refused) + 1,
                        "waited_s": round(self.clock() - started, 1),
                    }
            if self.clock() >= deadline:
                last = removed or (refused[-1] if refused else "nothing")
                raise QuorumError(
                    f"remove-controller: {name} was still a voter after {within:g} s "
                    f"(Kafka last said: {last})"
                )
            self.sleep(self.poll)


# ---- the steps -------------------------------------------------------------------------------


def _quorum(k: QuorumSteps) -> Quorum:
    if k.quorum is None:
        raise NemesisError(
            "this run's controller quorum is static: add-controller and remove-controller need "
            "cluster.controller_quorum: dynamic"
        )
    return k.quorum


def add_controller(k: QuorumSteps, step: Any) -> None:
    """A controller started (a spare, or one the run removed), caught up as an observer, and
    added to the voters."""
    q = _quorum(k)
    name = q.newcomer(k._resolved(step).get("target"))
    value = {"nodes": [name], "within": step.within}

    def act() -> dict[str, Any]:
        via, bootstrap = q.via(k.net.down | k.net.paused)
        before = q.named(q.status(via, bootstrap))
        k.net.topology = q.control.start_controller(name)
        if name in q.spares:
            q.spares.remove(name)
        q.removed.discard(name)
        out = q.join(name, bootstrap, via, step.within)
        q.control.voters.append(name)
        after = q.named(q.status(via, bootstrap))
        return out | _before_after(before, after) | {"settled": True, "out": sorted(q.removed)}

    k.net.logged("add-controller", value, act)


def remove_controller(k: QuorumSteps, step: Any) -> None:
    """A voter removed from the quorum by its directory id, and its container stopped (before
    the removal on releases without pre-vote, after it on 4.0 and later)."""
    q = _quorum(k)
    targets = k._resolved(step).get("target", [])
    voters = q.control.voters
    if len(targets) != 1 or targets[0] not in voters:
        raise NemesisError(
            f"remove-controller takes one voter; its target is {targets or 'none'} "
            f"(voters now: {', '.join(voters)})"
        )
    name = targets[0]
    if name in q.brokers_too:
        raise NemesisError(
            f"remove-controller stops the controller it removes: {name} is a broker too "
            "(combined mode); remove a dedicated controller (kraft-dedicated, or one an "
            "add-controller added)"
        )
    if len(voters) == 1:
        raise NemesisError(f"remove-controller: {name} is the last voter, which Kafka keeps")
    order = "removed, then stopped" if q.pre_vote else "stopped, then removed"
    value = {"nodes": [name], "within": step.within, "order": order}

    def act() -> dict[str, Any]:
        via, bootstrap = q.via(k.net.down | k.net.paused, avoid=[name])
        status = q.status(via, bootstrap)
        voter = status.voter(q.ids[name])
        if voter is None or voter.directory_id is None:
            raise QuorumError(
                f"remove-controller: Kafka lists no directory id for {name} among the voters "
                f"{sorted(q.named(status)['voters'])}"
            )
        before = q.named(status)
        if not q.pre_vote:
            k.net.topology = q.control.stop_controller(name)
        try:
            out = q.leave(name, voter.directory_id, bootstrap, via, step.within)
        except NemesisError:
            if not q.pre_vote:  # still a voter: not left stopped
                k.net.topology = q.control.start_controller(name)
            raise
        if q.pre_vote:
            k.net.topology = q.control.stop_controller(name)
        voters.remove(name)
        q.removed.add(name)
        after = q.named(q.status(via, bootstrap))
        return out | _before_after(before, after) | {"out": sorted(q.removed)}

    k.net.logged("remove-controller", value, act)


def _before_after(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    return {
        "voters_before": before["voters"],
        "voters_after": after["voters"],
        "leader_before": before["leader"],
        "leader_after": after["leader"],
        "directory_ids": before["directory_ids"] | after["directory_ids"],
    }
