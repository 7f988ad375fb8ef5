"""RabbitMQ's own list of rabbitmq.conf settings per release: the committed JSON read from each
image's cuttlefish schemas, merged as cuttlefish merges them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from systems.rabbitmq import confschema
from systems.rabbitmq.confschema import (
    ConfSchema,
    from_json,
    load,
    schema_from_files,
    to_json,
)
from systems.rabbitmq.key_check import value_refusal


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
