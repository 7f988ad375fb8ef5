"""Which release each event ran on: a rolling upgrade's release periods, from the nemesis's own
events (`upgrade`, `finalize-feature`: docs/history.md) and what the cluster started on (the
manifest).

A node runs its old release until its upgrade's ok; from the invoke to the ok it is restarting
onto the new one (down); from the ok on it runs the new one. A failed upgrade (fail) leaves it
on the old release, one of unknown outcome (info) on "old or new". A finalize-feature's ok sets
the feature to the level the cluster reported after it. A release period is a maximal span in
which none of that changed: "all on 3.9.2", then "mixed" (which nodes on which release, which
restarting), then "all on 4.4.0", a finalized feature beginning a period of its own.

The checker counts the workload in each span between two upgrade or finalize events
(checkers.spark): sends begun, acknowledged and delivered as a fault window's traffic is counted
(checkers.availability.window_traffic), and the lost, duplicated and reordered messages by the
span in effect at their acknowledgement, as they are tied to fault steps
(checkers.attribution.placed_anomalies). This module cuts the run into those spans and ties
them to periods: plain functions of events, nothing of Spark.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from checkers.attribution import ATTRIBUTED, NEVER_ACKED
from contract.history import SCHEDULE_KEYS, event_value
from contract.manifest import Manifest
from contract.versions import version_key

UPGRADE = "upgrade"
FINALIZE = "finalize-feature"
RELEASE_FS = (UPGRADE, FINALIZE)
UNKNOWN = "?"
NOT_RUNNING = "(not running)"  # a node whose container exited on the release it names
ENABLED = "enabled"  # a feature flag's level when the ok reports none (RabbitMQ's khepri_db)
# Anomalous messages listed with the releases they ran on, per anomaly and group, first acked
# first; ids/<group>/<anomaly>.txt holds them all.
LISTED = 20
TRAFFIC = ("sends", "acked", "delivered")
# Manifest topology roles that run no broker release (Kafka's ZooKeeper nodes).
NOT_BROKERS = frozenset({"zookeeper"})


@dataclass(frozen=True)
class Start:
    """What the cluster ran as the run began: the manifest's release, nodes and features."""

    system: str | None = None
    release: str | None = None
    nodes: tuple[str, ...] = ()
    features: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, manifest: Manifest) -> Start:
        system = manifest.system or next(iter(manifest.images), None)
        image = manifest.images.get(system or "") or {}
        version = image.get("version") if isinstance(image, dict) else None
        nodes = (manifest.topology or {}).get("nodes") or []
        return cls(
            system=system,
            release=str(version) if version is not None else None,
            nodes=tuple(
                str(n["name"])
                for n in nodes
                if isinstance(n, dict)
                and n.get("name")
                and n.get("role") not in NOT_BROKERS
                and not n.get("spare")
            ),
            features={k: str(v) for k, v in (manifest.kafka_features or {}).items()},
        )


def release_events(nemesis: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The nemesis's upgrade and finalize-feature events, in order."""
    return [e for e in nemesis if e["f"] in RELEASE_FS]


def spans(
    nemesis: list[dict[str, Any]], run_start: float, run_end: float
) -> list[tuple[float, float]]:
    """The run cut at every upgrade and finalize-feature event: (start, end) of each span, the
    first from the run's start, the last to its end; none for a run without such an event."""
    events = release_events(nemesis)
    if not events:
        return []
    # An event at the run's very end still begins a (zero-length) span: the cluster it leaves
    # is the one the run ended on.
    cuts = sorted({float(e["time"]) for e in events if run_start < e["time"] <= run_end})
    edges = [run_start, *cuts, max(run_end, run_start)]
    return list(zip(edges, edges[1:], strict=False))


def _blank_span(start: float, end: float) -> dict[str, Any]:
    return {"start": start, "end": end, **dict.fromkeys(TRAFFIC, 0), **{m: {} for m in ATTRIBUTED}}


def span_counts(
    cut: list[tuple[float, float]],
    traffic: list[Any],
    placed: list[Any],
    anomalies: list[Any],
) -> dict[str, Any]:
    """The workload in each span, from the collected rows of checkers.spark's release frames:
    traffic (w_start, w_end, sends, acked, delivered, ...: window_traffic's), placed (metric,
    group, step, node, second, count: placed_anomalies', `step` the span's index) and anomalies
    (metric, group, msg_id, invoke_time, ack_time, node: the first LISTED of each)."""
    out = [_blank_span(a, b) for a, b in cut]
    index = {(a, b): i for i, (a, b) in enumerate(cut)}
    for r in traffic:
        i = index.get((r["w_start"], r["w_end"]))
        if i is not None:
            for k in TRAFFIC:
                out[i][k] += r[k] or 0
    never: dict[str, dict[str, int]] = {}
    for r in placed:
        step = str(r["step"])
        if step == NEVER_ACKED:
            counts = never.setdefault(r["metric"], {})
        else:  # the span's index; acknowledged before the first span (none is) counts in it
            counts = out[int(step) if step.isdigit() else 0][r["metric"]]
        counts[r["group"]] = counts.get(r["group"], 0) + r["count"]
    listed = [
        {
            "metric": r["metric"],
            "group": r["group"],
            "msg_id": r["msg_id"],
            "invoked": r["invoke_time"],
            "acked": r["ack_time"],
            "node": r["node"],
        }
        for r in anomalies
    ]
    listed.sort(key=lambda a: (a["metric"], a["group"], a["acked"] is None, a["acked"] or 0.0))
    return {"spans": out, "anomalies": listed, "never_acknowledged": never}


@dataclass
class _Cluster:
    """The cluster as the release events leave it."""

    runs: dict[str, str]  # node -> the release it runs (its old one while restarting)
    restarting: dict[str, str] = field(default_factory=dict)  # node -> the release it restarts onto
    features: dict[str, str] = field(default_factory=dict)  # of the features the run finalizes

    def key(self) -> tuple[Any, ...]:
        return tuple(sorted(d.items()) for d in (self.runs, self.restarting, self.features))

    def apply(self, e: dict[str, Any], start: Start) -> None:
        v = event_value(e.get("value"))
        if e["f"] == UPGRADE:
            to = landed_on(v) if e["type"] == "ok" else _text(v.get("to")) or UNKNOWN
            for node in _nodes(v):
                old = self.runs.get(node) or _text(v.get("from")) or start.release or UNKNOWN
                self._upgrade(node, str(e["type"]), old, to)
        elif e["f"] == FINALIZE and e["type"] in ("ok", "info"):
            feature = _text(v.get("feature")) or UNKNOWN
            levels = _levels(v)
            level = levels.get(feature, v.get("level"))
            new = _text(level) or ENABLED
            if e["type"] == "info":  # it may or may not have taken
                new = _either(self.features.get(feature), new)
            self.features[feature] = new
            for other in (set(self.features) & set(levels)) - {feature}:
                self.features[other] = str(levels[other])  # what the cluster reported of it

    def _upgrade(self, node: str, type_: str, old: str, to: str) -> None:
        if type_ == "invoke":
            self.runs[node] = old
            self.restarting[node] = to
            return
        self.restarting.pop(node, None)
        self.runs[node] = {"ok": to, "fail": old}.get(type_) or _either(old, to)

    def period(self) -> dict[str, Any]:
        """What a period shows of the cluster: the nodes up on each release, those restarting
        and onto which release, the finalized features' levels."""
        up = {n: r for n, r in self.runs.items() if n not in self.restarting}
        on: dict[str, list[str]] = {}
        for node, release in sorted(up.items()):
            on.setdefault(release, []).append(node)
        on = {r: on[r] for r in sorted(on, key=release_order)}
        only = next(iter(on)) if len(on) == 1 else None
        return {
            "kind": f"all on {only}" if only and not self.restarting else "mixed",
            "on": on,
            "restarting": dict(sorted(self.restarting.items())),
            "features": dict(sorted(self.features.items())),
        }


def landed_on(value: dict[str, Any]) -> str:
    """What an upgrade's ok left the node on: the new release; when the node refused to boot
    on it (RabbitMQ's `booted: false`), the release it was put back on (`rolled_back`), each
    marked when the node did not run on it."""
    to = _text(value.get("to")) or UNKNOWN
    if value.get("booted") is not False:
        return to
    back = value.get("rolled_back")
    if not isinstance(back, dict):
        return f"{to} {NOT_RUNNING}"
    old = _text(back.get("to")) or UNKNOWN
    return old if back.get("booted") is not False else f"{old} {NOT_RUNNING}"


def _levels(value: dict[str, Any]) -> dict[str, Any]:
    """A finalize-feature ok's `levels`: what the cluster reported after it."""
    levels = value.get("levels")
    return levels if isinstance(levels, dict) else {}


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _nodes(value: dict[str, Any]) -> list[str]:
    nodes = value.get("nodes")
    return [str(n) for n in nodes] if isinstance(nodes, list) else []


def _either(old: str | None, new: str) -> str:
    """A release or level an event of unknown outcome left: the old one or the new."""
    return new if old == new else f"{old or UNKNOWN} or {new}"


def release_order(release: str) -> tuple[int, tuple[int, ...], str]:
    """Releases oldest first ("3.9.2" before "4.4.0"), what is not one release ("3.9.2 or
    4.4.0") after them."""
    try:
        return 0, version_key(release), release
    except ValueError:
        return 1, (), release


def _first_cluster(start: Start, events: list[dict[str, Any]]) -> _Cluster:
    """The cluster as the run began: every node on the starting release (a node the manifest
    does not name, on its first upgrade's `from`), the finalized features at their levels."""
    runs = {n: start.release or UNKNOWN for n in start.nodes}
    finalized: set[str] = set()
    for e in events:
        v = event_value(e.get("value"))
        if e["f"] == UPGRADE:
            for node in _nodes(v):
                runs.setdefault(node, start.release or _text(v.get("from")) or UNKNOWN)
        elif (feature := _text(v.get("feature"))) is not None:
            finalized.add(feature)
    features = {f: start.features[f] for f in sorted(finalized) if f in start.features}
    return _Cluster(runs=runs, features=features)


def periods(
    nemesis: list[dict[str, Any]], start: Start, counted: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The release periods, in order: each one's span, the cluster in it (_Cluster.period), the
    finalize-feature completions inside it and the workload's counts in it (the spans of
    span_counts that fall in it, summed)."""
    events = release_events(nemesis)
    cluster = _first_cluster(start, events)
    out: list[dict[str, Any]] = []
    keys: list[tuple[Any, ...]] = []
    applied = 0
    for span in counted:
        while applied < len(events) and events[applied]["time"] <= span["start"]:
            cluster.apply(events[applied], start)
            applied += 1
        if keys and keys[-1] == cluster.key():
            _add(out[-1], span)
            continue
        keys.append(cluster.key())
        out.append(
            {"number": len(out) + 1, **cluster.period(), "runs": dict(cluster.runs)}
            | {k: span[k] for k in ("start", "end", *TRAFFIC)}
            | {m: dict(span[m]) for m in ATTRIBUTED}
        )
    finalizes = [e for e in events if e["f"] == FINALIZE and e["type"] != "invoke"]
    for p in out:
        last = p is out[-1]
        p["finalized"] = [
            _finalized_row(e)
            for e in finalizes
            if p["start"] <= e["time"] and (e["time"] < p["end"] or last)
        ]
    return out


def _add(period: dict[str, Any], span: dict[str, Any]) -> None:
    period["end"] = span["end"]
    for k in TRAFFIC:
        period[k] += span[k]
    for m in ATTRIBUTED:
        for group, n in span[m].items():
            period[m][group] = period[m].get(group, 0) + n


def _finalized_row(e: dict[str, Any]) -> dict[str, Any]:
    """A finalize-feature's completion: the level the cluster reported after it where the ok
    says, else the one asked."""
    v = event_value(e.get("value"))
    feature = _text(v.get("feature")) or UNKNOWN
    levels = _levels(v)
    return {
        "feature": feature,
        "level": _text(levels.get(feature, v.get("level"))),
        "time": e["time"],
        "outcome": e["type"],
    }


def operations(nemesis: list[dict[str, Any]], f: str) -> list[dict[str, Any]]:
    """Each upgrade or finalize-feature the nemesis began, with its completion: its value (the
    ok's, which adds what it found), start, end (None while it never completed) and outcome
    (ok, fail, info, or open)."""
    out: list[dict[str, Any]] = []
    open_: dict[str, dict[str, Any]] = {}
    for e in nemesis:
        if e["f"] != f:
            continue
        v = {k: x for k, x in event_value(e.get("value")).items() if k not in SCHEDULE_KEYS}
        key = repr(_nodes(v)) if f == UPGRADE else str(v.get("feature"))
        if e["type"] == "invoke":
            row = {**v, "start": e["time"], "end": None, "outcome": "open", "error": None}
            open_[key] = row
            out.append(row)
        elif key in open_:
            row = open_.pop(key)
            row.update({**v, "end": e["time"], "outcome": e["type"], "error": e.get("error")})
            if e["type"] == "ok" and v.get("booted") is False:
                row["outcome"] = "refused"  # the node would not boot on the new release
    return out


def _period_at(ps: list[dict[str, Any]], t: float) -> dict[str, Any]:
    for p in ps:
        if t < p["end"]:
            return p
    return ps[-1]


def ran_on(ps: list[dict[str, Any]], a: dict[str, Any]) -> dict[str, Any]:
    """An anomalous message (span_counts' anomalies) with the period it was acknowledged in,
    the releases the cluster's running nodes had while it was sent (from its invoke to its
    ack) and the release of the node that acknowledged it, where the history names one."""
    sent, acked = a["invoked"], a["acked"]
    at = _period_at(ps, acked) if acked is not None else None
    since = sent if sent is not None else acked
    until = acked if acked is not None else since
    during = (
        [p for p in ps if p["start"] <= until and (since < p["end"] or p is ps[-1])]
        if since is not None and until is not None
        else []
    )
    releases = {r for p in during for r in p["on"]}
    return a | {
        "period": at["number"] if at else None,
        "releases": sorted(releases, key=release_order),
        "node_release": at["runs"].get(a["node"]) if at and a["node"] else None,
    }


def release_section(
    nemesis: list[dict[str, Any]],
    start: Start,
    counted: dict[str, Any] | None,
    run_start: float,
    run_end: float,
) -> dict[str, Any] | None:
    """verdict.json's releases: for a run that upgraded or finalized a feature, the release it
    started on, each upgrade and finalize-feature, the release periods with their counts, and
    the anomalous messages with the releases they ran on; None for any other run. `counted`:
    span_counts of the spans of this nemesis (None: zero counts)."""
    if not release_events(nemesis):
        return None
    counted = counted or span_counts(spans(nemesis, run_start, run_end), [], [], [])
    ps = periods(nemesis, start, counted["spans"])
    listed = [ran_on(ps, a) for a in counted["anomalies"]] if ps else []
    upgrades = operations(nemesis, UPGRADE)
    return {
        "system": start.system,
        # The manifest's release; without it, what the first upgrade was from.
        "started_on": start.release or next((_text(u.get("from")) for u in upgrades), None),
        "nodes": sorted({n for p in ps for n in p["runs"]}),
        "ended_on": ps[-1]["on"] if ps else {},
        "upgrades": upgrades,
        "finalized": operations(nemesis, FINALIZE),
        "periods": [{k: v for k, v in p.items() if k != "runs"} for p in ps],
        "anomalies": listed,
        "listed_per_group": LISTED,
        "never_acknowledged": counted.get("never_acknowledged") or {},
    }


def nodes_words(period: dict[str, Any]) -> str:
    """ "4.4.0: kafka1; 3.9.2: kafka2, kafka3; restarting onto 4.4.0: kafka1" """
    words = [f"{r}: {', '.join(nodes)}" for r, nodes in period["on"].items()]
    onto: dict[str, list[str]] = {}
    for node, release in period.get("restarting", {}).items():
        onto.setdefault(release, []).append(node)
    words += [f"restarting onto {r}: {', '.join(n)}" for r, n in onto.items()]
    return "; ".join(words) or "no node known"


def finalized_words(f: dict[str, Any]) -> str:
    """ "metadata.version 4.4-IV0 finalized", or "... failed", "... of unknown outcome" """
    what = " ".join(w for w in (f["feature"], f.get("level")) if w)
    outcome = {"ok": "finalized", "fail": "failed", "info": "of unknown outcome"}
    return f"{what} {outcome.get(f['outcome'], f['outcome'])}"


def _oks(operations: list[dict[str, Any]]) -> int:
    return sum(1 for o in operations if o["outcome"] == "ok")


def per_group_words(counts: dict[str, int]) -> str:
    shown = {g: n for g, n in sorted(counts.items()) if n}
    if not shown:
        return "0"
    return ", ".join(f"{n} in {g}" for g, n in shown.items())


def summary_lines(section: dict[str, Any] | None, run_start: float = 0.0) -> list[str]:
    """One line for the upgrade, then one a release period: its span, who ran what, what it
    finalized, and the workload's counts in it."""
    if not section:
        return []
    ups, fins = section.get("upgrades") or [], section.get("finalized") or []
    lines = [
        f"releases: started on {section.get('started_on') or UNKNOWN}; upgrades ok "
        f"{_oks(ups)} of {len(ups)}; features finalized {_oks(fins)} of {len(fins)}"
    ]
    for p in section.get("periods") or []:
        finalized = "".join(f", {finalized_words(f)}" for f in p.get("finalized") or [])
        lines.append(
            f"release period {p['number']} +{p['start'] - run_start:.1f} to "
            f"+{p['end'] - run_start:.1f} s, {p['kind']} ({nodes_words(p)}){finalized}: "
            f"{p['acked']} acknowledged, "
            + ", ".join(f"{m} {per_group_words(p[m])}" for m in ATTRIBUTED)
        )
    return lines
