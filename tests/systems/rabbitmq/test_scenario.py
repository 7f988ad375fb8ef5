"""Scenario validation: every shipped file is valid; bad input gets one line naming the field."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from systems.rabbitmq.scenario import RabbitMQScenario
from systems.registry import find_scenario, load_scenario, parse_scenario
from systems.scenario import ScenarioError
from tests.helpers import ROOT

SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))

GOOD = """
id: t
expect: safe
cluster: {partition_handling: pause_minority, queue_type: mirrored}
workload:
  queues: [q]
  publishers: [{id: A, count: 10}]
  consumers: [{queue: q}]
nemesis:
  - {at: 1, op: isolate, nodes: [rabbit3]}
  - {at: 2, op: heal}
"""


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_shipped_scenarios_are_valid(path: Path) -> None:
    s = load_scenario(path)
    assert s.id == path.stem
    # One file per claim row, or variants of a row: K19-acks1, K24-idempotence.
    assert s.claim is None or s.id == s.claim or s.id.startswith(f"{s.claim}-")


def test_the_required_scenarios_ship() -> None:
    assert {"baseline", "R1", "R2", "R6"} <= {p.stem for p in SCENARIOS}
    r1 = load_scenario(ROOT / "scenarios" / "R1.yaml")
    assert r1.expect == "loss" and r1.cluster.partition_handling == "pause_minority"
    assert r1.cluster.queue_type == "mirrored"
    assert [(s.op, s.nodes) for s in r1.nemesis] == [
        ("isolate", ["rabbit3"]),
        ("isolate", ["rabbit1"]),
        ("isolate", ["rabbit2"]),
        ("heal", ["rabbit3"]),
        ("heal", ["rabbit2"]),
    ]
    r6 = load_scenario(ROOT / "scenarios" / "R6.yaml")
    assert r6.expect == "safe" and r6.cluster.queue_type == "quorum"
    assert r6.nemesis == r1.nemesis


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("expect: safe", "expect: maybe"), "expect 'maybe' is not one of loss, safe"),
        (("expect: safe", "expect: [safe, loss]"), "only duplicates and reordered can be"),
        (
            ("{at: 1, op: isolate, nodes: [rabbit3]}", "{at: 1, op: power-loss, nodes: [rabbit3]}"),
            "power-loss needs cluster.lazy_disks: true",
        ),
        (("pause_minority", "pause_majority"), "cluster.partition_handling"),
        (("count: 10", "count: -1"), "workload.publishers.0.count"),
        (("op: isolate", "op: explode"), "nemesis.0.op"),
        (("nodes: [rabbit3]", "nodes: [rabbit9]"), "unknown node 'rabbit9'"),
        (("consumers: [{queue: q}]", "consumers: [{queue: other}]"), "not in queues"),
        (("{at: 2, op: heal}", "{at: 0, op: heal}"), "time order"),
        (("id: t", "id: t\nsurprise: 1"), "surprise: Extra inputs are not permitted"),
        (("{at: 1, op: isolate, nodes: [rabbit3]}", "{at: 1, op: kill}"), "kill needs a target"),
        (
            ("queue_type: mirrored}", "queue_type: mirrored, version: '4.0'}"),
            "RabbitMQ 4.0 has no mirrored queues (4.0 removed them)",
        ),
        (("queue_type: mirrored}", "queue_type: mirrored, version: four}"), "cluster.version"),
        (("queue_type: mirrored}", "queue_type: lazy}"), "cluster.queue_type"),
        (("nodes: [rabbit3]", "nodes: [leader]"), "leader needs quorum queues or streams"),
        (
            ("{at: 1, op: isolate, nodes: [rabbit3]}", "{at: 1, op: pause-client, client: A}"),
            "'pause-client' is not a rabbitmq fault op",
        ),
    ],
)
def test_invalid_fields_are_named(change: tuple[str, str], expected: str) -> None:
    text = GOOD.replace(*change)
    assert text != GOOD
    with pytest.raises(ScenarioError) as e:
        parse_scenario(text, "t.yaml")
    message = str(e.value)
    assert expected in message, message
    assert message.startswith("t.yaml: ") and "\n" not in message


def test_expect_several_words_and_lazy_disks() -> None:
    s = parse_scenario(GOOD.replace("expect: safe", "expect: [duplicates, reordered]"))
    assert s.expect == "duplicates+reordered"
    text = GOOD.replace(
        "{at: 1, op: isolate, nodes: [rabbit3]}", "{at: 1, op: power-loss, nodes: [rabbit3]}"
    )
    lazy = parse_scenario(text.replace("mirrored}", "mirrored, lazy_disks: true}"))
    assert lazy.cluster.lazy_disks and lazy.nemesis[0].op == "power-loss"


def test_good_scenario_parses() -> None:
    s = parse_scenario(GOOD)
    assert s.workload.publishers[0].nodes == []  # every node of the cluster, rabbit1 first
    assert s.cluster.version is None  # 3.10, the last line with mirrored queues


@pytest.mark.parametrize("queue_type", ["quorum", "stream", "classic"])
def test_rabbitmq_4_takes_quorum_queues_streams_and_classic_queues(queue_type: str) -> None:
    text = GOOD.replace("queue_type: mirrored}", f"queue_type: {queue_type}, version: '4.3.6'}}")
    s = parse_scenario(text)
    assert (s.cluster.version, s.cluster.queue_type) == ("4.3.6", queue_type)


def test_quorum_queue_roles_and_labels() -> None:
    quorum = GOOD.replace("queue_type: mirrored}", "queue_type: quorum}")
    s = parse_scenario(
        quorum.replace(
            "{at: 1, op: isolate, nodes: [rabbit3]}", "{at: 1, op: kill, nodes: [leader], label: k}"
        ).replace("{at: 2, op: heal}", "{at: 2, op: start, nodes: ['@k']}")
    )
    assert [st.nodes for st in s.nemesis] == [["leader"], ["@k"]]
    with pytest.raises(ScenarioError, match="no earlier step is labelled 'k'"):
        parse_scenario(quorum.replace("{at: 2, op: heal}", "{at: 2, op: start, nodes: ['@k']}"))


def test_drawn_targets_take_any_queue_type_and_a_shape_replaces_groups() -> None:
    drawn = GOOD.replace(
        "{at: 1, op: isolate, nodes: [rabbit3]}", "{at: 1, op: kill, nodes: [random-node]}"
    ).replace("{at: 2, op: heal}", "{at: 2, op: partition, shape: random-halves}")
    s = parse_scenario(drawn)  # mirrored queues: no leader to aim at, but a node to draw
    assert s.nemesis[0].nodes == ["random-node"] and s.nemesis[1].shape == "random-halves"
    assert s.draws_targets() and not parse_scenario(GOOD).draws_targets()
    for bad, said in [
        ("shape: random-halves, groups: [[rabbit1], [rabbit2]]", "instead of its groups"),
        ("shape: majorities-ring", "majorities-ring needs 4 nodes or more"),
        ("shape: random-thirds", "random-halves"),
    ]:
        with pytest.raises(ScenarioError, match=said):
            parse_scenario(drawn.replace("shape: random-halves", bad))
    with pytest.raises(ScenarioError, match="random-node is drawn once a step"):
        parse_scenario(
            drawn.replace(
                "op: kill, nodes: [random-node]", "op: cut, from: [random-node], to: [random-node]"
            )
        )
    with pytest.raises(ScenarioError, match="shape is for a partition"):
        parse_scenario(drawn.replace("op: partition, shape", "op: kill, nodes: [rabbit1], shape"))


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["R1", "--rabbitmq", "4.0"], "RabbitMQ 4.0 has no mirrored queues"),
        (["R6", "--rabbitmq", "four"], "--rabbitmq takes a release line or release"),
        (["K4", "--rabbitmq", "4.0"], "--rabbitmq is for RabbitMQ scenarios"),
    ],
)
def test_cli_refuses_a_rabbitmq_release_the_scenario_cannot_run(
    args: list[str], expected: str, tmp_path: Path
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", *args, "--results", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert result.returncode == 2
    (line,) = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert expected in line and "Traceback" not in result.stderr
    assert not list(tmp_path.iterdir())  # refused before any run began


def test_not_yaml_and_not_a_mapping() -> None:
    with pytest.raises(ScenarioError, match="not valid YAML"):
        parse_scenario("a: [b", "x.yaml")
    with pytest.raises(ScenarioError, match="expected a mapping"):
        parse_scenario("- 1", "x.yaml")


def test_find_scenario_by_id_and_unknown(tmp_path: Path) -> None:
    assert find_scenario("R1", ROOT / "scenarios").name == "R1.yaml"
    with pytest.raises(ScenarioError, match="no scenario 'R99'"):
        find_scenario("R99", ROOT / "scenarios")


def _harness(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def test_cli_rejects_a_bad_scenario_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("count: 10", "count: zero"))
    result = _harness("validate", str(bad))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().count("\n") == 0
    assert "workload.publishers.0.count" in result.stderr


def test_cli_run_unknown_scenario_exits_2_without_traceback() -> None:
    result = _harness("run", "no-such-scenario")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr + result.stdout
    assert "no scenario 'no-such-scenario'" in result.stderr


def test_cli_unknown_flag_exits_2() -> None:
    result = _harness("run", "--bogus")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_two_nodes_and_a_load_balancer() -> None:
    two = GOOD.replace("mirrored}", "mirrored, nodes: 2, load_balancer: true}")
    s = parse_scenario(two.replace("rabbit3", "rabbit2"))
    assert s.cluster.nodes == 2 and s.cluster.load_balancer
    with pytest.raises(ScenarioError, match="no node 'rabbit3' in a cluster of 2"):
        parse_scenario(two)  # isolates rabbit3
    steps = "  - {at: 1, op: block-publishers, nodes: [rabbit1]}\n"
    steps += "  - {at: 1, op: wait-drained, nodes: [rabbit1], within: 30}\n"
    r4 = parse_scenario(two.split("nemesis:")[0] + "nemesis:\n" + steps)
    assert [(x.op, x.within) for x in r4.nemesis] == [
        ("block-publishers", 120.0),
        ("wait-drained", 30.0),
    ]


def test_the_load_balancer_sends_every_client_to_the_first_node() -> None:
    from systems.rabbitmq.cluster import render_haproxy

    cfg = render_haproxy(("rabbit1", "rabbit2"), "172.29.57")
    assert "  server rabbit1 172.29.57.11:5672 check\n" in cfg
    assert "  server rabbit2 172.29.57.12:5672 check backup\n" in cfg
    assert "on-marked-down shutdown-sessions on-marked-up shutdown-backup-sessions" in cfg


def test_consumer_modes_and_acks_and_what_a_stream_refuses() -> None:
    mixed = parse_scenario(GOOD.replace("{queue: q}", "{queue: q, mode: mixed, ack: multiple}"))
    (consumer,) = mixed.workload.consumers
    assert (consumer.mode, consumer.ack) == ("mixed", "multiple")
    assert mixed.draws_targets(), "a mixed consumer's coin is the run's seed's"
    stream = GOOD.replace("queue_type: mirrored}", "queue_type: stream, version: '4.3'}")
    assert parse_scenario(stream.replace("{queue: q}", "{queue: q, ack: multiple}"))
    for odd in ("mode: poll", "ack: auto"):
        with pytest.raises(ScenarioError, match="a stream is read by subscribing"):
            parse_scenario(stream.replace("{queue: q}", f"{{queue: q, {odd}}}"))
    with pytest.raises(ScenarioError, match="'rabbit3' is not a node of a cluster of 2"):
        parse_scenario(
            GOOD.replace("mirrored}", "mirrored, nodes: 2}")
            .replace("{queue: q}", "{queue: q, nodes: [rabbit3]}")
            .replace("rabbit3]}\n  - {at: 2", "rabbit2]}\n  - {at: 2")
        )


def test_a_dead_letter_queue_is_declared_unbound_and_read_for_its_queue() -> None:
    text = GOOD.replace("mirrored}", "quorum}").replace(
        "consumers: [{queue: q}]",
        "consumers: [{queue: q.dlq}]\n"
        "  dead_letter: {q: q.dlq}\n"
        "  queue_arguments: {q: {x-message-ttl: 1000, x-dead-letter-strategy: at-least-once}}",
    )
    w = parse_scenario(text).workload
    assert w.group_of("q.dlq") == "q" and w.group_of("q") == "q"
    assert w.declared_arguments() == {
        "q": {
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "q.dlq",
            "x-message-ttl": 1000,
            "x-dead-letter-strategy": "at-least-once",
        }
    }
    for old, new, said in [
        ("dead_letter: {q: q.dlq}", "dead_letter: {r: q.dlq}", "'r' is not in queues"),
        ("dead_letter: {q: q.dlq}", "dead_letter: {q: q}", "must be a queue of its own"),
        ("consumers: [{queue: q.dlq}]", "consumers: [{queue: r}]", "not in queues or dead_letter"),
        ("quorum}", "stream, version: '4.3'}", "a stream dead-letters nothing"),
    ]:
        with pytest.raises(ScenarioError, match=said):
            parse_scenario(text.replace(old, new))


def test_the_rabbitmq_team_s_jepsen_cells_ship_as_the_catalogue_lists_them() -> None:
    from harness.claims import claim_scenarios

    cells = {p.stem: load_scenario(p) for p in (ROOT / "scenarios/rabbitmq-jepsen").glob("*.yaml")}
    assert sorted(cells) == sorted(f"RJ{n}" for n in range(1, 15))
    catalogue = (ROOT / "docs/claims.md").read_text()
    for cid, s in cells.items():
        assert s.claim == cid and f"| {cid} |" in catalogue
        assert (s.cluster.nodes, s.cluster.version, s.cluster.queue_type) == (5, "4.3", "quorum")
        shapes = {step.shape for step in s.nemesis if step.op == "partition"}
        assert len(shapes) == 1 and s.nemesis[0].at == 20 and s.draws_targets()
        assert [p.nodes for p in s.workload.publishers] == [[f"rabbit{i}"] for i in range(1, 6)]
    assert cells["RJ13"].workload.dead_letter == {"jepsen.queue": "jepsen.queue.dead.letter"}
    assert {c.mode for c in cells["RJ12"].workload.consumers} == {"poll"}
    members = cells["RJ6"].workload.queue_arguments["jepsen.queue"]
    assert members["x-quorum-initial-group-size"] == 3
    assert {s.id for s in claim_scenarios(ROOT / "scenarios")} >= set(cells)
    from systems.registry import find_scenario

    assert find_scenario("RJ1", ROOT / "scenarios") == ROOT / "scenarios/rabbitmq-jepsen/RJ1.yaml"


@pytest.mark.unit
def test_a_step_s_target_is_named_as_kafka_s_or_by_its_older_name() -> None:
    quorum = GOOD.replace("queue_type: mirrored}", "queue_type: quorum}")
    for said in ("target: leader", "nodes: leader"):
        s = parse_scenario(quorum.replace("nodes: [rabbit3]", said))
        assert isinstance(s, RabbitMQScenario) and s.nemesis[0].nodes == ["leader"]
    with pytest.raises(ScenarioError) as e:
        parse_scenario(quorum.replace("nodes: [rabbit3]", "target: leader, nodes: rabbit2"))
    assert "target and nodes are one field" in str(e.value)


@pytest.mark.unit
def test_a_role_in_a_partition_s_groups_is_said_to_be_one() -> None:
    quorum = GOOD.replace("queue_type: mirrored}", "queue_type: quorum}")
    step = "{at: 1, op: partition, groups: [[leader], [rabbit2]]}"
    with pytest.raises(ScenarioError) as e:
        parse_scenario(quorum.replace("{at: 1, op: isolate, nodes: [rabbit3]}", step))
    assert "'leader' is resolved only in target, from and to" in str(e.value)
    assert "did you mean" not in str(e.value)


@pytest.mark.unit
def test_rabbitmq_4_3_needs_no_partition_handling() -> None:
    """4.3 ignores cluster_partition_handling: a scenario for it need not choose one."""
    no_handling = GOOD.replace("partition_handling: pause_minority, queue_type: mirrored", "{}")
    on_4_3 = no_handling.replace("{}", 'version: "4.3", queue_type: quorum')
    s = parse_scenario(on_4_3)
    assert isinstance(s, RabbitMQScenario) and s.cluster.partition_handling is None
    with pytest.raises(ScenarioError, match="partition_handling is required"):
        parse_scenario(on_4_3.replace('"4.3"', '"4.0"'))


MEMBERSHIP = """
id: x
expect: safe
cluster: {version: "4.3", queue_type: QUEUE_TYPE}
workload:
  queues: [q]
  publishers: [{id: A, count: 10}]
  consumers: [{queue: q}]
  QUEUE_ARGUMENTS
nemesis:
"""


def membership(steps: list[str], queue_type: str = "quorum", arguments: str = "") -> str:
    lines = [f"- {{at: {i}, {s}}}" for i, s in enumerate(steps, 1)]
    text = MEMBERSHIP.replace("QUEUE_TYPE", queue_type).replace("QUEUE_ARGUMENTS", arguments)
    return text + "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("steps", "queue_type", "arguments", "message"),
    [
        (
            ["op: forget-node, target: leader", "op: forget-node, target: [rabbit2, rabbit3]"],
            "quorum",
            "",
            "nemesis.1: forget-node would leave the cluster no node (3 nodes, 3 out by then): "
            "add-node some back first",
        ),
        (
            ["op: shrink-queue, target: followers", "op: shrink-queue, target: leader"],
            "quorum",
            "",
            "nemesis.1: shrink-queue would leave a queue no member (3 members, 3 out by then)",
        ),
        (
            ["op: shrink-queue, target: rabbit1", "op: shrink-queue, target: rabbit2"],
            "quorum",
            "queue_arguments: {q: {x-quorum-initial-group-size: 2}}",
            "nemesis.1: shrink-queue would leave a queue no member (2 members, 2 out by then)",
        ),
        (
            ["op: shrink-queue, target: rabbit1"],
            "stream",
            "",
            "nemesis.0: shrink-queue needs quorum queues (cluster.queue_type: quorum)",
        ),
        (["op: forget-node"], "quorum", "", "forget-node needs a target"),
        (["op: add-node, target: rabbit9"], "quorum", "", "unknown node 'rabbit9'"),
    ],
)
def test_a_membership_step_that_cannot_be_is_one_line(
    steps: list[str], queue_type: str, arguments: str, message: str
) -> None:
    with pytest.raises(ScenarioError) as e:
        parse_scenario(membership(steps, queue_type, arguments), "x.yaml")
    said = str(e.value)
    assert message in said and "\n" not in said, said


def test_membership_steps_that_put_back_what_they_took_out_are_counted_through() -> None:
    steps = [
        "op: forget-node, target: leader",
        "op: forget-node, target: rabbit3",
        "op: add-node",  # every node back: two more may go
        "op: forget-node, target: [rabbit1, rabbit2]",
        "op: add-node, target: [rabbit1]",
        "op: shrink-queue, target: followers",
        "op: grow-queue, target: non-members",
        "op: shrink-queue, target: rabbit1",
    ]
    scenario = parse_scenario(membership(steps), "x.yaml")
    assert [s.op for s in scenario.nemesis][-2:] == ["grow-queue", "shrink-queue"]


PROBED = """
id: t
expect: safe
cluster: {version: "4.3", metadata_store: khepri, queue_type: quorum}
workload:
  queues: [q]
  publishers: [{id: A, count: 10}]
  consumers: [{queue: q}]
expect_declares:
  minority: {answers: [refused, timed-out], after_heal: nowhere}
  majority: {answers: [accepted]}
nemesis:
  - {at: 1, op: isolate, target: [rabbit3]}
  - {at: 2, op: declare, target: [rabbit1, rabbit3], within: 40}
  - {at: 50, op: heal}
"""


@pytest.mark.unit
def test_a_declare_step_and_what_each_side_of_the_partition_must_get() -> None:
    s = parse_scenario(PROBED)
    assert isinstance(s, RabbitMQScenario) and s.expect_declares is not None
    assert s.expect_declares.minority is not None and s.expect_declares.majority is not None
    assert s.expect_declares.minority.answers == ["refused", "timed-out"]
    assert s.expect_declares.minority.after_heal == "nowhere"
    assert s.expect_declares.majority.after_heal is None  # not judged
    assert (s.nemesis[1].op, s.nemesis[1].nodes, s.nemesis[1].within) == (
        "declare",
        ["rabbit1", "rabbit3"],
        40,
    )


@pytest.mark.unit
@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        (
            "  - {at: 2, op: declare, target: [rabbit1, rabbit3], within: 40}\n",
            "",
            "needs a declare step",
        ),
        (
            "  minority: {answers: [refused, timed-out], after_heal: nowhere}\n"
            "  majority: {answers: [accepted]}\n",
            "  {}\n",
            "name minority, majority or both",
        ),
        ("answers: [accepted]", "answers: [declined]", "answers.0: Input should be 'accepted'"),
        ("answers: [accepted]", "answers: []", "at least 1"),
        ("after_heal: nowhere", "after_heal: somewhere", "'nowhere' or 'everywhere'"),
        ("op: declare, target: [rabbit1, rabbit3]", "op: declare", "needs a target"),
    ],
)
def test_declare_expectations_that_cannot_be_judged_are_refused(
    old: str, new: str, said: str
) -> None:
    assert old in PROBED
    with pytest.raises(ScenarioError, match=said):
        parse_scenario(PROBED.replace(old, new))


@pytest.mark.unit
def test_a_scenario_about_one_metadata_store_is_refused_by_a_release_with_the_other(
    tmp_path: Path,
) -> None:
    mnesia = PROBED.replace(
        'version: "4.3", metadata_store: khepri',
        'version: "4.0", metadata_store: mnesia, partition_handling: pause_minority',
    )
    assert parse_scenario(mnesia).cluster.metadata_store == "mnesia"
    with pytest.raises(ScenarioError, match="RabbitMQ 4.3 keeps its metadata in Khepri"):
        parse_scenario(mnesia.replace('version: "4.0"', 'version: "4.3"'))
    with pytest.raises(ScenarioError, match="RabbitMQ 4.0 keeps its metadata in Mnesia"):
        parse_scenario(
            PROBED.replace('version: "4.3"', 'version: "4.0", partition_handling: ignore')
        )
    with pytest.raises(ScenarioError, match="RabbitMQ 3.10 keeps its metadata in Mnesia"):
        parse_scenario(PROBED.replace('version: "4.3", ', "partition_handling: ignore, "))
    # A scenario that names no store runs on either.
    assert parse_scenario(PROBED.replace("metadata_store: khepri, ", "")).cluster.version == "4.3"
    # --rabbitmq moves a scenario to another release, and is refused there in one line.
    path = tmp_path / "t.yaml"
    path.write_text(mnesia)
    assert load_scenario(path).cluster.version == "4.0"
    with pytest.raises(ScenarioError, match="metadata_store mnesia needs 4.1 or older"):
        load_scenario(path, rabbitmq="4.3")
