"""Checking a run directory: history in, verdict.json, ids/ and summary.txt out."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from checkers.read import write_parquet
from checkers.spark import HistoryError, check_history, spark_session
from checkers.verdict import (
    claim_word,
    judge,
    missing_errors,
    placement_mismatches,
    summary_lines,
    with_client_expectations,
    with_sync_windows,
)


def check_run(
    run_dir: Path,
    master: str = "local[*]",
    expect: str | None = None,
    spark: Any = None,
    timeout: float = 1800.0,
) -> dict[str, Any]:
    """Checks RUN_DIR/history and writes the verdict files; returns the verdict."""
    if not run_dir.is_dir():
        raise HistoryError(f"{run_dir}: not a directory")
    manifest_path = run_dir / "manifest.json"
    manifest: dict[str, Any] = {}
    if manifest_path.exists():
        try:
            manifest = json.loads(manifest_path.read_text())
        except ValueError:
            raise HistoryError(f"{manifest_path}: not valid JSON") from None
    expect = expect or manifest.get("expect")
    started = time.monotonic()
    session = spark or spark_session(master)
    # The check is a phase like any other: bounded. Past the timeout, every Spark job is
    # cancelled as it starts, which makes the running action fail.
    done = threading.Event()

    def cancel_when_late() -> None:
        if done.wait(timeout):
            return
        while not done.wait(0.2):
            session.sparkContext.cancelAllJobs()

    watchdog = threading.Thread(target=cancel_when_late, daemon=True)
    watchdog.start()
    try:
        # The run's history is complete: its Parquet copy is made once, and checked from.
        write_parquet(session, run_dir / "history")
        result = check_history(
            session, run_dir / "history", run_dir / "ids", manifest.get("groups")
        )
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
    span_end = (result.history_span or {}).get("last") or 0.0
    result.stalls = with_sync_windows(result.stalls, manifest.get("mirrored_queues"), span_end)
    judgement = judge(
        result.groups,
        result.sends,
        expect,
        manifest.get("drain_complete", True),
        result.log,
        result.stalls,
        result.unavailability,
    )
    spec = manifest.get("scenario_spec") or {}
    judgement = with_client_expectations(
        judgement,
        missing_errors(spec.get("expect_errors") or [], result.errors),
        placement_mismatches(result.placement),
    )
    verdict: dict[str, Any] = {
        "scenario": manifest.get("scenario"),
        "claim": manifest.get("claim"),
        "expect": expect,
        # kafka-mock results prove our code, never a broker's claim.
        "tier": manifest.get("tier", "unknown"),
        "counts_toward_claim": manifest.get("tier") == "real-cluster",
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
        "producers": result.producers,
        "kafka_mode": manifest.get("kafka_mode"),
        "kafka_version": ((manifest.get("images") or {}).get("kafka") or {}).get("version"),
        # RabbitMQ's own log of its mirrored queues (recoveries, mirrors added, syncs).
        "mirrored_queues": manifest.get("mirrored_queues"),
        "cluster_recovered": manifest.get("cluster_recovered"),
        "drain_complete": manifest.get("drain_complete", True),
        "truncated_lines": result.truncated_lines,
        "ids_dir": "ids",
        "checker": {
            "engine": "pyspark",
            "master": master,
            "history": result.history_source,
            "seconds": 0.0,
        },
    }
    verdict["claim_verdict"] = claim_word(verdict) if verdict["claim"] else None
    verdict["checker"]["seconds"] = round(time.monotonic() - started, 2)
    (run_dir / "verdict.json").write_text(json.dumps(verdict, indent=2) + "\n")
    (run_dir / "timeline.json").write_text(json.dumps(result.timeline) + "\n")
    (run_dir / "summary.txt").write_text("\n".join(summary_lines(verdict)) + "\n")
    return verdict
