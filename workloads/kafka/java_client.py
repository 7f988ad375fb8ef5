"""Kafka's own Java client for the transactional workload: TransactionalProducer.java compiled
against the release's kafka-clients, so that a 4.x cluster is spoken to with KIP-890's
transaction protocol (TV2), which confluent-kafka (librdkafka) does not speak.

Per release, the cache holds `lib/` (kafka-clients and its run-time jars, from Maven Central by
Maven, whose local repository keeps them) and `classes/` (javac's output); `make setup` builds it
for every local Kafka image's release, and a run builds a missing one before its clients start.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from compose.releases import setup_releases
from contract.cache import cache_root

SOURCE = Path(__file__).parent / "java" / "TransactionalProducer.java"
POM = Path(__file__).parent / "java" / "pom.xml"
MAIN_CLASS = "TransactionalProducer"
BUILD_TIMEOUT = 600.0  # seconds: Maven's first download of a release's jars


class JavaClientError(Exception):
    """The Java client cannot be built here; the message is one line for the user."""


def client_dir(version: str) -> Path:
    return cache_root() / "java-client" / version


def classpath(version: str) -> str:
    d = client_dir(version)
    return f"{d / 'classes'}:{d / 'lib'}/*"


def built(version: str) -> bool:
    classes = client_dir(version) / "classes" / f"{MAIN_CLASS}.class"
    return classes.exists() and classes.stat().st_mtime >= SOURCE.stat().st_mtime


def ensure(version: str) -> Path:
    """The release's client, built unless it is already: its directory."""
    if built(version):
        return client_dir(version)
    for tool in ("mvn", "javac"):
        if shutil.which(tool) is None:
            raise JavaClientError(f"the Java client needs {tool} (make setup installs it)")
    d = client_dir(version)
    staging = d.with_name(f".{version}.building")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
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
            str(SOURCE),
        ],
        "javac could not compile the Java client",
    )
    shutil.rmtree(d, ignore_errors=True)
    staging.rename(d)
    return d


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
