"""Where a run's output goes: results/<scenario>/<run-id>/, and results/latest.

Every file of a run directory is named here, and nowhere else:
  history/*.jsonl   one file per process (contract.history); *.jsonl.zst once checked
                    and reported (contract.packed)
  manifest.json     what the run was and how it went (contract.manifest)
  schedule.yaml     a generated run's scenario, replayable with `harness run` (chaos)
  logs/             each node's log, each client's output and config
  evidence/         the brokers' own evidence read before the cluster came down: each node's
                    data files (<node>-data.tar.zst, kept when the run found something) and
                    their decoded dumps (<node>/*.txt.zst), evidence.json saying what is there
  cluster/          the rendered compose file and the nodes' data
  history.parquet   the checker's columnar copy of the history
  ids/              the message ids behind every count (acked and received packed as
                    <metric>.txt.zst with the history)
  verdict.json, timeline.json, summary.txt   the checker's answer
  report.html, junit.xml                     the reports
  shrink.json       what `harness shrink` made of this run's schedule
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

DEFAULT_ROOT = Path(os.environ.get("BJ_RESULTS", "results"))
HISTORY = "history"
MANIFEST = "manifest.json"
LOGS = "logs"
# The brokers' own evidence, read before the cluster came down (systems.<broker>.evidence).
EVIDENCE = "evidence"
EVIDENCE_INDEX = "evidence.json"  # what evidence/ holds of each node, and what not
# A ZooKeeper node's transaction log as its own tool prints it (evidence.json's dump name).
ZOOKEEPER_TXNS = "zookeeper-txns"
# Per node, the raw data files copied out (and decoded) at most, in MiB, unless a run says
# (`harness run --data-cap`): a 3-broker run of a few minutes holds tens of MiB a node; past the
# cap the copy stops and evidence.json says so.
DATA_CAP_MIB = 256
CLUSTER = "cluster"
IDS = "ids"
VERDICT = "verdict.json"
TIMELINE = "timeline.json"
SUMMARY = "summary.txt"
SCHEDULE = "schedule.yaml"
SHRINK = "shrink.json"


@dataclass(frozen=True)
class RunDir:
    """The paths of one run directory."""

    path: Path

    @property
    def history(self) -> Path:
        return self.path / HISTORY

    @property
    def manifest(self) -> Path:
        return self.path / MANIFEST

    @property
    def logs(self) -> Path:
        return self.path / LOGS

    @property
    def evidence(self) -> Path:
        return self.path / EVIDENCE

    @property
    def cluster(self) -> Path:
        return self.path / CLUSTER

    @property
    def ids(self) -> Path:
        return self.path / IDS

    @property
    def verdict(self) -> Path:
        return self.path / VERDICT

    @property
    def timeline(self) -> Path:
        return self.path / TIMELINE

    @property
    def summary(self) -> Path:
        return self.path / SUMMARY

    @property
    def schedule(self) -> Path:
        return self.path / SCHEDULE

    @property
    def shrink(self) -> Path:
        return self.path / SHRINK


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(2)


def make_run_dir(root: Path, scenario_id: str, run_id: str) -> RunDir:
    run = RunDir(root / scenario_id / run_id)
    run.history.mkdir(parents=True, exist_ok=False)
    run.logs.mkdir()
    latest = root / "latest"
    if latest.is_symlink() or latest.exists():
        latest.unlink()
    latest.symlink_to(Path(scenario_id) / run_id)
    return run
