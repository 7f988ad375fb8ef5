"""What RabbitMQ's own log says of its classic mirrored queues (R5): which node recovered how
many classic queues when it started, when a mirror was added, and each synchronisation the
master ran: how many messages, to which mirrors, from start to "complete"; and from those, the
copy each restarted mirror threw away.

A restarted mirror does not keep its copy: the node recovers no queue it only mirrored
("Recovering 0 queues of type rabbit_classic_queue"), is added back as a new, empty mirror, and
the master copies the whole backlog to it, blocking the queue while it does. These lines are the
broker's word for that; the history is ours.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

# "2026-11-23 12:27:27.634470+00:00 [info] <0.1098.0> message"
_LINE = re.compile(
    r"(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+[+-]\d\d:\d\d) \[\w+\] <[\d.]+> (?P<text>.*)"
)
_QUEUE = re.compile(r"Mirrored queue '(?P<queue>[^']*)' in vhost '[^']*': (?P<what>.*)")
_TO_SYNC = re.compile(r"Synchronising: (?P<n>\d+) messages to synchronise")
_MIRRORS = re.compile(r"Synchronising: mirrors \[(?P<mirrors>[^\]]*)\] to sync")
_ADDED = re.compile(r"Adding mirror on node (?P<node>\S+?):")
_RECOVERED = re.compile(r"Recovering (?P<n>\d+) queues of type rabbit_classic_queue")


@dataclass
class MirrorSync:
    queue: str
    master: str  # the node whose log ran it
    messages: int
    start: float
    mirrors: list[str] = field(default_factory=list)  # empty: every mirror already synced
    end: float | None = None  # None: no "complete" before the log ended

    @property
    def seconds(self) -> float | None:
        return None if self.end is None else round(self.end - self.start, 3)


def _timestamp(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def _node_name(erlang_node: str) -> str:
    return erlang_node.split("@", 1)[-1]


def read_node_log(node: str, text: str) -> dict[str, list[Any]]:
    """One node's log: its recoveries, the mirrors its queues added, the syncs it ran."""
    out: dict[str, list[Any]] = {"recoveries": [], "mirrors_added": [], "syncs": []}
    open_syncs: dict[str, MirrorSync] = {}
    for raw in text.splitlines():
        m = _LINE.search(raw)
        if not m:
            continue
        at, line = _timestamp(m["time"]), m["text"]
        if r := _RECOVERED.search(line):
            out["recoveries"].append({"node": node, "at": at, "classic_queues": int(r["n"])})
            continue
        q = _QUEUE.match(line)
        if not q:
            continue
        queue, what = q["queue"], q["what"]
        if a := _ADDED.match(what):
            out["mirrors_added"].append({"queue": queue, "node": _node_name(a["node"]), "at": at})
        elif s := _TO_SYNC.match(what):
            sync = MirrorSync(queue, node, int(s["n"]), at)
            open_syncs[queue] = sync
            out["syncs"].append(sync)
        elif (ms := _MIRRORS.match(what)) and queue in open_syncs:
            names = [_node_name(n.strip()) for n in ms["mirrors"].split(",") if n.strip()]
            open_syncs[queue].mirrors = names
        elif what.startswith("Synchronising: all mirrors already synced"):
            if queue in open_syncs:
                open_syncs.pop(queue).end = at
        elif what.startswith("Synchronising: complete") and queue in open_syncs:
            open_syncs.pop(queue).end = at
    return out


def _holders(added: list[dict[str, Any]], syncs: list[MirrorSync]) -> dict[tuple[str, str], float]:
    """(node, queue) -> when the node is first seen holding the queue: added as its mirror,
    or checking its mirrors as its master."""
    seen = [(a["node"], a["queue"], a["at"]) for a in added]
    seen += [(s.master, s.queue, s.start) for s in syncs]
    first: dict[tuple[str, str], float] = {}
    for node, queue, at in sorted(seen, key=lambda x: x[2]):
        first.setdefault((node, queue), at)
    return first


def discarded_copies(
    recoveries: list[dict[str, Any]], added: list[dict[str, Any]], syncs: list[MirrorSync]
) -> list[dict[str, Any]]:
    """The copies nodes threw away: a node that had held a queue (its mirror or its master)
    and started again recovering no classic queue came back without its copy. Its size is
    what a master counted at the last check with every mirror in step (one runs whenever a
    mirror leaves or a master fails over) between the node first holding it and its return:
    the whole queue, which every node in step holds."""
    holders = _holders(added, syncs)
    out = []
    for r in recoveries:
        if r["classic_queues"] != 0:
            continue
        held = {q: at for (node, q), at in holders.items() if node == r["node"] and at < r["at"]}
        for queue, since in sorted(held.items()):
            checks = [
                s for s in syncs if s.queue == queue and not s.mirrors and since < s.start < r["at"]
            ]
            if checks:
                last = max(checks, key=lambda s: s.start)
                out.append(
                    {
                        "node": r["node"],
                        "queue": queue,
                        "messages": last.messages,
                        "counted_at": last.start,
                        "back_at": r["at"],
                    }
                )
    return out


def mirror_story(logs: dict[str, str]) -> dict[str, Any]:
    """Every node's log read together: recoveries and added mirrors in time order, the copies
    restarted mirrors discarded, and the syncs that copied messages to a mirror (those where
    every mirror was in sync copy nothing and are left out)."""
    story: dict[str, list[Any]] = {"recoveries": [], "mirrors_added": [], "syncs": []}
    for node, text in sorted(logs.items()):
        for key, items in read_node_log(node, text).items():
            story[key] += items
    recoveries = sorted(story["recoveries"], key=lambda r: r["at"])
    added = sorted(story["mirrors_added"], key=lambda r: r["at"])
    syncs = sorted((s for s in story["syncs"] if s.mirrors), key=lambda s: s.start)
    return {
        "recoveries": recoveries,
        "mirrors_added": added,
        "discarded": discarded_copies(recoveries, added, story["syncs"]),
        "syncs": [asdict(s) | {"seconds": s.seconds} for s in syncs],
    }


# ---- a node that refused its configuration ------------------------------------------------------

# "2026-11-25 04:00:56.897798+00:00 [error] <0.144.0> text", or the text alone (the lines a
# node prints to stdout before its logger runs); Docker's own timestamp first in saved logs.
_PREFIX = re.compile(
    r"^(?:\d{4}-\d\d-\d\dT\S+Z )?"
    r"(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+[+-]\d\d:\d\d \[\w+\] <[\d.]+> )?"
)
_CONF_HEADER = re.compile(r"^Error (?:preparing|generating|parsing) configuration\b.*:$")
_ADVANCED = re.compile(r"^Failed to load advanced configuration file (?P<rest>.*)$")


def boot_errors(text: str) -> list[str]:
    """What a node's log says of the configuration it refused at boot, one item per error:
    cuttlefish's list (an unknown key, a value its datatype cannot convert, a translation that
    found the settings invalid) and advanced.config's parse error; empty when it says none."""
    lines = [_PREFIX.sub("", raw).rstrip() for raw in text.splitlines()]
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if _CONF_HEADER.match(line):
            items: list[str] = []
            i += 1
            while i < len(lines) and lines[i].startswith("  - "):
                items.append(lines[i][4:].strip())
                i += 1
            out += _joined_items(items)
            continue
        if m := _ADVANCED.match(line):
            # The reason is an Erlang term the logger spreads over indented lines.
            parts = [m["rest"]]
            i += 1
            while i < len(lines) and lines[i].startswith(" ") and not lines[i].startswith("  - "):
                parts.append(lines[i].strip())
                i += 1
            out.append("advanced.config: " + re.sub(r"\s+", " ", " ".join(parts)).strip())
            continue
        i += 1
    return list(dict.fromkeys(out))


def _joined_items(items: list[str]) -> list[str]:
    """Cuttlefish says a datatype error in two items, the key then the reason: one here."""
    out: list[str] = []
    i = 0
    while i < len(items):
        head = items[i].removeprefix("Error transforming datatype for: ")
        if head != items[i] and i + 1 < len(items):
            out.append(f"{head}: {items[i + 1]}")
            i += 2
            continue
        out.append(items[i])
        i += 1
    return out
