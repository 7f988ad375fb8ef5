"""A Kafka workload's share consumers (KIP-932): their knobs, what they set on their group, the
coordinators they have, and what is refused in one line."""

from __future__ import annotations

import pytest

from systems.kafka.scenario import KafkaScenario
from systems.kafka.targets import coordinator_partition, share_key_partition
from systems.kafka.workload_spec import SHARE_IDLE_MARGIN, KafkaShareSpec
from systems.registry import parse_scenario
from systems.scenario import ScenarioError


def scenario(share: str, extra: str = "") -> str:
    return f"""
id: s
expect: safe
cluster: {{system: kafka, release: "4.4", modes: [kraft], partitions: 3}}
workload:
  producers: [{{id: P, count: 1}}]
  readers: [{{id: r}}]
  share_consumers: {share}
  {extra}
"""


def share_of(text: str) -> KafkaShareSpec:
    s = parse_scenario(text)
    assert isinstance(s, KafkaScenario) and s.workload.share_consumers is not None
    return s.workload.share_consumers


def test_share_consumers_are_named_after_their_id_and_are_clients_of_the_run() -> None:
    s = parse_scenario(scenario("{consumers: 2, id: q}"))
    assert isinstance(s, KafkaScenario)
    assert s.workload.client_ids() == ["P", "r", "q-0", "q-1"]
    default = share_of(scenario("{}"))
    assert default.processes() == ["share-consumer-0", "share-consumer-1", "share-consumer-2"]


def test_the_group_configs_are_every_typed_knob_and_the_passthrough() -> None:
    share = share_of(
        scenario(
            "{record_lock_duration_ms: 20000, delivery_count_limit: 3, "
            "group_config: {share.isolation.level: read_committed}}"
        )
    )
    assert share.group_configs() == {
        "share.delivery.count.limit": "3",
        "share.record.lock.duration.ms": "20000",
        "share.auto.offset.reset": "earliest",  # Kafka's default (latest) would skip records
        "share.isolation.level": "read_committed",
    }
    assert share.drain_idle_s() == 20 + SHARE_IDLE_MARGIN


def test_the_settings_the_checker_needs_are_resolved() -> None:
    share = share_of(
        scenario("{acknowledgement: explicit, outcomes: {accept: 0.5, release: 0.3, reject: 0.2}}")
    )
    settings = share.settings("jepsen")
    assert settings["outcomes"] == {"accept": 0.5, "release": 0.3, "reject": 0.2}
    assert settings["requested"] == {
        "delivery_count_limit": 5,
        "lock_duration_ms": 30000,
        "auto_offset_reset": "earliest",
    }
    assert (settings["topic"], settings["group"], settings["acknowledgement"]) == (
        "jepsen",
        "share",
        "explicit",
    )
    implicit = share_of(scenario("{}")).settings("jepsen")
    assert implicit["outcomes"] == {"accept": 1.0, "release": 0.0, "reject": 0.0}


def test_the_share_group_has_a_group_coordinator_and_a_share_coordinator_per_partition() -> None:
    s = parse_scenario(scenario("{group: q}"))
    assert isinstance(s, KafkaScenario)
    keys = s.workload.coordinator_keys("AAAAAAAAAAAAAAAAAAAAAQ", 3)
    assert keys == [
        ("group-coordinator", "q"),
        ("share-coordinator", "q:AAAAAAAAAAAAAAAAAAAAAQ:0"),
        ("share-coordinator", "q:AAAAAAAAAAAAAAAAAAAAAQ:1"),
        ("share-coordinator", "q:AAAAAAAAAAAAAAAAAAAAAQ:2"),
    ]
    assert [share_key_partition(k) for _, k in keys[1:]] == [0, 1, 2]
    # The three keys need not share a __share_group_state partition (nor its leader).
    assert len({coordinator_partition(k, 50) for _, k in keys[1:]}) > 1
    assert s.workload.coordinated("AAAAAAAAAAAAAAAAAAAAAQ", 3)["share-coordinator"].endswith(":0")


@pytest.mark.parametrize(
    ("share", "extra", "message"),
    [
        ("{outcomes: {accept: 1}}", "", "outcomes are for acknowledgement: explicit"),
        (
            "{acknowledgement: explicit, outcomes: {accept: 0.5, release: 0.2}}",
            "",
            "add up to 0.7, not 1",
        ),
        (
            "{group_config: {share.record.lock.duration.ms: 1000}}",
            "",
            "is the typed knob record_lock_duration_ms's",
        ),
        ("{group_config: {session.timeout.ms: 1000}}", "", "no share group config"),
        ("{delivery_count_limit: 1}", "", "greater than or equal to 2"),
        ("{group: r}", "readers: [{id: r, mode: group}]", "both the share consumers'"),
        ("{record_lock_duration_ms: 60000}", "drain_timeout: 30", "raise it"),
    ],
)
def test_bad_share_consumers_are_one_line(share: str, extra: str, message: str) -> None:
    text = scenario(share, extra)
    if "readers:" in extra:
        text = text.replace("  readers: [{id: r}]\n", "")
    with pytest.raises(ScenarioError, match=message):
        parse_scenario(text)


def test_a_share_consumer_may_not_take_another_clients_id() -> None:
    text = scenario("{id: r, consumers: 1}").replace("{id: r}", "{id: r-0}")
    with pytest.raises(ScenarioError, match="an id of their own"):
        parse_scenario(text)
