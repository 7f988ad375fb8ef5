"""A real-cluster Kafka run's share group (KIP-932), its admin client faked: the group's configs
set before its consumers start, what the manifest then says of it, and the refusals."""

from __future__ import annotations

from typing import Any

import pytest

from checkers.share_groups import ShareSetup
from compose.cli import ComposeError
from contract.manifest import Manifest
from systems.kafka.run import KafkaRun
from systems.registry import load_scenario
from systems.scenario import ScenarioError
from tests.helpers import ROOT


class FakeAdmin:
    def __init__(self, fail: str | None = None, say: dict[str, str] | None = None) -> None:
        self.fail, self.say = fail, say or {}
        self.set: list[tuple[str, dict[str, str]]] = []

    def topic_id(self, topic: str) -> str:
        return "AAAAAAAAAAAAAAAAAAAAAQ"

    def set_group_configs(self, group: str, configs: dict[str, str]) -> dict[str, str]:
        if self.fail:
            raise ComposeError(self.fail)
        self.set.append((group, configs))
        return configs | self.say


def share_run(scenario: str = "S3", features: dict[str, str] | None = None) -> Any:
    run = object.__new__(KafkaRun)
    run.scenario = load_scenario(ROOT / "scenarios" / f"{scenario}.yaml")  # type: ignore[assignment]
    run.manifest = Manifest(kafka_features=features or {"share.version": "2"})
    run._mark = lambda step: None  # type: ignore[method-assign]
    return run


def test_the_share_groups_configs_are_set_before_its_consumers_and_kept_in_the_manifest() -> None:
    run, admin = share_run(), FakeAdmin()
    assert run._share_group(admin) == "AAAAAAAAAAAAAAAAAAAAAQ"
    ((group, configs),) = admin.set
    assert group == "share" and configs["share.record.lock.duration.ms"] == "15000"
    assert run.manifest.share_groups is not None
    shared = run.manifest.share_groups["share"]
    assert shared["topic_id"] == "AAAAAAAAAAAAAAAAAAAAAQ" and shared["config"] == configs
    assert shared["topics"] == [run.scenario.cluster.topic]
    assert (shared["delivery_count_limit"], shared["lock_duration_ms"]) == (5, 15000)
    # What the workload asked is apart from what the brokers apply, under names of its own.
    assert shared["requested"] == {
        "delivery_count_limit": 5,
        "lock_duration_ms": 15000,
        "auto_offset_reset": "earliest",
    }
    assert "record_lock_duration_ms" not in shared and "auto_offset_reset" not in shared
    assert shared["acknowledgement"] == "explicit"
    assert shared["outcomes"] == {"accept": 0.9, "release": 0.08, "reject": 0.02}
    assert shared["consumers"] == ["share-consumer-0", "share-consumer-1", "share-consumer-2"]


def test_a_group_config_the_brokers_say_otherwise_is_recorded_as_they_say_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    run = share_run()
    run._share_group(FakeAdmin(say={"share.delivery.count.limit": "4"}))
    assert run.manifest.share_groups is not None
    shared = run.manifest.share_groups["share"]
    # The checker judges by the limit the brokers apply.
    assert shared["config"]["share.delivery.count.limit"] == "4"
    assert shared["delivery_count_limit"] == 4 and shared["requested"]["delivery_count_limit"] == 5
    assert "share.delivery.count.limit=4 (not 5)" in caplog.text
    # The one resolution reads the applied limit, never the one asked.
    assert ShareSetup.of(run.manifest.share_groups).settings("share").delivery_count_limit == 4


@pytest.mark.parametrize(
    ("features", "fail", "message"),
    [
        (
            {"share.version": "0"},
            None,
            "share.version is 0 on this cluster: its share groups are off",
        ),
        (None, "cannot set group share's configs: INVALID_CONFIG", "INVALID_CONFIG"),
    ],
)
def test_a_share_group_that_cannot_be_had_ends_the_run_in_one_line(
    features: dict[str, str] | None, fail: str | None, message: str
) -> None:
    run = share_run(features=features)
    with pytest.raises(ScenarioError, match=message):
        run._share_group(FakeAdmin(fail=fail))
    assert run.manifest.share_groups is None


def test_a_run_without_share_consumers_leaves_its_groups_alone() -> None:
    run = object.__new__(KafkaRun)
    run.scenario = load_scenario(ROOT / "scenarios" / "K4.yaml")  # type: ignore[assignment]
    run.manifest = Manifest()
    admin = FakeAdmin()
    assert run._share_group(admin) == "" and admin.set == []  # type: ignore[arg-type]
    assert run.manifest.share_groups is None
