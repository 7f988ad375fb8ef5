"""Kafka scenarios: a scenario file for every K-claim row, valid for each of its modes, and bad
steps, readers and cluster settings refused in one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from systems.kafka.scenario import KafkaScenario, KafkaStep
from systems.registry import load_scenario, parse_scenario
from systems.scenario import ScenarioError
from tests.helpers import ROOT

KAFKA_SCENARIOS = sorted(p for p in (ROOT / "scenarios").glob("K*.yaml"))


def test_every_kafka_claim_row_has_a_scenario() -> None:
    claims = {load_scenario(p).claim for p in KAFKA_SCENARIOS}
    rows = {f"K{i}" for i in range(1, 27)} - {"K17", "K18"}  # K17/K18: power loss, not here
    assert rows <= claims, sorted(rows - claims)


@pytest.mark.parametrize("path", KAFKA_SCENARIOS, ids=lambda p: p.stem)
def test_kafka_scenarios_are_valid_for_each_of_their_modes(path: Path) -> None:
    s = load_scenario(path)
    assert isinstance(s, KafkaScenario) and s.claim and re.fullmatch(r"K\d+", s.claim)
    assert s.id == path.stem
    if s.expect == "loss":  # built to lose: a fault aimed at the leader (power-loss: all replicas)
        assert any(
            step.op == "power-loss"
            or step.target == "leader"
            or step.from_ == "leader"
            or step.to == "leader"
            or step.op == "cut"
            and "leader" in (step.from_, step.to)
            or step.op == "rolling-restart"
            for step in s.nemesis
        ), s.id


BASE = """
id: x
expect: safe
cluster: {system: kafka, modes: [zk, kraft]}
workload: {producers: [{id: P, count: 1}], readers: [{id: r}]}
"""


@pytest.mark.parametrize(
    ("nemesis", "message"),
    [
        (
            "[{at: 1, op: kill, target: leaderr}]",
            "no node 'leaderr' in mode zk (did you mean leader?)",
        ),
        ("[{at: 1, op: kill}]", "kill needs a target"),
        ("[{at: 1, op: cut, from: leader}]", "cut needs from and to"),
        ("[{at: 1, op: degrade, from: leader, to: followers}]", "degrade needs loss_pct"),
        ("[{at: 1, op: start, target: '@old'}]", "@old names no earlier step's label"),
        ("[{at: 1, op: isolate, target: [zk1]}]", "no node 'zk1' in mode kraft"),
        ("[{at: 1, op: cut-from-quorum, target: leader}]", "cut-from-quorum needs a quorum apart"),
        (
            "[{at: 1, op: pause-client, client: P9}]",
            "pause-client: no client 'P9' (clients are P, r)",
        ),
        ("[{at: 1, op: pause-client}]", "pause-client needs a client (a producer's, reader's"),
        ("[{at: 1, op: pause-client, client: P, target: leader}]", "names a client, not nodes"),
        ("[{at: 1, op: kill, target: leader, client: P}]", "client is for pause-client, resume"),
        ("[{at: 2, op: restart-client, client: P}]", "restart-client P follows no kill-client"),
        ("[{at: 1, op: resume-client, client: P}]", "resume-client P follows no pause-client"),
    ],
)
def test_bad_kafka_steps_are_one_line(nemesis: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=re.escape(message)):
        parse_scenario(BASE + f"nemesis: {nemesis}\n", "x.yaml")


def test_the_consumer_group_protocol_is_a_group_readers_and_needs_kafka_4() -> None:
    group = BASE.replace(
        "readers: [{id: r}]", "readers: [{id: r, mode: group, group_protocol: consumer}]"
    )
    spec = parse_scenario(group, "x.yaml")
    assert isinstance(spec, KafkaScenario)
    assert spec.line_refusal("4.1") is None and spec.line_refusal("4.4.0") is None
    assert "KIP-848" in (spec.line_refusal("3.9") or "")
    assert parse_scenario(BASE, "x.yaml").line_refusal("3.9") is None  # type: ignore[union-attr]
    assign = BASE.replace("readers: [{id: r}]", "readers: [{id: r, group_protocol: consumer}]")
    with pytest.raises(ScenarioError, match="group_protocol is for readers in mode group"):
        parse_scenario(assign, "x.yaml")


def test_bad_cluster_settings_are_one_line() -> None:
    bad = BASE.replace("modes: [zk, kraft]}", "modes: [zk], replica_assignment: [[1, 2]]}")
    with pytest.raises(ScenarioError, match="replication_factor distinct brokers"):
        parse_scenario(bad, "x.yaml")


# ---- the final read ----------------------------------------------------------------------------


def test_the_final_reads_group_is_reserved() -> None:
    bad = BASE.replace("readers: [{id: r}]", "readers: [{id: final}]")
    with pytest.raises(ScenarioError, match="reader id 'final' is the final read's own"):
        parse_scenario(bad, "x.yaml")
    assert parse_scenario(bad.replace("}]}", "}], final_read: false}"), "x.yaml")


MEMBERSHIP = """
id: x
expect: safe
cluster: {system: kafka, modes: [kraft-dedicated], brokers: 4, spare_brokers: 1}
workload: {producers: [{id: P, count: 1}], readers: [{id: r}]}
"""


@pytest.mark.parametrize(
    ("nemesis", "message"),
    [
        (
            "[{at: 1, op: add-broker}, {at: 2, op: add-broker}]",
            "nemesis.1: add-broker needs a spare broker: cluster.spare_brokers is 1, and the "
            "steps before it started them all",
        ),
        (
            "[{at: 1, op: add-broker, target: [kafka2]}]",
            "add-broker starts one spare broker, not ['kafka2'] (spares not started: kafka5)",
        ),
        (
            "[{at: 1, op: remove-broker, target: leader}, {at: 2, op: remove-broker, "
            "target: follower}]",
            "nemesis.1: remove-broker would leave 2 brokers for replication_factor 3",
        ),
        ("[{at: 1, op: remove-broker, target: followers}]", "remove-broker takes one broker"),
        ("[{at: 1, op: remove-broker, target: [kafka1, kafka2]}]", "takes one broker at a time"),
        ("[{at: 1, op: kill, target: [kafka5]}]", "kafka5 is a spare broker no add-broker has"),
        ("[{at: 1, op: kill, target: leader, throttle: 2048}]", "throttle is for reassign and"),
        ("[{at: 1, op: add-broker, throttle: 2048}]", "set move_onto: true"),
        ("[{at: 1, op: reassign, move_onto: true}]", "move_onto is for add-broker, not reassign"),
    ],
)
def test_bad_membership_steps_are_one_line(nemesis: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=re.escape(message)):
        parse_scenario(MEMBERSHIP + f"nemesis: {nemesis}\n", "x.yaml")


def test_a_removal_below_min_isr_is_refused_and_a_start_of_the_removed_broker_counts_it_back() -> (
    None
):
    rf2 = MEMBERSHIP.replace("spare_brokers: 1", "replication_factor: 2, min_insync_replicas: 4")
    with pytest.raises(ScenarioError, match="fewer than min_insync_replicas 4"):
        parse_scenario(rf2 + "nemesis: [{at: 1, op: remove-broker, target: leader}]\n", "x.yaml")
    back = (
        "nemesis: [{at: 1, op: remove-broker, target: leader, label: gone}, "
        "{at: 2, op: start, target: '@gone'}, {at: 3, op: remove-broker, target: leader}]\n"
    )
    assert parse_scenario(MEMBERSHIP + back, "x.yaml").nemesis[2].op == "remove-broker"
    after = "nemesis: [{at: 1, op: add-broker}, {at: 2, op: kill, target: [kafka5]}]\n"
    assert parse_scenario(MEMBERSHIP + after, "x.yaml").cluster.spare_brokers == 1


QUORUM = """
id: x
expect: safe
cluster: {system: kafka, modes: [kraft-dedicated, kraft], controller_quorum: dynamic,
  spare_controllers: 1}
workload: {producers: [{id: P, count: 1}], readers: [{id: r}]}
"""


@pytest.mark.parametrize(
    ("cluster", "message"),
    [
        (
            "{system: kafka, controller_quorum: dynamic}",  # modes default to zk and kraft
            "controller_quorum: dynamic is a KRaft quorum's (KIP-853): modes must not include zk",
        ),
        (
            "{system: kafka, modes: [kraft], spare_controllers: 1}",
            "spare_controllers: a spare controller joins a dynamic quorum",
        ),
        (
            "{system: kafka, modes: [kraft], controller_quorum: dynamic, release: '3.8'}",
            "controller_quorum: dynamic needs Kafka 3.9 or later (KIP-853), not 3.8",
        ),
        ("{system: kafka, modes: [kraft], spare_controllers: 3}", "less than or equal to 2"),
    ],
)
def test_a_dynamic_quorum_needs_kraft_and_kafka_39(cluster: str, message: str) -> None:
    text = BASE.replace("{system: kafka, modes: [zk, kraft]}", cluster)
    with pytest.raises(ScenarioError, match=re.escape(message)):
        parse_scenario(text, "x.yaml")


def test_a_dynamic_quorum_on_a_line_before_39_is_refused_when_the_run_asks_for_it() -> None:
    s = parse_scenario(QUORUM, "x.yaml")
    assert isinstance(s, KafkaScenario)
    assert s.line_refusal("3.7") == (
        "controller_quorum: dynamic needs Kafka 3.9 or later (KIP-853), not 3.7"
    )
    assert s.line_refusal("3.9") is None and s.line_refusal("4.4.0") is None


@pytest.mark.parametrize(
    ("nemesis", "message"),
    [
        (
            "[{at: 1, op: add-controller}, {at: 2, op: add-controller}]",
            "nemesis.1: add-controller needs a spare controller: cluster.spare_controllers is 1, "
            "and the steps before it started them all",
        ),
        (
            "[{at: 1, op: add-controller, target: [controller2]}]",
            "nemesis.0: add-controller starts a spare controller or one a remove-controller "
            "removed; controller2 is neither (spares not started: controller4)",
        ),
        (
            "[{at: 1, op: remove-controller, target: [controller1]}, "
            "{at: 2, op: remove-controller, target: controller}, "
            "{at: 3, op: remove-controller, target: controller}]",
            "nemesis.2: remove-controller would remove the last voter, which Kafka refuses",
        ),
        ("[{at: 1, op: remove-controller, target: quorum}]", "remove-controller takes one"),
        ("[{at: 1, op: remove-controller, target: leader}]", "controller (the active one), an"),
        ("[{at: 1, op: add-controller, target: controller}]", "add-controller starts one"),
        ("[{at: 1, op: kill, target: [controller4]}]", "controller4 is a spare controller no"),
        (
            "[{at: 1, op: remove-controller, target: controller, label: gone}, "
            "{at: 2, op: kill, target: '@gone'}]",
            "nemesis.1: @gone is out of the quorum and stopped (remove-controller)",
        ),
    ],
)
def test_bad_quorum_steps_are_one_line(nemesis: str, message: str) -> None:
    dedicated = QUORUM.replace("[kraft-dedicated, kraft]", "[kraft-dedicated]")
    with pytest.raises(ScenarioError, match=re.escape(message)):
        parse_scenario(dedicated + f"nemesis: {nemesis}\n", "x.yaml")


def test_quorum_steps_need_a_dynamic_quorum_and_never_stop_a_combined_node() -> None:
    static = QUORUM.replace(" controller_quorum: dynamic,\n  spare_controllers: 1", "")
    with pytest.raises(ScenarioError, match="add-controller needs cluster.controller_quorum"):
        parse_scenario(static + "nemesis: [{at: 1, op: add-controller}]\n", "x.yaml")
    combined = "nemesis: [{at: 1, op: remove-controller, target: [kafka1]}]\n"
    with pytest.raises(ScenarioError, match="kafka1 is a broker too in mode kraft"):
        parse_scenario(QUORUM.replace("[kraft-dedicated, kraft]", "[kraft]") + combined, "x.yaml")
    # A removed controller named back, then a spare: four voters, one out, none refused.
    steps = (
        "nemesis: [{at: 1, op: remove-controller, target: controller, label: gone}, "
        "{at: 2, op: add-controller, target: '@gone'}, {at: 3, op: add-controller}, "
        "{at: 4, op: kill, target: [controller4]}]\n"
    )
    s = parse_scenario(QUORUM + steps, "x.yaml")
    assert s.cluster.node_names("kraft") >= {"controller4"}  # named alike in both KRaft modes


SHARE_SCENARIOS = sorted(p for p in (ROOT / "scenarios").glob("S[0-9]*.yaml"))


def test_every_share_group_claim_row_has_a_scenario_on_each_client() -> None:
    clients: dict[str, set[str]] = {}
    for path in SHARE_SCENARIOS:
        s = load_scenario(path)
        assert isinstance(s, KafkaScenario) and s.claim and s.id == path.stem
        assert s.workload.share_consumers is not None and s.cluster.release == "4.4"
        clients.setdefault(s.claim, set()).add(s.workload.share_consumers.client)
    assert clients == {f"S{i}": {"python", "java"} for i in range(1, 5)}


def test_the_share_rows_fault_what_their_claims_name() -> None:
    steps: dict[str, list[KafkaStep]] = {}
    for p in SHARE_SCENARIOS:
        s = load_scenario(p)
        assert isinstance(s, KafkaScenario)
        steps[p.stem] = s.nemesis
    assert steps["S1"] == steps["S1-java"] == []
    assert {s.target for s in steps["S2"] if s.op in ("kill", "restart")} == {"leader"}
    assert {s.target for s in steps["S3"] if s.op == "kill"} == {"share-coordinator"}
    s4 = load_scenario(ROOT / "scenarios" / "S4.yaml")
    assert isinstance(s4, KafkaScenario) and s4.workload.share_consumers is not None
    lock = s4.workload.share_consumers.record_lock_duration_ms / 1000
    paused = [s for s in s4.nemesis if s.op == "pause-client"]
    resumed = [s for s in s4.nemesis if s.op == "resume-client"]
    assert paused and all(r.at - p.at > lock for p, r in zip(paused, resumed, strict=True))


SHARE = """
id: x
expect: safe
cluster: {system: kafka, release: "4.4", modes: [kraft], partitions: 2}
workload:
  producers: [{id: P, count: 1}]
  readers: [{id: r}]
  share_consumers: {consumers: 2}
"""


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('release: "4.4"', 'release: "4.1"', "need Kafka 4.2 or later .* not 4.1"),
        ('release: "4.4"', 'release: "3.9"', "need Kafka 4.2 or later .* not 3.9"),
        (
            "{consumers: 2}",
            "{consumers: 2, record_lock_duration_ms: 5000}",
            "below the brokers' group.share.min.record.lock.duration.ms \\(15000\\)",
        ),
        (
            "{consumers: 2}",
            "{consumers: 2, delivery_count_limit: 12}",
            "above the brokers' group.share.max.delivery.count.limit \\(10\\)",
        ),
        (
            "partitions: 2}",
            "partitions: 2, broker_config: {group.share.min.record.lock.duration.ms: x}}",
            "no number",
        ),
    ],
)
def test_share_consumers_out_of_their_release_or_the_brokers_bounds_are_one_line(
    old: str, new: str, message: str
) -> None:
    with pytest.raises(ScenarioError, match=message):
        parse_scenario(SHARE.replace(old, new))


def test_a_lock_below_the_default_bound_runs_where_the_brokers_allow_it() -> None:
    text = SHARE.replace(
        "partitions: 2}",
        "partitions: 2, broker_config: {group.share.min.record.lock.duration.ms: 1000}}",
    ).replace("{consumers: 2}", "{consumers: 2, record_lock_duration_ms: 5000}")
    assert isinstance(parse_scenario(text), KafkaScenario)


@pytest.mark.parametrize(
    ("nemesis", "message"),
    [
        ("[{at: 1, op: kill, target: share-coordinator, partition: 2}]", "the topic has 2"),
        ("[{at: 1, op: pause-client, client: share-consumer-2}]", "no client 'share-consumer-2'"),
    ],
)
def test_bad_share_steps_are_one_line(nemesis: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        parse_scenario(SHARE + f"nemesis: {nemesis}\n")


def test_the_share_coordinator_needs_share_consumers() -> None:
    steps = "nemesis: [{at: 1, op: kill, target: share-coordinator}]\n"
    assert isinstance(parse_scenario(SHARE + steps), KafkaScenario)
    with pytest.raises(ScenarioError, match="share-coordinator needs share consumers"):
        parse_scenario(SHARE.replace("  share_consumers: {consumers: 2}\n", "") + steps)


def test_the_mock_tier_runs_no_share_consumers() -> None:
    text = SHARE.replace('system: kafka, release: "4.4", modes: [kraft]', "system: kafka-mock")
    with pytest.raises(ScenarioError, match="share_consumers need a real cluster"):
        parse_scenario(text)
