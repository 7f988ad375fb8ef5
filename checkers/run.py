"""Checking a run directory: history in, verdict.json, ids/ and summary.txt out."""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

from checkers.broker_errors import broker_errors
from checkers.cluster_views import cluster_views
from checkers.coverage import ClusterFacts, coverage_of, with_coverage
from checkers.declares import declares_section
from checkers.disk_evidence import disk_evidence
from checkers.engine import (
    Where,
    cancel_all,
    checker_session,
    measured,
    phase,
    profiling,
    session_of,
)
from checkers.explain import explain_run
from checkers.pace import with_pace
from checkers.read import history_bytes, write_parquet
from checkers.releases import Start, release_section
from checkers.share_groups import ShareSetup
from checkers.spark import HistoryError, check_history
from checkers.summary import summary_lines
from checkers.verdict import (
    Counts,
    Judgement,
    claim_word,
    judge,
    missing_errors,
    placement_mismatches,
    with_client_expectations,
    with_producers_ended,
    with_sync_windows,
)
from contract.manifest import Manifest, ManifestError, read_manifest
from contract.rundir import IDS, RunDir

# How a warm server a check starts for the next ones is warmed (checkers.engine.autostart): in
# a process of its own, by name, as this module cannot import the one that imports it.
WARM_UP = (sys.executable, "-m", "checkers.rehearsal", "warm-up")


def check_run(
    run_dir: Path,
    master: str | None = None,
    expect: str | None = None,
    spark: Any = None,
    timeout: float = 1800.0,
    profile: bool = False,
) -> dict[str, Any]:
    """Checks RUN_DIR/history and writes the verdict files; returns the verdict. `master`
    None: the warm Spark Connect server when one runs, else a local Spark (checkers.engine.session);
    the verdict's `checker` says which, and with `profile` where the time went, phase by phase
    (checkers.engine.profile)."""
    if not run_dir.is_dir():
        raise HistoryError(f"{run_dir}: not a directory")
    # Absolute: a Connect server resolves a relative path against its own directory.
    run = RunDir(run_dir.resolve())
    manifest = _manifest(run)
    expect = expect or manifest.expect
    started = time.monotonic()
    history_size = history_bytes(run.history)
    with contextlib.ExitStack() as held:  # a session of the check's own ends with it
        if spark is None:
            spark, where = held.enter_context(checker_session(master, history_size, WARM_UP))
        else:
            where = session_of(spark)
        session_seconds = time.monotonic() - started
        connect_url = where.master if where.engine == "pyspark-connect" else None
        with (
            profiling(spark) if profile else contextlib.nullcontext() as profiled,
            measured(spark, connect_url, active=profile) as jvm_cpu,
        ):
            result = checked_history(run, spark, manifest.groups, timeout, share_setup(manifest))
    span_end = (result.history_span or {}).get("last") or 0.0
    result.stalls = with_sync_windows(result.stalls, manifest.mirrored_queues, span_end)
    coverage = coverage_of(
        result.nemesis,
        result.partition_states,
        result.window_traffic,
        ClusterFacts.of(manifest.scenario_spec),
        manifest.scenario_spec.get("requires") or [],
        expect,
        (result.history_span or {}).get("first") or 0.0,
        result.transactions,
        result.share_groups,
    )
    declares = declares_of(result, manifest)
    judgement = with_coverage(judgement_of(result, manifest, expect, declares), coverage)
    verdict = verdict_of(result, manifest, expect, judgement, where)
    verdict["coverage"] = coverage
    # RabbitMQ's metadata probes (declare steps), side by side (none without one).
    verdict["declares"] = declares
    verdict["broker_errors"] = broker_errors(run.logs, manifest)
    # What the brokers logged of the run's disk faults, named (none without a disk fault).
    verdict["disk_evidence"] = disk_evidence(run.logs, manifest, result.nemesis)
    # Which release each period and anomaly ran on (only for a run that upgraded).
    with_releases(verdict, result, manifest)
    # The brokers' own evidence of each anomalous message (null, with why, when there is none).
    run_start = (result.history_span or {}).get("first") or 0.0
    verdict["explanations"], verdict["explanations_missing"] = explain_run(run, run_start)
    verdict["cluster_views"] = cluster_views(run)
    verdict["checker"]["seconds"] = round(time.monotonic() - started, 2)
    verdict["checker"]["session_seconds"] = round(session_seconds, 2)
    if profiled is not None:
        verdict["checker"]["profile"] = profiled.as_dict()
        verdict["checker"]["jvm_cpu"] = jvm_cpu
    write_verdict(run, verdict, result.timeline)
    return verdict


def with_releases(verdict: dict[str, Any], result: Any, manifest: Manifest) -> None:
    """verdict.json's `releases` (checkers.releases), set only for a run that upgraded or
    finalized a feature: a reader of any other run's verdict finds no such key."""
    span = result.history_span or {}
    section = release_section(
        result.nemesis,
        Start.of(manifest),
        result.release_counts,
        span.get("first") or 0.0,
        span.get("last") or 0.0,
    )
    if section is not None:
        verdict["releases"] = section


def queues_left(after_drain: dict[str, Any] | None) -> dict[str, int] | None:
    """RabbitMQ: each queue that still held messages when the drain ended, by its count (the
    RabbitMQ team's Jepsen CI fails a run on one); None when the broker was not asked or did not
    answer."""
    if not after_drain or "error" in after_drain:
        return None
    return {
        q: int(d["messages"])
        for q, d in sorted(after_drain.items())
        if isinstance(d, dict) and isinstance(d.get("messages"), int) and d["messages"] > 0
    }


def _manifest(run: RunDir) -> Manifest:
    try:
        return read_manifest(run.path)
    except ManifestError as e:
        raise HistoryError(str(e)) from None


def share_setup(manifest: Manifest) -> ShareSetup:
    """The run's share groups and what they are judged by: the manifest's `share_groups`, and
    its brokers' settings for the rest."""
    return ShareSetup.of(manifest.share_groups, manifest.settings.get("broker"))


def checked_history(
    run: RunDir,
    session: Any,
    groups: list[str] | None,
    timeout: float,
    share: ShareSetup | None = None,
) -> Any:
    """The history's counts, from one Spark check bounded by `timeout`: past it, every Spark
    job is cancelled as it starts, which makes the running action fail."""
    started = time.monotonic()
    done = threading.Event()

    def cancel_when_late() -> None:
        if done.wait(timeout):
            return
        while not done.wait(0.2):
            try:
                cancel_all(session)
            except Exception:  # noqa: BLE001 (a server gone: the check fails on its own)
                return

    watchdog = threading.Thread(target=cancel_when_late, daemon=True)
    watchdog.start()
    try:
        # The run's history is complete: its Parquet copy is made once, and checked from.
        with phase("parquet copy"):
            write_parquet(session, run.history)
        result = check_history(session, run.history, run.ids, groups, share)
    except HistoryError:
        raise
    except Exception as e:
        if time.monotonic() - started >= timeout:
            raise HistoryError(f"the checker did not finish in {timeout:.0f} s") from None
        # A Spark job that failed (an executor lost, a cluster that cannot run it): one line.
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise HistoryError(f"the Spark job failed: {first[:300]}") from e
    finally:
        done.set()
        watchdog.join()
    if time.monotonic() - started >= timeout:
        raise HistoryError(f"the checker did not finish in {timeout:.0f} s")
    return result


def declares_of(result: Any, manifest: Manifest) -> dict[str, Any] | None:
    """The declare steps' section (checkers.declares), judged by the scenario's
    expect_declares; the cluster's nodes are the run's topology's."""
    nodes = [str(n["name"]) for n in (manifest.topology or {}).get("nodes") or []]
    return declares_section(
        result.nemesis,
        nodes,
        manifest.scenario_spec.get("expect_declares"),
        (result.history_span or {}).get("first") or 0.0,
    )


def judgement_of(
    result: Any, manifest: Manifest, expect: str | None, declares: dict[str, Any] | None = None
) -> Judgement:
    """The expectation's judge over the counts, then what the clients (and the declare
    steps' probes) had to see."""
    counts = Counts.of(
        result.groups,
        result.sends,
        manifest.drain_complete,
        result.log,
        result.stalls,
        result.unavailability,
        result.transactions,
        getattr(result, "share_groups", None),  # a result made elsewhere may have none
    )
    return with_client_expectations(
        with_producers_ended(judge(counts, expect), manifest.producer_exit_codes),
        missing_errors(manifest.scenario_spec.get("expect_errors") or [], result.errors)
        + [f"declares: {m}" for m in (declares or {}).get("mismatches") or []],
        placement_mismatches(result.placement),
    )


def verdict_of(
    result: Any, manifest: Manifest, expect: str | None, judgement: Judgement, where: Where
) -> dict[str, Any]:
    """verdict.json: the judgement, every count behind it, and what the run was."""
    verdict: dict[str, Any] = {
        "scenario": manifest.scenario,
        "claim": manifest.claim,
        "expect": expect,
        # kafka-mock results prove our code, never a broker's claim.
        "tier": manifest.tier or "unknown",
        "counts_toward_claim": manifest.tier == "real-cluster",
        "outcome": judgement.outcome,
        "claim_verdict": "",  # filled below, from the whole verdict
        "matched": judgement.matched,
        "reason": judgement.reason,
        "groups": result.groups,
        "sends": result.sends,
        "refused_window": result.refused_window,
        "fault_windows": result.fault_windows,
        "history_span": result.history_span,
        "unavailability": result.unavailability,
        "stalls": result.stalls,
        "errors": result.errors,
        "placement": result.placement,
        "log": result.log,
        "readers": result.readers,
        "attribution": result.attribution,
        # Each producer's anomalies, and the rate it reached beside the rate asked of it.
        "producers": with_pace(result.producers, result.sending, manifest.scenario_spec),
        "transactions": result.transactions,
        # What each share group did with its records (checkers.share_groups); null without one.
        "share_groups": result.share_groups,
        "seed": manifest.seed,
        "pick_seed": manifest.pick_seed,
        "kafka_mode": manifest.kafka_mode,
        "kafka_version": manifest.kafka_version,
        # RabbitMQ's own log of its mirrored queues (recoveries, mirrors added, syncs).
        "mirrored_queues": manifest.mirrored_queues,
        "cluster_recovered": manifest.cluster_recovered,
        "drain_complete": manifest.drain_complete,
        "queues_left": queues_left(manifest.queues_after_drain),
        "truncated_lines": result.truncated_lines,
        "ids_dir": IDS,
        "checker": {
            "engine": where.engine,
            "master": where.master,
            "session": where.said,
            "history": result.history_source,
            "seconds": 0.0,
        },
    }
    verdict["claim_verdict"] = claim_word(verdict) if verdict["claim"] else None
    return verdict


def write_verdict(run: RunDir, verdict: dict[str, Any], timeline: dict[str, Any]) -> None:
    run.verdict.write_text(json.dumps(verdict, indent=2) + "\n")
    run.timeline.write_text(json.dumps(timeline) + "\n")
    run.summary.write_text("\n".join(summary_lines(verdict)) + "\n")
