"""A real RabbitMQ cluster for a test module: up, yielded, and down whatever the tests did."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from systems.rabbitmq.cluster import NODE_NAMES, ClusterConfig, RabbitMQCluster


@contextmanager
def running_cluster(
    image: str,
    workdir: Path,
    nodes: tuple[str, ...] = NODE_NAMES[:3],
    timeout: float = 240,
) -> Iterator[RabbitMQCluster]:
    """pause_minority with a short net_ticktime, so a partition is seen in seconds; its own
    project and a free subnet, since another session may share the engine."""
    c = RabbitMQCluster(
        ClusterConfig(
            partition_handling="pause_minority", net_ticktime=4, image=image, nodes=nodes
        ),
        workdir=workdir,
        project=f"pytest{len(nodes)}-{os.getpid()}-{int(time.time())}",
    )
    try:
        c.up(timeout=timeout)
        yield c
    finally:
        c.down()
