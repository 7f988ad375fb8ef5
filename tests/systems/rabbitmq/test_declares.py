"""RabbitMQ's metadata probe on the nemesis's side: the declare step asks its targets at once and
writes each answer to the nemesis history; after the heal each node is asked which probe queues
it lists, and they are deleted. Against a faked cluster and client; the shape of what is written
is what checkers.declares reads (tests/checkers/test_declares.py reads these very histories)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from compose.cli import ComposeError
from contract.history import HistoryWriter
from contract.topology import Endpoint, NodeHandle, Topology
from nemesis.containers import Nemesis, NemesisError
from systems.rabbitmq.declares import Declares, queue_name
from systems.rabbitmq.nemesis import apply_step
from systems.rabbitmq.scenario import NemesisStep
from workloads.rabbitmq.declare import DeclareAnswer

NODES = ("rabbit1", "rabbit2", "rabbit3")
REFUSAL = "541 INTERNAL_ERROR - ... because the metadata store operation timed out"


class FakeCluster:
    """Endpoints for every node, each node's queue list as `lists` says (a node in `silent`
    fails to answer), and the deletes asked."""

    def __init__(self, answers: dict[str, DeclareAnswer], barrier: int = 0) -> None:
        self.answers = answers
        self.lists: list[dict[str, list[str]]] = []  # one per reading; the last repeats
        self.readings = 0
        self.silent: set[str] = set()
        self.deleted: list[tuple[str, str]] = []
        self.refuse_delete: set[str] = set()
        self.asked: list[tuple[str, str, float]] = []
        # Every ask waits for the others: asked one after another, the step would never end.
        self.together = threading.Barrier(barrier, timeout=5) if barrier else None
        self.declares = Declares(self, list(NODES), ask=self.ask, sleep=lambda _s: None)

    def ask(self, endpoint: Endpoint, queue: str, within: float) -> DeclareAnswer:
        self.asked.append((endpoint.node, queue, within))
        if self.together is not None:
            self.together.wait()
        return self.answers[endpoint.node]

    def endpoints(self) -> list[Endpoint]:
        return [Endpoint(n, "127.0.0.1", 5670 + i) for i, n in enumerate(NODES, 1)]

    def queue_names(self, node: str) -> list[str]:
        if node == NODES[0]:  # a reading asks every node, the first first
            self.readings += 1
        if node in self.silent:
            raise ComposeError(f"rabbitmqctl list_queues on {node}: timed out\nmore")
        reading = self.lists[min(self.readings, len(self.lists)) - 1]
        return ["jepsen.primary", *reading.get(node, [])]

    def delete_queue(self, node: str, queue: str) -> None:
        if node in self.refuse_delete:
            raise ComposeError(f"rabbitmqctl delete_queue on {node}: refused")
        self.deleted.append((node, queue))


def nemesis(tmp_path: Path) -> Nemesis:
    topology = Topology(
        tuple(NodeHandle(n, n, f"10.0.0.{i}") for i, n in enumerate(NODES, 1)), "10.0.0.254"
    )
    net = Nemesis(
        topology,
        "unused",
        HistoryWriter(tmp_path, "nemesis", "rabbitmq"),
        client=cast(Any, object()),
    )
    net._apply_rules = lambda nodes: None  # type: ignore[method-assign]  # no iptables here
    return net


def events(tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / "nemesis.jsonl").read_text().splitlines()]


def declare(net: Nemesis, cluster: FakeCluster, *target: str, within: float = 45) -> None:
    step = NemesisStep.model_validate(
        {"at": 1, "op": "declare", "target": list(target), "within": within}
    )
    apply_step(net, cast(Any, cluster), step)


ANSWERS = {
    "rabbit1": DeclareAnswer("accepted", 0.021),
    "rabbit2": DeclareAnswer("accepted", 0.018),
    "rabbit3": DeclareAnswer("refused", 30.004, REFUSAL),
}


def test_a_declare_step_asks_every_target_at_once_and_writes_each_answer(tmp_path: Path) -> None:
    net, cluster = nemesis(tmp_path), FakeCluster(ANSWERS, barrier=2)
    declare(net, cluster, "rabbit3", "rabbit1")
    # Both asked together (the barrier), each its own queue, with the step's bound.
    assert sorted(cluster.asked) == [
        ("rabbit1", "bj-declare-1-rabbit1", 45),
        ("rabbit3", "bj-declare-1-rabbit3", 45),
    ]
    invoke, ok = events(tmp_path)
    queues = {"rabbit1": "bj-declare-1-rabbit1", "rabbit3": "bj-declare-1-rabbit3"}
    assert (invoke["type"], invoke["f"]) == ("invoke", "declare")
    assert invoke["value"] == {"nodes": ["rabbit1", "rabbit3"], "queues": queues, "within": 45}
    assert (ok["type"], ok["f"]) == ("ok", "declare")
    assert ok["value"]["answers"] == {
        "rabbit1": {"answer": "accepted", "seconds": 0.021, "error": ""},
        "rabbit3": {"answer": "refused", "seconds": 30.004, "error": REFUSAL},
    }
    # A second step names queues of its own.
    cluster.together = None
    declare(net, cluster, "rabbit2")
    assert cluster.declares.queues == [*queues.values(), queue_name(2, "rabbit2")]
    assert events(tmp_path)[-2]["value"]["queues"] == {"rabbit2": "bj-declare-2-rabbit2"}


def test_after_the_heal_each_node_says_which_probe_queues_it_lists_then_they_go(
    tmp_path: Path,
) -> None:
    net, cluster = nemesis(tmp_path), FakeCluster(ANSWERS)
    declare(net, cluster, "rabbit1", "rabbit3")
    # A store still catching up: the first reading differs from the next two, which agree.
    settled = {n: ["bj-declare-1-rabbit1"] for n in NODES}
    cluster.lists = [{"rabbit1": ["bj-declare-1-rabbit1"]}, settled, settled, {}]
    cluster.declares.after_heal(net)
    assert cluster.readings == 3  # read until two readings agreed, no further
    done = events(tmp_path)[-1]
    assert (done["type"], done["f"]) == ("ok", "declared")
    assert done["value"]["found"] == {
        "bj-declare-1-rabbit1": ["rabbit1", "rabbit2", "rabbit3"],
        "bj-declare-1-rabbit3": [],
    }
    assert done["value"]["asked"] == list(NODES) and done["value"]["unanswered"] == {}
    # Deleted once, through the first node that lists it; the workload's queue left alone.
    assert cluster.deleted == [("rabbit1", "bj-declare-1-rabbit1")]
    assert done["value"]["not_deleted"] == {}


def test_a_node_that_does_not_answer_after_the_heal_is_said_and_a_refused_delete_kept(
    tmp_path: Path,
) -> None:
    net, cluster = nemesis(tmp_path), FakeCluster(ANSWERS)
    declare(net, cluster, "rabbit3")
    cluster.lists = [{"rabbit3": ["bj-declare-1-rabbit3"]}]  # rabbit3 alone kept it (a split)
    cluster.silent = {"rabbit2"}
    cluster.refuse_delete = {"rabbit3"}
    cluster.declares.after_heal(net)
    done = events(tmp_path)[-1]["value"]
    assert done["found"] == {"bj-declare-1-rabbit3": ["rabbit3"]}
    assert done["asked"] == ["rabbit1", "rabbit3"]
    assert done["unanswered"] == {"rabbit2": "rabbitmqctl list_queues on rabbit2: timed out"}
    assert done["not_deleted"] == {
        "bj-declare-1-rabbit3": "rabbit3: rabbitmqctl delete_queue on rabbit3: refused"
    }


def test_no_declare_step_no_look_after_the_heal(tmp_path: Path) -> None:
    net, cluster = nemesis(tmp_path), FakeCluster(ANSWERS)
    cluster.declares.after_heal(net)
    assert not (tmp_path / "nemesis.jsonl").exists() or events(tmp_path) == []


def test_a_target_without_an_amqp_port_stops_the_step_before_anything_is_asked(
    tmp_path: Path,
) -> None:
    class NoPorts(FakeCluster):
        def endpoints(self) -> list[Endpoint]:
            return [Endpoint("rabbit1", "127.0.0.1", 5671)]

    net, cluster = nemesis(tmp_path), NoPorts(ANSWERS)
    with pytest.raises(NemesisError, match="declare: rabbit3 publishes no AMQP port"):
        declare(net, cluster, "rabbit1", "rabbit3")
    assert cluster.asked == [] and cluster.declares.queues == []


# ---- on a real RabbitMQ 4.3 cluster (the cluster tier) ---------------------------------------


@pytest.fixture(scope="module")
def cluster_43(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from systems.rabbitmq.cluster import choose_image
    from tests.conftest import missing
    from tests.systems.rabbitmq.clusters import running_cluster

    try:
        image = choose_image(None, docker_client, "4.3")
    except ComposeError as e:
        missing(str(e))
        raise
    with running_cluster(image, tmp_path_factory.mktemp("cluster-4.3")) as c:
        yield c


# Nightly: a 4.3 cluster of its own and Khepri's 30 s timeout waited out, besides the cut and the
# reunion (about 1.5 min with the cluster's start), as the other cut-and-heal tests of a line.
@pytest.mark.cluster
@pytest.mark.nightly
def test_on_khepri_an_isolated_node_refuses_a_declare_and_the_majority_takes_one(
    cluster_43: Any, tmp_path: Path
) -> None:
    """RK1 by hand on 4.3: rabbit3 isolated; rabbit1's declare accepted at once, rabbit3's
    refused after Khepri's 30 s (541, the metadata store operation timed out) or not answered
    in 45 s; after the heal rabbit1's queue is on every node and rabbit3's on none, as the
    checker reads the history."""
    from checkers.declares import declares_section
    from contract.wait import wait_until
    from tests.checkers.test_declares import KHEPRI
    from tests.systems.rabbitmq.test_cluster import assert_reunited, nemesis_of

    cluster = cluster_43
    with nemesis_of(cluster, tmp_path) as net:
        net.isolate(["rabbit3"])
        majority = {"rabbit@rabbit1", "rabbit@rabbit2"}
        assert wait_until(lambda: set(cluster.running_nodes("rabbit1")) == majority, 60)
        cluster.declares.probe(net, ["rabbit1", "rabbit3"], 45)
        answers = json.loads(net.history.path.read_text().splitlines()[-1])["value"]["answers"]
        assert answers["rabbit1"]["answer"] == "accepted", answers
        assert answers["rabbit3"]["answer"] in ("refused", "timed-out"), answers
        if answers["rabbit3"]["answer"] == "refused":
            assert answers["rabbit3"]["error"].startswith("541 INTERNAL_ERROR"), answers
            assert "metadata store operation timed out" in answers["rabbit3"]["error"], answers
        net.heal()
        assert_reunited(cluster)
        cluster.declares.after_heal(net)
        rows = [json.loads(line) for line in net.history.path.read_text().splitlines()]
        found = rows[-1]["value"]["found"]
        assert found == {"bj-declare-1-rabbit1": list(NODES), "bj-declare-1-rabbit3": []}
        assert rows[-1]["value"]["not_deleted"] == {}
        assert not [q for q in cluster.queue_names("rabbit1") if q.startswith("bj-declare")]
        events = [{**r, "value": json.dumps(r["value"])} for r in rows]
        section = declares_section(events, list(NODES), KHEPRI, rows[0]["time"])
        assert section is not None and section["held"] is True, section
