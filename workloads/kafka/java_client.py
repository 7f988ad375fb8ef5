"""Kafka's own Java client for the transactional workload: TransactionalProducer.java compiled
against the release's kafka-clients, so that a 4.x cluster is spoken to with KIP-890's
transaction protocol (TV2), which confluent-kafka (librdkafka) does not speak.

Per release, the cache holds `lib/` (kafka-clients and its run-time jars, from Maven Central by
Maven, whose local repository keeps them) and `classes/` (javac's output); `make setup` builds it
for every local Kafka image's release, and a run builds a missing one before its clients start.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from compose.releases import setup_releases
from contract.cache import cache_root

log = logging.getLogger("workloads.kafka.java_client")

SOURCES = tuple(sorted((Path(__file__).parent / "java").glob("*.java")))
POM = Path(__file__).parent / "java" / "pom.xml"
MAIN_CLASS = "TransactionalProducer"  # the transactional producer's main class
COPIER_CLASS = "TransactionalCopier"  # the exactly-once copier's
SHARE_CLASS = "ShareConsumer"  # the share consumer's (KIP-932)
BUILD_TIMEOUT = 600.0  # seconds: Maven's first download of a release's jars
DRAIN_RESEND = 5.0  # seconds between two SIGUSR1 to a Java client asked to drain, until it ends


class JavaClientError(Exception):
    """The Java client cannot be built here; the message is one line for the user."""


def client_dir(version: str) -> Path:
    return cache_root() / "java-client" / version


def classpath(version: str) -> str:
    d = client_dir(version)
    return f"{d / 'classes'}:{d / 'lib'}/*"


def built(version: str) -> bool:
    """Every source's class compiled, and none older than its source."""
    classes = client_dir(version) / "classes"
    for source in SOURCES:
        compiled = classes / f"{source.stem}.class"
        if not compiled.exists() or compiled.stat().st_mtime < source.stat().st_mtime:
            return False
    return True


def ensure(version: str) -> Path:
    """The release's client, built unless it is already: its directory."""
    if built(version):
        return client_dir(version)
    for tool in ("mvn", "javac"):
        if shutil.which(tool) is None:
            raise JavaClientError(f"the Java client needs {tool} (make setup installs it)")
    d = client_dir(version)
    d.parent.mkdir(parents=True, exist_ok=True)
    # A staging directory of this build's own: two clients of one run may build at once.
    staging = Path(tempfile.mkdtemp(prefix=f".{version}.building-", dir=d.parent))
    staging.chmod(0o755)  # mkdtemp's is 0700; the cache's directories are not private
    try:
        _build(version, staging)
        if built(version):  # another build finished first
            return d
        shutil.rmtree(d, ignore_errors=True)
        try:
            staging.rename(d)
        except OSError:
            if not built(version):  # not a build that finished in between: a real failure
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return d


def _build(version: str, staging: Path) -> None:
    """Maven's copy of the release's jars into staging/lib, javac's classes into
    staging/classes."""
    _run(
        [
            "mvn",
            "-q",
            "-B",
            "-f",
            str(POM),
            f"-Dkafka.version={version}",
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={staging / 'lib'}",
        ],
        f"Maven could not resolve kafka-clients {version}",
    )
    _run(
        [
            "javac",
            "-nowarn",
            "-cp",
            f"{staging / 'lib'}/*",
            "-d",
            str(staging / "classes"),
            *map(str, SOURCES),
        ],
        "javac could not compile the Java client",
    )


def _run(argv: list[str], failure: str) -> None:
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        raise JavaClientError(f"{failure}: no answer in {BUILD_TIMEOUT:.0f} s") from None
    if proc.returncode != 0:
        said = (proc.stdout + proc.stderr).strip().splitlines()
        raise JavaClientError(f"{failure}: {said[-1] if said else f'exit {proc.returncode}'}")


def _java_child() -> None:
    """A Java client's preexec: it ends with its Python parent, and a SIGUSR1 that comes before
    the JVM has installed its handler is ignored rather than fatal (it is sent again)."""
    from workloads.lifeline import die_with_parent

    die_with_parent()
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)


JAVA_CANNOT_START = 2  # a Java client's exit code here: it could not be built or started


def launch(
    what: str,
    version: str | None,
    properties: dict[str, str],
    props_path: Path,
    argv_of: Callable[[str], list[str]],
    deadline: float,
    slack: float,
    draining: Callable[[], bool],
) -> int:
    """A Java client of the release `version` (built unless it is), its properties written to
    `props_path`, run as `argv_of(classpath)` under `supervise`: its exit code, or
    JAVA_CANNOT_START (said in the log) when it cannot be built."""
    if not version:
        log.error("%s needs its kafka-clients release (java_version)", what)
        return JAVA_CANNOT_START
    try:
        ensure(version)
    except JavaClientError as e:
        log.error("%s", e)
        return JAVA_CANNOT_START
    props_path.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
    return supervise(argv_of(classpath(version)), deadline, slack, draining, what)


def supervise(
    argv: list[str], deadline: float, slack: float, draining: Callable[[], bool], what: str
) -> int:
    """Runs a Java client to its end and returns its exit code. Once `draining()` says so it is
    sent SIGUSR1 (the drain), again every DRAIN_RESEND seconds until it ends; `slack` seconds
    after its `deadline` (Unix time) it is killed (exit 1)."""
    give_up = time.monotonic() + max(1.0, deadline - time.time()) + slack
    proc = subprocess.Popen(argv, preexec_fn=_java_child)
    signalled = float("-inf")
    try:
        while True:
            try:
                return proc.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if draining() and now - signalled >= DRAIN_RESEND:
                proc.send_signal(signal.SIGUSR1)
                signalled = now
            if now >= give_up:
                log.error("%s did not end %.0f s after its deadline", what, slack)
                return 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workloads.kafka.java_client")
    parser.add_argument("releases", nargs="*", help="Kafka releases (default: the local images')")
    args = parser.parse_args(argv)
    releases = args.releases or list(setup_releases("kafka"))
    try:
        for release in releases:
            print(f"java client: kafka-clients {release} in {ensure(release)}")
    except JavaClientError as e:
        print(f"java client: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
