"""Which rolling upgrades a RabbitMQ scenario may ask for: the paths RabbitMQ supports (the next
series, a patch, with the last series' feature flags on), refused in one line otherwise unless
the step says `unsupported_path: true`; and the fields each upgrade op needs."""

from __future__ import annotations

import pytest

from systems.rabbitmq.scenario import RabbitMQScenario
from systems.rabbitmq.upgrade_path import next_series, path_refusal, skipped
from systems.registry import parse_scenario
from systems.scenario import ScenarioError

SCENARIO = """
id: t
expect: safe
cluster: {{queue_type: quorum, partition_handling: pause_minority{cluster}}}
workload:
  queues: [q]
  publishers: [{{id: A, count: 10}}]
  consumers: [{{queue: q}}]
nemesis:
{steps}
"""


def scenario(steps: list[str], version: str | None = "4.0", cluster: str = "") -> str:
    extra = f", version: '{version}'" if version else ""
    return SCENARIO.format(cluster=extra + cluster, steps="\n".join(f"  - {s}" for s in steps))


def parsed(text: str) -> RabbitMQScenario:
    s = parse_scenario(text, "t.yaml")
    assert isinstance(s, RabbitMQScenario)
    return s


def refusal(steps: list[str], version: str | None = "4.0", cluster: str = "") -> str:
    with pytest.raises(ScenarioError) as e:
        parse_scenario(scenario(steps, version, cluster), "t.yaml")
    return str(e.value)


@pytest.mark.parametrize(
    ("series", "then"),
    [("3.10", "3.11"), ("3.13", "4.0"), ("4.0", "4.1"), ("4.2", "4.3"), ("4.3", "4.4")],
)
def test_the_next_series_follows_rabbitmqs_table_and_past_it_the_next_minor(
    series: str, then: str
) -> None:
    assert next_series(series) == then


def test_what_a_skip_skips() -> None:
    assert skipped("4.0", "4.3") == ["4.1", "4.2"]
    assert skipped("3.10", "4.0") == ["3.11", "3.12", "3.13"]
    assert skipped("4.3", "4.6") == ["4.4", "4.5"]  # past the table: the minors


@pytest.mark.parametrize(
    ("start", "end", "flags", "said"),
    [
        ("4.0.5", "4.0.9", "4.0", None),  # a patch
        ("4.0", "4.0.5", "4.0", None),  # the same release again
        ("3.13.7", "4.0.5", "3.13", None),  # the next series, its flags on
        ("4.0.5", "4.1", "4.0", None),
        ("4.0.5", "4.3.6", "4.0", "do not skip a series: 4.0.5 to 4.3.6 skips 4.1, 4.2"),
        ("3.10.8", "4.0.5", "3.10", "skips 3.11, 3.12, 3.13"),
        ("4.3.6", "4.0.5", "4.3", "downgrade"),
        ("4.0.9", "4.0.5", "4.0", "downgrade"),
        ("4.1", "4.2", "4.0", "needs 4.1's feature flags on first"),
    ],
)
def test_a_path_rabbitmq_does_not_support_says_why(
    start: str, end: str, flags: str, said: str | None
) -> None:
    refused = path_refusal(start, end, flags)
    assert refused is None if said is None else said in (refused or "")


def test_a_supported_schedule_is_taken() -> None:
    s = parsed(
        scenario(
            [
                "{at: 5, op: upgrade, release: '4.0.5', target: rabbit2, within: 60}",
                "{at: 20, op: upgrade, release: '4.1'}",
                "{at: 60, op: finalize-feature, feature: all}",
                "{at: 70, op: upgrade, release: '4.2'}",
                "{at: 90, op: finalize-feature, feature: khepri_db}",
            ]
        )
    )
    upgrade = s.nemesis[0]
    assert (upgrade.release, upgrade.nodes, upgrade.within) == ("4.0.5", ["rabbit2"], 60)
    assert upgrade.unsupported_path is False
    assert [step.feature for step in s.nemesis[2::2]] == ["all", "khepri_db"]


@pytest.mark.parametrize(
    ("steps", "said"),
    [
        (
            ["{at: 5, op: upgrade, release: '4.3'}"],
            "nemesis.0: RabbitMQ's rolling upgrades do not skip a series: 4.0 to 4.3 skips "
            "4.1, 4.2 (unsupported_path: true runs it",
        ),
        # The flags a finished upgrade brings stay off until enabled.
        (
            ["{at: 5, op: upgrade, release: '4.1'}", "{at: 30, op: upgrade, release: '4.2'}"],
            "nemesis.1: upgrade from 4.1 to 4.2 needs 4.1's feature flags on first",
        ),
        # Enabling all while a node still runs 4.0 turns on 4.0's flags only.
        (
            [
                "{at: 5, op: upgrade, release: '4.1', target: [rabbit1, rabbit2]}",
                "{at: 20, op: finalize-feature, feature: all}",
                "{at: 30, op: upgrade, release: '4.2', target: rabbit1}",
            ],
            "nemesis.2: upgrade from 4.1 to 4.2 needs 4.1's feature flags on first",
        ),
        # A role may be any node: one still on 4.0 would skip 4.1.
        (
            [
                "{at: 5, op: upgrade, release: '4.1', target: leader}",
                "{at: 20, op: finalize-feature, feature: all}",
                "{at: 30, op: upgrade, release: '4.2', target: rabbit3}",
            ],
            "nemesis.2: RabbitMQ's rolling upgrades do not skip a series: 4.0 to 4.2",
        ),
        (
            ["{at: 5, op: upgrade, release: '3.13'}"],
            "nemesis.0: upgrade from 4.0 to 3.13 is a downgrade",
        ),
    ],
)
def test_a_path_rabbitmq_does_not_support_is_one_line_naming_the_step(
    steps: list[str], said: str
) -> None:
    message = refusal(steps)
    assert said in message and "\n" not in message


def test_unsupported_path_runs_it_and_the_node_may_then_run_either() -> None:
    steps = ["{at: 5, op: upgrade, release: '4.3.6', target: rabbit1, unsupported_path: true}"]
    assert parsed(scenario(steps)).nemesis[0].unsupported_path is True
    # The node may have refused (rolled back to 4.0) or booted: a later step is judged for both.
    later = "{at: 40, op: upgrade, release: '4.1', target: rabbit1}"
    assert "4.3.6 to 4.1 is a downgrade" in refusal([*steps, later])


def test_an_upgrade_needs_the_release_the_nodes_start_on() -> None:
    step = ["{at: 5, op: upgrade, release: '4.0'}"]
    assert "nemesis.0: upgrade needs cluster.version" in refusal(step, version=None)
    own = refusal(step, cluster=", image: mine:1")
    assert "not the default or an image of your own" in own


def test_khepri_db_needs_a_release_that_has_it() -> None:
    step = ["{at: 5, op: finalize-feature, feature: khepri_db}"]
    assert "nemesis.0: RabbitMQ 3.10 has no khepri_db (3.13 on)" in refusal(
        step, version="3.10", cluster=""
    )


@pytest.mark.parametrize(
    ("step", "said"),
    [
        ("{at: 5, op: upgrade}", "upgrade needs release"),
        ("{at: 5, op: finalize-feature}", "finalize-feature needs feature"),
        ("{at: 5, op: kill, target: rabbit1, release: '4.0'}", "release is for upgrade, not kill"),
        (
            "{at: 5, op: finalize-feature, feature: all, unsupported_path: true}",
            "unsupported_path is for upgrade, not finalize-feature",
        ),
        (
            "{at: 5, op: upgrade, release: '4.0', feature: all}",
            "feature is for finalize-feature, not upgrade",
        ),
        ("{at: 5, op: upgrade, release: 'four'}", "release"),
    ],
)
def test_each_upgrade_op_names_its_own_fields(step: str, said: str) -> None:
    assert said in refusal([step])
