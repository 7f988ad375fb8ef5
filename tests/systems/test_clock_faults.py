"""Clock faults in both systems' scenarios and nemeses: a step's argument refused in one line, a
cluster without fake_clock refused, each dispatcher handing the step, its targets resolved, to
the common nemesis; and the clusters started under libfaketime only when asked."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from compose import clocks
from systems.kafka.cluster import BrokerPorts, render_compose
from systems.kafka.config import KafkaClusterConfig
from systems.kafka.nemesis import KafkaNemesis
from systems.rabbitmq.cluster import ClusterConfig, RabbitMQCluster
from systems.rabbitmq.nemesis import apply_step
from systems.rabbitmq.scenario import NemesisStep
from systems.registry import parse_scenario
from systems.scenario import ScenarioError

KAFKA = """
id: x
expect: safe
cluster: {system: kafka, modes: [kraft], fake_clock: true}
workload: {producers: [{id: P, count: 1}], readers: [{id: r}]}
"""
RABBITMQ = """
id: x
expect: safe
cluster: {version: "4.3", queue_type: quorum, fake_clock: true}
workload: {queues: [q], publishers: [{id: A, count: 10}], consumers: [{queue: q}]}
"""
NODE = {KAFKA: "kafka1", RABBITMQ: "rabbit1"}


def nemesis(base: str, *steps: str) -> str:
    lines = [f"- {{at: {i}, {s.replace('NODE', NODE[base])}}}" for i, s in enumerate(steps, 1)]
    return "nemesis:\n" + "\n".join(lines) + "\n"


def test_a_kafka_cluster_takes_the_fake_clock_and_its_clock_steps() -> None:
    text = KAFKA + nemesis(KAFKA, "op: clock, target: NODE, offset: -7200", "op: clock-ok")
    skew, ok = cast(list[Any], parse_scenario(text, "x.yaml").nemesis)
    assert (skew.op, skew.offset, ok.op) == ("clock", -7200, "clock-ok")


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ("op: clock, target: NODE", "clock needs offset: seconds off true time, signed"),
        ("op: clock, target: NODE, offset: 1e9", "offset"),
        ("op: clock, target: NODE, offset: .nan", "offset"),
        ("op: clock, target: NODE, offset: soon", "offset"),
        ("op: kill, target: NODE, offset: 5", "offset is for corrupt or clock, not kill"),
        ("op: clock-ok, offset: 0", "offset is for corrupt or clock, not clock-ok"),
        ("op: clock, target: NODE, offset: 5, drift: 1.5", "drift"),
        ("op: clock, offset: 5", "clock needs a target"),
    ],
)
def test_a_bad_clock_step_is_one_line(step: str, message: str) -> None:
    with pytest.raises(ScenarioError) as e:
        parse_scenario(RABBITMQ + nemesis(RABBITMQ, step), "x.yaml")
    said = str(e.value)
    assert re.search(re.escape(message), said) and "\n" not in said, said


@pytest.mark.parametrize("base", [KAFKA, RABBITMQ], ids=["kafka", "rabbitmq"])
@pytest.mark.parametrize("step", ["op: clock, target: NODE, offset: 60", "op: clock-ok"])
def test_a_clock_step_needs_the_fake_clock(base: str, step: str) -> None:
    text = base.replace(", fake_clock: true", "") + nemesis(base, step)
    op = step.split(",")[0].removeprefix("op: ")
    with pytest.raises(ScenarioError, match=f"nemesis.0: {op} needs cluster.fake_clock: true"):
        parse_scenario(text, "x.yaml")


def test_a_clock_step_takes_a_signed_offset_and_a_bare_clock_ok_every_clock() -> None:
    base = RABBITMQ
    text = base + nemesis(
        base, "op: clock, target: [NODE], offset: 3600", "op: clock, target: [NODE], offset: -1.5",
        "op: clock-ok",
    )  # fmt: skip
    ahead, behind, ok = cast(list[Any], parse_scenario(text, "x.yaml").nemesis)
    assert (ahead.offset, behind.offset, ok.offset) == (3600, -1.5, None)


class FakeNet:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.history = None
        self.down: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        return lambda *args: self.calls.append((name, *args))


def kafka_step(**kw: Any) -> Any:
    fields = {"target": None, "from_": None, "to": None, "partition": 0, "label": ""}
    return SimpleNamespace(**(fields | {"offset": None} | kw))


def test_kafkas_clock_steps_reach_the_common_nemesis_on_their_resolved_targets() -> None:
    net = FakeNet()
    k = KafkaNemesis(net, SimpleNamespace(), "t", 1)  # type: ignore[arg-type]
    k.apply(kafka_step(op="clock", target=["kafka2"], offset=3600, label="skewed"))
    k.apply(kafka_step(op="clock", target="@skewed", offset=-3600))
    k.apply(kafka_step(op="clock-ok", target="@skewed"))
    k.apply(kafka_step(op="clock-ok"))
    assert net.calls == [
        ("clock", ["kafka2"], 3600),
        ("clock", ["kafka2"], -3600),
        ("clock_ok", ["kafka2"]),
        ("clock_ok", None),
    ]


def test_rabbitmqs_clock_steps_reach_the_common_nemesis() -> None:
    net = FakeNet()
    steps: list[dict[str, Any]] = [
        {"op": "clock", "target": "rabbit2", "offset": -600},
        {"op": "clock-ok", "target": ["rabbit2"]},
        {"op": "clock-ok"},
    ]
    for fields in steps:
        apply_step(net, SimpleNamespace(), NemesisStep.model_validate({"at": 1, **fields}))  # type: ignore[arg-type]
    assert net.calls == [
        ("clock", ["rabbit2"], -600),
        ("clock_ok", ["rabbit2"]),
        ("clock_ok", None),
    ]


def kafka_compose(
    fake_clock: bool, tmp_path: Path, mode: str = "kraft-dedicated"
) -> dict[str, Any]:
    cfg = KafkaClusterConfig(mode=mode, fake_clock=fake_clock)  # type: ignore[arg-type]
    ports = {i: BrokerPorts(19000 + i, 19000 + i) for i in (1, 2, 3)}
    fake = clocks.FakeClocks(tmp_path, ["controller1", "kafka1", "zk1"])
    mounts = {n: [fake.clock_volume(n), "agent:/opt/agent:ro"] for n in fake.offsets}
    return render_compose(
        cfg, "p", {"kafka": "img", "zookeeper": "zk"}, ports, "10.9.0", "id", None,
        mounts if fake_clock else None,
    )  # fmt: skip


def test_kafka_nodes_run_the_clock_agent_only_when_asked(tmp_path: Path) -> None:
    plain = kafka_compose(False, tmp_path)["services"]
    assert not any("javaagent" in s["environment"].get("KAFKA_OPTS", "") for s in plain.values())
    faked = kafka_compose(True, tmp_path)["services"]
    for node in ("controller1", "kafka1"):
        env = faked[node]["environment"]
        assert (
            env["KAFKA_OPTS"]
            == f"-javaagent:/opt/brokerjepsen-clock-agent/clock-agent.jar={clocks.clock_file()}"
        )
        assert "LD_PRELOAD" not in env  # a JVM under libfaketime is too slow to keep its quorum
        assert faked[node]["volumes"] == [
            f"{(tmp_path / 'clocks' / node).resolve()}:{clocks.CONTAINER_DIR}:ro",
            "agent:/opt/agent:ro",
        ]
        assert env["KAFKA_NODE_ID"]  # its own variables kept
    assert "KAFKA_OPTS" not in faked["kafka2"]["environment"]  # a node given no clock


def test_a_zookeeper_node_keeps_its_own_jvm_options_beside_the_agent(tmp_path: Path) -> None:
    options = kafka_compose(True, tmp_path, "zk")["services"]["zk1"]["environment"]["KAFKA_OPTS"]
    assert options.startswith("-Dzookeeper.4lw.commands.whitelist=* -javaagent:"), options


def test_rabbitmqs_clock_override_puts_each_node_on_its_own_clock_file(tmp_path: Path) -> None:
    cluster = object.__new__(RabbitMQCluster)  # no Docker: only the override is written
    cluster.workdir, cluster.nodes = tmp_path, ("rabbit1", "rabbit2")
    fake = clocks.FakeClocks(tmp_path, list(cluster.nodes))
    services = json.loads(cluster._clock_override(fake).read_text())["services"]
    assert set(services) == {"rabbit1", "rabbit2"}
    assert services["rabbit2"] == {
        "environment": clocks.environment(),
        "volumes": [
            f"{(tmp_path / 'clocks' / 'rabbit2').resolve()}:{clocks.CONTAINER_DIR}:ro",
            f"{(tmp_path / 'clocks' / '.no-shm').resolve()}:/dev/shm:ro",
        ],
    }
    assert ClusterConfig(partition_handling=None).fake_clock is False


def test_a_kafka_node_must_say_its_jvm_started_the_clock_agent_and_a_spare_is_passed_over() -> None:
    from compose import clock_agent
    from compose.cli import ComposeError
    from systems.kafka.cluster import KafkaCluster

    logs = {"kafka1": f"{clock_agent.STARTED} /run/brokerjepsen-clock/faketime", "kafka2": ""}
    cluster = object.__new__(KafkaCluster)  # no Docker: the check reads what the nodes logged
    cluster.containers = lambda: dict.fromkeys(logs)  # type: ignore[method-assign]
    cluster.logged_line = lambda nodes, text, since: next(  # type: ignore[method-assign]
        (logs[n] for n in nodes if text in logs[n]), None
    )
    cluster.check_fake_clocks(["kafka1", "controller4"])  # controller4: a spare, not started
    with pytest.raises(ComposeError, match="kafka2's JVM did not start the clock agent"):
        cluster.check_fake_clocks(["kafka1", "kafka2"])
