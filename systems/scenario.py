"""What every scenario file has, whatever its system: an id, what the configuration promises,
the client errors it must show, and the bound of each phase. Each system (systems/<name>/
scenario.py) adds its cluster, workload and nemesis steps; the ops a step may name are the fault
registry's.

A scenario is YAML validated with pydantic; an invalid one is reported as one line naming the
field, never as a traceback.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from contract.expectations import known_expectation
from faults.registry import System, check_op


def _joined(value: object) -> object:
    return "+".join(str(v) for v in value) if isinstance(value, list) else value


Expectation = Annotated[str, BeforeValidator(_joined), AfterValidator(known_expectation)]


def fault_op(system: System) -> AfterValidator:
    """A step's `op`: one of the fault registry's ops for `system`."""

    def known(name: str) -> str:
        return check_op(system, name)

    return AfterValidator(known)


class ScenarioError(Exception):
    """A scenario file that cannot be used; the message is one line for the user."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Timeouts(Strict):
    cluster_up: Annotated[float, Field(gt=0, le=1800)] = 240.0
    workload: Annotated[float, Field(gt=0, le=7200)] = 600.0
    recovery: Annotated[float, Field(gt=0, le=1800)] = 120.0


class ErrorExpectation(Strict):
    """Clients must see this: at least one `f` outcome (send, commit) that is not ok and whose
    error contains `error` (any error when empty)."""

    f: Literal["send", "commit"] = "send"
    error: str = ""


class ScenarioBase(Strict):
    """What every scenario has; each system adds its cluster, workload and nemesis steps."""

    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+$")]
    description: str = ""
    expect: Expectation
    expect_errors: list[ErrorExpectation] = Field(default_factory=list)
    timeouts: Timeouts = Timeouts()
    claim: str | None = None  # a row of the claims catalogue, e.g. "R1"; None for a baseline
    cluster: Any
    workload: Any
    nemesis: list[Any] = Field(default_factory=list)

    @model_validator(mode="after")
    def _ordered(self) -> ScenarioBase:
        times = [step.at for step in self.nemesis]
        if times != sorted(times):
            raise ValueError("nemesis steps must be in time order")
        return self


def first_error(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(top level)"
    msg = first["msg"].removeprefix("Value error, ")
    more = len(err.errors()) - 1
    return f"{where}: {msg}" + (f" (and {more} more)" if more else "")
