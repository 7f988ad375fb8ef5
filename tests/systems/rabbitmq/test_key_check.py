"""The one-line checks of a rabbitmq.conf key and value against a release's committed schema."""

from __future__ import annotations

import pytest

from systems.rabbitmq.confschema import load
from systems.rabbitmq.key_check import ignored, key_refusal, plugin_refusal, value_refusal
from tests.systems.rabbitmq.test_confschema import _no_cache  # noqa: F401 - autouse: no image read


@pytest.mark.parametrize(
    "key",
    [
        "cluster_partition_handling",
        "net_ticktime",
        "vm_memory_high_watermark.relative",
        "listeners.tcp.default",  # listeners.tcp.$name
        "default_user_tags.administrator",  # default_user_tags.$tag
        "queue_master_locator",
    ],
)
@pytest.mark.parametrize("release", ["3.10.8", "4.3.6"])
def test_settings_both_releases_have(release: str, key: str) -> None:
    assert key_refusal(load(release), key) is None


def test_settings_of_one_release_only() -> None:
    old, new = load("3.10.8"), load("4.3.6")
    # 4.x: quorum queue membership reconciliation; TLS options included from a partial (4.3).
    for key in (
        "quorum_queue.continuous_membership_reconciliation.enabled",
        "amqp10_client.ssl_options.verify",
    ):
        assert key_refusal(new, key) is None
        assert key_refusal(old, key) == f'"{key}" is not a RabbitMQ 3.10.8 setting'
    # Gone in 4.3: the AMQP 1.0 plugin's default user.
    assert key_refusal(old, "amqp1_0.default_user") is None
    assert key_refusal(new, "amqp1_0.default_user") is not None


def test_a_typo_gets_one_line_with_the_nearest_setting() -> None:
    assert key_refusal(load("4.3.6"), "cluster_partition_handlin") == (
        '"cluster_partition_handlin" is not a RabbitMQ 4.3.6 setting '
        "(did you mean cluster_partition_handling?)"
    )
    # A pattern's $ segment is filled from the key.
    assert key_refusal(load("4.3.6"), "listeners.tpc.default") == (
        '"listeners.tpc.default" is not a RabbitMQ 4.3.6 setting '
        "(did you mean listeners.tcp.default?)"
    )
    assert key_refusal(load("4.3.6"), "zzz_nothing_like_it") == (
        '"zzz_nothing_like_it" is not a RabbitMQ 4.3.6 setting'
    )


@pytest.mark.parametrize(
    ("release", "key", "value", "expected"),
    [
        ("3.10.8", "net_ticktime", "abc", "it must be an integer"),
        ("4.3.6", "net_ticktime", "0", "it must be an integer of at least 1"),
        ("4.3.6", "net_ticktime", "5.0", "it must be an integer of at least 1"),
        (
            "4.3.6",
            "cluster_partition_handling",
            "pause_minorty",
            "it must be one of ignore, pause_minority, autoheal, pause_if_all_down",
        ),
        ("4.3.6", "vm_memory_high_watermark_paging_ratio", "1.5", "below 1"),
        ("4.3.6", "collect_statistics_interval", "5s", "an integer"),
    ],
)
def test_a_value_the_datatype_refuses_names_key_release_and_reason(
    release: str, key: str, value: str, expected: str
) -> None:
    line = value_refusal(load(release), key, value)
    assert line is not None and "\n" not in line
    assert line.startswith(f'{key}: "{value}" is not a value RabbitMQ {release} takes')
    assert expected in line


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("net_ticktime", "10"),
        ("cluster_partition_handling", "autoheal"),
        ("vm_memory_high_watermark.relative", "0.6"),
        ("listeners.tcp.default", "5673"),  # [integer, ip]: the integer fits
        ("listeners.tcp.default", "0.0.0.0:5673"),  # and so may the ip
        ("disk_free_limit.absolute", "2GB"),  # [integer, string]: any string fits
        ("cluster_name", "anything at all"),
        ("channel_max", "2047"),  # 4.3's old name of max_channels_per_connection
    ],
)
def test_values_the_schema_takes_or_cannot_judge_pass(key: str, value: str) -> None:
    assert value_refusal(load("4.3.6"), key, value) is None


def test_a_plugins_setting_is_refused_where_no_plugin_runs() -> None:
    line = plugin_refusal(load("4.3.6"), "management.rates_mode")
    assert line is not None and "rabbitmq_management plugin" in line
    assert plugin_refusal(load("4.3.6"), "net_ticktime") is None


def test_what_a_release_says_it_ignores() -> None:
    keys = ["cluster_partition_handling", "net_ticktime"]
    assert ignored(load("3.10.8"), keys) == {}
    assert ignored(load("4.3.6"), keys) == {
        "cluster_partition_handling": "No longer used, exists only for backwards compatibility"
    }
