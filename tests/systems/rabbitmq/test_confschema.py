"""RabbitMQ's own list of rabbitmq.conf settings per release (the committed JSON read from each
image's cuttlefish schemas), and the one-line checks of a key and a value against it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from systems.rabbitmq import confschema
from systems.rabbitmq.confschema import (
    ConfSchema,
    from_json,
    key_refusal,
    load,
    schema_from_files,
    terms_refusal,
    to_json,
    value_refusal,
)


@pytest.fixture(autouse=True)
def _no_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The committed files alone: nothing a local cache holds, and no image read."""
    monkeypatch.setenv("BJ_CACHE_DIR", str(tmp_path / "cache"))

    def no_docker(image: str, timeout_s: float = 0) -> ConfSchema:
        raise AssertionError(f"a unit test read {image}")

    monkeypatch.setattr(confschema, "extract", no_docker)
    yield


def test_the_setup_releases_are_committed() -> None:
    assert confschema.committed_releases() == ["3.10.8", "4.0.5", "4.3.6"]
    # As cuttlefish itself counts them in each image (cuttlefish_schema:files), and the old
    # names 4.3 still takes.
    counts = {
        r: sum(m.alias_of is None for m in load(r).mappings.values())
        for r in confschema.committed_releases()
    }
    assert counts == {"3.10.8": 828, "4.0.5": 965, "4.3.6": 1123}
    assert all(load(r).plugins_enabled == () for r in counts)
    assert load("4.3.6").mappings["channel_max"].alias_of == "max_channels_per_connection"


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
    line = confschema.plugin_refusal(load("4.3.6"), "management.rates_mode")
    assert line is not None and "rabbitmq_management plugin" in line
    assert confschema.plugin_refusal(load("4.3.6"), "net_ticktime") is None


def test_what_a_release_says_it_ignores() -> None:
    keys = ["cluster_partition_handling", "net_ticktime"]
    assert confschema.ignored(load("3.10.8"), keys) == {}
    assert confschema.ignored(load("4.3.6"), keys) == {
        "cluster_partition_handling": "No longer used, exists only for backwards compatibility"
    }


SCHEMA = r"""
%% A comment, with a . in it.
{mapping, "a.b", "app.b", [{datatype, integer}, {default, 3}]}.

%% DEPRECATED. Not used since RabbitMQ 4.0
{mapping, "a.old", "app.old", [{datatype, {enum, [on, off]}}]}.

{mapping, "a.list.$name", "app.list", [{datatype, [{atom, infinity}, {integer, positive}]}]}.
{translation, "app.list", fun(Conf) -> Conf end}.

{mapping, "a.new", "app.new", [{datatype, integer}, {alias, "a.renamed"}]}.

{mapping, "a.first", "app.same", [{datatype, string}]}.
{mapping, "a.second", "app.same", [{datatype, string}]}.

{include_partial, {app, "tls"},
    [{prefix, "a.tls"}, {app_prefix, "app.tls"}, {disable_with, none}, {exclude, ["dh"]}]}.

{translation, "app.other", fun(Conf) -> case Conf of "x." -> ok; _ -> $. end end}.
"""
PARTIAL = r"""
{mapping, "verify", "verify", [{datatype, {enum, [verify_peer, verify_none]}}]}.
{mapping, "dh", "dh", [{datatype, string}]}.
"""
PLUGINS = "/usr/lib/rabbitmq/lib/rabbitmq_server-9.9.9/plugins"


def test_schemas_are_read_as_cuttlefish_merges_them() -> None:
    schema = schema_from_files(
        {
            f"{PLUGINS}/app-9.9.9/priv/schema/app.schema": SCHEMA,
            f"{PLUGINS}/app-9.9.9/priv/schema/tls.partial": PARTIAL,
            f"{PLUGINS}/rabbit-9.9.9/priv/schema/rabbit.schema": '{mapping, "r", "rabbit.r", []}.',
            "/etc/rabbitmq/enabled_plugins": "[rabbitmq_management].",
        }
    )
    assert schema.release == "9.9.9" and schema.plugins_enabled == ("rabbitmq_management",)
    m = schema.mappings
    assert m["a.b"].datatype == ("integer",) and m["a.b"].note is None
    assert m["a.old"].note == "DEPRECATED. Not used since RabbitMQ 4.0"
    assert m["a.list.$name"].datatype == ({"atom": "infinity"}, {"integer": {"min": 1}})
    assert m["r"].datatype == ("string",)  # cuttlefish's default
    assert m["a.renamed"].alias_of == "a.new" and m["a.renamed"].datatype == ("integer",)
    # Two keys feeding one setting no translation computes: only the first is a setting.
    assert "a.first" in m and "a.second" not in m
    # The partial under its prefix, the excluded key left out, the block's off switch.
    assert m["a.tls.verify"].datatype == ({"enum": ["verify_peer", "verify_none"]},)
    assert "a.tls.dh" not in m and m["a.tls"].datatype == ({"enum": ["none"]},)
    assert schema.match("a.list.x") is m["a.list.$name"]
    assert value_refusal(schema, "a.list.x", "infinity") is None
    assert value_refusal(schema, "a.list.x", "0") is not None
    assert from_json(to_json(schema)) == schema


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[].", None),
        ("[{rabbit, [{quorum_tick_interval, 1000}]}].\n", None),
        ('[{rabbit, [{a, "]}"}, {b, $]}]}]. % done\n', None),
        ("[{rabbit, [{a, 1}]}\n", "the [ of line 1 is never closed"),
        ("[{rabbit, [{a, 1}]]}].", "] at line 1 does not close the { of line 1"),
        ("[{rabbit,\n [{a, 1}]}]}].", "} at line 2 closes nothing"),
        ('[{rabbit, [{a, "x}]}].', 'the quote " at line 1 is never closed'),
        ("[{rabbit, []}]. [].", "more than one term"),
        ("{rabbit, []}.", "it must be one list ending with ]."),
        ("[{rabbit, []}]", "it must be one list ending with ]."),
    ],
)
def test_advanced_config_is_one_balanced_list(text: str, expected: str | None) -> None:
    line = terms_refusal(text)
    if expected is None:
        assert line is None
    else:
        assert line is not None and expected in line
