"""The broker releases `make setup` builds as local images (`compose/images/releases.txt`, which
the image scripts read too): one place for the versions the harness ships with."""

from __future__ import annotations

import re
from pathlib import Path

from contract.versions import version_key

RELEASES_FILE = Path(__file__).resolve().parent / "images" / "releases.txt"
# What a user names a version by: a release line ("4.4") or a release ("4.4.0").
SPEC_PATTERN = r"^\d+\.\d+(\.\d+)?$"
RELEASE_PATTERN = r"^\d+\.\d+\.\d+$"


def setup_releases(kind: str, releases_file: Path = RELEASES_FILE) -> tuple[str, ...]:
    """The releases of one broker ("kafka", "rabbitmq") setup builds, oldest first."""
    rows = (line.split() for line in releases_file.read_text().splitlines())
    found = (r[1] for r in rows if len(r) >= 2 and r[0] == kind)
    return tuple(sorted(found, key=version_key))


def releases_named_in(folder: Path) -> list[str]:
    """The releases a folder holds a `<release>.json` of (committed definitions, a cache),
    oldest first."""
    found = (p.stem for p in folder.glob("*.json"))
    return sorted((r for r in found if re.match(RELEASE_PATTERN, r)), key=version_key)
