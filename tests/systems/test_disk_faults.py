"""Disk faults in both systems' scenarios and nemeses: a step's arguments refused in one line,
and each system's dispatcher handing the step, its targets resolved, to the common nemesis."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import pytest

from lazyfs.corrupt import Corruption
from systems.kafka.nemesis import KafkaNemesis
from systems.rabbitmq.nemesis import apply_step
from systems.rabbitmq.scenario import NemesisStep
from systems.registry import parse_scenario
from systems.scenario import ScenarioError

KAFKA = """
id: x
expect: safe
cluster: {system: kafka, modes: [kraft], lazy_disks: true}
workload: {producers: [{id: P, count: 1}], readers: [{id: r}]}
"""
RABBITMQ = """
id: x
expect: safe
cluster: {version: "4.3", queue_type: quorum, lazy_disks: true}
workload: {queues: [q], publishers: [{id: A, count: 10}], consumers: [{queue: q}]}
"""
NODE = {KAFKA: "kafka1", RABBITMQ: "rabbit1"}


def nemesis(base: str, *steps: str) -> str:
    """A nemesis section of these steps (`op: kill, target: NODE`), NODE a node of the base's."""
    lines = [f"- {{at: {i}, {s.replace('NODE', NODE[base])}}}" for i, s in enumerate(steps, 1)]
    return "nemesis:\n" + "\n".join(lines) + "\n"


@pytest.mark.parametrize("base", [KAFKA, RABBITMQ], ids=["kafka", "rabbitmq"])
@pytest.mark.parametrize(
    ("step", "message"),
    [
        ("op: disk-error, target: NODE", "disk-error needs fail_on: write, fsync or read"),
        ("op: disk-error, target: NODE, fail_on: sync", "fail_on"),
        ("op: disk-error, target: NODE, fail_on: write, path: /x", "path '/x': a glob relative"),
        ("op: disk-error, target: NODE, fail_on: read, path: '../*'", "no leading /, no .."),
        ("op: disk-error, target: NODE, fail_on: read, probability: 0", "probability"),
        (
            "op: disk-full, target: NODE, path: '*.log'",
            "path is for disk-error, corrupt or torn-write, not disk-full",
        ),
        ("op: kill, target: NODE, fail_on: write", "fail_on is for disk-error, not kill"),
        ("op: corrupt, target: NODE", "corrupt needs path: a glob of the broker's data files"),
        ("op: corrupt, target: NODE, path: '*.log', keep: 0.5", "keep is for torn-write, not"),
        ("op: torn-write, target: NODE, seed: 3", "seed is for corrupt, not torn-write"),
        ("op: disk-full, target: NODE, while: running", "while is for corrupt, not disk-full"),
        ("op: corrupt, target: NODE, path: '*.log', while: paused", "while"),
        ("op: corrupt, target: NODE, path: '*.log', corruption: shred", "corruption"),
        ("op: corrupt, target: NODE, path: '*.log', length: 0", "length"),
        ("op: torn-write, target: NODE, keep: 1", "keep"),
        ("op: disk-full", "disk-full needs a target"),
    ],
)
def test_a_bad_disk_step_is_one_line(base: str, step: str, message: str) -> None:
    text = base + nemesis(base, step)
    with pytest.raises(ScenarioError) as e:
        parse_scenario(text, "x.yaml")
    said = str(e.value)
    assert re.search(re.escape(message), said) and "\n" not in said, said


@pytest.mark.parametrize("base", [KAFKA, RABBITMQ], ids=["kafka", "rabbitmq"])
@pytest.mark.parametrize("op", ["disk-error", "disk-full", "disk-ok", "torn-write", "corrupt"])
def test_a_disk_step_needs_lazy_disks(base: str, op: str) -> None:
    extra = {"disk-error": ", fail_on: write", "corrupt": ", path: '*.log'"}.get(op, "")
    step = f"op: {op}, target: NODE{extra}"
    text = base.replace(", lazy_disks: true", "") + nemesis(base, step)
    with pytest.raises(ScenarioError, match=f"nemesis.0: {op} needs cluster.lazy_disks: true"):
        parse_scenario(text, "x.yaml")


@pytest.mark.parametrize("base", [KAFKA, RABBITMQ], ids=["kafka", "rabbitmq"])
def test_a_disk_step_takes_its_arguments_and_a_bare_disk_ok_mends_every_disk(base: str) -> None:
    text = base + nemesis(
        base,
        "op: disk-error, target: [NODE], fail_on: fsync, path: '*.log', probability: 0.5",
        "op: disk-full, target: [NODE]",
        "op: disk-ok",
    )
    error, full, ok = parse_scenario(text, "x.yaml").nemesis
    assert (error.fail_on, error.path, error.probability) == ("fsync", "*.log", 0.5)
    assert (full.path, full.probability) == ("*", 1.0)
    assert ok.op == "disk-ok"


@pytest.mark.parametrize("base", [KAFKA, RABBITMQ], ids=["kafka", "rabbitmq"])
def test_corrupt_and_torn_write_take_their_arguments_and_corrupt_stops_the_node_by_default(
    base: str,
) -> None:
    text = base + nemesis(
        base,
        "op: corrupt, target: [NODE], path: '*.log', files: 2, length: 16, offset: -16, "
        "corruption: zero, seed: 7, while: running",
        "op: corrupt, target: [NODE], path: '*.wal'",
        "op: torn-write, target: [NODE], path: '*.log', keep: 0.25",
    )
    steps: list[Any] = list(parse_scenario(text, "x.yaml").nemesis)
    given, bare, torn = steps
    assert (given.files, given.length, given.offset, given.corruption) == (2, 16, -16, "zero")
    assert (given.seed, given.while_) == (7, "running")
    assert (bare.files, bare.length, bare.offset, bare.corruption) == (1, 1, None, "flip")
    assert (bare.seed, bare.while_) == (None, "stopped")
    assert (torn.path, torn.keep) == ("*.log", 0.25)


class FakeNet:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.history = None
        self.down: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kw: self.calls.append((name, *args, *kw.values()))


def kafka_step(**kw: Any) -> Any:
    fields = {"target": None, "from_": None, "to": None, "partition": 0, "label": ""}
    disk = {"fail_on": None, "path": "*", "probability": 1.0, "keep": 0.5, "seed": None}
    corrupt = {"files": 1, "length": 1, "offset": None, "corruption": "flip", "while_": "stopped"}
    return SimpleNamespace(**(fields | disk | corrupt | kw))


def test_kafkas_disk_steps_reach_the_common_nemesis_on_their_resolved_targets() -> None:
    net = FakeNet()
    k = KafkaNemesis(net, SimpleNamespace(), "t", 1)  # type: ignore[arg-type]
    k.apply(kafka_step(op="disk-error", target=["kafka2"], fail_on="read", path="*.index"))
    k.apply(kafka_step(op="disk-full", target=["kafka3"], label="full"))
    k.apply(kafka_step(op="disk-ok", target="@full"))
    k.apply(kafka_step(op="disk-ok"))
    k.apply(kafka_step(op="torn-write", target=["kafka1"], path="*.log", keep=0.25))
    k.apply(kafka_step(op="corrupt", target=["kafka2"], path="*.log", seed=9, length=4))
    assert net.calls == [
        ("disk_error", ["kafka2"], "read", "*.index", 1.0),
        ("disk_full", ["kafka3"]),
        ("disk_ok", ["kafka3"]),
        ("disk_ok", None),
        ("torn_write", ["kafka1"], "*.log", 0.25),
        ("corrupt", ["kafka2"], Corruption("*.log", seed=9, length=4), True),
    ]


def test_rabbitmqs_disk_steps_reach_the_common_nemesis() -> None:
    net = FakeNet()
    steps: list[dict[str, Any]] = [
        {"op": "disk-error", "target": "rabbit2", "fail_on": "write", "probability": 0.1},
        {"op": "disk-full", "target": ["rabbit1", "rabbit3"]},
        {"op": "disk-ok"},
        {"op": "corrupt", "target": "rabbit1", "path": "*.wal", "while": "running"},
    ]
    for fields in steps:
        apply_step(net, SimpleNamespace(), NemesisStep.model_validate({"at": 1, **fields}))  # type: ignore[arg-type]
    name, nodes, spec, stopped = net.calls.pop()
    # No seed given: one drawn, which the nemesis writes to the history to replay it with.
    assert (name, nodes, spec.path, stopped) == ("corrupt", ["rabbit1"], "*.wal", False)
    assert isinstance(spec.seed, int)
    assert net.calls == [
        ("disk_error", ["rabbit2"], "write", "*", 0.1),
        ("disk_full", ["rabbit1", "rabbit3"]),
        ("disk_ok", None),
    ]
