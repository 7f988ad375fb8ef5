"""Noticing the Docker engine going away in the middle of a run.

A run follows the engine's event stream from its start; the stream ends only when we close it
or when the engine stops (a restart, a crash, a socket gone). A run that lost its engine did not
do to the cluster what its scenario says, whatever its history looks like afterwards: it could
not be carried out.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import docker
import docker.errors


class EngineLost(Exception):
    """The Docker engine stopped answering during a run; one line for the user."""


class EngineWatch:
    def __init__(self, client: docker.DockerClient) -> None:
        self._client = client
        self._stream: Any = client.events(decode=True)
        self._closing = False
        self.lost_at: float | None = None  # Unix time the stream ended by itself
        self._thread = threading.Thread(target=self._follow, name="engine-watch", daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        try:
            for _ in self._stream:
                pass
        except Exception:  # noqa: BLE001 - however the stream breaks, the engine went away
            pass
        if not self._closing:
            self.lost_at = time.time()

    def lost(self, during: str, wait: float = 0.0) -> EngineLost | None:
        """What to raise when the engine went away (`during`: the phase), else None. With
        `wait` (after an error), the engine is asked too: one shutting down stops answering
        well before it ends its event stream."""
        if wait and self.lost_at is None:
            self._thread.join(wait)
            try:
                self._client.ping()
            except Exception:  # noqa: BLE001 - any failure to answer is the engine's
                self.lost_at = time.time()
        if self.lost_at is None:
            return None
        at = time.strftime("%H:%M:%S", time.localtime(self.lost_at))
        return EngineLost(f"the Docker engine went away at {at}, during the {during}")

    def close(self) -> None:
        self._closing = True
        try:
            self._stream.close()
        except Exception:  # noqa: BLE001 - an engine already gone has nothing to close
            pass
