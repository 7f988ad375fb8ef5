"""The fake clock of a Kafka or ZooKeeper node: a Java agent (compose/clock-agent/) that rewrites
the time-of-day reads of Kafka's and ZooKeeper's classes, as they load, to add the node's offset
from its clock file (compose.clocks). RabbitMQ's nodes get theirs from libfaketime instead;
docs/clock-faults.md says why a JVM does not.

`make setup` builds the jar once (ASM from Maven Central, by Maven; the agent's classes by
javac); a cluster with `fake_clock` mounts its directory into each Kafka and ZooKeeper node.
The directory is named by a digest of what the build reads (the sources, the pom, the
manifest): a checkout whose sources differ builds its own, and a finished one is never removed
or replaced, so a running cluster's mount stays whole whatever another checkout builds.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

from compose.cli import ComposeError
from contract.cache import cache_root, exclusive

SOURCE_DIR = Path(__file__).parent / "clock-agent"
SOURCES = tuple(sorted(SOURCE_DIR.rglob("*.java")))
JAR = "clock-agent.jar"
CONTAINER_DIR = "/opt/brokerjepsen-clock-agent"  # where a node sees the jar's directory
BUILD_TIMEOUT = 600.0  # seconds: Maven's first download of ASM
JAVA_RELEASE = "17"  # the images' JVM


class ClockAgentError(ComposeError):
    """The agent cannot be built here; the message is one line for the user (a cluster that
    needs it cannot start, as for any other reason compose gives)."""


def build_inputs() -> list[Path]:
    """Every file the build reads: what a change of makes another agent."""
    return [*SOURCES, SOURCE_DIR / "pom.xml", SOURCE_DIR / "MANIFEST.MF"]


@cache
def digest() -> str:
    """A short digest of the build's inputs, by their paths under SOURCE_DIR and contents."""
    h = hashlib.sha256()
    for path in sorted(build_inputs()):
        h.update(path.relative_to(SOURCE_DIR).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def agent_dir() -> Path:
    return cache_root() / "clock-agent" / digest()


def built() -> bool:
    return (agent_dir() / JAR).exists()


def ensure() -> Path:
    """The agent's directory (holding JAR), built unless it is already: one build at a time
    (a lock beside the builds), each into a staging directory renamed into place once whole."""
    if built():
        return agent_dir()
    for tool in ("mvn", "javac", "jar"):
        if shutil.which(tool) is None:
            raise ClockAgentError(f"the clock agent needs {tool} (make setup installs it)")
    d = agent_dir()
    d.parent.mkdir(parents=True, exist_ok=True)
    with exclusive(d.parent / "lock"):
        if built():  # another build finished while this one waited
            return d
        staging = Path(tempfile.mkdtemp(prefix=".building-", dir=d.parent))
        staging.chmod(0o755)  # mkdtemp's is 0700; a broker's user reads the jar
        try:
            _build(staging)
            out = staging / "out"
            out.chmod(0o755)
            out.rename(d)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return d


def _build(staging: Path) -> None:
    """ASM's classes and the agent's, in one jar (the agent runs on the JVM's class path, before
    Kafka's jars are looked at: nothing else there needs to be found)."""
    lib, classes, out = staging / "lib", staging / "classes", staging / "out"
    for d in (classes, out):
        d.mkdir()
    _run(
        [
            "mvn",
            "-q",
            "-B",
            "-f",
            str(SOURCE_DIR / "pom.xml"),
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={lib}",
        ],
        "Maven could not resolve ASM for the clock agent",
    )
    for dependency in sorted(lib.glob("*.jar")):
        _run(["jar", "xf", str(dependency)], "could not unpack ASM", cwd=classes)
    # ASM's manifest is not the agent's, and its module descriptor would make javac compile the
    # agent as part of ASM's module (which does not read java.instrument).
    shutil.rmtree(classes / "META-INF", ignore_errors=True)
    (classes / "module-info.class").unlink(missing_ok=True)
    _run(
        ["javac", "-nowarn", "--release", JAVA_RELEASE, "-cp", str(classes), "-d", str(classes)]
        + [str(s) for s in SOURCES],
        "javac could not compile the clock agent",
    )
    _run(
        ["jar", "cfm", str(out / JAR), str(SOURCE_DIR / "MANIFEST.MF"), "-C", str(classes), "."],
        "could not pack the clock agent",
    )
    (out / JAR).chmod(0o644)


def _run(argv: list[str], failure: str, cwd: Path | None = None) -> None:
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False, cwd=cwd
        )
    except subprocess.TimeoutExpired:
        raise ClockAgentError(f"{failure}: no answer in {BUILD_TIMEOUT:.0f} s") from None
    if proc.returncode != 0:
        said = (proc.stdout + proc.stderr).strip().splitlines()
        raise ClockAgentError(f"{failure}: {said[-1] if said else f'exit {proc.returncode}'}")


# What the agent says on a JVM's stderr when it starts, and of a class it could not rewrite.
STARTED = "brokerjepsen clock agent: the time of day is offset by"
LEFT_ON_TRUE_TIME = "left on true time"


def java_option(clock_file: str) -> str:
    """The JVM option that puts a node's Kafka (or ZooKeeper) under its clock file."""
    return f"-javaagent:{CONTAINER_DIR}/{JAR}={clock_file}"


def main() -> int:
    try:
        print(f"clock agent: {ensure() / JAR}")
    except ClockAgentError as e:
        print(f"clock agent: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
