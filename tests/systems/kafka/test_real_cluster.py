"""Real clusters for the Kafka layer.

The ZooKeeper ensemble of ZooKeeper mode is real here (Debian's ZooKeeper in our image): the
nemesis's quorum cut, rate limit and packet loss are proven on it. Real Kafka brokers run
from the images make setup builds from Maven Central (3.9 and 4.1): each mode's cluster forms,
a leader-aimed cut shrinks the ISR as the brokers report it and heals, and K1 (zk) and K4
(kraft) run end to end. Without an image they skip with the reason, and fail in CI.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from confluent_kafka import Producer

from compose.cli import compose
from compose.disks import leftover_mounts
from compose.subnet import free_net_prefix
from contract.topology import NodeHandle, Topology
from contract.wait import wait_until
from nemesis.containers import Nemesis, NemesisError
from systems.kafka.admin import KafkaAdmin
from systems.kafka.cluster import (
    LOCAL_ZOOKEEPER_IMAGE,
    BrokerPorts,
    KafkaCluster,
    KafkaUnavailable,
    choose_kafka_image,
    choose_zookeeper_image,
    render_compose,
)
from systems.kafka.config import KafkaClusterConfig
from systems.kafka.nemesis import KafkaNemesis
from systems.kafka.targets import Metadata
from systems.rabbitmq.cluster import LOCAL_IMAGE as TOOLS_IMAGE
from tests.browser import assert_report_shows_the_run
from tests.conftest import missing
from tests.helpers import ROOT, history_events

pytestmark = pytest.mark.cluster
PROJECT = f"brokerjepsen-zktest-{os.getpid()}"  # its own: another session may share the engine
ZK = ("zk1", "zk2", "zk3")


def srvr(docker_client: Any, node: str) -> str:
    """ZooKeeper's own answer to `srvr`: its mode, or that it is not serving."""
    c = docker_client.containers.get(f"{PROJECT}-{node}-1")
    probe = "exec 3<>/dev/tcp/localhost/2181; echo srvr >&3; cat <&3"
    out = c.exec_run(["bash", "-c", probe]).output.decode(errors="replace")
    if "not currently serving" in out:
        return "not serving"
    m = re.search(r"Mode: (\w+)", out)
    return m.group(1) if m else "no answer"


def in_namespace(node_container: str, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            f"--network=container:{node_container}",
            "--cap-add=NET_ADMIN",
            "--entrypoint",
            "sh",
            TOOLS_IMAGE,
            "-c",
            command,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def ensemble(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topology]:
    """The three ZooKeeper nodes of a ZooKeeper-mode cluster, from the same compose rendering."""
    try:
        image = choose_zookeeper_image(None, docker_client)
    except KafkaUnavailable as e:
        missing(str(e))
    cfg = KafkaClusterConfig(mode="zk")
    data = render_compose(
        cfg,
        PROJECT,
        {"kafka": "unused", "zookeeper": image},
        {i: BrokerPorts(i, i) for i in (1, 2, 3)},
        free_net_prefix(docker_client),
        "unused",
    )
    path = tmp_path_factory.mktemp("zk") / "docker-compose.yml"
    path.write_text(yaml.safe_dump(data))
    try:
        compose(path, ["up", "-d", *ZK], {}, timeout=180)
        ok = wait_until(
            lambda: (
                sorted(srvr(docker_client, z) for z in ZK) == ["follower", "follower", "leader"]
            ),
            90,
            interval=1,
        )
        assert ok, {z: srvr(docker_client, z) for z in ZK}
        handles, gateway = [], ""
        for z in ZK:
            c = docker_client.containers.get(f"{PROJECT}-{z}-1")
            (net,) = c.attrs["NetworkSettings"]["Networks"].values()
            handles.append(NodeHandle(z, c.id, net["IPAddress"]))
            gateway = net["Gateway"]
        yield Topology(tuple(handles), gateway)
    finally:
        compose(path, ["down", "-v", "-t", "2"], {}, timeout=180, check=False)


class QuorumOnly:
    """KafkaControl for a cluster whose brokers are not up: the quorum is all it names."""

    def metadata(self, need_controller: bool = False) -> Metadata:
        return Metadata({}, None, (), ZK)

    def elect(self, election: str, partitions: list[int], via: str | None = None) -> dict[str, str]:
        raise AssertionError("no election without brokers")


def test_cut_from_quorum_takes_the_zookeeper_leader_out_and_heal_brings_it_back(
    ensemble: Topology, docker_client: Any, tmp_path: Path
) -> None:
    from contract.history import HistoryWriter

    # Cut the ensemble's own leader: the other two must elect a new one and serve on.
    (leader,) = [z for z in ZK if srvr(docker_client, z) == "leader"]
    others = [z for z in ZK if z != leader]
    with HistoryWriter(tmp_path, "nemesis", "kafka") as history:
        net = Nemesis(ensemble, TOOLS_IMAGE, history)
        kafka = KafkaNemesis(net, QuorumOnly(), "t", 1)  # type: ignore[arg-type]
        step = type(
            "S",
            (),
            {
                "op": "cut-from-quorum",
                "target": [leader],
                "from_": None,
                "to": None,
                "partition": 0,
                "label": "",
            },
        )()
        try:
            kafka.apply(step)
            assert wait_until(lambda: srvr(docker_client, leader) == "not serving", 30, 1)
            majority = lambda: sorted(srvr(docker_client, z) for z in others)  # noqa: E731
            assert wait_until(lambda: majority() == ["follower", "leader"], 60, 1), majority()
        finally:
            net.heal_all()
        assert wait_until(lambda: srvr(docker_client, leader) == "follower", 60, 1)
    events = [json.loads(x) for x in (tmp_path / "nemesis.jsonl").read_text().splitlines()]
    cuts = [e["value"] for e in events if e["type"] == "ok" and e["f"] == "start-partition"]
    assert [(c["from"], c["to"]) for c in cuts] == [([leader], others), (others, [leader])]
    assert sorted(map(tuple, cuts[0]["cuts"] + cuts[1]["cuts"])) == sorted(
        [(leader, o) for o in others] + [(o, leader) for o in others]
    )


def _ping(topology: Topology, src: str, dst: str, args: str) -> str:
    result = in_namespace(
        topology.node(src).container, f"ping {args} -q {topology.node(dst).address}"
    )
    return result.stdout


def test_degraded_links_rate_limit_and_lose_then_heal_clean(ensemble: Topology) -> None:
    net = Nemesis(ensemble, TOOLS_IMAGE)
    try:
        _degrade_and_measure(ensemble, net)
    finally:
        net.heal_all()
    for z in ZK:
        shown = in_namespace(ensemble.node(z).container, "tc qdisc show; iptables -S BJ-NEMESIS")
        assert "htb" not in shown.stdout and "DROP" not in shown.stdout, shown.stdout
    assert " 0% packet loss" in _ping(ensemble, "zk1", "zk3", "-c 2 -W 1")


def _degrade_and_measure(ensemble: Topology, net: Nemesis) -> None:
    many = "-c 40 -i 0.01 -s 1400 -W 5"  # 40 x 1.4 kB in 0.4 s: 1.1 Mbit/s offered
    fast = _ping(ensemble, "zk1", "zk2", many)
    net.degrade(["zk1"], ["zk2"], rate_kbit=128)
    slow = _ping(ensemble, "zk1", "zk2", many)
    # Queued behind a 128 kbit/s class, echo requests wait tens to hundreds of milliseconds.
    avg_rtt = lambda out: float(re.search(r"= [\d.]+/([\d.]+)/", out).group(1))  # noqa: E731
    assert avg_rtt(fast) < 20 and avg_rtt(slow) > 80, (fast, slow)
    net.degrade(["zk1"], ["zk3"], loss_pct=100)
    assert " 0 received" in _ping(ensemble, "zk1", "zk3", "-c 3 -W 1")
    assert " 0% packet loss" in _ping(ensemble, "zk2", "zk3", "-c 2 -W 1")  # other links intact
    try:
        net.degrade(["zk2"], ["zk1"], delay_ms=200)
    except NemesisError as e:  # a kernel without sch_netem (this project's CI machines)
        assert "sch_netem" in str(e)
        assert not net.state.shaped_from("zk2")  # rolled back, not left half-applied
    else:
        assert (
            float(re.search(r"= ([\d.]+)/", _ping(ensemble, "zk2", "zk1", "-c 3")).group(1)) >= 200
        )


# ---- real Kafka: brokers from our Maven-built images ---------------------------------------


def kafka_image_or_missing(docker_client: Any, mode: str, line: str) -> str:
    """The image for (mode, line); missing one fails in CI (make setup builds both lines)."""
    try:
        return choose_kafka_image(None, mode, docker_client, line)  # type: ignore[arg-type]
    except KafkaUnavailable as e:
        missing(f"real Kafka {line} ({mode}) not run: {e}")
        raise


def _isr(admin: KafkaAdmin) -> tuple[int, set[int]]:
    # From a broker that knows the topic: a KRaft broker applies a new topic a moment after the
    # controller, and its answer then has no partitions (CI saw KeyError: 0 here once).
    md = admin.topic_metadata()
    pm = md.topics[admin.topic].partitions[0]
    return pm.leader, set(pm.isrs)


# The leader drops a lagging follower itself ("Shrinking ISR"), or, in KRaft, the controller
# fences a broker whose heartbeats stop (broker.session.timeout.ms, 6 s here) and removes it from
# every ISR; the leader then applies the new partition state. A follower cut from a leader that
# is also the active controller (combined mode) goes either way, whichever timer fires first.
LEADER_SHRINK = re.compile(
    r"\[Partition isr-0 broker=\d+\] Shrinking ISR from ([\d,]+) to ([\d,]+)"
)
APPLIED_STATE = re.compile(
    r"state change for isr-0 .*?LeaderAndIsrPartitionState\(topicName='isr', partitionIndex=0, "
    r".*?isr=\[([\d, ]*)\].*?replicas=\[([\d, ]*)\]"
)
# 4.4 logs the partition registration it applied instead, replicas before the ISR.
APPLIED_REGISTRATION = re.compile(
    r"state change for isr-0 .*?PartitionRegistration\(replicas=\[([\d, ]*)\].*?isr=\[([\d, ]*)\]"
)


def _ids(text: str) -> set[int]:
    return {int(i) for i in re.split(r"[, ]+", text.strip()) if i}


def _dropped_from_isr(cluster: KafkaCluster, leader: int) -> set[int]:
    """Brokers the leader's log says left the ISR of the test topic's partition: dropped by the
    leader, or by the controller in a partition state the leader applied."""
    log = cluster.containers()[cluster.node_of[leader]].logs().decode(errors="replace")
    dropped: set[int] = set()
    for before, after in LEADER_SHRINK.findall(log):
        dropped |= _ids(before) - _ids(after)
    for isr, replicas in APPLIED_STATE.findall(log):
        dropped |= _ids(replicas) - _ids(isr)
    for replicas, isr in APPLIED_REGISTRATION.findall(log):
        dropped |= _ids(replicas) - _ids(isr)
    return dropped


def _isr_lines(cluster: KafkaCluster, leader: int) -> list[str]:
    """What the leader logged about the partition's ISR: the evidence when no shrink shows."""
    log = cluster.containers()[cluster.node_of[leader]].logs().decode(errors="replace")
    return [ln[:300] for ln in log.splitlines() if "isr-0" in ln and "ISR" in ln.upper()][-8:]


def _isr_or_none(admin: KafkaAdmin) -> tuple[int, set[int]] | None:
    try:
        return _isr(admin)
    except Exception:  # noqa: BLE001 - a broker busy electing: ask again
        return None


@pytest.mark.parametrize(
    ("mode", "line"),
    [("zk", "3.9"), ("kraft", "3.9"), ("kraft", "4.1"), ("kraft", "4.4")],
    ids=["zk-3.9", "kraft-3.9", "kraft-4.1", "kraft-4.4"],
)
def test_cluster_forms_and_a_leader_aimed_cut_shrinks_the_isr_then_heals(
    mode: str, line: str, docker_client: Any, tmp_path: Path
) -> None:
    kafka_image_or_missing(docker_client, mode, line)
    cfg = KafkaClusterConfig(mode=mode, kafka_line=line)  # type: ignore[arg-type]
    project = f"isr-{mode}-{line}-{os.getpid()}".replace(".", "")
    cluster = KafkaCluster(cfg, tmp_path / "cluster", project)
    admin = KafkaAdmin(cluster, "isr")
    try:
        cluster.up(240, lambda: admin.registered_brokers() >= set(cluster.node_of))
        version = cluster.kafka_version()
        assert version.startswith(line + "."), version
        features = cluster.feature_levels()
        if mode != "zk":  # KRaft: the metadata version the cluster was formatted with
            assert features.get("metadata.version", "").startswith(line), features
        admin.create_topic(1, 3, None, {"min.insync.replicas": "2"}, 60)
        assert wait_until(admin.fully_in_sync, 60, interval=1)
        net = Nemesis(cluster.topology(), TOOLS_IMAGE)
        kafka = KafkaNemesis(net, admin, "isr", 1)
        leader, _ = _isr(admin)
        step = SimpleNamespace(
            op="cut",
            target=None,
            from_="follower",
            to="leader",
            both_ways=True,
            partition=0,
            label="",
        )
        try:
            kafka.apply(step)
            (follower,) = net.state.rules_on(cluster.node_of[leader])
            follower_id = next(i for i, n in cluster.node_of.items() if n == follower)
            # replica.lag.time.max.ms is 5 s: the leader drops the follower from the ISR. Asked
            # of the leader's own log: metadata may come from the cut follower, whose view of
            # the partition is as stale as its link to the controller.
            # Writes must flow: a follower whose log ends where the leader's does is never out of
            # sync, fetching or not (Kafka's rule), so an idle partition keeps its ISR.
            producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "1"})
            delivered = []

            def shrunk() -> bool:
                for _ in range(20):
                    producer.produce(
                        "isr", b"x", on_delivery=lambda e, _m: delivered.append(e is None)
                    )
                producer.poll(0)
                return follower_id in _dropped_from_isr(cluster, leader)

            assert wait_until(shrunk, 45, interval=0.5), (
                f"cut {follower_id} from leader {leader}; writes acknowledged "
                f"{sum(delivered)} of {len(delivered)}; metadata {_isr_or_none(admin)}; "
                f"leader's log: {_isr_lines(cluster, leader)}"
            )
            producer.flush(10)
        finally:
            net.heal_all()
        assert wait_until(admin.fully_in_sync, 90, interval=1), _isr_or_none(admin)
    finally:
        cluster.save_logs(tmp_path / "logs")
        cluster.down()


@pytest.mark.spark
@pytest.mark.e2e
# K4 on dedicated controllers: in combined mode the cut follower may serve stale metadata and the
# client may never see the refusal (scenarios/K4.yaml says why).
# K17/K18: every replica loses power at once on lazy disks (lazyfs), default flush vs
# flush.messages=1.
# K4 again on the newest line, 4.4 (KRaft only). K4 on the default line, 3.9, is the fast tier's
# Kafka smoke; the rest run nightly (the fast tier's cluster tests start 4.1 and 4.4 clusters).
@pytest.mark.parametrize(
    ("scenario", "mode", "line"),
    [
        ("K1", "zk", "3.9"),
        pytest.param("K4", "kraft-dedicated", "3.9", marks=pytest.mark.smoke("kafka", "3.9")),
        ("K4", "kraft-dedicated", "4.4"),
        ("K17", "zk", "3.9"),
        ("K18", "zk", "3.9"),
    ],
)
def test_kafka_scenario_end_to_end_on_a_real_cluster(
    scenario: str, mode: str, line: str, docker_client: Any, spark: object, tmp_path: Path
) -> None:
    kafka_image_or_missing(docker_client, mode, line)
    command = ["run", scenario, "--mode", mode, "--kafka", line, "--results", str(tmp_path)]
    result = subprocess.run(
        [".venv/bin/harness", *command],
        capture_output=True,
        text=True,
        timeout=1500,
        cwd=ROOT,
    )
    run_dir = (tmp_path / "latest").resolve()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["error"] is None, result.stderr[-3000:]
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert manifest["kafka_mode"] == mode and verdict["kafka_version"].startswith(line + ".")
    assert verdict["tier"] == "real-cluster" and verdict["counts_toward_claim"] is True
    assert verdict["sends"]["ok"] > 1000 and manifest["drain_complete"] is True
    groups = verdict["groups"]
    assert set(groups) == {"reader", "final"}  # the live reader, and the final read of the log
    for group in groups.values():
        assert group["received"] >= group["acked"] - group["lost"]
    lost = max(group["lost"] for group in groups.values())
    if scenario == "K4":  # a safe claim: nothing lost, and the survivor refused writes
        assert lost == 0, verdict["reason"]
        assert verdict["errors"]["send"].get("NOT_ENOUGH_REPLICAS", 0) > 0, verdict["errors"]
        assert verdict["claim_verdict"] == "reproduced" and result.returncode == 0
    if scenario in ("K17", "K18"):
        power_loss = [
            e
            for e in history_events(run_dir / "history", "nemesis")
            if e["f"] == "power-loss" and e["type"] == "ok"
        ]
        assert len(power_loss) == 1
        dropped = power_loss[0]["value"]["dropped"]
        assert set(dropped) == {"kafka1", "kafka2", "kafka3"}
        # Default flush leaves the acknowledged writes of the last half minute in page cache.
        # (With flush.messages=1 only an append the kill caught before its fsync is left.)
        if scenario == "K17":
            assert sum(d["bytes"] for d in dropped.values()) > 0, dropped
        assert not [m for m in leftover_mounts() if str(run_dir) in str(m)]
    if scenario == "K18":  # a safe claim under power loss
        assert lost == 0 and verdict["claim_verdict"] == "reproduced", verdict["reason"]
    elif (
        scenario != "K4"
    ):  # a loss claim; whether this run lost is Kafka's doing, the verdict must say it
        assert verdict["claim_verdict"] == ("reproduced" if lost else "not reproduced")
        assert result.returncode == (0 if lost else 1)
    left = docker_client.containers.list(
        all=True, filters={"label": f"com.docker.compose.project={manifest['compose_project']}"}
    )
    assert left == []
    assert_report_shows_the_run(run_dir, f"report-{scenario}-{mode}-{line}.png")


def test_zookeeper_image_is_debians(docker_client: Any) -> None:
    try:
        image = docker_client.images.get(LOCAL_ZOOKEEPER_IMAGE)
    except Exception:  # noqa: BLE001
        missing(f"{LOCAL_ZOOKEEPER_IMAGE} is not built (make setup)")
        return
    out = subprocess.run(
        ["docker", "run", "--rm", image.id, "cat", "/etc/brokerjepsen-version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.stdout.startswith("3.8.0"), out.stderr


def test_a_kafka_run_without_its_image_says_so_in_one_line(tmp_path: Path) -> None:
    spec = yaml.safe_load((ROOT / "scenarios/K4.yaml").read_text())
    spec["cluster"]["image"] = "brokerjepsen/kafka:0.0.0-absent"
    scenario = tmp_path / "K4-absent.yaml"
    scenario.write_text(yaml.safe_dump(spec))
    result = subprocess.run(
        [".venv/bin/harness", "run", str(scenario), "--mode", "kraft", "--results", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "0.0.0-absent" in lines[0] and "Traceback" not in result.stderr


def test_zk_mode_is_refused_on_kafka_4_in_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            ".venv/bin/harness",
            "run",
            "K4",
            "--mode",
            "zk",
            "--kafka",
            "4.1",
            "--results",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 2
    (line,) = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert "no zk mode" in line and "Traceback" not in result.stderr
