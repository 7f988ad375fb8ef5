"""A RabbitMQ run's own evidence, read before the cluster comes down: each node's word on the
cluster it sees and on the run's queues, from RabbitMQ's own tools.

Every node is asked, not one: after a partition the nodes may disagree on who is clustered
with whom, and on a quorum queue's members and their Raft state, and the disagreement is the
finding (a cluster split for good after a heal shows as two views of `cluster_status`). Each
answer is kept as the tool printed it, one file per node and question, zstd-compressed; a node
that does not answer (stopped, paused, hung) is said in evidence.json with the tool's error.
On 3.13 and later each node is also asked the metadata store's status (Mnesia, or Khepri's Raft
membership and indexes). Each node's persisted feature flags file is copied as well, from a
stopped node too: what a node will ask of the cluster when it boots (a release that refused to
boot may have left its own required flags there). The nodes' own logs are kept beside
(RUN_DIR/logs/), whole.
"""

from __future__ import annotations

import io
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compose.cli import ComposeError
from compose.cluster import ComposeCluster
from contract.versions import version_key
from systems.evidence import keep_text

ASK_TIMEOUT_S = 30.0
# Where a node keeps the feature flags it has enabled (RABBITMQ_MNESIA_BASE of our images).
FEATURE_FLAGS_FILE = "/var/lib/rabbitmq/mnesia/rabbit@{node}-feature_flags"
JSON = ["--formatter", "json"]


@dataclass
class NodeAnswers:
    """What one node answered, and what not (with why)."""

    node: str
    answers: dict[str, str] = field(default_factory=dict)  # question -> file, relative
    missing: list[str] = field(default_factory=list)
    seconds: float = 0.0


# The metadata store's own status (Mnesia, or Khepri's Raft members and indexes): 3.13 and later.
METADATA_STORE_SINCE = (3, 13)


def _at_least(release: str | None, line: tuple[int, int]) -> bool:
    try:
        return release is not None and version_key(release)[:2] >= line
    except ValueError:
        return False  # a release named otherwise (a tag of the official image): not asked


def questions(
    queue_type: str, queues: list[str], release: str | None = None
) -> dict[str, list[str]]:
    """Per question (its file's stem), the command a node is asked it with, as JSON (the
    tools' tables draw their borders with terminal escapes)."""
    json = JSON
    asked = {"cluster-status": ["rabbitmq-diagnostics", "-q", "cluster_status", *json]}
    if _at_least(release, METADATA_STORE_SINCE):
        asked["metadata-store"] = ["rabbitmq-diagnostics", "-q", "metadata_store_status", *json]
    for queue in queues:
        if queue_type == "quorum":
            asked[f"quorum-status-{queue}"] = [
                "rabbitmq-queues",
                "-q",
                "quorum_status",
                queue,
                *json,
            ]
        elif queue_type == "stream":
            asked[f"stream-status-{queue}"] = [
                "rabbitmq-streams",
                "-q",
                "stream_status",
                queue,
                *json,
            ]
    asked["queues"] = [
        "rabbitmqctl", "-q", "list_queues", "name", "type", "messages", "leader", "members",
        "online", "state", *json,
    ]  # fmt: skip
    return asked


def ask(
    cluster: ComposeCluster, node: str, asked: dict[str, list[str]], out_dir: Path
) -> NodeAnswers:
    """Each question put to one node, its answer kept as `<node>/<question>.json.zst` (or
    .txt.zst)."""
    started = time.monotonic()
    found = NodeAnswers(node)
    for name, argv in asked.items():
        answer = _answer(cluster, node, name, argv)
        if isinstance(answer, str):
            found.missing.append(answer)
            continue
        text, suffix = answer
        found.answers[name] = keep_text(out_dir, node, name, text, suffix)
    found.seconds = round(time.monotonic() - started, 2)
    return found


def _answer(
    cluster: ComposeCluster, node: str, name: str, argv: list[str]
) -> tuple[str, str] | str:
    """The node's answer and its kind (json, or txt from a command that takes no JSON
    formatter on this release), or why there is none."""
    said = ""
    for args, suffix in ((argv, "json"), (argv[: -len(JSON)], "txt")):
        try:
            return cluster.run_in(node, args, name, ASK_TIMEOUT_S), suffix
        except ComposeError as e:
            said = str(e)[:300]
    return said


def collect(
    cluster: ComposeCluster,
    nodes: list[str],
    queue_type: str,
    queues: list[str],
    out_dir: Path,
    release: str | None = None,
) -> list[NodeAnswers]:
    """Every running node asked, in parallel (before the cluster comes down)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    asked = questions(queue_type, queues, release)
    containers = cluster.containers()
    present = [n for n in nodes if n in containers and containers[n].status == "running"]
    with ThreadPoolExecutor(max_workers=max(1, len(present))) as pool:
        found = list(pool.map(lambda n: ask(cluster, n, asked, out_dir), present))
    found += [NodeAnswers(n, missing=["not running"]) for n in nodes if n not in present]
    for answers in found:
        if answers.node in containers:
            keep_feature_flags(containers[answers.node], answers, out_dir)
    return found


def keep_feature_flags(container: Any, answers: NodeAnswers, out_dir: Path) -> None:
    """The node's feature flags file, copied out of its container (running or not) as
    `<node>/feature-flags.txt.zst`; why not, in `missing`."""
    path = FEATURE_FLAGS_FILE.format(node=answers.node)
    try:
        stream, _ = container.get_archive(path)
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = tar.next()
            data = tar.extractfile(member) if member is not None else None
            text = data.read().decode(errors="replace") if data is not None else ""
    except Exception as e:  # noqa: BLE001 - a node never booted has none: said, not raised
        answers.missing.append(f"feature-flags: {str(e)[:200]}")
        return
    answers.answers["feature-flags"] = keep_text(out_dir, answers.node, "feature-flags", text)
