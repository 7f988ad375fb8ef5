"""What a step that restarts Kafka nodes one at a time (an upgrade, a migration's phases) uses of
the Kafka nemesis (systems.kafka.nemesis): a protocol, so that neither module imports the other."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from nemesis.containers import Nemesis


class NodeSteps(Protocol):
    net: Nemesis

    def _rejoined(self, broker: int) -> bool:
        """The broker registered and in the ISR of every partition it replicates."""
        ...

    @property
    def history(self) -> Any: ...

    def roles_now(self) -> Any: ...

    def _log_resolution(
        self,
        op: str,
        roles: dict[str, str],
        nodes: dict[str, list[str]],
        partition: int | None,
        also: Iterable[str] = (),
        now: Any = None,
    ) -> None: ...
