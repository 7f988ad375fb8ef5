"""The nemesis's own logic, apart from any engine: what it does when Docker refuses a fault."""

from __future__ import annotations

from typing import Any, cast

import docker.errors
import pytest
from docker.models.containers import Container

from nemesis.faults import FREEZE_ATTEMPTS, NemesisError, freeze

RUNC_REFUSAL = "OCI runtime pause failed: unable to freeze: unknown"


class Freezer:
    """A container whose pause fails the first `refusals` times, as runc's does on cgroup v1."""

    def __init__(self, refusals: int, explanation: str = RUNC_REFUSAL) -> None:
        self.refusals = refusals
        self.explanation = explanation
        self.calls = 0

    def pause(self) -> None:
        self.calls += 1
        if self.calls <= self.refusals:
            raise docker.errors.APIError("500 Server Error", explanation=self.explanation)


def as_container(fake: Any) -> Container:
    return cast(Container, fake)


def test_a_pause_refused_by_the_freezer_is_tried_again_and_counted() -> None:
    node = Freezer(refusals=1)
    assert freeze(as_container(node), "rabbit2") == 2
    assert node.calls == 2


def test_a_pause_the_freezer_keeps_refusing_is_one_line_after_bounded_attempts() -> None:
    node = Freezer(refusals=99)
    with pytest.raises(NemesisError, match="cannot pause rabbit2: .*unable to freeze"):
        freeze(as_container(node), "rabbit2")
    assert node.calls == FREEZE_ATTEMPTS


def test_other_refusals_are_not_retried() -> None:
    node = Freezer(refusals=1, explanation="Container abc is not running")
    with pytest.raises(NemesisError, match="is not running"):
        freeze(as_container(node), "rabbit2")
    assert node.calls == 1
