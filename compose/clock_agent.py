"""The fake clock of a Kafka or ZooKeeper node: a Java agent (compose/clock-agent/) that rewrites
the time-of-day reads of Kafka's and ZooKeeper's classes, as they load, to add the node's offset
from its clock file (compose.clocks). RabbitMQ's nodes get theirs from libfaketime instead;
docs/clock-faults.md says why a JVM does not.

`make setup` builds the jar once (ASM from Maven Central, by Maven; the agent's classes by
javac); a cluster with `fake_clock` mounts its directory into each Kafka and ZooKeeper node.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from compose.cli import ComposeError
from contract.cache import cache_root

SOURCE_DIR = Path(__file__).parent / "clock-agent"
SOURCES = tuple(sorted(SOURCE_DIR.rglob("*.java")))
JAR = "clock-agent.jar"
CONTAINER_DIR = "/opt/brokerjepsen-clock-agent"  # where a node sees the jar's directory
BUILD_TIMEOUT = 600.0  # seconds: Maven's first download of ASM
JAVA_RELEASE = "17"  # the images' JVM


class ClockAgentError(ComposeError):
    """The agent cannot be built here; the message is one line for the user (a cluster that
    needs it cannot start, as for any other reason compose gives)."""


def agent_dir() -> Path:
    return cache_root() / "clock-agent"


def built() -> bool:
    """The jar is there and newer than every source and the build's own description."""
    jar = agent_dir() / JAR
    if not jar.exists():
        return False
    newest = max(p.stat().st_mtime for p in (*SOURCES, SOURCE_DIR / "pom.xml", Path(__file__)))
    return jar.stat().st_mtime >= newest


def ensure() -> Path:
    """The agent's directory (holding JAR), built unless it is already."""
    if built():
        return agent_dir()
    for tool in ("mvn", "javac", "jar"):
        if shutil.which(tool) is None:
            raise ClockAgentError(f"the clock agent needs {tool} (make setup installs it)")
    d = agent_dir()
    d.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".clock-agent.building-", dir=d.parent))
    staging.chmod(0o755)  # mkdtemp's is 0700; a broker's user reads the jar
    try:
        _build(staging)
        if built():  # another build finished first
            return d
        shutil.rmtree(d, ignore_errors=True)
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
