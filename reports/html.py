"""RUN_DIR/report.html: one self-contained page per run (plotly's script inlined, no network)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jinja2

from checkers.cycles import CYCLES_FILE
from checkers.releases import LISTED, finalized_words, nodes_words, per_group_words
from checkers.share_groups import ANOMALIES as SHARE_ANOMALIES
from checkers.share_groups import CONSUMER_COUNTS, FATES, LEFT, REDELIVERIES, WORDS, story
from checkers.transactions import TXN_METRICS
from checkers.verdict import DEAD_LETTER_METRICS, METRICS
from contract.cache import cache_root
from contract.manifest import Manifest
from contract.rundir import SCHEDULE, RunDir
from faults.registry import label_of
from reports.figures import timeline_figure
from reports.run_data import SAMPLE_IDS, RunData

# Colour of a claim verdict word (checkers.verdict.claim_word), and of a run with none.
VERDICT_COLOURS = {
    "reproduced": "#2e7d32",
    "refuted": "#c62828",
    "not reproduced": "#ef6c00",
    "inconclusive": "#757575",
    None: "#757575",
}
REPORT_NAME = "report.html"
# The one isolation level the transactions check judges (checkers.transactions).
READ_COMMITTED = "read_committed"
TXN_COUNTS = ("aborted_reads", "aborted_read_txns", "torn", "lost_txns")
# The exactly-once copy's counts (checkers.eos), each with its words and its id file, at the top
# of the ids folder beside the groups' folders.
COPY_METRICS = (
    (
        "copied_twice",
        "copied twice",
        "an input record copied by two committed transactions: the copy's duplicate",
    ),
    (
        "never_copied",
        "never copied",
        "an acknowledged input record no committed transaction copied",
    ),
    (
        "input_duplicates",
        "written twice by their producer",
        "an input record the copiers read at two input offsets: the input's duplicate, which "
        "the output holds twice by the input's doing and the verdict does not count against "
        "the copy",
    ),
)
CYCLE_SAMPLES = 3  # dependency cycles listed in the report; ids/cycles.txt holds them all


def _compiled_templates() -> jinja2.BytecodeCache | None:
    """Where the templates' compiled code is kept between commands: compiling the report's
    template took about a tenth of a second of every report. None (compiled each time) where
    the cache cannot be written."""
    directory = cache_root() / "templates"
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return jinja2.FileSystemBytecodeCache(str(directory))


TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("reports", "templates"),
    bytecode_cache=_compiled_templates(),
    autoescape=jinja2.select_autoescape(["html", "j2"]),
    # A run that ended early has no verdict: its missing fields render empty, not fail.
    undefined=jinja2.ChainableUndefined,
)


def verdict_word(verdict: dict[str, Any] | None, manifest: Manifest) -> str:
    """What a person reads first: the claim verdict, or why there is none."""
    if verdict is None:
        return "no verdict: " + str(manifest.error or "the run was not checked")
    word = verdict.get("claim_verdict")
    if word:
        return f"claim {verdict.get('claim')}: {word}"
    return f"{verdict['outcome']} ({'matches' if verdict['matched'] else 'does not match'})"


def verdict_colour(verdict: dict[str, Any] | None) -> str:
    if verdict is None:
        return VERDICT_COLOURS[None]
    word = verdict.get("claim_verdict")
    if word:
        return VERDICT_COLOURS.get(word, VERDICT_COLOURS[None])
    return VERDICT_COLOURS["reproduced" if verdict.get("matched") else "refuted"]


def warnings(run: RunData) -> list[str]:
    """What makes a verdict weaker than it looks."""
    out = []
    verdict, manifest = run.verdict or {}, run.manifest
    if manifest.tier and manifest.tier != "real-cluster":
        out.append(f"tier {manifest.tier}: proves our code, never counts toward a claim")
    if manifest.cluster_recovered is False:
        out.append("the cluster did not reunite after the faults")
    if manifest.drain_complete is False:
        out.append("the final drain was not confirmed: unread messages may count as lost")
    if verdict.get("truncated_lines"):
        out.append(f"torn history lines: {', '.join(verdict['truncated_lines'])}")
    coverage = verdict.get("coverage") or {}
    if coverage.get("vacuous"):
        out.append("vacuous: " + "; ".join(coverage.get("why_vacuous") or []))
    if manifest.skipped_steps:
        out.append(
            f"{len(manifest.skipped_steps)} generated steps could not be applied: "
            + "; ".join(
                f"step {s['step']} ({s['op']}): {s['error']}" for s in manifest.skipped_steps
            )
        )
    if run.timeline is None and run.verdict is not None:
        out.append("no timeline.json: re-check the run (harness check) to draw its timeline")
    return out


def versions(manifest: Manifest) -> list[tuple[str, str]]:
    """(system, "version (image)") of every image the run used."""
    out = []
    for system, image in sorted(manifest.images.items()):
        if isinstance(image, dict):
            version = f"{image['version']} " if image.get("version") else ""
            out.append((system, f"{version}({image.get('name', '?')})"))
    return out


DEAD_LETTER_COLUMNS = DEAD_LETTER_METRICS  # shown where a group received any
# The groups table: every count but the replays' detail; the anomalies: what went wrong.
GROUP_COLUMNS = tuple(m for m in METRICS if m not in ("unflagged", *DEAD_LETTER_COLUMNS))
ANOMALY_COLUMNS = tuple(m for m in METRICS if m not in ("acked", "received", *DEAD_LETTER_COLUMNS))


def group_columns(verdict: dict[str, Any] | None) -> tuple[str, ...]:
    """The counts the groups table shows: dead-lettering's only for a run that had any."""
    groups = ((verdict or {}).get("groups") or {}).values()
    dead = any(counts.get("dead_lettered") for counts in groups)
    return GROUP_COLUMNS + (DEAD_LETTER_COLUMNS if dead else ())


def anomaly_rows(run: RunData) -> list[dict[str, Any]]:
    """Every non-zero anomaly count of every group, with its first ids and its id file."""
    rows = []
    shown = ANOMALY_COLUMNS + DEAD_LETTER_COLUMNS
    for group, counts in sorted(((run.verdict or {}).get("groups") or {}).items()):
        for metric in shown:
            if counts.get(metric):
                rows.append(
                    {
                        "group": group,
                        "metric": metric,
                        "count": counts[metric],
                        "samples": run.sample_ids(group, metric),
                        "file": f"ids/{group}/{metric}.txt",
                    }
                )
    return rows


def attribution_rows(verdict: dict[str, Any] | None, key: str) -> list[dict[str, Any]]:
    """(metric, group, where, count): attribution by_step or by_node, largest first."""
    rows = []
    for metric, groups in ((verdict or {}).get("attribution") or {}).items():
        for group, tables in sorted(groups.items()):
            for where, n in (tables.get(key) or {}).items():
                rows.append({"metric": metric, "group": group, "where": where, "count": n})
    return sorted(rows, key=lambda r: (r["metric"], r["group"], -r["count"]))


def transactions_of(verdict: dict[str, Any] | None) -> dict[str, Any] | None:
    """The verdict's transactions section; None for a run without transactional producers."""
    txns = (verdict or {}).get("transactions")
    return txns if isinstance(txns, dict) else None


def transaction_rows(txns: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Per reader group: its isolation, what it read of aborted transactions, the committed ones
    it saw in part, and the id files behind non-zero counts."""
    rows = []
    for group, counts in sorted(((txns or {}).get("groups") or {}).items()):
        judged = counts.get("isolation") == READ_COMMITTED
        # The checker never counts the other groups: their 0 would read as a clean bill.
        # A verdict from a checker before lost_txns has none: "-", not a clean 0.
        shown = {k: counts.get(k) if judged else None for k in TXN_COUNTS}
        files = [f"ids/{group}/{k}.txt" for k in TXN_METRICS if shown[k]]
        isolation = counts.get("isolation") or "?"
        rows.append(
            {"group": group, "isolation": isolation, "judged": judged, "files": files} | shown
        )
    return rows


def aborted_read_samples(txns: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The checker's first aborted reads, each with where its group read it (partition@offset)."""
    out = []
    for s in ((txns or {}).get("samples") or {}).get("aborted_reads") or []:
        where = "?" if s.get("partition") is None else f"{s['partition']}@{s.get('offset')}"
        out.append(s | {"where": where})
    return out


def copy_of(txns: dict[str, Any] | None) -> dict[str, Any] | None:
    """The exactly-once copy's part of the transactions section; None for a run without
    copiers."""
    copy = (txns or {}).get("copy")
    return copy if isinstance(copy, dict) else None


def copy_rows(copy: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Per count of the copy: its words, its first ids and its id file. A count a verdict from
    an older checker lacks (input_duplicates) has no row."""
    rows = []
    samples = (copy or {}).get("samples") or {}
    for key, name, meaning in COPY_METRICS:
        if key not in (copy or {}):
            continue
        shown = (samples.get(key) or [])[:SAMPLE_IDS]
        first = [s.get("msg_id") if isinstance(s, dict) else s for s in shown]
        rows.append(
            {
                "key": key,
                "name": name,
                "meaning": meaning,
                "count": (copy or {})[key],
                "samples": [str(i) for i in first],
                "file": f"ids/{key}.txt",
            }
        )
    return rows


def copied_twice_samples(copy: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The copy's first duplicates, each with where the copiers read it (stream/partition@offset)
    and the committed transactions that copied it."""
    out = []
    for s in ((copy or {}).get("samples") or {}).get("copied_twice") or []:
        where = _record_at(s.get("from_stream"), s.get("from_partition"), s.get("from_offset"))
        out.append({"msg_id": s.get("msg_id"), "where": where, "txns": s.get("txns") or []})
    return out


def cycles_of(txns: dict[str, Any] | None) -> dict[str, Any] | None:
    """The dependency cycles between committed transactions (checkers.cycles); None when the
    checker did not look for them."""
    cycles = (txns or {}).get("cycles")
    return cycles if isinstance(cycles, dict) else None


def cycle_samples(cycles: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The first CYCLE_SAMPLES cycles: their class, their transactions in cycle order (back to
    the first) and, per edge, the two records that order its transactions."""
    out = []
    for c in ((cycles or {}).get("samples") or [])[:CYCLE_SAMPLES]:
        txns = [str(t) for t in c.get("transactions") or []]
        out.append(
            {
                "kind": c.get("kind") or "?",
                "path": txns + txns[:1],
                "edges": [_edge_words(e) for e in c.get("edges") or []],
            }
        )
    return out


def _record_at(stream: Any, partition: Any, offset: Any) -> str:
    """stream/partition@offset; ? for a part the history did not say."""
    stream, partition, offset = ("?" if x is None else x for x in (stream, partition, offset))
    return f"{stream}/{partition}@{offset}"


def _edge_words(e: dict[str, Any]) -> dict[str, Any]:
    """One edge of a cycle: its kind, its two transactions and their records. ww: src's write
    is the one just before dst's in a partition; wr: dst copied the record src wrote."""
    return {
        "kind": e.get("kind") or "?",
        "src": e.get("src"),
        "dst": e.get("dst"),
        "at": _record_at(e.get("stream"), e.get("partition"), e.get("offset")),
        "msg_id": e.get("msg_id"),
        "to_at": _record_at(e.get("to_stream"), e.get("to_partition"), e.get("to_offset")),
        "to_msg_id": e.get("to_msg_id"),
    }


def share_groups_of(verdict: dict[str, Any] | None) -> dict[str, Any] | None:
    """The verdict's share groups section (checkers.share_groups); None for a run without."""
    section = (verdict or {}).get("share_groups")
    return section if isinstance(section, dict) else None


# The share groups' anomalies as the report names them.
SHARE_WORDS = {"lost": "lost (acknowledged, never settled)"} | WORDS


def share_group_rows(section: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Per share group: its topics and settings, how its acknowledged messages ended, each
    anomaly, its redeliveries by cause, what was left at the end, and the id files behind the
    anomalies it had."""
    rows = []
    for name, g in sorted(((section or {}).get("groups") or {}).items()):
        files = [f"ids/{name}/share_{a}.txt" for a in SHARE_ANOMALIES if g.get(a)]
        rows.append(
            {
                "group": name,
                "topics": ", ".join(g.get("topics") or []) or "-",
                "limit": g.get("delivery_count_limit"),
                "lock_s": (g.get("lock_duration_ms") or 0) / 1000,
                "settings_from": g.get("settings_from") or "?",
                "acked": g.get("acked", 0),
                "records": g.get("records", 0),
                "acquisitions": g.get("acquisitions", 0),
                "fates": {f: (g.get("fates") or {}).get(f, 0) for f in FATES},
                "anomalies": {a: g.get(a, 0) for a in SHARE_ANOMALIES},
                "redelivered": {
                    r: (g.get("redelivered") or {}).get(r, 0)
                    for r in (*REDELIVERIES, "after_unknown_ack")
                },
                "left": {w: (g.get("left_at_end") or {}).get(w, 0) for w in LEFT},
                "unexpected": g.get("unexpected", 0),
                "files": files,
            }
        )
    return rows


def share_consumer_rows(section: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Per share group and consumer: its client, its acquisitions and how their
    acknowledgements ended, and the anomalies it showed."""
    rows = []
    for name, g in sorted(((section or {}).get("groups") or {}).items()):
        for consumer, c in (g.get("consumers") or {}).items():
            counts = {k: c.get(k, 0) for k in (*CONSUMER_COUNTS, *SHARE_ANOMALIES)}
            rows.append(
                {"group": name, "consumer": consumer, "client": c.get("client") or "-"} | counts
            )
    return rows


def share_partition_rows(section: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Per share group and topic partition: its records, acquisitions and anomalies."""
    rows = []
    for name, g in sorted(((section or {}).get("groups") or {}).items()):
        for partition, c in (g.get("partitions") or {}).items():
            counts = {k: c.get(k, 0) for k in ("records", "acquisitions", *SHARE_ANOMALIES)}
            rows.append({"group": name, "partition": partition} | counts)
    return rows


def share_step_rows(section: dict[str, Any] | None) -> list[dict[str, Any]]:
    """(group, anomaly, step, count): each share group's anomalies by the fault step in effect
    when they showed, in the run's order."""
    return [
        {"group": name, "anomaly": SHARE_WORDS.get(a, a), "step": step, "count": n}
        for name, g in sorted(((section or {}).get("groups") or {}).items())
        for a, steps in (g.get("by_step") or {}).items()
        for step, n in steps.items()
    ]


def share_sample_rows(section: dict[str, Any] | None, run_start: float) -> list[dict[str, Any]]:
    """The checker's first anomalies of each share group, each as its record's story."""
    return [
        {"group": name, "anomaly": SHARE_WORDS.get(a, a), "story": story(sample, run_start)}
        for name, g in sorted(((section or {}).get("groups") or {}).items())
        for a, samples in sorted((g.get("samples") or {}).items())
        for sample in samples
    ]


def releases_of(verdict: dict[str, Any] | None) -> dict[str, Any] | None:
    """The verdict's releases section (checkers.releases); None for a run that did not
    upgrade."""
    section = (verdict or {}).get("releases")
    return section if isinstance(section, dict) else None


def first_event(run: RunData) -> float:
    """The run's first event, where the timeline's seconds count from: the timeline's, else the
    verdict's history span's (the same time), else what the manifest says."""
    first = ((run.verdict or {}).get("history_span") or {}).get("first")
    return run.run_start if run.timeline or first is None else float(first)


def _since(t: float | None, run_start: float) -> str:
    return "-" if t is None else f"+{t - run_start:.1f} s"


def release_period_rows(section: dict[str, Any] | None, run_start: float) -> list[dict[str, Any]]:
    """One row a release period: its span, who ran what, what it finalized and the workload's
    counts in it, in words."""
    return [
        {
            "number": p["number"],
            "kind": p["kind"],
            "start": _since(p["start"], run_start),
            "end": _since(p["end"], run_start),
            "nodes": nodes_words(p),
            "features": ", ".join(f"{k} {v}" for k, v in (p.get("features") or {}).items()),
            "finalized": "; ".join(finalized_words(f) for f in p.get("finalized") or []),
            **{k: p.get(k, 0) for k in ("sends", "acked", "delivered")},
            **{m: per_group_words(p.get(m) or {}) for m in ("lost", "duplicated", "reordered")},
            "anomalous": any(p.get(m) for m in ("lost", "duplicated", "reordered")),
        }
        for p in (section or {}).get("periods") or []
    ]


def release_upgrade_rows(section: dict[str, Any] | None, run_start: float) -> list[dict[str, Any]]:
    """One row a node's upgrade: from and to which release, when, how it ended and what it
    said (the ok's `in_sync`, `waited_s`, a failure's error)."""
    shown = ("nodes", "from", "to", "start", "end", "outcome", "error")
    rows = []
    for u in (section or {}).get("upgrades") or []:
        said = [
            f"{k} {v if isinstance(v, str) else json.dumps(v)}"
            for k, v in u.items()
            if k not in shown and v is not None
        ]
        rows.append(
            {
                "nodes": ", ".join(map(str, u.get("nodes") or [])),
                "from": u.get("from") or "?",
                "to": u.get("to") or "?",
                "start": _since(u.get("start"), run_start),
                "end": _since(u.get("end"), run_start),
                "outcome": u.get("outcome"),
                "said": "; ".join([*said, *([u["error"]] if u.get("error") else [])]),
            }
        )
    return rows


def release_anomaly_rows(section: dict[str, Any] | None, run_start: float) -> list[dict[str, Any]]:
    """Each anomalous message the checker listed, with when it was sent and acknowledged, by
    which node (and its release), its period and the releases the cluster ran while it was
    sent."""
    return [
        {
            "metric": a["metric"],
            "group": a["group"],
            "msg_id": a["msg_id"],
            "sent": _since(a.get("invoked"), run_start),
            "acked": _since(a.get("acked"), run_start),
            "node": (a.get("node") or "-")
            + (f" ({a['node_release']})" if a.get("node_release") else ""),
            "period": a.get("period") or "-",
            "releases": ", ".join(a.get("releases") or []) or "?",
        }
        for a in (section or {}).get("anomalies") or []
    ]


def render_report(run: RunData) -> Path:
    """Builds RUN_DIR/report.html from the run's files; returns its path."""
    verdict = run.verdict
    figure = timeline_figure(run) if run.timeline else None
    txns = transactions_of(verdict)
    copy, cycles = copy_of(txns), cycles_of(txns)
    releases = releases_of(verdict)
    shares = share_groups_of(verdict)
    page = TEMPLATES.get_template("report.html.j2").render(
        run=run,
        m=run.manifest,
        v=verdict or {},
        word=verdict_word(verdict, run.manifest),
        colour=verdict_colour(verdict),
        warnings=warnings(run),
        versions=versions(run.manifest),
        anomalies=anomaly_rows(run),
        group_columns=group_columns(verdict),
        by_step=attribution_rows(verdict, "by_step"),
        by_node=attribution_rows(verdict, "by_node"),
        steps=(run.timeline or {}).get("steps") or [],
        fault_label=label_of,
        schedule_name=SCHEDULE,  # the fault registry's word for each step's kind
        states=(run.timeline or {}).get("partition_states") or [],
        figure_html=figure.to_html(full_html=False, include_plotlyjs=True, div_id="timeline")
        if figure
        else "",
        manifest_json=json.dumps(
            run.manifest.model_dump(mode="json", exclude_unset=True, exclude={"scenario_spec"}),
            indent=2,
        ),
        spec_json=json.dumps(run.manifest.scenario_spec, indent=2),
        coverage=(verdict or {}).get("coverage") or {},
        txns=txns,
        txn_rows=transaction_rows(txns),
        aborted_reads=aborted_read_samples(txns),
        copy=copy,
        copy_rows=copy_rows(copy),
        copied_twice=copied_twice_samples(copy),
        cycles=cycles,
        cycle_samples=cycle_samples(cycles),
        cycles_file=f"ids/{CYCLES_FILE}",
        shrink=run.shrink,
        schedule=RunDir(run.run_dir).schedule.is_file(),
        releases=releases,
        release_periods=release_period_rows(releases, first_event(run)),
        release_upgrades=release_upgrade_rows(releases, first_event(run)),
        release_anomalies=release_anomaly_rows(releases, first_event(run)),
        releases_listed=LISTED,
        shares=shares,
        share_groups=share_group_rows(shares),
        share_consumers=share_consumer_rows(shares),
        share_partitions=share_partition_rows(shares),
        share_steps=share_step_rows(shares),
        share_samples=share_sample_rows(shares, first_event(run)),
        share_words=SHARE_WORDS,
        share_fates=FATES,
        share_consumer_counts=CONSUMER_COUNTS,
    )
    out = run.run_dir / REPORT_NAME
    out.write_text(page)
    return out
