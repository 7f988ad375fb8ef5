"""The manifest: what a run was (scenario, cluster, images, phases) and how it went (drain,
recovery, errors), written to RUN_DIR/manifest.json as the run goes and read by the checker,
the reports and the claims matrix.

Every key is declared here with the value a reader assumes when a run never set it (a run
killed early, a synthetic history, a run directory from an older harness). The file holds only
the keys a run set, so a reader tells "not reached" from "false"; keys this version does not
know are kept as they were.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from contract.rundir import MANIFEST


class ManifestError(Exception):
    """A manifest that cannot be read; one line naming the file and the field."""


class Manifest(BaseModel):
    model_config = ConfigDict(extra="allow")

    # what was run
    scenario: str | None = None
    claim: str | None = None
    expect: str | None = None
    description: str = ""
    scenario_file: str | None = None
    scenario_spec: dict[str, Any] = {}
    run_id: str | None = None
    system: str | None = None
    tier: str | None = None  # "real-cluster" or "kafka-mock": only the first counts for a claim
    harness_version: str | None = None
    seed: int | None = None  # a generated schedule's seed; None for a scripted run
    # The seed of the targets the steps draw as they run (random-node, a partition's shape):
    # a generated schedule's seed, `harness run --seed`, or drawn; None when no step draws.
    pick_seed: int | None = None
    # A generated run: its base scenario, the generator's options and the steps drawn.
    chaos: dict[str, Any] | None = None
    groups: list[str] | None = None  # reader groups that must each receive every acked message
    # Share groups (KIP-932), judged apart from `groups` (checkers.share_groups.ShareSetup):
    # {group: {"topics": [...], "delivery_count_limit": n, "lock_duration_ms": n (both as the
    # brokers apply them), "config": {the group's configs as the brokers said them once set},
    # ...}}; what else the workload says of a group (its consumers, client, acknowledgement mode,
    # outcome shares, the topic's id, and under "requested" the delivery_count_limit,
    # lock_duration_ms and auto_offset_reset it asked) is kept beside.
    share_groups: dict[str, dict[str, Any]] | None = None
    # the cluster
    kafka_mode: str | None = None
    kafka_line: str | None = None
    images: dict[str, dict[str, Any]] = {}
    compose_project: str | None = None
    bootstrap_servers: str | None = None
    # Kafka with proxy ops: per broker, the Toxiproxy address its clients connect to.
    client_proxy: dict[str, str] | None = None
    cluster_network: str | None = None
    kafka_features: dict[str, Any] | None = None
    topic_config: dict[str, str] | None = None
    # Every setting of the run by scope ("broker", "broker 2", "topic", "producer A", ...): what
    # a verdict is read next to, and what `harness diff` compares.
    settings: dict[str, dict[str, str]] = {}
    # Of those, the keys the scenario chose (its passthrough keys and the properties of the
    # typed knobs it set); the rest are the harness's explicit defaults.
    settings_from_scenario: dict[str, list[str]] = {}
    # Each key of the team's own files (harness run --config): file, scope, key, value, its fate
    # (taken; replaced or overrode a typed knob of the scenario; left out) and why.
    config_files: list[dict[str, str]] = []
    topology: dict[str, Any] | None = None
    # how it went
    started: float | None = None
    # The processes of a live run: `harness heal` stops the clients of a harness that is gone.
    harness_pid: int | None = None
    client_pids: dict[str, int] = {}
    ended: float | None = None
    phases: dict[str, dict[str, float]] = {}
    # Where cluster_up and the teardown spent their time: each one's steps, in order, and their
    # seconds.
    phase_steps: dict[str, dict[str, float]] = {}
    nemesis_steps_done: int = 0
    # A generated schedule's steps that could not be applied, with why (the run went on).
    skipped_steps: list[dict[str, Any]] = []
    cluster_recovered: bool | None = None
    partitions_after_recovery: dict[str, Any] | None = None
    drain_complete: bool = True
    drain_rounds: int | None = None
    consumer_exit_codes: dict[str, int] | None = None
    # Each producer's exit code: one that ended with an error sent less than the scenario asked.
    producer_exit_codes: dict[str, int] | None = None
    # RabbitMQ: each queue's depth and state as the drain ended (never a stream's: a stream
    # keeps what was read).
    queues_after_drain: dict[str, Any] | None = None
    # RabbitMQ's own log of its mirrored queues (recoveries, mirrors added, syncs)
    mirrored_queues: dict[str, Any] | None = None
    error: str | None = None
    heal_error: str | None = None

    @property
    def kafka_version(self) -> str | None:
        version = (self.images.get("kafka") or {}).get("version")
        return str(version) if version is not None else None

    def write(self, run_dir: Path) -> None:
        """Replaces RUN_DIR/manifest.json at once (a reader never sees half of it)."""
        tmp = run_dir / (MANIFEST + ".tmp")
        text = json.dumps(self.model_dump(mode="json", exclude_unset=True), indent=2, default=str)
        tmp.write_text(text + "\n")
        tmp.replace(run_dir / MANIFEST)


def read_manifest(run_dir: Path, required: bool = False) -> Manifest:
    """RUN_DIR's manifest; an empty one when there is none and none is required."""
    path = run_dir / MANIFEST
    if not path.exists():
        if required:
            raise ManifestError(f"{path}: no manifest")
        return Manifest()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        raise ManifestError(f"{path}: not valid JSON") from None
    if not isinstance(data, dict):
        raise ManifestError(f"{path}: not a JSON object")
    try:
        return Manifest.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ManifestError(f"{path}: {where}: {first['msg']}") from None
