"""The metadata probes of a RabbitMQ run (its `declare` steps, systems.rabbitmq.declares): what
each target answered, which side of a partition it was on when asked, and where its queue was
found once the cluster had reunited; and whether that is what the scenario's `expect_declares`
says (a matching verdict stays one only if it is).

The side is read from the nemesis's own events, as they were when the step began: each cut's ok
lists the links it cut, each heal's ok the cuts it left, and a node killed, stopped or paused is
down until it is back. A target's side is itself and every node it could reach both ways that
was up; it was on the minority side when that is no more than half of the cluster's nodes (a
Raft store, Khepri's, needs more than half), a target that was down included. Cuts between
nodes alone count: a cut of the clients' path (cut-clients) is said beside, as clients_cut.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from contract.history import event_value
from faults.registry import window_of

SIDES = ("minority", "majority")
CLIENTS = "clients"  # the pseudo-node of the clients' path in the nemesis's cuts


@dataclass
class _Network:
    """The nemesis's cuts and the nodes it had down, replayed from its events."""

    cuts: set[tuple[str, str]] = field(default_factory=set)
    down: set[str] = field(default_factory=set)

    def replay(self, type_: str, f: str, v: dict[str, Any]) -> None:
        window = window_of(f)
        names = {str(n) for n in v.get("nodes") or [] if isinstance(n, str)}
        if type_ == "ok" and f == "start-partition":
            self.cuts |= _cut_set(v.get("cuts"))
        elif type_ == "ok" and window in ("network-heal", "heal-all") and "remaining_cuts" in v:
            self.cuts = _cut_set(v.get("remaining_cuts"))
        elif type_ == "ok" and window == "heal-all":
            self.cuts.clear()
        elif type_ == "invoke" and window in ("node-down", "node-bounce"):
            self.down |= names
        elif type_ == "ok" and window in ("node-up", "node-bounce"):
            self.down -= names

    def side_of(self, node: str, nodes: Iterable[str]) -> list[str]:
        """The nodes `node` could reach both ways, itself counted, the nodes down not."""
        if node in self.down:
            return []
        return sorted(
            m
            for m in nodes
            if m == node
            or (m not in self.down and (node, m) not in self.cuts and (m, node) not in self.cuts)
        )


def _cut_set(raw: Any) -> set[tuple[str, str]]:
    if not isinstance(raw, list):
        return set()
    return {(str(c[0]), str(c[1])) for c in raw if isinstance(c, list | tuple) and len(c) == 2}


def declares_section(
    nemesis: list[dict[str, Any]],
    nodes: list[str],
    expected: dict[str, Any] | None,
    run_start: float,
) -> dict[str, Any] | None:
    """The verdict's `declares`: every probe, counts by side and by node, the look after the
    heal, and the expectation's mismatches (held: None without an expectation). None for a run
    with no declare step and no expectation of one."""
    net = _Network()
    probes: list[dict[str, Any]] = []
    asked: dict[str, dict[str, Any]] = {}  # the declare step under way: each target's side
    looked: dict[str, Any] | None = None
    failed: list[str] = []
    for e in nemesis:
        type_, f, v = e["type"], e["f"], event_value(e.get("value"))
        net.replay(type_, f, v)
        if f == "declare" and type_ == "invoke":
            asked = {
                str(n): {
                    "side": net.side_of(str(n), nodes),
                    "clients_cut": (CLIENTS, str(n)) in net.cuts,
                    "at": round(float(e["time"]) - run_start, 1),
                }
                for n in v.get("nodes") or []
            }
        elif f == "declare" and type_ == "ok":
            probes += _probes(asked, v, len(nodes))
        elif f == "declare" and type_ == "fail":
            failed.append(f"declare of {', '.join(sorted(asked))} failed: {e.get('error') or '?'}")
        elif f == "declared" and type_ == "ok":
            looked = {"asked": v.get("asked") or [], "unanswered": v.get("unanswered") or {}}
            found = v.get("found") or {}
            for p in probes:
                p["found_after_heal"] = found.get(p["queue"])
    if not probes and not failed and not expected:
        return None
    # Judged only where the scenario says what to expect: a step that failed is one then.
    mismatches = mismatches_of(probes, looked, expected) + failed if expected else []
    return {
        "probes": probes,
        "by_side": _counts(probes, lambda p: p["side_kind"]),
        "by_node": {
            node: _counts([p for p in probes if p["node"] == node], lambda p: p["side_kind"])
            for node in sorted({p["node"] for p in probes})
        },
        "looked_after_heal": looked,
        "failed_steps": failed,
        "expected": expected,
        "mismatches": mismatches,
        "held": (not mismatches) if expected else None,
    }


def _probes(
    asked: dict[str, dict[str, Any]], v: dict[str, Any], cluster: int
) -> list[dict[str, Any]]:
    """One record per target of a declare step's ok."""
    queues = v.get("queues") or {}
    out = []
    for node, said in sorted((v.get("answers") or {}).items()):
        where = asked.get(node) or {"side": [], "clients_cut": False, "at": None}
        side = where["side"]
        out.append(
            {
                "at": where["at"],
                "node": node,
                "queue": queues.get(node),
                "answer": said.get("answer"),
                "seconds": said.get("seconds"),
                "error": said.get("error") or "",
                "side": side,
                "side_kind": "majority" if 2 * len(side) > cluster else "minority",
                "clients_cut": where["clients_cut"],
                "found_after_heal": None,
            }
        )
    return out


def _counts(probes: list[dict[str, Any]], key: Any) -> dict[str, dict[str, int]]:
    """Answers counted by side: {side: {answer: n}}."""
    out: dict[str, dict[str, int]] = {}
    for p in probes:
        answers = out.setdefault(key(p), {})
        answers[p["answer"]] = answers.get(p["answer"], 0) + 1
    return out


def mismatches_of(
    probes: list[dict[str, Any]], looked: dict[str, Any] | None, expected: dict[str, Any]
) -> list[str]:
    """What the probes showed against what each side was expected to show, one line each."""
    out: list[str] = []
    for side in SIDES:
        want = expected.get(side)
        if not want:
            continue
        on_side = [p for p in probes if p["side_kind"] == side]
        if not on_side:
            out.append(f"no declare was asked of a node on the {side} side")
        for p in on_side:
            if p["answer"] not in want.get("answers", []):
                said = f": {p['error']}" if p["error"] else ""
                out.append(f"{p['node']} ({side}) {p['answer']} {p['queue']} at +{p['at']} s{said}")
        after = want.get("after_heal")
        if after and on_side and looked is None:
            out.append("the declare steps' queues were not looked for after the heal")
        elif after and looked is not None:
            out += [line for p in on_side if (line := _after_heal(p, side, after, looked))]
    return out


def _after_heal(p: dict[str, Any], side: str, after: str, looked: dict[str, Any]) -> str:
    """The line saying where a probe's queue was found when that is not where it should be."""
    found = sorted(p.get("found_after_heal") or [])
    asked = sorted(looked.get("asked") or [])
    where = ", ".join(found) or "no node"
    if after == "nowhere" and found:
        return f"{p['queue']} ({p['node']}, {side}) found after the heal on {where}"
    if after == "everywhere" and (not asked or found != asked):
        return (
            f"{p['queue']} ({p['node']}, {side}) found after the heal on {where}, "
            f"of {', '.join(asked) or 'no node that answered'}"
        )
    return ""


def summary_lines(section: dict[str, Any] | None) -> list[str]:
    """The probes in a few lines: each answer with the target's side, then held or not."""
    if not section:
        return []
    lines = []
    for p in section["probes"]:
        found = p.get("found_after_heal")
        after = "" if found is None else f"; after the heal on {', '.join(found) or 'no node'}"
        said = f" ({p['error']})" if p["error"] else ""
        lines.append(
            f"declare {p['queue']} via {p['node']} ({p['side_kind']}, reaching "
            f"{', '.join(p['side']) or 'nothing: down'}) at +{p['at']} s: {p['answer']} in "
            f"{p['seconds']} s{said}{after}"
        )
    if section["held"] is not None:
        lines.append("declares: " + ("held" if section["held"] else "did not hold"))
        lines += [f"  {m}" for m in section["mismatches"]]
    return lines
