"""A policy a RabbitMQ scenario sets (cluster.policies): the scenario's schema declares it, and the
settings that check and apply it (systems.rabbitmq.settings) read it, without the rest of the
scenario."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, JsonValue

from systems.scenario import Strict

# What set_policy's --apply-to takes; 3.x only the first three (systems.rabbitmq.settings).
ApplyTo = Literal["all", "queues", "exchanges", "classic_queues", "quorum_queues", "streams"]


class Policy(Strict):
    """A policy set with rabbitmqctl set_policy once the cluster has formed, before the
    workload: RabbitMQ applies to each queue or exchange the one of highest priority whose
    pattern (a regular expression) its name matches."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:@-]+$")]
    pattern: Annotated[str, Field(min_length=1)]
    definition: Annotated[dict[str, JsonValue], Field(min_length=1)]
    apply_to: ApplyTo = "all"
    priority: int = 0
