"""RabbitMQ's rolling upgrade steps against a faked cluster: the order each node is recreated in,
what each node's event says, the wait for the node back and its queue members in sync, a node
that refuses a release and is rolled back, and the feature flag commands finalize-feature issues
per release. Then the cluster's side without a cluster: the compose files it writes for an
upgrade (a volume per node's data, each node's image) and how it recreates a node."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from compose.cli import ComposeError
from contract.history import HistoryWriter
from contract.topology import NodeHandle, Topology
from faults.registry import window_of
from nemesis.containers import Nemesis, NemesisError
from systems.rabbitmq import cluster as cluster_module
from systems.rabbitmq.cluster import NODE_IMAGES, ClusterConfig, RabbitMQCluster
from systems.rabbitmq.membership import Membership
from systems.rabbitmq.nemesis import StepTargets, apply_step
from systems.rabbitmq.run import upgrade_releases
from systems.rabbitmq.scenario import NemesisStep
from systems.rabbitmq.upgrade import finalize_feature, upgrade

NODES = ("rabbit1", "rabbit2", "rabbit3")
REFUSAL = (
    "[error] Feature flags: `rabbitmq_4.1.0`: required feature flag not enabled! It must be "
    "enabled before upgrading RabbitMQ."
)


class FakeCluster:
    """Three nodes on `release`, one quorum queue with a member on each. A recreated node's
    member starts from commit index 0 and catches up 40 a question, while the leader (rabbit2's,
    never upgraded first) commits 10 more each time it is asked. `refusing`: the images a node
    will not boot on (it exits, as RabbitMQ does naming a required flag)."""

    def __init__(self, release: str = "4.0.5", refusing: tuple[str, ...] = ()) -> None:
        self.node_images = {n: f"img:{release}" for n in NODES}
        self.refusing = set(refusing)
        self.running = set(NODES)
        self.generation = dict.fromkeys(NODES, 0)
        self.commit = dict.fromkeys(NODES, 100)
        self.replaced: list[tuple[str, str]] = []
        self.calls: list[tuple[str, ...]] = []
        self.flags = {
            "rabbitmq_4.0.0": {"state": "enabled", "stability": "stable"},
            "khepri_db": {"state": "disabled", "stability": "experimental"},
        }
        self.store = "disabled" if release.startswith("4.0") else None  # None: no rabbit_khepri
        self.never_back: set[str] = set()
        self.membership = Membership(self, list(NODES))

    # ---- UpgradeControl -----------------------------------------------------------------

    def release_of(self, image: str) -> str:
        return image.split(":")[1]

    def node_release(self, node: str) -> str:
        return self.release_of(self.node_images[node])

    def image_for(self, release: str) -> str:
        return f"img:{release}"

    def replace_node(self, node: str, image: str, timeout: float) -> None:
        self.replaced.append((node, image))
        self.generation[node] += 1
        self.node_images[node] = image
        self.commit[node] = 0
        if image in self.refusing:
            self.running.discard(node)
            raise ComposeError(f"compose up: container {node} exited (1)")
        self.running.add(node)

    def topology(self) -> Topology:
        handles = tuple(
            NodeHandle(n, f"{n}-{self.generation[n]}", f"10.0.0.{i}")
            for i, n in enumerate(NODES, 1)
        )
        return Topology(handles, "10.0.0.254")

    def running_nodes(self, node: str) -> list[str]:
        if node not in self.running:
            raise ComposeError(f"rabbitmqctl cluster_status on {node}: not running")
        listed = self.running - (self.never_back if node not in self.never_back else set())
        return [f"rabbit@{n}" for n in sorted(listed)]

    def quorum_members(self) -> dict[str, list[str]]:
        return {"q": list(NODES)}

    def quorum_status(self, queue: str, via: str) -> list[dict[str, Any]]:
        self.calls.append(("quorum_status", via))
        self.commit["rabbit2"] += 10
        for n in NODES:
            if n != "rabbit2":
                self.commit[n] = min(self.commit[n] + 40, self.commit["rabbit2"])
        return [
            {
                "Node Name": f"rabbit@{n}",
                "Raft State": "leader" if n == "rabbit2" else "follower",
                "Membership": "voter",
                "Commit Index": self.commit[n],
            }
            for n in NODES
        ]

    def log_tail(self, node: str, lines: int) -> list[str]:
        return ["[info] Starting RabbitMQ 4.3.6", REFUSAL][-lines:]

    def rabbitmqctl(self, node: str, *args: str, timeout: float = 60) -> str:
        self.calls.append(("rabbitmqctl", node, *args))
        if args[0] == "list_feature_flags":
            return json.dumps([{"name": k, **v} for k, v in self.flags.items()])
        if args[0] == "enable_feature_flag":
            names = list(self.flags) if args[-1] == "all" else [args[-1]]
            for name in names:
                if self.flags[name]["stability"] == "experimental" and "--opt-in" not in args:
                    if args[-1] != "all":
                        raise ComposeError(f"rabbitmqctl enable_feature_flag on {node}: opt-in")
                    continue  # all: the stable ones only
                self.flags[name]["state"] = "enabled"
                self.store = "enabled" if name == "khepri_db" else self.store
            return ""
        if args[0] == "eval":
            if self.store is None:
                raise ComposeError(f"rabbitmqctl eval on {node}: {{:undef, [...]}}")
            return f"{self.store}\n"
        return ""

    # ---- Membership's (not used by these steps) -----------------------------------------

    def rabbitmq_queues(self, node: str, *args: str, timeout: float = 60) -> str:
        raise AssertionError("no queue membership change in an upgrade")

    def release(self) -> str:
        return self.node_release("rabbit1")


class Engine:
    """A Docker client as far as the nemesis asks: containers to stop, helpers it runs in a
    node's namespace (each recorded with the container it joined)."""

    def __init__(self) -> None:
        self.containers = self
        self.helpers: list[str] = []

    def get(self, container: str) -> SimpleNamespace:
        return SimpleNamespace(stop=lambda timeout: None)

    def run(self, image: str, **kwargs: Any) -> None:
        self.helpers.append(kwargs["network_mode"])


def nemesis(tmp_path: Path, cluster: FakeCluster) -> tuple[Nemesis, Engine]:
    engine = Engine()
    history = HistoryWriter(tmp_path, "nemesis", "rabbitmq")
    return Nemesis(cluster.topology(), "tools", history, client=cast(Any, engine)), engine


def events(tmp_path: Path) -> list[tuple[str, str, dict[str, Any]]]:
    rows = [json.loads(line) for line in (tmp_path / "nemesis.jsonl").read_text().splitlines()]
    return [(r["type"], r["f"], r["value"]) for r in rows]


def step(**fields: Any) -> NemesisStep:
    return NemesisStep.model_validate({"at": 1, **fields})


def oks(tmp_path: Path, f: str = "upgrade") -> list[dict[str, Any]]:
    return [v for t, name, v in events(tmp_path) if (t, name) == ("ok", f)]


# ---- upgrade ------------------------------------------------------------------------------


def test_every_node_is_recreated_in_turn_each_an_event_of_its_own(tmp_path: Path) -> None:
    cluster = FakeCluster("4.0.5")
    net, _ = nemesis(tmp_path, cluster)
    upgrade(net, cast(Any, cluster), step(op="upgrade", release="4.0.9"), poll=0)
    assert cluster.replaced == [(n, "img:4.0.9") for n in NODES]
    invokes = [v for t, f, v in events(tmp_path) if (t, f) == ("invoke", "upgrade")]
    assert invokes == [{"nodes": [n], "from": "4.0.5", "to": "4.0.9"} for n in NODES]
    for ok in oks(tmp_path):
        assert ok["booted"] and ok["back"] and ok["in_sync"] and ok["queues"] == ["q"]
        assert "stopped_rollout" not in ok
    # Each event's invoke and ok follow one another: one node down at a time.
    kinds = [(t, f) for t, f, _ in events(tmp_path)]
    assert kinds == [("invoke", "upgrade"), ("ok", "upgrade")] * 3
    assert [h.container for h in net.topology.nodes] == [f"{n}-1" for n in NODES]
    assert not net.down


def test_a_node_is_waited_for_until_it_has_what_the_leader_had_committed(tmp_path: Path) -> None:
    """The leader commits on while it is asked: the mark is what it had when first asked (110),
    which the node's member reaches on the third question (40, 80, 120), not a moving one."""
    cluster = FakeCluster()
    net, _ = nemesis(tmp_path, cluster)
    upgrade(net, cast(Any, cluster), step(op="upgrade", release="4.0.5", target="rabbit1"), poll=0)
    assert cluster.calls == [("quorum_status", "rabbit1")] * 3
    (ok,) = oks(tmp_path)
    assert ok["in_sync"] is True and cluster.commit["rabbit1"] >= 110


def test_the_network_rules_a_node_had_are_put_on_its_new_container(tmp_path: Path) -> None:
    cluster = FakeCluster()
    net, engine = nemesis(tmp_path, cluster)
    net.cut(["rabbit3"], ["rabbit1"])  # dropped as it reaches rabbit1: rabbit1's rules
    assert engine.helpers == ["container:rabbit1-0"]
    upgrade(net, cast(Any, cluster), step(op="upgrade", release="4.0.5", target="rabbit1"), poll=0)
    assert engine.helpers == ["container:rabbit1-0", "container:rabbit1-1"]


def test_a_node_that_refuses_the_release_is_rolled_back_and_the_rollout_ends(
    tmp_path: Path,
) -> None:
    cluster = FakeCluster("4.0.5", refusing=("img:4.3.6",))
    net, _ = nemesis(tmp_path, cluster)
    upgrade_all = step(op="upgrade", release="4.3.6", unsupported_path=True)
    upgrade(net, cast(Any, cluster), upgrade_all, poll=0)
    assert cluster.replaced == [("rabbit1", "img:4.3.6"), ("rabbit1", "img:4.0.5")]
    (ok,) = oks(tmp_path)
    assert ok["from"] == "4.0.5" and ok["to"] == "4.3.6"
    assert (ok["booted"], ok["back"], ok["in_sync"]) == (False, False, False)
    assert "exited (1)" in ok["error"] and ok["refused"][-1] == REFUSAL
    rolled = ok["rolled_back"]
    assert rolled["to"] == "4.0.5" and rolled["booted"] and rolled["back"] and rolled["in_sync"]
    assert ok["stopped_rollout"] == ["rabbit2", "rabbit3"]
    assert cluster.node_images["rabbit1"] == "img:4.0.5" and not net.down


def test_a_node_that_never_boots_again_stays_down_for_the_end_of_the_run(tmp_path: Path) -> None:
    cluster = FakeCluster("4.0.5", refusing=("img:4.3.6", "img:4.0.5"))
    net, _ = nemesis(tmp_path, cluster)
    upgrade(net, cast(Any, cluster), step(op="upgrade", release="4.3.6", target="rabbit3"), poll=0)
    (ok,) = oks(tmp_path)
    assert ok["rolled_back"]["booted"] is False
    assert net.down == {"rabbit3"}  # heal_all starts it; the recovery says if it came back


def test_a_node_not_back_within_the_bound_ends_the_rollout(tmp_path: Path) -> None:
    cluster = FakeCluster()
    cluster.never_back = {"rabbit1"}  # its peers never list it again
    net, _ = nemesis(tmp_path, cluster)
    upgrade(net, cast(Any, cluster), step(op="upgrade", release="4.0.5", within=0.2), poll=0.01)
    (ok,) = oks(tmp_path)
    assert (ok["booted"], ok["back"], ok["in_sync"]) == (True, False, False)
    assert ok["stopped_rollout"] == ["rabbit2", "rabbit3"] and ok["waited_s"] >= 0.2


def test_a_forgotten_node_is_refused_before_anything_changes(tmp_path: Path) -> None:
    cluster = FakeCluster()
    cluster.membership.forgotten.add("rabbit2")
    net, _ = nemesis(tmp_path, cluster)
    with pytest.raises(NemesisError, match="upgrade: rabbit2 is out of the cluster"):
        upgrade(net, cast(Any, cluster), step(op="upgrade", release="4.0.5", target="rabbit2"))
    assert not cluster.replaced
    # None named: the members alone.
    upgrade(net, cast(Any, cluster), step(op="upgrade", release="4.0.5"), poll=0)
    assert [n for n, _ in cluster.replaced] == ["rabbit1", "rabbit3"]


def test_the_dispatcher_resolves_a_role_then_upgrades(tmp_path: Path) -> None:
    cluster = FakeCluster()
    cluster.queue_leader = lambda queue: ("rabbit2", list(NODES))  # type: ignore[attr-defined]
    net, _ = nemesis(tmp_path, cluster)
    cluster.never_back = set()
    targets = StepTargets("q", nodes=list(NODES))
    apply_step(
        net, cast(Any, cluster), step(op="upgrade", release="4.0.5", target="leader"), targets
    )
    assert [n for n, _ in cluster.replaced] == ["rabbit2"]


def test_the_upgrade_is_a_node_bounce_and_finalize_feature_no_fault() -> None:
    assert window_of("upgrade") == "node-bounce"
    assert window_of("finalize-feature") == "none"


def test_the_run_looks_for_each_release_its_upgrades_name_once() -> None:
    steps = [
        step(op="upgrade", release="4.1"),
        step(op="finalize-feature", feature="all"),
        step(op="upgrade", release="4.0.5", target="rabbit1"),
        step(op="upgrade", release="4.1", target="rabbit1"),
    ]
    assert upgrade_releases(steps) == ("4.1", "4.0.5")


# ---- finalize-feature ---------------------------------------------------------------------


def test_khepri_db_is_opted_into_on_40_and_every_node_says_its_store(tmp_path: Path) -> None:
    cluster = FakeCluster("4.0.5")
    net, _ = nemesis(tmp_path, cluster)
    finalize_feature(net, cast(Any, cluster), step(op="finalize-feature", feature="khepri_db"))
    flags = ("list_feature_flags", "name", "state", "stability", "--formatter", "json")
    assert cluster.calls == [
        ("rabbitmqctl", "rabbit1", *flags),
        ("rabbitmqctl", "rabbit1", "enable_feature_flag", "--opt-in", "khepri_db"),
        ("rabbitmqctl", "rabbit1", *flags),
        *(("rabbitmqctl", n, "eval", "rabbit_khepri:get_feature_state().") for n in NODES),
    ]
    said = events(tmp_path)
    assert said[0] == ("invoke", "finalize-feature", {"feature": "khepri_db", "level": None})
    (ok,) = oks(tmp_path, "finalize-feature")
    assert ok["opted_in"] is True and ok["via"] == "rabbit1"
    assert ok["flags"] == {"khepri_db": "enabled", "rabbitmq_4.0.0": "enabled"}
    assert ok["metadata_store"] == dict.fromkeys(NODES, "khepri")


def test_all_enables_the_stable_flags_and_a_release_without_khepri_is_on_mnesia(
    tmp_path: Path,
) -> None:
    cluster = FakeCluster("3.10.8")
    cluster.flags.pop("khepri_db")
    cluster.flags["stream_queue"] = {"state": "disabled", "stability": "stable"}
    net, _ = nemesis(tmp_path, cluster)
    finalize_feature(net, cast(Any, cluster), step(op="finalize-feature", feature="all"))
    assert ("rabbitmqctl", "rabbit1", "enable_feature_flag", "all") in cluster.calls
    (ok,) = oks(tmp_path, "finalize-feature")
    assert ok["opted_in"] is False and ok["flags"]["stream_queue"] == "enabled"
    assert ok["metadata_store"] == dict.fromkeys(NODES, "mnesia")


def test_a_flag_the_release_does_not_know_fails_the_step_naming_the_ones_it_has(
    tmp_path: Path,
) -> None:
    cluster = FakeCluster("4.0.5")
    net, _ = nemesis(tmp_path, cluster)
    with pytest.raises(NemesisError, match="knows no feature flag 'rabbitmq_4.2.0'.*khepri_db"):
        finalize_feature(
            net, cast(Any, cluster), step(op="finalize-feature", feature="rabbitmq_4.2.0")
        )
    assert not [c for c in cluster.calls if "enable_feature_flag" in c]
    assert events(tmp_path)[-1][:2] == ("fail", "finalize-feature")


def test_finalize_runs_in_a_member_that_answers(tmp_path: Path) -> None:
    cluster = FakeCluster("4.0.5")
    net, _ = nemesis(tmp_path, cluster)
    net.down.add("rabbit1")
    finalize_feature(net, cast(Any, cluster), step(op="finalize-feature", feature="all"))
    (ok,) = oks(tmp_path, "finalize-feature")
    assert ok["via"] == "rabbit2" and set(ok["metadata_store"]) == {"rabbit2", "rabbit3"}


# ---- the cluster's side -------------------------------------------------------------------


class Container:
    def __init__(self, log: bytes) -> None:
        self.log = log
        self.stopped = False

    def stop(self, timeout: int) -> None:
        self.stopped = True

    def logs(self, timestamps: bool = False, tail: int | None = None) -> bytes:
        return self.log


def unstarted_cluster(tmp_path: Path, upgrades: tuple[str, ...] = ("4.3",)) -> RabbitMQCluster:
    """A cluster object as far as an upgrade reads it, no Docker behind it."""
    cluster = object.__new__(RabbitMQCluster)
    cluster.workdir, cluster.nodes = tmp_path, NODES
    cluster.config = ClusterConfig(partition_handling=None, upgrades=upgrades)
    cluster.image = "brokerjepsen/rabbitmq:4.0.5-debian"
    cluster.node_images = dict.fromkeys(NODES, cluster.image)
    cluster.upgrade_images = {"4.3": "brokerjepsen/rabbitmq:4.3.6-debian"}
    cluster.overrides, cluster._env = (tmp_path / "fake-clocks.yml",), {"BJ_PROJECT": "p"}
    labels = {"org.brokerjepsen.rabbitmq-version": ""}

    def image(name: str) -> SimpleNamespace:
        release = name.split(":")[1].removesuffix("-debian")
        return SimpleNamespace(labels={**labels, "org.brokerjepsen.rabbitmq-version": release})

    cluster.docker = cast(Any, SimpleNamespace(images=SimpleNamespace(get=image)))
    return cluster


def test_each_nodes_data_is_a_volume_of_its_own(tmp_path: Path) -> None:
    written = json.loads(unstarted_cluster(tmp_path)._data_volume_override().read_text())
    assert written["services"]["rabbit2"] == {"volumes": ["rabbit2-data:/var/lib/rabbitmq"]}
    assert set(written["volumes"]) == {"rabbit1-data", "rabbit2-data", "rabbit3-data"}


def test_recreating_a_node_retires_its_log_and_names_its_image_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = unstarted_cluster(tmp_path)
    old = Container(b"2026-01-01T00:00:00Z booted 4.0.5\n")
    monkeypatch.setattr(cluster, "containers", lambda: {"rabbit2": old})
    composed: list[tuple[list[str], tuple[Path, ...]]] = []
    monkeypatch.setattr(
        cluster_module,
        "compose",
        lambda file, args, env, timeout, overrides: composed.append((args, overrides)),
    )
    new_image = cluster.image_for("4.3")
    cluster.replace_node("rabbit2", new_image, timeout=90)
    assert old.stopped
    ((args, overrides),) = composed
    assert args == [
        "up", "-d", "--no-deps", "--force-recreate", "--wait", "--wait-timeout", "90", "rabbit2"
    ]  # fmt: skip
    assert overrides == (tmp_path / "fake-clocks.yml", tmp_path / NODE_IMAGES)
    images = json.loads((tmp_path / NODE_IMAGES).read_text())["services"]
    assert images == {
        "rabbit1": {"image": cluster.image},
        "rabbit2": {"image": new_image},
        "rabbit3": {"image": cluster.image},
    }
    assert cluster.node_release("rabbit2") == "4.3.6"
    assert cluster.release() == "4.0.5"  # a mixed cluster runs at its oldest release
    (retired,) = cluster.retired_logs("rabbit2")
    assert retired.name == "rabbit2.000.4.0.5.log" and retired.read_bytes() == old.log
    # Recreated again: the override is not listed twice.
    cluster.replace_node("rabbit2", cluster.image, timeout=90)
    assert composed[-1][1] == overrides
    assert [p.name for p in cluster.retired_logs("rabbit2")][-1] == "rabbit2.001.4.3.6.log"


def test_an_image_no_upgrade_named_is_an_error_not_a_guess(tmp_path: Path) -> None:
    with pytest.raises(ComposeError, match="no image was looked for of RabbitMQ 4.1"):
        unstarted_cluster(tmp_path).image_for("4.1")


def test_a_node_whose_container_does_not_run_keeps_its_fixed_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Docker gives an exited container (a node that refused a release) no address; the other
    nodes' network rules name it by the compose file's."""
    cluster = unstarted_cluster(tmp_path)
    cluster.net_prefix = "10.7.3"
    handles = (NodeHandle("rabbit1", "c1", "10.7.3.11"), NodeHandle("rabbit2", "c2", ""))
    monkeypatch.setattr(cluster, "topology_of", lambda names: Topology(handles, "10.7.3.1"))
    found = cluster.topology()
    assert [(h.container, h.address) for h in found.nodes] == [
        ("c1", "10.7.3.11"),
        ("c2", "10.7.3.12"),
    ]
    assert found.client_address == "10.7.3.1"
