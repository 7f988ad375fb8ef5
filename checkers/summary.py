"""A verdict.json in a few human lines: the verdict and its claim's word, then each section of
the check that has something to say (unavailability, coverage, stalls, the brokers' logs,
explanations, groups, transactions, share groups, the log)."""

from __future__ import annotations

from typing import Any

from checkers import (
    broker_errors,
    cluster_views,
    declares,
    disk_evidence,
    explain,
    releases,
    share_groups,
)
from checkers.pace import PACE_KEYS, slow_lines
from checkers.verdict import DEAD_LETTER_METRICS, METRICS, SYNC_SECONDS, claim_word


def summary_lines(verdict: dict[str, Any]) -> list[str]:
    """A short human summary of a verdict.json."""
    lines = [
        f"verdict: {verdict['outcome']} ({'matches' if verdict['matched'] else 'does not match'}"
        f" the expectation {verdict.get('expect') or 'none'}): {verdict['reason']}",
        "sends: " + ", ".join(f"{k} {v}" for k, v in sorted(verdict["sends"].items())),
    ]
    if verdict.get("claim"):  # a scenario of a user's own claims nothing
        lines.insert(1, f"claim {verdict['claim']}: {claim_word(verdict)}")
    if verdict.get("cluster_recovered") is False:
        lines.append("warning: the cluster did not reunite within the recovery timeout")
    if verdict.get("drain_complete") is False:
        lines.append("warning: the drain could not confirm every queue empty")
    if left := verdict.get("queues_left"):
        said = ", ".join(f"{q} {n}" for q, n in left.items())
        lines.append(f"queues not empty after the drain (messages): {said}")
    if window := verdict.get("refused_window"):
        start = (verdict.get("history_span") or {}).get("first") or 0.0
        lines.append(
            f"sends refused or unknown between +{window['first'] - start:.1f} s and "
            f"+{window['last'] - start:.1f} s"
        )
    lines += _unavailability_lines(verdict)
    lines += coverage_lines(verdict.get("coverage"))
    lines += slow_lines(verdict.get("producers") or {})
    lines += _stall_lines(verdict)
    lines += _mirror_lines(verdict)
    lines += broker_errors.summary_lines(verdict.get("broker_errors"))
    start = (verdict.get("history_span") or {}).get("first") or 0.0
    lines += disk_evidence.summary_lines(verdict.get("disk_evidence"), start)
    lines += releases.summary_lines(verdict.get("releases"), start)
    lines += explain.summary_lines(verdict)
    lines += cluster_views.summary_lines(verdict.get("cluster_views"))
    lines += declares.summary_lines(verdict.get("declares"))
    for f, names in sorted((verdict.get("errors") or {}).items()):
        lines.append(f"{f} errors: " + ", ".join(f"{n} {c}" for n, c in sorted(names.items())))
    for snap in verdict.get("placement") or []:
        lines.append(
            f"leaders {snap.get('label') or ''}: "
            + ("balanced" if snap.get("balanced") else "not balanced")
            + f", per broker {snap.get('per_broker')}"
        )
    for name, g in sorted(verdict["groups"].items()):
        # Dead-lettering's counts where a run had any; a verdict from before a count existed
        # lacks it (0).
        metrics = [m for m in METRICS if m not in DEAD_LETTER_METRICS or g.get(m)]
        lines.append(f"group {name}: " + ", ".join(f"{m} {g.get(m, 0)}" for m in metrics))
    for metric, groups in sorted((verdict.get("attribution") or {}).items()):
        for group, tied in sorted(groups.items()):
            for how, counts in (("fault step", tied["by_step"]), ("acking node", tied["by_node"])):
                shown = ", ".join(f"{k}: {n}" for k, n in sorted(counts.items()))
                lines.append(f"{metric} in {group} by {how}: {shown}")
    for process, counts in sorted((verdict.get("readers") or {}).items()):
        if any(counts.values()):
            lines.append(f"reader {process}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    for producer, figures in sorted((verdict.get("producers") or {}).items()):
        counts = {k: v for k, v in figures.items() if k not in PACE_KEYS}
        if any(counts.values()):
            lines.append(
                f"producer {producer}: " + ", ".join(f"{k} {v}" for k, v in counts.items())
            )
    lines += _transaction_lines(verdict.get("transactions"))
    lines += share_groups.summary_lines(verdict.get("share_groups"), start)
    if log := verdict.get("log"):
        lines.append(
            f"log: inconsistent offsets {log['inconsistent_offsets']}, "
            f"duplicate offsets {log['duplicate_offsets']}"
        )
        for metric, samples in sorted((log.get("samples") or {}).items()):
            lines += [f"  {metric}: {s}" for s in samples]
    if verdict.get("seed") is not None:
        lines.append(f"seed: {verdict['seed']} (harness chaos BASE --seed {verdict['seed']})")
    if verdict.get("pick_seed") is not None and verdict.get("pick_seed") != verdict.get("seed"):
        seed = verdict["pick_seed"]
        lines.append(f"drawn targets: seed {seed} (harness run SCENARIO --seed {seed})")
    if verdict.get("kafka_mode"):
        lines.append(f"kafka mode: {verdict['kafka_mode']}, version {verdict.get('kafka_version')}")
    if verdict.get("tier") == "kafka-mock":
        lines.append("tier: kafka-mock (librdkafka's mock cluster): proves the harness, not Kafka")
    if verdict.get("truncated_lines"):
        lines.append(f"truncated last lines skipped: {len(verdict['truncated_lines'])}")
    return lines


def _transaction_lines(txns: dict[str, Any] | None) -> list[str]:
    """ "transactions: 60 (52 committed, 8 aborted of which 8 planned, 0 unknown)", then per
    group what it read of them."""
    if not txns:
        return []
    lines = [
        f"transactions: {txns['transactions']} ({txns['committed']} committed, "
        f"{txns['aborted']} aborted of which {txns['planned_aborts']} planned, "
        f"{txns['unknown']} unknown, {txns['unknown_seen_committed']} of them seen committed)"
    ]
    if "commits_in_faults" in txns:
        lines.append(
            f"transactions in faults: {txns.get('open_in_faults', 0)} open, "
            f"{txns['commits_in_faults']} with their commit in flight; "
            f"{txns.get('commits_across_coordinator_moves', 0)} committing as their "
            "coordinator moved"
        )
    if "held_past_end" in txns:
        lines.append(
            f"clients' path: {txns['held_past_end']} transactions ended while a request of "
            f"theirs was held; {txns.get('commits_delayed', 0)} had their commit in flight "
            "through a delayed or held coordinator link"
        )
    if "zombie_commits" in txns:
        lines.append(
            f"fencing: {txns.get('fenced_open', 0)} transactions open when a newer instance "
            f"initialised ({txns.get('fenced_while_paused', 0)} of them paused); "
            f"{txns.get('fenced_commits', 0)} commits asked by instances a newer one "
            f"had fenced, {txns['zombie_commits']} of them took effect (zombie commits)"
        )
    for producer, client in sorted((txns.get("clients") or {}).items()):
        lines.append(f"transactions of {producer}: {client}")
    for name, g in sorted(txns["groups"].items()):
        lines.append(
            f"transactions in {name} ({g['isolation']}): aborted reads {g['aborted_reads']} "
            f"(in {g['aborted_read_txns']} transactions), torn {g['torn']}"
            + (f", committed with records lost {g['lost_txns']}" if "lost_txns" in g else "")
        )
    for metric, samples in sorted((txns.get("samples") or {}).items()):
        lines += [f"  {metric}: {s}" for s in samples[:3]]
    if cycles := txns.get("cycles"):
        lines.append(
            f"dependency cycles: G0 (write cycles) {cycles['G0']}, G1c (cyclic information "
            f"flow) {cycles['G1c']}, over {cycles['transactions']} committed transactions "
            f"({cycles['edges']['ww']} ww, {cycles['edges']['wr']} wr edges)"
        )
        for c in cycles["samples"][:3]:
            lines.append(f"  {c['kind']}: {' -> '.join(c['transactions'])}")
    if copy := txns.get("copy"):
        c = copy["copies"]
        lines.append(
            f"exactly-once copy: {c['committed']} copies committed, {c['aborted']} aborted, "
            f"{c['unknown']} unknown; input records copied twice {copy['copied_twice']}, "
            f"never copied {copy['never_copied']}, written twice by their producer "
            f"{copy['input_duplicates']}"
            + (
                f"; {unrecorded} copied by a transaction its copier never recorded (read in "
                "the output)"
                if (unrecorded := copy.get("copied_unrecorded"))
                else ""
            )
        )
        for metric, samples in sorted(copy["samples"].items()):
            lines += [f"  {metric}: {s}" for s in samples[:3]]
    return lines


def coverage_lines(coverage: dict[str, Any] | None) -> list[str]:
    """ "coverage: 6 fault steps, 4 hit a leader; acknowledged inside faults 3120, ...";
    "ops applied: kill 2, start 2, ..."; "situations: leader-faulted 4, ..."; and why the run
    is vacuous, when it is."""
    if not coverage:
        return []
    steps = coverage.get("steps") or []
    missed = sum(1 for s in steps if s.get("held_role") is False)
    lines = [
        f"coverage: {len(steps)} fault steps, {_leaders_hit(steps)}"
        + (f", {missed} missed the role they aimed at" if missed else "")
        + f"; inside faults {coverage.get('acked_in_faults', 0)} acknowledged, "
        f"{coverage.get('delivered_in_faults', 0)} delivered; "
        f"{coverage.get('exposed_at_faults', 0)} acknowledged and undelivered as faults began"
    ]
    for late in coverage.get("late_steps") or []:
        lines.append(f"late: {late['step']} began {late['lag']:.1f} s after its scheduled time")
    if dropped := coverage.get("proxy_undelivered"):
        lines.append(
            f"proxy: {dropped} held chunks never delivered at a release (no reader took them in "
            "5 s: a connection its client had stopped reading)"
        )
    if ops := coverage.get("ops"):
        lines.append("ops applied: " + ", ".join(f"{k} {n}" for k, n in ops.items()))
    if situations := coverage.get("situations"):
        lines.append("situations: " + ", ".join(f"{k} {n}" for k, n in situations.items()))
    if coverage.get("vacuous"):
        lines.append("vacuous: " + "; ".join(coverage.get("why_vacuous") or []))
    return lines


def _leaders_hit(steps: list[dict[str, Any]]) -> str:
    """How many steps hit a leader, among those where the run knew where the leaders were
    (a verdict older than `leader_known` knew for every step)."""
    known = [s for s in steps if s.get("leader_known", True)]
    hit = sum(1 for s in known if s.get("leaders_hit") or s.get("queue_leader_hit"))
    if steps and not known:
        return "leaders not recorded (no step aimed at one)"
    unknown = len(steps) - len(known)
    return f"{hit} hit a leader" + (f", {unknown} where no leader was recorded" if unknown else "")


def _stall_lines(verdict: dict[str, Any]) -> list[str]:
    """ "stalled jepsen.primary: 2 stalls, 8.1 s; longest 7.3 s at +31.2 s (7.3 s inside fault
    windows)" per group that stalled."""
    run_start = (verdict.get("history_span") or {}).get("first") or 0.0
    lines = []
    for group, s in sorted((verdict.get("stalls") or {}).items()):
        top = s["longest"][0]
        lines.append(
            f"stalled {group}: {s['stalls']} stalls, {s['seconds']:.1f} s; longest "
            f"{top['seconds']:.1f} s at +{top['start'] - run_start:.1f} s "
            f"({top['in_fault_seconds']:.1f} s inside fault windows"
            + (
                f", {top[SYNC_SECONDS]:.1f} s while a mirror synchronised"
                if top.get(SYNC_SECONDS)
                else ""
            )
            + ")"
        )
    return lines


def _mirror_lines(verdict: dict[str, Any]) -> list[str]:
    """What RabbitMQ logged of its mirrors: each node that started again and how many classic
    queues it recovered (a mirror's copy is not one of them), and each synchronisation."""
    story = verdict.get("mirrored_queues") or {}
    run_start = (verdict.get("history_span") or {}).get("first") or 0.0
    lines, booted = [], set()
    for r in story.get("recoveries") or []:
        if r["node"] in booted:
            lines.append(
                f"broker log: {r['node']} started again at +{r['at'] - run_start:.1f} s and "
                f"recovered {r['classic_queues']} classic queues"
            )
        booted.add(r["node"])
    for d in story.get("discarded") or []:
        lines.append(
            f"broker log: {d['node']} came back without its copy of {d['queue']}; "
            f"a master's last count of it before then, at +{d['counted_at'] - run_start:.1f} s, "
            f"was {d['messages']} messages"
        )
    for s in story.get("syncs") or []:
        took = f"in {s['seconds']:.2f} s" if s["seconds"] is not None else "never completed"
        lines.append(
            f"broker log: {s['master']} synchronised {s['queue']} to {', '.join(s['mirrors'])}: "
            f"{s['messages']} messages at +{s['start'] - run_start:.1f} s, {took}"
        )
    return lines


def _unavailability_lines(verdict: dict[str, Any]) -> list[str]:
    """ "unavailable P1: 3 intervals, 12.4 s (11.9 s inside fault windows); longest 8.1 s at
    +20.3 s (120 refused, 4 unknown)" per producer, after the fault windows."""
    windows = verdict.get("fault_windows") or []
    producers = verdict.get("unavailability") or {}
    if not windows and not producers:
        return []
    run_start = (verdict.get("history_span") or {}).get("first") or 0.0
    lines = [
        "fault windows: "
        + (
            ", ".join(f"+{w['start'] - run_start:.1f} s for {w['seconds']:.1f} s" for w in windows)
            if windows
            else "none"
        )
    ]
    for producer, u in sorted(producers.items()):
        line = (
            f"unavailable {producer}: {u['intervals']} intervals, {u['seconds']:.1f} s "
            f"({u['in_fault_seconds']:.1f} s inside fault windows)"
        )
        if u["longest"]:
            top = u["longest"][0]
            line += (
                f"; longest {top['seconds']:.1f} s at +{top['start'] - run_start:.1f} s"
                f" ({top['refused']} refused, {top['unknown']} unknown)"
            )
        lines.append(line)
    return lines
