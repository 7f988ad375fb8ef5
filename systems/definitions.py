"""A release's own definitions of what it takes (Kafka's config definitions, RabbitMQ's
rabbitmq.conf settings), wherever they are had: the JSON committed for the releases setup
builds, else the copy in the local cache, else the release's image, read by one short
container into the cache. What the definitions say, and the check of a key against them, is
each system's own.
"""

from __future__ import annotations

import re
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Literal, TypeVar, overload

from compose.releases import RELEASE_PATTERN, releases_named_in
from contract.cache import cache_root, write_whole
from contract.versions import version_key

T = TypeVar("T")
Out = TypeVar("Out", str, bytes)


@dataclass(frozen=True)
class ReleaseFiles(Generic[T]):
    """Where one system's definitions are kept, one JSON file a release: `committed_dir` in the
    repository, `cache_name` under the local cache; `parse` reads a file (None when it is of
    another format or unreadable)."""

    committed_dir: Path
    cache_name: str
    parse: Callable[[str], T | None]

    def cache_dir(self) -> Path:
        return cache_root() / self.cache_name

    def committed(self, release: str) -> Path:
        return self.committed_dir / f"{release}.json"

    def cached(self, release: str) -> Path:
        return self.cache_dir() / f"{release}.json"

    def committed_releases(self) -> list[str]:
        """The releases whose definitions are committed, oldest first."""
        return releases_named_in(self.committed_dir)

    def known_releases(self) -> list[str]:
        """The releases whose definitions are committed or cached, oldest first."""
        cached = (p.stem for p in self.cache_dir().glob("*.json"))
        found = {*self.committed_releases(), *(r for r in cached if re.match(RELEASE_PATTERN, r))}
        return sorted(found, key=version_key)

    def read(self, path: Path) -> T | None:
        try:
            return self.parse(path.read_text())
        except OSError:
            return None

    def kept(self, release: str) -> T | None:
        """A release's definitions as committed, else as cached; None when neither holds them."""
        for path in (self.committed(release), self.cached(release)):
            if (found := self.read(path)) is not None:
                return found
        return None

    def here(self, release: str) -> bool:
        """Whether a file of the release's definitions is committed or cached."""
        return any(path.exists() for path in (self.committed(release), self.cached(release)))

    def keep(self, release: str, text: str) -> None:
        """Writes a release's definitions into the cache; an unwritable cache costs a container
        a run, nothing else."""
        try:
            write_whole(self.cached(release), text)
        except OSError:
            pass


# ---- reading them from an image -------------------------------------------------------------


@overload
def docker(
    args: list[str], timeout: float, missing: Exception, text: Literal[True]
) -> subprocess.CompletedProcess[str]: ...
@overload
def docker(
    args: list[str], timeout: float, missing: Exception, text: Literal[False]
) -> subprocess.CompletedProcess[bytes]: ...
def docker(
    args: list[str], timeout: float, missing: Exception, text: bool
) -> subprocess.CompletedProcess[str] | subprocess.CompletedProcess[bytes]:
    """One docker command, its output captured; `missing` raised when there is no docker."""
    try:
        return subprocess.run(
            ["docker", *args], capture_output=True, text=text, timeout=timeout, check=False
        )
    except FileNotFoundError:
        raise missing from None


Docker = Callable[[list[str], float], subprocess.CompletedProcess[Out]]


def has_image(run: Docker[Out], image: str) -> bool:
    return run(["image", "inspect", image], 60).returncode == 0


def run_once(
    run: Docker[Out], purpose: str, args: list[str], timeout_s: float, late: Exception
) -> subprocess.CompletedProcess[Out]:
    """One short container without a network (`args` after `docker run --rm --name N --network
    none`), named brokerjepsen-<purpose>-...; when it outlasts `timeout_s` the client gave up,
    not the container: it is removed rather than left running, and `late` raised."""
    name = f"brokerjepsen-{purpose}-{uuid.uuid4().hex[:12]}"
    try:
        return run(["run", "--rm", "--name", name, "--network", "none", *args], timeout_s)
    except subprocess.TimeoutExpired:
        run(["rm", "-f", name], 60)
        raise late from None
