"""RabbitMQ's 4.x release lines against a real three-node cluster, in the fast tier.

The gate keeps one end-to-end run on RabbitMQ's default line (the baseline on 3.10); on 4.0
and 4.3 it forms a cluster of the line's local build (cutting a node off and healing it is
nightly). Their end-to-end runs (R9-kill on 4.0, R10 on both) are nightly: each took 140-160 s
of the gate.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compose.cli import ComposeError
from systems.rabbitmq import confschema, key_check
from systems.rabbitmq.cluster import RabbitMQCluster, choose_image
from tests.conftest import missing
from tests.systems.rabbitmq.clusters import running_cluster
from tests.systems.rabbitmq.test_cluster import (
    forms_whole,
    isolating_cuts_off_and_heal_restores,
    nemesis_of,
)

pytestmark = pytest.mark.cluster
LINES = ("4.0", "4.3")


@pytest.fixture(scope="module", params=LINES)
def line_cluster(
    request: pytest.FixtureRequest, docker_client: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, RabbitMQCluster]]:
    line = str(request.param)
    try:
        image = choose_image(None, docker_client, line)
    except ComposeError as e:
        missing(str(e))
        raise
    with running_cluster(image, tmp_path_factory.mktemp(f"cluster-{line}")) as c:
        yield line, c


def test_a_cluster_of_the_line_forms_with_three_running_nodes(
    line_cluster: tuple[str, RabbitMQCluster],
) -> None:
    line, cluster = line_cluster
    assert cluster.server_version().startswith(line + ".")
    forms_whole(cluster)


def pauses_a_minority(cluster: RabbitMQCluster) -> bool:
    """Whether the release reads cluster_partition_handling, by its own schema: 4.3's says it
    no longer does (a minority is Khepri's Raft's business, and nothing pauses it:
    docs/claims-findings.md)."""
    schema = confschema.of_image(str(cluster.image), cluster.release())
    return not key_check.ignored(schema, ["cluster_partition_handling"])


# Nightly for its time: about 46 s of the gate for both lines.
@pytest.mark.nightly
def test_on_the_line_an_isolated_node_is_cut_off_and_heal_restores_it(
    line_cluster: tuple[str, RabbitMQCluster], tmp_path: Path
) -> None:
    _, cluster = line_cluster
    with nemesis_of(cluster, tmp_path) as nemesis:
        isolating_cuts_off_and_heal_restores(cluster, nemesis, pauses_a_minority(cluster))
