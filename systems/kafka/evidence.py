"""A Kafka run's own evidence, kept before the cluster comes down: what each node has on disk
for the partitions the run is about, and Kafka's own reading of it.

A finding about a broker is only as good as the broker's own files: which batch held a record
on which replica, under which producer id, epoch and sequence, and when a replica truncated it.
The cluster is removed at the end of every run, so those files are copied out first, from each
node's data directory (a stopped or killed node's too: Docker reads a stopped container's
files), and only what a run can be asked about: the workload's topic and its copy, the
transaction log and KRaft's metadata log, each with its checkpoints. Kafka's own tool
(DumpLogSegments, as `kafka-dump-log.sh` runs it) then decodes them in a container of the
release's image with no network: every batch's offsets, producer id, epoch, base sequence,
transactional and control flags, with each record and its payload (--deep-iteration,
--print-data-log); the transaction log's states (--transaction-log-decoder); the metadata log's
leader and ISR changes and fencing (--cluster-metadata-decoder).

Everything is bounded: the copy by a size cap per node, each decode by a timeout; what could
not be had is said in evidence.json, never silently missing (systems.evidence).
"""

from __future__ import annotations

import contextlib
import io
import logging
import shlex
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import zstandard

from compose.cli import ComposeError
from compose.cluster import ComposeCluster
from contract.rundir import ZOOKEEPER_TXNS
from systems.evidence import DATA_CAP_MIB, LEVEL, compressing, keep_text
from systems.kafka.cluster import DATA_DIR, INTERNAL_PORT

log = logging.getLogger(__name__)

COPY_TIMEOUT_S = 60.0
DECODE_TIMEOUT_S = 120.0
FIND_HANGING_TIMEOUT_S = 45.0
# Kafka's log dump tool: in core before 4.2 (Scala), in tools since.
DUMP_CLASSES = ("org.apache.kafka.tools.DumpLogSegments", "kafka.tools.DumpLogSegments")
TRANSACTION_LOG = "__transaction_state"
METADATA_LOG = "__cluster_metadata"
# A partition's offset and time indexes: preallocated (10 MiB each, mostly zeros), rebuilt by
# Kafka from the log, and not read by the dump tool.
INDEX_SUFFIXES = (".index", ".timeindex")
# Files of a log directory that say where each partition's log stands.
CHECKPOINTS = (
    "replication-offset-checkpoint",
    "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint",
    "cleaner-offset-checkpoint",
    "meta.properties",
)


@dataclass
class NodeEvidence:
    """What was had of one node, and what not (with why)."""

    node: str
    data_archive: str | None = None  # relative to evidence/
    data_bytes: int = 0
    partitions: list[str] = field(default_factory=list)
    dumps: dict[str, str] = field(default_factory=dict)  # a log -> its dump, relative
    missing: list[str] = field(default_factory=list)
    copy_seconds: float = 0.0
    decode_seconds: float = 0.0


def topic_of(dir_name: str) -> str | None:
    """The topic of a partition directory (`<topic>-<n>`), None for anything else."""
    topic, sep, number = dir_name.rpartition("-")
    return topic if sep and number.isdigit() else None


def wanted_member(path: str, topics: Iterable[str]) -> bool:
    """Whether a member of a data directory's archive (`data/<dir>/<file>`, as Docker names
    them) is evidence: a checkpoint file, or a file of a partition of the run's topics or of
    the transaction and metadata logs."""
    parts = Path(path).parts[1:]
    if len(parts) == 1:
        return parts[0] in CHECKPOINTS
    if len(parts) < 2:
        return False
    if parts[-1].endswith(INDEX_SUFFIXES):
        return False
    topic = topic_of(parts[0])
    return topic is not None and (topic in set(topics) or topic in (TRANSACTION_LOG, METADATA_LOG))


class _Chunks(io.RawIOBase):
    """A raw stream over the chunks Docker streams an archive in."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._left = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._left:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._left = chunk
        n = min(len(buffer), len(self._left))
        buffer[:n] = self._left[:n]
        self._left = self._left[n:]
        return n


def chunk_reader(chunks: Iterable[bytes]) -> IO[bytes]:
    return io.BufferedReader(_Chunks(chunks), buffer_size=1 << 20)


def filter_archive(
    source: IO[bytes], sink: IO[bytes], topics: list[str], cap: int, deadline: float
) -> tuple[list[str], int, str | None]:
    """Copies the wanted members of a tar stream into another: the partition directories it
    kept, the bytes, and why it stopped early (None: it did not)."""
    kept: set[str] = set()
    size = 0
    stopped = None
    with (
        tarfile.open(fileobj=source, mode="r|") as src,
        tarfile.open(fileobj=sink, mode="w|") as out,
    ):
        for member in src:
            if time.monotonic() > deadline:
                stopped = f"copy stopped after {COPY_TIMEOUT_S:.0f} s"
                break
            if not wanted_member(member.name, topics):
                continue
            if member.isfile() and size + member.size > cap:
                stopped = f"copy stopped at the cap of {cap // 2**20} MiB"
                break
            out.addfile(member, src.extractfile(member) if member.isfile() else None)
            size += member.size
            parts = Path(member.name).parts
            if len(parts) >= 3:
                kept.add(parts[1])
    return sorted(kept), size, stopped


def copy_data(
    container: Any, node: str, topics: list[str], out_dir: Path, cap_bytes: int
) -> NodeEvidence:
    """The node's data files of the run's partitions, as `<node>-data.tar.zst` in `out_dir`,
    read from the container whether it runs or not: a running node's own tar leaves the
    preallocated indexes out; a stopped one's directory comes whole through Docker's archive
    and is filtered here."""
    started = time.monotonic()
    evidence = NodeEvidence(node)
    archive = out_dir / f"{node}-data.tar.zst"
    deadline = started + COPY_TIMEOUT_S
    try:
        with archive.open("wb") as raw, compressing(raw) as sink, _data_tar(container) as tar:
            kept, size, stopped = filter_archive(tar, sink, topics, cap_bytes, deadline)
        evidence.data_archive, evidence.partitions, evidence.data_bytes = archive.name, kept, size
        if stopped:
            evidence.missing.append(stopped)
    except Exception as e:  # noqa: BLE001 - evidence is best effort: the run goes on without it
        evidence.missing.append(f"data directory: {type(e).__name__}: {e}")
        archive.unlink(missing_ok=True)
    evidence.copy_seconds = round(time.monotonic() - started, 2)
    return evidence


@contextlib.contextmanager
def _data_tar(container: Any) -> Iterator[IO[bytes]]:
    """The data directory as a tar stream whose members are `data/...`."""
    parent, name = DATA_DIR.rsplit("/", 1)
    if container.status != "running":
        stream, _ = container.get_archive(DATA_DIR)
        yield chunk_reader(stream)
        return
    excludes = [f"--exclude=*{suffix}" for suffix in INDEX_SUFFIXES]
    argv = ["docker", "exec", container.id, "tar", "-C", parent, *excludes, "-cf", "-", name]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
        assert proc.stdout is not None
        try:
            yield proc.stdout
        finally:
            proc.kill()


def dump_commands(data: Path, topics: list[str]) -> dict[str, list[str]]:
    """Per dump (its file's stem), the DumpLogSegments arguments for every node's segments
    under `data` (`data/<node>/<partition>/`; paths as the decoding container sees them,
    /data/<node>/...): one run of the tool reads every node's, which a dump's "Dumping <file>"
    lines tell apart."""
    groups: dict[str, tuple[list[str], list[str]]] = {}
    for part in sorted(p for p in data.glob("*/*") if p.is_dir()):
        topic = topic_of(part.name)
        if topic == TRANSACTION_LOG:
            name, flags = "transaction-state", ["--transaction-log-decoder"]
        elif topic == METADATA_LOG:
            name, flags = "cluster-metadata", ["--cluster-metadata-decoder"]
        elif topic in topics:
            # Each record's payload names its message (producer and sequence): a lost or
            # duplicated message is then found on each replica by what it is, not where.
            name, flags = topic, ["--deep-iteration", "--print-data-log"]
        else:
            continue
        node = part.parent.name
        segments = [f"/data/{node}/{part.name}/{s.name}" for s in sorted(part.glob("*.log"))]
        if segments:
            groups.setdefault(name, (flags, []))[1].extend(segments)
    return {name: [*flags, "--files", ",".join(files)] for name, (flags, files) in groups.items()}


def decode_script(commands: dict[str, list[str]]) -> str:
    """A shell script for the decoding container: the dumps side by side, each into
    /out/<name>.txt with the tool's class of this release (the first that loads)."""
    lines = ["set -u"]
    for name, args in commands.items():
        argv = " ".join(shlex.quote(a) for a in args)
        tries = " || ".join(
            f"/opt/kafka/bin/kafka-run-class.sh {cls} {argv} >/out/{name}.txt 2>/out/{name}.err"
            for cls in DUMP_CLASSES
        )
        lines.append(f"( {tries} ) &")
    lines.append("wait")
    return "\n".join(lines) + "\n"


def split_by_node(text: str) -> dict[str, str]:
    """A dump of several nodes' files cut at each `Dumping /data/<node>/...` line, by node."""
    parts: dict[str, list[str]] = {}
    node = None
    for line in text.splitlines(keepends=True):
        if line.startswith("Dumping /data/"):
            node = line.removeprefix("Dumping /data/").split("/", 1)[0]
        if node is not None:
            parts.setdefault(node, []).append(line)
    return {n: "".join(lines) for n, lines in parts.items()}


def decode_all(image: str, topics: list[str], out_dir: Path, found: list[NodeEvidence]) -> None:
    """Kafka's own reading of every copied node's data files, in one container of the
    release's image with no network (three JVMs at most, whatever the cluster's size): each
    node's dumps zstd-compressed into `out_dir/<node>/`."""
    started = time.monotonic()
    copied = [e for e in found if e.data_archive is not None]
    if not copied:
        return
    with tempfile.TemporaryDirectory(prefix="bj-evidence-") as tmp:
        data, out = Path(tmp) / "data", Path(tmp) / "out"
        out.mkdir()
        for e in copied:
            node_dir = out_dir / e.node
            node_dir.mkdir(parents=True, exist_ok=True)
            _extract(out_dir / str(e.data_archive), data / e.node)
            _leader_epochs(data / e.node / "data", node_dir / "leader-epochs.txt")
            # The archive's own top folder goes: /data/<node>/<partition>/...
            for child in (data / e.node / "data").iterdir():
                child.rename(data / e.node / child.name)
            (data / e.node / "data").rmdir()
        commands = dump_commands(data, topics)
        if not commands:
            for e in copied:
                e.missing.append("no log segment to decode")
            return
        argv = [
            "docker", "run", "--rm", "--network", "none", "--hostname", "localhost",
            "--entrypoint", "bash", "-v", f"{data}:/data:ro", "-v", f"{out}:/out", image,
            "-c", decode_script(commands),
        ]  # fmt: skip
        try:
            subprocess.run(argv, capture_output=True, timeout=DECODE_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            for e in copied:
                e.missing.append(f"decoding timed out after {DECODE_TIMEOUT_S:.0f} s")
        for name in commands:
            _keep_dump(name, out, out_dir, copied)
    seconds = round(time.monotonic() - started, 2)
    for e in copied:
        e.decode_seconds = seconds


def _keep_dump(name: str, out: Path, out_dir: Path, copied: list[NodeEvidence]) -> None:
    """One dump of every node, split and kept per node; a node it says nothing of is said."""
    text_file = out / f"{name}.txt"
    text = text_file.read_text(errors="replace") if text_file.exists() else ""
    by_node = split_by_node(text)
    err_file = out / f"{name}.err"
    err = err_file.read_text(errors="replace") if err_file.exists() else ""
    for e in copied:
        if e.node not in by_node:
            if any(topic_of(p) is not None and _dump_name(p) == name for p in e.partitions):
                e.missing.append(f"{name} not decoded: {_last_line(err)}")
            continue
        target = out_dir / e.node / f"{name}.dump.txt.zst"
        target.write_bytes(zstandard.ZstdCompressor(level=LEVEL).compress(by_node[e.node].encode()))
        e.dumps[name] = str(target.relative_to(out_dir))


def _dump_name(partition: str) -> str:
    topic = topic_of(partition) or ""
    return {TRANSACTION_LOG: "transaction-state", METADATA_LOG: "cluster-metadata"}.get(
        topic, topic
    )


def _extract(archive: Path, into: Path) -> None:
    with archive.open("rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as src:
        with tarfile.open(fileobj=src, mode="r|") as tar:
            tar.extractall(into, filter="data")


def _leader_epochs(data: Path, target: Path) -> None:
    """Every partition's leader-epoch checkpoint in one file: `<partition>: <epoch> <offset>`."""
    lines = []
    for checkpoint in sorted(data.glob("*/leader-epoch-checkpoint")):
        body = checkpoint.read_text(errors="replace").splitlines()[2:]  # version, count
        lines += [f"{checkpoint.parent.name}: {entry}" for entry in body]
    target.write_text("".join(f"{line}\n" for line in lines))


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


def find_hanging(cluster: ComposeCluster, broker: str, broker_id: int, out_dir: Path) -> str | None:
    """Kafka's own list of the transactions a broker holds open with no coordinator state
    behind them (`kafka-transactions.sh find-hanging`), kept as `<broker>/find-hanging.txt`;
    None, or why there is no answer."""
    argv = [
        "/opt/kafka/bin/kafka-run-class.sh", "org.apache.kafka.tools.TransactionsCommand",
        "--bootstrap-server", f"localhost:{INTERNAL_PORT}", "find-hanging",
        "--broker-id", str(broker_id),
    ]  # fmt: skip
    try:
        answer = cluster.run_in(broker, argv, "find-hanging", FIND_HANGING_TIMEOUT_S)
    except ComposeError as e:
        return str(e)[:300]
    node_dir = out_dir / broker
    node_dir.mkdir(parents=True, exist_ok=True)
    (node_dir / "find-hanging.txt").write_text(answer)
    return None


# ZooKeeper's own reading of its transaction log (every create, setData and delete with its
# time): in ZooKeeper mode the partitions' leaders and ISRs, the controller and the brokers'
# registrations live there, as KRaft's live in its metadata log. The local image's paths.
ZOOKEEPER_DUMP = (
    "for f in /var/lib/zookeeper/version-2/log.*; do "
    "java -Xmx128m -cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar "
    'org.apache.zookeeper.server.persistence.TxnLogToolkit --dump --yes "$f"; done'
)


def zookeeper_txns(cluster: ComposeCluster, node: str, out_dir: Path) -> NodeEvidence:
    """One ZooKeeper node's transaction log as its own TxnLogToolkit prints it, kept as
    `<node>/zookeeper-txns.txt.zst` (every node's: a node cut off in a partition logged less)."""
    started = time.monotonic()
    evidence = NodeEvidence(node)
    try:
        answer = cluster.run_in(
            node, ["bash", "-c", ZOOKEEPER_DUMP], ZOOKEEPER_TXNS, DECODE_TIMEOUT_S
        )
    except ComposeError as e:
        evidence.missing.append(f"{ZOOKEEPER_TXNS}: {str(e)[:300]}")
    else:
        evidence.dumps[ZOOKEEPER_TXNS] = keep_text(out_dir, node, ZOOKEEPER_TXNS, answer)
    evidence.decode_seconds = round(time.monotonic() - started, 2)
    return evidence


def collect_zookeeper(
    cluster: ComposeCluster, nodes: list[str], out_dir: Path
) -> list[NodeEvidence]:
    """Every running ZooKeeper node's transaction log, the nodes in parallel."""
    containers = cluster.containers()
    running = [n for n in nodes if n in containers and containers[n].status == "running"]
    out_dir.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=max(1, len(running))) as pool:
        found = list(pool.map(lambda n: zookeeper_txns(cluster, n, out_dir), running))
    return found + [NodeEvidence(n, missing=["not running"]) for n in nodes if n not in running]


def collect(
    containers: dict[str, Any],
    nodes: list[str],
    topics: list[str],
    out_dir: Path,
    cap_mib: int = DATA_CAP_MIB,
) -> list[NodeEvidence]:
    """Each node's data files copied out (at most `cap_mib` MiB a node), the nodes in parallel
    (before the cluster comes down)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    present = [n for n in nodes if n in containers]
    cap = cap_mib * 2**20
    with ThreadPoolExecutor(max_workers=max(1, len(present))) as pool:
        found = list(pool.map(lambda n: copy_data(containers[n], n, topics, out_dir, cap), present))
    found += [NodeEvidence(n, missing=["no container"]) for n in nodes if n not in containers]
    return found
