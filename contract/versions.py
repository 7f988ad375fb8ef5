"""Broker versions as the harness compares them: a release ("4.4.0") and its line ("4.4"). In
the contract so that every layer (the images, the systems, the checker) compares them alike."""

from __future__ import annotations


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


def line_of(release: str) -> str:
    """The release line ("4.4") of a release or line."""
    return ".".join(release.split(".")[:2])


def on_spec(version: str, spec: str) -> bool:
    """Whether a release is what a line or release asks for ("4.4" holds 4.4.0)."""
    want = version_key(spec)
    return version_key(version)[: len(want)] == want
