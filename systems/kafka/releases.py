"""Which Kafka a run uses: a release line ("4.4") or a release ("4.4.0"), any from 3.7 on, and the
local image that carries it, built from Maven Central's jars on first use.

`make setup` builds the releases `compose/images/releases.txt` names; any other release builds
when a run first asks for it (`compose/images/build_kafka_image.sh`, about a minute with the
jars downloaded). Maven Central's list of releases (its `maven-metadata.xml`) is what a line
resolves against and what an unknown version is answered with.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Iterable

from compose.releases import RELEASE_PATTERN, RELEASES_FILE, SPEC_PATTERN
from contract.versions import line_of, on_spec
from contract.versions import version_key as _version
from systems.scenario import ScenarioError

BUILD_SCRIPT = RELEASES_FILE.parent / "build_kafka_image.sh"
MAVEN_CENTRAL = "https://repo.maven.apache.org/maven2"
METADATA_PATH = "org/apache/kafka/kafka_2.13/maven-metadata.xml"
OLDEST = (3, 7)  # the oldest line the images and the clients are known to run
BUILD_TIMEOUT_S = 20 * 60
SPEC = re.compile(SPEC_PATTERN)


class KafkaReleaseError(ScenarioError):
    """A Kafka version the harness cannot run: one line saying why and what there is."""


def check_spec(spec: str) -> str:
    """A --kafka value: a line or a release, from 3.7 on."""
    if not SPEC.match(spec):
        raise KafkaReleaseError(
            f"--kafka takes a release line or release (4.4, 4.4.0), not {spec!r}"
        )
    if _version(spec)[:2] < OLDEST:
        oldest = ".".join(map(str, OLDEST))
        raise KafkaReleaseError(
            f"Kafka {spec} is older than {oldest}, the oldest line this harness runs"
        )
    return spec


def maven_releases(timeout_s: float = 15.0) -> list[str] | None:
    """Every Kafka release Maven Central lists (MAVEN_CENTRAL overrides its address), oldest
    first; None when it cannot be read."""
    base = os.environ.get("MAVEN_CENTRAL", MAVEN_CENTRAL).rstrip("/")
    try:
        with urllib.request.urlopen(f"{base}/{METADATA_PATH}", timeout=timeout_s) as response:
            root = ET.fromstring(response.read())
    except (OSError, urllib.error.URLError, ET.ParseError, ValueError):
        return None
    found = (v.text or "" for v in root.iter("version"))
    return sorted((v for v in found if re.fullmatch(RELEASE_PATTERN, v)), key=_version)


def newest_per_line(releases: Iterable[str], lines: int = 4) -> list[str]:
    """The newest release of each of the newest `lines` lines, newest first."""
    newest: dict[str, str] = {}
    for r in sorted(releases, key=_version):
        newest[line_of(r)] = r
    return sorted(newest.values(), key=_version, reverse=True)[:lines]


def resolve(spec: str, local: Iterable[str], maven: list[str] | None) -> str:
    """The release a line or release means: a local image's when one matches, else the newest
    on Maven Central that matches."""
    check_spec(spec)
    have = sorted((v for v in local if on_spec(v, spec)), key=_version)
    if have:
        return have[-1]
    if maven is None:
        raise KafkaReleaseError(
            f"no local image of Kafka {spec}, and Maven Central cannot be read to build one "
            "(set MAVEN_CENTRAL to a reachable mirror)"
        )
    offered = [v for v in maven if on_spec(v, spec) and _version(v)[:2] >= OLDEST]
    if not offered:
        newest = ", ".join(newest_per_line(v for v in maven if _version(v)[:2] >= OLDEST))
        raise KafkaReleaseError(
            f"Kafka {spec} is not on Maven Central; its newest releases: {newest}"
        )
    return offered[-1]


def build_image(release: str, progress: bool | None = None) -> None:
    """Builds brokerjepsen/kafka:<release>-debian from Maven Central, bounded in time. On a
    terminal the build's steps are shown as they happen; elsewhere only a failure's last lines."""
    show = sys.stderr.isatty() if progress is None else progress
    env = {**os.environ, "KAFKA_VERSIONS": release, "KAFKA_TARBALL": ""}
    try:
        done = subprocess.run(
            ["bash", str(BUILD_SCRIPT)],
            env=env,
            stdout=None if show else subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise KafkaReleaseError(
            f"building the Kafka {release} image took over {BUILD_TIMEOUT_S // 60} min; gave up"
        ) from None
    if done.returncode != 0:
        last = (done.stdout or "").strip().splitlines()[-1:] or ["see the output above"]
        raise KafkaReleaseError(f"could not build the Kafka {release} image: {last[0]}")
