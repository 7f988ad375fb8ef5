"""What a run's faults actually did: each fault step's targets, whether they held the role
they were aimed at and every role they held besides (a follower that was the controller too),
the situations reached (a leader cut off while its ISR had shrunk, a
majority down, a power loss that dropped unsynced writes), and the traffic inside the fault
windows.

A run whose faults carried no traffic, or in which a situation the scenario requires never
happened, is vacuous: it tested nothing of what it claims, so a pass becomes inconclusive
(a loss found is a loss, vacuous or not). Pure Python over the few nemesis and partition-watch
rows of a run and the per-window counts the Spark check made (checkers.availability.window_traffic).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from checkers.attribution import step_label
from checkers.verdict import Judgement
from contract.history import event_value
from faults.registry import FAULT_WINDOWS, OPS, is_step, window_of

PARTITION_ROLES = ("leader", "follower", "followers", "isr", "in-sync-followers")
CONTROL_ROLES = ("controller", "quorum")
# The history names of the steps that change the KRaft controller quorum's voters.
QUORUM_CHANGES = ("add-controller", "remove-controller")
# Roles naming the broker that coordinates a client's transactions, consumer group or share
# group's state (the share coordinator, KIP-932).
COORDINATOR_ROLES = ("transaction-coordinator", "group-coordinator", "share-coordinator")
# Outcomes that say something did not happen: only a run that tested something may say so.
NEGATIVE_OUTCOMES = frozenset({"safe", "unavailable", "no-duplicates"})


@dataclass(frozen=True)
class ClusterFacts:
    """What the coverage needs of the scenario: replicas, min ISR, brokers."""

    replication_factor: int | None = None
    min_insync_replicas: int | None = None
    brokers: int = 3

    @classmethod
    def of(cls, spec: dict[str, Any]) -> ClusterFacts:
        cluster = spec.get("cluster") or {}
        system = cluster.get("system", "rabbitmq")
        if system == "kafka":
            return cls(
                cluster.get("replication_factor", 3),
                _topic_min_isr(cluster),
                cluster.get("brokers", 3),
            )
        return cls(brokers=cluster.get("brokers", cluster.get("nodes", 3)))


# The ops that fault only the clients' path to the brokers (through the run's proxy).
CLIENT_PATH_OPS = frozenset(o.name for o in OPS if o.needs_proxy)


def _topic_min_isr(cluster: dict[str, Any]) -> int:
    """The workload topic's min ISR: its own config, else the brokers' (set through the
    scenario's passthrough keys or the typed knob), else the harness's default of 2."""
    for source in (cluster.get("topic_config"), cluster.get("broker_config")):
        if isinstance(source, dict) and "min.insync.replicas" in source:
            try:
                return int(source["min.insync.replicas"])
            except (TypeError, ValueError):
                break
    return int(cluster.get("min_insync_replicas", 2))


@dataclass
class _Watch:
    """Leader and ISR of each partition as the partition watch last saw them."""

    leader: dict[int, str | None] = field(default_factory=dict)
    isr: dict[int, list[str]] = field(default_factory=dict)


def coverage_of(
    nemesis: list[dict[str, Any]],
    states: list[dict[str, Any]],
    traffic: list[dict[str, Any]],
    facts: ClusterFacts,
    requires: list[str],
    expect: str | None,
    run_start: float,
    transactions: dict[str, Any] | None = None,
    share_groups: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The coverage section of verdict.json (see the module's docstring). With transactional
    clients, `transactions` is the verdict's transactions section: what a transactional claim
    tests is a fault meeting open transactions, whose records are acknowledged only at their
    commit; it also says whose commit was in flight in a fault or as a coordinator moved. With
    share consumers, `share_groups` is the verdict's share groups section: the records it saw
    redelivered after a release or a lock's expiry are situations too."""
    situations: Counter[str] = Counter(_watched_situations(states, facts))
    ops = _ops_applied(nemesis)
    steps = _fault_steps(nemesis, states, facts, run_start, situations)
    situations.update(_down_situations(nemesis, facts))
    open_transactions = None if transactions is None else transactions.get("open_in_faults", 0)
    for situation, count in _transaction_situations(transactions or {}).items():
        situations[situation] += count
    for key, situation in SHARE_SITUATIONS.items():
        if count := int((share_groups or {}).get(key) or 0):
            situations[situation] += count
    totals = {key: sum(w[key] for w in traffic) for key in ("acked", "sends", "delivered")}
    # A message undelivered through several windows was exposed at each: counted once, at the
    # first (older verdicts' windows lack first_exposed).
    totals["exposed"] = sum(w.get("first_exposed", w["exposed"]) for w in traffic)
    missing = [s for s in requires if not situations.get(s)]
    why = _vacuous_because(steps, totals, missing, expect, open_transactions)
    return {
        "steps": steps,
        "ops": ops,
        "situations": dict(sorted(situations.items())),
        "windows": traffic,
        "acked_in_faults": totals["acked"],
        "sends_in_faults": totals["sends"],
        "delivered_in_faults": totals["delivered"],
        "exposed_at_faults": totals["exposed"],
        "late_steps": _late_steps(nemesis, run_start),
        **_undelivered(nemesis),
        "requires": requires,
        "missing": missing,
        "vacuous": bool(why),
        "why_vacuous": why,
    }


def _writers() -> dict[str, str]:
    """Each history name only one op writes, and that op (a kill is `kill`; a start-partition
    is written by isolate, partition, cut... and names its op in its value)."""
    by_f: dict[str, list[str]] = {}
    for o in OPS:
        for f in o.writes:
            by_f.setdefault(f, []).append(o.name)
    return {f: names[0] for f, names in by_f.items() if len(names) == 1}


WRITTEN_BY = _writers()


def _ops_applied(nemesis: list[dict[str, Any]]) -> dict[str, int]:
    """How many steps of each op the nemesis carried out (an invoke its ok followed; a step that
    failed or was skipped is not counted), heals included, by the op's name in a scenario: what
    a generated schedule drew and did, per op."""
    pending: dict[str, str] = {}  # a step's history name -> its op, from its invoke to its end
    done: Counter[str] = Counter()
    for e in nemesis:
        if not is_step(e["f"]):
            continue
        if e["type"] == "invoke":
            said = event_value(e.get("value")).get("op")
            pending[e["f"]] = said if isinstance(said, str) else WRITTEN_BY.get(e["f"], e["f"])
        elif e["type"] in ("ok", "fail") and e["f"] in pending:
            op = pending.pop(e["f"])
            done[op] += e["type"] == "ok"
    return {op: n for op, n in sorted(done.items()) if n}


# The transactions section's counts that are situations a transactional claim may require.
TRANSACTION_SITUATIONS = {
    "open_in_faults": "transaction-open-in-fault",
    "commits_in_faults": "commit-in-flight-in-fault",
    "commits_across_coordinator_moves": "coordinator-moved-in-commit",
    "fenced_commits": "fenced-commit-asked",
    "fenced_open": "fenced-transaction-open",
    "fenced_while_paused": "zombie-fenced-while-paused",
    "held_past_end": "request-held-past-end-txn",
    "commits_delayed": "commit-delayed",
}


# The share groups section's counts that are situations a share-group claim may require.
SHARE_SITUATIONS = {
    "lock_expired_redelivered": "share-lock-expired-redelivered",
    "released_redelivered": "share-released-redelivered",
}


def _transaction_situations(transactions: dict[str, Any]) -> dict[str, int]:
    return {
        situation: int(transactions.get(key) or 0)
        for key, situation in TRANSACTION_SITUATIONS.items()
        if transactions.get(key)
    }


def with_coverage(j: Judgement, coverage: dict[str, Any]) -> Judgement:
    """A pass that says nothing went wrong is inconclusive when the faults tested nothing."""
    if not (j.matched and coverage.get("vacuous")):
        return j
    if not set(j.outcome.split("+")) & NEGATIVE_OUTCOMES:
        return j
    why = "; ".join(coverage.get("why_vacuous") or [])
    return Judgement("inconclusive", False, f"vacuous: {why} (it would have been: {j.reason})")


def _vacuous_because(
    steps: list[dict[str, Any]],
    totals: dict[str, int],
    missing: list[str],
    expect: str | None,
    open_transactions: int | None = None,
) -> list[str]:
    why = []
    if steps:
        if open_transactions is not None:
            if not open_transactions:
                why.append("no transaction was open while a fault was in effect")
        elif "unavailable" in (expect or "").split("+"):
            if not totals["sends"]:
                why.append("no send was attempted while a fault was in effect")
        elif not totals["acked"] and not totals["exposed"]:
            why.append(
                "no message was acknowledged while a fault was in effect, and none "
                "acknowledged before one was still waiting to be delivered when it began"
            )
    if missing:
        why.append(f"the faults never brought about {', '.join(missing)}")
    return why


# ---- the partition watch ---------------------------------------------------------------------


def _watched_situations(states: list[dict[str, Any]], facts: ClusterFacts) -> list[str]:
    out: list[str] = []
    last: dict[int, str | None] = {}
    for s in states:
        v = event_value(s.get("value"))
        p, leader, isr = s["partition"], v.get("leader"), v.get("isr") or []
        if leader is None:
            out.append("no-leader")
        elif p in last and last[p] is not None and last[p] != leader:
            out.append("leader-changed")
        if leader is not None:
            last[p] = leader
        elif p not in last:
            last[p] = None
        min_isr, rf = facts.min_insync_replicas, facts.replication_factor
        if min_isr is not None and rf is not None and isr:
            if len(isr) < min_isr:
                out.append("isr-below-min-isr")
            elif len(isr) == min_isr and min_isr < rf:
                out.append("isr-at-min-isr")
    return out


def _watch_at(states: list[dict[str, Any]], t: float) -> _Watch:
    w = _Watch()
    for s in states:
        if s["time"] > t:
            break
        v = event_value(s.get("value"))
        w.leader[s["partition"]] = v.get("leader")
        w.isr[s["partition"]] = list(v.get("isr") or [])
    return w


# ---- the nemesis's steps ---------------------------------------------------------------------

LATE_STEP_S = 1.0  # a step whose fault began later than this after its `at` did not run as written


def _undelivered(nemesis: list[dict[str, Any]]) -> dict[str, int]:
    """`proxy_undelivered`, when the clients' proxy dropped held data at a release (no reader
    took it: a connection its client had stopped reading): those requests never arrived."""
    dropped = sum(
        int(event_value(e.get("value")).get("undelivered_chunks") or 0)
        for e in nemesis
        if e["type"] == "ok" and e["f"] == "release-clients"
    )
    return {"proxy_undelivered": dropped} if dropped else {}


def _late_steps(nemesis: list[dict[str, Any]], run_start: float) -> list[dict[str, Any]]:
    """Every step whose fault began more than LATE_STEP_S after the time the schedule gave it
    (a role resolved slowly, a fault that took long to apply): what ran is not what was
    written, and the verdict says so."""
    late, number = [], 0
    for e in nemesis:
        if e["type"] != "invoke" or not is_step(e["f"]):
            continue
        number += 1
        lag = event_value(e.get("value")).get("lag")
        if isinstance(lag, (int, float)) and lag > LATE_STEP_S:
            label = step_label(number, e["f"], e.get("value"), e["time"] - run_start)
            late.append({"step": label, "lag": lag})
    return late


def _touched(v: dict[str, Any]) -> set[str]:
    """The nodes a fault acts on (a partition's bridge, in every group, is not cut)."""
    names: set[str] = set()
    for key in ("nodes", "from", "to", "brokers"):
        if isinstance(v.get(key), list):
            names |= {str(n) for n in v[key]}
    groups = v.get("groups")
    if isinstance(groups, list) and groups:
        sets = [set(map(str, g)) for g in groups]
        names |= set[str]().union(*sets) - sets[0].intersection(*sets[1:])
    return names


def _fault_steps(
    nemesis: list[dict[str, Any]],
    states: list[dict[str, Any]],
    facts: ClusterFacts,
    run_start: float,
    situations: Counter[str],
) -> list[dict[str, Any]]:
    """One row per fault step: what it hit, and whether that was the role it was aimed at."""
    rows: list[dict[str, Any]] = []
    resolved: dict[str, Any] = {}
    number = 0
    for e in nemesis:
        v = event_value(e.get("value"))
        if e["type"] == "info" and e["f"] == "resolve":
            resolved = v
            continue
        if e["type"] != "invoke" or not is_step(e["f"]):  # numbered as attribution numbers
            continue
        number += 1
        if window_of(e["f"]) not in FAULT_WINDOWS:
            resolved = {}
            continue
        # A role is a word (leader, followers, @label); anything else a history holds is shown
        # as written, never trusted as one.
        roles = {
            k: r if isinstance(r, str) else str(r) for k, r in (resolved.get("roles") or {}).items()
        }
        watch = _watch_at(states, e["time"])
        touched = _touched(v)
        hit = sorted(str(p) for p, leader in watch.leader.items() if leader in touched)
        # A RabbitMQ queue's leader, as the broker named it when the step resolved its role:
        # there is no partition watch to say so.
        queue_leader_hit = bool(resolved.get("queue")) and "leader" in roles.values()
        held = _roles_held(resolved, touched)
        row = {
            "step": step_label(number, e["f"], e.get("value"), e["time"] - run_start),
            "f": e["f"],
            "nodes": sorted(touched),
            "roles": roles,
            "held_role": _held(resolved, watch),
            # Every role each node it touched held as it began (None: not recorded, as by
            # RabbitMQ or an older run), and what went unlearnt, by role.
            "held": held,
            "roles_unknown": _roles_unknown(resolved),
            "leaders_hit": hit,
            "lag": v.get("lag"),  # seconds after its `at` the fault began (None: not recorded)
            # Whose leader each of those partitions was: what the report shows beside its id.
            "hit_leaders": {p: watch.leader[int(p)] for p in hit},
            "queue_leader_hit": queue_leader_hit,
            # Whether anything said where the leaders were as the step began: a run with no
            # partition watch (RabbitMQ) knows a queue's leader only where a step aimed at it.
            "leader_known": bool(watch.leader) or queue_leader_hit,
        }
        rows.append(row)
        situations.update(_step_situations(e["f"], v, roles, hit, watch, facts, held))
        if queue_leader_hit and not hit:
            situations["leader-faulted"] += 1
        resolved = {}
    return rows


def _held(resolved: dict[str, Any], watch: _Watch) -> bool | None:
    """Whether the nodes each role of a resolve event named held it by the partition watch's
    view at that moment (None when the watch cannot say: no partition role, or no watch)."""
    roles: dict[str, str] = resolved.get("roles") or {}
    nodes: dict[str, list[str]] = resolved.get("nodes") or {}
    partition = resolved.get("partition", 0)
    leader, isr = watch.leader.get(partition), watch.isr.get(partition)
    answers = []
    for key, role in roles.items():
        got = set(nodes.get(key) or [])
        if role not in PARTITION_ROLES or leader is None or isr is None:
            continue
        if role == "leader":
            answers.append(got == {leader})
        elif role in ("follower", "followers"):
            answers.append(leader not in got)
        elif role == "isr":
            answers.append(got == set(isr))
        else:
            answers.append(leader not in got and got <= set(isr))
    return all(answers) if answers else None


def _roles_held(resolved: dict[str, Any], touched: set[str]) -> dict[str, list[str]] | None:
    """The roles each node the step touched held as it began, as the nemesis recorded them
    ("leader p0", "controller", "transaction-coordinator tx-1", ...); None when it did not."""
    held = resolved.get("held")
    if not isinstance(held, dict):
        return None
    return {
        str(node): sorted(str(r) for r in roles)
        for node, roles in sorted(held.items())
        if str(node) in touched and isinstance(roles, list)
    }


def _roles_unknown(resolved: dict[str, Any]) -> dict[str, str]:
    unknown = resolved.get("roles_unknown")
    return {str(k): str(why) for k, why in unknown.items()} if isinstance(unknown, dict) else {}


def _role_words(held: dict[str, list[str]] | None) -> set[str]:
    """The roles held, without what of ("leader p0" is a leader's, "group-coordinator g" a
    group coordinator's)."""
    return {r.split(" ", 1)[0] for roles in (held or {}).values() for r in roles}


def _step_situations(
    f: str,
    v: dict[str, Any],
    roles: dict[str, str],
    leaders_hit: list[str],
    watch: _Watch,
    facts: ClusterFacts,
    held: dict[str, list[str]] | None = None,
) -> list[str]:
    out = []
    window = window_of(f)
    # Roles held count as the roles aimed at, for a fault on the nodes themselves: injected
    # errors are the mock's, and a fault of the clients' path alone (a cut, a delay through the
    # proxy) leaves the controller controlling: the brokers' own traffic is untouched.
    held_words = _role_words(held) if window != "injected" else set()
    clients_path = v.get("op") == "cut-clients" or _on_clients_path(v.get("op"))
    control_held = "controller" in held_words and not clients_path
    if window in ("node-down", "node-bounce"):
        out.append("node-faulted")
    if window == "disk-start":
        out.append("disk-faulted")
    if f == "corrupt":  # a node-bounce too: its node was down while its files changed
        out.append("data-corrupted")
    if f in QUORUM_CHANGES:
        out.append("quorum-changed")
    else:
        # An add-broker moves replicas only with move_onto.
        moves = window == "membership-start" and v.get("move_onto") is not False
        if moves or f == "remove-broker":
            out.append("reassigned")
        if f in ("remove-broker", "add-broker") or window == "member-out":
            out.append("membership-changed")
    if window == "clock-start":
        out.append("clock-skewed")
    if window == "client-down":
        out.append("client-paused" if f == "pause-client" else "client-ended")
    if leaders_hit and window != "injected":
        out.append("leader-faulted")
        rf = facts.replication_factor
        if rf is not None and any(len(watch.isr.get(int(p), [])) < rf for p in leaders_hit):
            out.append("leader-faulted-isr-shrunk")
    if set(roles.values()) & set(CONTROL_ROLES) or v.get("op") == "cut-from-quorum" or control_held:
        out.append("controller-faulted")
    if set(roles.values()) & set(COORDINATOR_ROLES) or held_words & set(COORDINATOR_ROLES):
        out.append("coordinator-faulted")
    if f == "start-partition" and v.get("op") in ("isolate", "partition", "cut"):
        out.append("network-partitioned")
    if v.get("op") == "cut-clients":
        out.append("clients-cut")
    if v.get("op") in ("delay", "hold", "blackhole", "slow-link"):
        out.append("clients-delayed")
    return out


def _on_clients_path(op: object) -> bool:
    """Whether an op faults only the clients' path to the brokers (through the proxy)."""
    return isinstance(op, str) and op in CLIENT_PATH_OPS


def _down_situations(nemesis: list[dict[str, Any]], facts: ClusterFacts) -> list[str]:
    """Situations the processes' faults bring about over time: a majority down at once, a
    power loss that dropped unsynced writes."""
    out = []
    down: set[str] = set()
    for e in nemesis:
        v = event_value(e.get("value"))
        names = _touched(v)
        window = window_of(e["f"])
        if e["type"] == "invoke" and window in ("node-down", "node-bounce"):
            down |= names
            if len(down) > facts.brokers / 2:
                out.append("majority-down")
        elif e["type"] == "ok" and window in ("node-up", "node-bounce"):
            down -= names
        elif e["type"] == "ok" and window == "heal-all":
            down.clear()
        if e["type"] == "ok" and e["f"] == "power-loss" and _dropped_something(v.get("dropped")):
            out.append("power-lost-unsynced-dropped")
    return out


def _dropped_something(dropped: Any) -> bool:
    if isinstance(dropped, dict):
        return any(_dropped_something(x) for x in dropped.values())
    if isinstance(dropped, list):
        return bool(dropped)
    return isinstance(dropped, (int, float)) and not isinstance(dropped, bool) and dropped > 0
