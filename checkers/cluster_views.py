"""What each RabbitMQ node said of its cluster before teardown (the run's evidence/, read by
systems.rabbitmq.evidence), side by side: who each node believes is running, the partitions it
still reports, which node it names leader of each queue, and the Raft state of each quorum
queue's members (and of Khepri's, on 3.13 and later) as it reports them.

Nodes that disagree on who is running are a cluster split at the end of the run: after a heal
the cluster should have come back whole, and a split that outlives it is the finding itself. Two
members that each call themselves leader are said with their terms. Each node's persisted
feature flags (copied from a stopped node too) are compared: a flag some nodes have and others
not is what a node will ask of the cluster when it boots (a release that refused to boot may
have left its own there).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import zstandard

from contract.rundir import EVIDENCE_INDEX, RunDir

CLUSTER_STATUS = "cluster-status"
QUEUES = "queues"
METADATA_STORE = "metadata-store"
QUORUM_STATUS = "quorum-status-"
STREAM_STATUS = "stream-status-"
FEATURE_FLAGS = "feature-flags"
# A flag in the persisted file, an Erlang list of atoms: bare or quoted ('rabbitmq_4.1.0').
FLAG = re.compile(r"'([^']+)'|([a-z][A-Za-z0-9_@.]*)")


def short(node: str) -> str:
    """rabbit@rabbit1 -> rabbit1"""
    return node.rpartition("@")[2]


def _answer(evidence: Path, relative: str) -> Any:
    """A node's answer as JSON; None for a table (a release without the formatter) or an
    unreadable file."""
    if not relative.endswith(".json.zst"):
        return None
    try:
        raw = zstandard.ZstdDecompressor().decompress((evidence / relative).read_bytes())
        return json.loads(raw)
    except (OSError, ValueError, zstandard.ZstdError):
        return None


def raft_members(rows: Any) -> list[dict[str, Any]]:
    """Each member of a Raft cluster (a quorum queue's, Khepri's) as a node reported it: its
    name, state, term and commit index (3.10 names no membership and calls the log index so)."""
    if not isinstance(rows, list):
        return []
    members = []
    for row in rows:
        if isinstance(row, dict) and "Node Name" in row:
            members.append(
                {
                    "member": short(str(row["Node Name"])),
                    "state": str(row.get("Raft State")),
                    "term": row.get("Term"),
                    "commit_index": row.get("Commit Index"),
                }
            )
    return members


def _views(status: dict[str, dict[str, Any]]) -> list[dict[str, list[str]]]:
    """The nodes grouped by the running nodes they see, the largest group first."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for node, answer in sorted(status.items()):
        running = tuple(sorted(short(n) for n in answer.get("running_nodes") or []))
        groups.setdefault(running, []).append(node)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return [{"nodes": nodes, "running": list(running)} for running, nodes in ordered]


def _partitions(status: dict[str, dict[str, Any]]) -> dict[str, dict[str, list[str]]]:
    out = {}
    for node, answer in sorted(status.items()):
        reported = answer.get("partitions") or {}
        if isinstance(reported, dict) and reported:
            out[node] = {short(k): sorted(short(p) for p in v) for k, v in reported.items()}
    return out


def _queues(
    answers: dict[str, dict[str, Any]],
) -> dict[str, dict[str, Any]]:
    """Per queue: the leader each node names, and each node's report of its Raft members with
    the members that call themselves leader."""
    queues: dict[str, dict[str, Any]] = {}
    for node, said in sorted(answers.items()):
        for row in said.get(QUEUES) or []:
            if isinstance(row, dict) and row.get("name"):
                q = queues.setdefault(str(row["name"]), {"leaders": {}, "raft": {}})
                q["leaders"][node] = short(str(row.get("leader") or "")) or None
        for question, rows in said.items():
            for prefix in (QUORUM_STATUS, STREAM_STATUS):
                if question.startswith(prefix) and (members := raft_members(rows)):
                    name = question[len(prefix) :]
                    q = queues.setdefault(name, {"leaders": {}, "raft": {}})
                    q["raft"][node] = members
    for q in queues.values():
        claimed = {
            (m["member"], m["term"])
            for members in q["raft"].values()
            for m in members
            if m["state"] == "leader"
        }
        q["leaders_claimed"] = [list(c) for c in sorted(claimed, key=str)]
    return queues


def cluster_views(run: RunDir) -> dict[str, Any] | None:
    """verdict.json's cluster_views; None for a run whose evidence holds no node's
    cluster_status (a Kafka run, a run from before evidence was kept)."""
    try:
        index = json.loads((run.evidence / EVIDENCE_INDEX).read_text())
    except (OSError, ValueError):
        return None
    nodes = [n for n in index.get("nodes", []) if isinstance(n, dict) and "answers" in n]
    # A run whose nodes answered nothing of their cluster (a metadata store too broken to say)
    # still has what their feature flags files say.
    if not any({CLUSTER_STATUS, FEATURE_FLAGS} & set(n.get("answers") or {}) for n in nodes):
        return None
    answers: dict[str, dict[str, Any]] = {}
    silent: dict[str, str] = {}
    unread: dict[str, list[str]] = {}
    flags: dict[str, list[str]] = {}
    broken: dict[str, str] = {}  # a flags file that is no whole Erlang list: what it is
    for n in nodes:
        node = str(n["node"])
        said = {}
        for question, relative in (n.get("answers") or {}).items():
            if question == FEATURE_FLAGS:
                if (text := _text(run.evidence, str(relative))) is not None:
                    listed = enabled_flags(text)
                    if listed is None:
                        broken[node] = f"{len(text.encode())} bytes, not a whole list"
                    else:
                        flags[node] = listed
                    continue
            value = _answer(run.evidence, str(relative))
            if value is None:
                unread.setdefault(node, []).append(question)
            else:
                said[question] = value
        if isinstance(said.get(CLUSTER_STATUS), dict):
            answers[node] = said
        else:
            silent[node] = "; ".join(n.get("missing") or []) or "its cluster_status not read"
    status = {node: said[CLUSTER_STATUS] for node, said in answers.items()}
    views = _views(status)
    return {
        "nodes_answered": sorted(answers),
        "nodes_silent": silent,
        "unread": unread,
        "views": views,
        "split": len(views) > 1,
        "partitions": _partitions(status),
        "queues": _queues(answers),
        "metadata_store": {
            node: raft_members(said[METADATA_STORE]) or said[METADATA_STORE]
            for node, said in answers.items()
            if METADATA_STORE in said
        },
        "feature_flags": flags,
        "feature_flags_differ": flags_differ(flags),
        "feature_flags_unreadable": broken,
    }


def _text(evidence: Path, relative: str) -> str | None:
    try:
        raw = zstandard.ZstdDecompressor().decompress((evidence / relative).read_bytes())
    except (OSError, zstandard.ZstdError):
        return None
    return raw.decode(errors="replace")


def enabled_flags(text: str) -> list[str] | None:
    """The flags a node's persisted feature flags file lists (an Erlang list of atoms); None
    when it is no whole list (empty, or cut short: what a node cannot boot from)."""
    whole = text.strip()
    if not (whole.startswith("[") and whole.endswith("].")):
        return None
    body = whole.removesuffix(".").strip().removeprefix("[").removesuffix("]")
    return sorted({quoted or bare for quoted, bare in FLAG.findall(body)})


def flags_differ(flags: dict[str, list[str]]) -> dict[str, list[str]]:
    """Each flag some nodes have and others not, with the nodes that have it."""
    if len(flags) < 2:
        return {}
    everyone = set.intersection(*(set(f) for f in flags.values()))
    anyone = set().union(*(set(f) for f in flags.values()))
    return {
        flag: sorted(node for node, f in flags.items() if flag in f)
        for flag in sorted(anyone - everyone)
    }


def _listed(names: list[str]) -> str:
    return " and ".join(", ".join(names).rsplit(", ", 1)) if names else "nobody"


def summary_lines(section: dict[str, Any] | None) -> list[str]:
    """What the nodes' own views say, when they say something is wrong: a split, partitions
    still reported, or two leaders claimed for a queue."""
    if not section:
        return []
    lines = []
    if section["split"]:
        seen = "; ".join(
            f"{_listed(v['nodes'])} {'see' if len(v['nodes']) > 1 else 'sees'} "
            f"{_listed(v['running'])}"
            for v in section["views"]
        )
        lines.append(f"cluster views at the end: split: {seen}")
    for node, peers in sorted(section["partitions"].items()):
        cut = "; ".join(f"{k} from {_listed(v)}" for k, v in sorted(peers.items()))
        lines.append(f"cluster views at the end: {node} still reports a partition: {cut}")
    by_nodes: dict[tuple[str, ...], list[str]] = {}
    for flag, holders in (section.get("feature_flags_differ") or {}).items():
        by_nodes.setdefault(tuple(holders), []).append(flag)
    for node, what in sorted((section.get("feature_flags_unreadable") or {}).items()):
        lines.append(
            f"cluster views at the end: {node}'s feature flags file is unreadable ({what}): "
            "the node cannot boot from it"
        )
    for holders, named in sorted(by_nodes.items()):
        lines.append(
            f"cluster views at the end: feature flags {', '.join(named)} on "
            f"{_listed(list(holders))} only"
        )
    for name, q in sorted(section["queues"].items()):
        if len(q["leaders_claimed"]) > 1:
            claims = ", ".join(f"{m} (term {t})" for m, t in q["leaders_claimed"])
            lines.append(f"cluster views at the end: queue {name} has leaders {claims}")
    return lines
