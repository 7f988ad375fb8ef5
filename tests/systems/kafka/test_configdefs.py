"""Kafka's own config definitions: read from Kafka's HTML, committed per release, cached, or read
from a release's image."""

from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import systems.kafka.configdefs as configdefs
from compose.releases import setup_releases
from systems.kafka.configdefs import (
    ConfigDef,
    KafkaConfigDefsError,
    committed_releases,
    definitions,
    from_json,
    parse_config_html,
    to_json,
)
from systems.scenario import ScenarioError

RELEASES = ("3.9.2", "4.1.2", "4.4.0")

# Two entries as Kafka prints them: a broker key with its documentation (nested lists, an
# entity) and a topic config, whose table names the broker key it defaults from.
SAMPLE = """<ul class="config-list">
<li>
<h4><a id="log.retention.ms"></a><a id="brokerconfigs_log.retention.ms"
 href="#brokerconfigs_log.retention.ms">log.retention.ms</a></h4>
<p>How long to keep a log &lt;file&gt;:<ul><li>1. this</li><li>2. that</li></ul></p>
<table><tbody>
<tr><th>Type:</th><td>long</td></tr>
<tr><th>Default:</th><td>604800000 (7 days)</td></tr>
<tr><th>Valid Values:</th><td>[-1,...]</td></tr>
<tr><th>Importance:</th><td>high</td></tr>
<tr><th>Update Mode:</th><td>cluster-wide</td></tr>
</tbody></table>
</li>
<li>
<h4><a id="node.id"></a><a id="brokerconfigs_node.id" href="#brokerconfigs_node.id">node.id</a></h4>
<p>Required.</p>
<table><tbody>
<tr><th>Type:</th><td>int</td></tr>
<tr><th>Default:</th><td></td></tr>
<tr><th>Valid Values:</th><td>[0,...]</td></tr>
<tr><th>Importance:</th><td>high</td></tr>
</tbody></table>
</li>
<li>
<h4><a id="authorizer.class.name"></a><a href="#x">authorizer.class.name</a></h4>
<p>An empty string by default.</p>
<table><tbody>
<tr><th>Type:</th><td>string</td></tr>
<tr><th>Default:</th><td>""</td></tr>
<tr><th>Valid Values:</th><td>non-null string</td></tr>
<tr><th>Importance:</th><td>low</td></tr>
</tbody></table>
</li>
<li>
<h4><a id="cleanup.policy"></a><a href="#topicconfigs_cleanup.policy">cleanup.policy</a></h4>
<p>The "delete" policy&mdash;the default.</p>
<table><tbody>
<tr><th>Type:</th><td>list</td></tr>
<tr><th>Default:</th><td>delete</td></tr>
<tr><th>Valid Values:</th><td>[compact, delete]</td></tr>
<tr><th>Server Default Property:</th><td>log.cleanup.policy</td></tr>
<tr><th>Importance:</th><td>medium</td></tr>
</tbody></table>
</li>
</ul>
"""


def test_the_html_parser_reads_each_key_and_its_table_not_its_documentation() -> None:
    defs = parse_config_html(SAMPLE)
    assert list(defs) == ["log.retention.ms", "node.id", "authorizer.class.name", "cleanup.policy"]
    assert defs["log.retention.ms"] == ConfigDef(
        "log.retention.ms", "long", "604800000", "[-1,...]", "high"
    )
    assert defs["node.id"].default is None  # required: no default at all
    assert defs["authorizer.class.name"].default == ""  # printed as ""
    assert defs["cleanup.policy"] == ConfigDef(
        "cleanup.policy", "list", "delete", "[compact, delete]", "medium", "log.cleanup.policy"
    )


def test_the_json_form_round_trips_and_an_older_format_is_read_again() -> None:
    defs: configdefs.Definitions = {"broker": parse_config_html(SAMPLE), "topic": {}}
    text = to_json("9.9.9", defs)
    assert from_json(text) == defs
    assert from_json(text.replace('"format": 1', '"format": 0')) is None
    assert from_json("not json") is None


def test_the_committed_releases_are_the_ones_setup_builds_written_as_the_module_writes() -> None:
    assert committed_releases() == list(RELEASES) == list(setup_releases("kafka"))
    for release in RELEASES:
        text = (configdefs.COMMITTED_DIR / f"{release}.json").read_text()
        defs = from_json(text)
        assert defs is not None and to_json(release, defs) == text
        assert len(defs["broker"]) > 300 and len(defs["topic"]) > 30
        assert all(d.type for kind in defs.values() for d in kind.values())


def _fake_docker(
    monkeypatch: pytest.MonkeyPatch, image_present: bool, output: str = ""
) -> list[list[str]]:
    calls: list[list[str]] = []

    def fake(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        calls.append(args)
        if args[:2] == ["image", "inspect"]:
            return subprocess.CompletedProcess(args, 0 if image_present else 1, "", "")
        return subprocess.CompletedProcess(args, 0, output, "log4j: no configuration")

    monkeypatch.setattr(configdefs, "_docker", fake)
    return calls


@pytest.fixture
def uncommitted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """No committed file and an empty cache: a release must come from its image."""
    files = dataclasses.replace(configdefs.FILES, committed_dir=tmp_path / "committed")
    monkeypatch.setattr(configdefs, "FILES", files)
    monkeypatch.setenv("BJ_CACHE_DIR", str(tmp_path / "cache"))
    configdefs.load.cache_clear()
    yield tmp_path / "cache" / "kafka-configdefs"
    configdefs.load.cache_clear()


def test_a_release_without_image_or_file_is_one_scenario_line(
    uncommitted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _fake_docker(monkeypatch, image_present=False)
    with pytest.raises(ScenarioError) as e:
        definitions("3.8.1", "broker")
    assert isinstance(e.value, KafkaConfigDefsError) and "\n" not in str(e.value)
    assert "no image brokerjepsen/kafka:3.8.1-debian" in str(e.value)
    assert [c[:2] for c in calls] == [["image", "inspect"]]  # nothing started


def test_an_image_is_read_once_into_the_cache(
    uncommitted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    output = SAMPLE + configdefs._TOPIC_MARK + "\n" + SAMPLE
    calls = _fake_docker(monkeypatch, image_present=True, output=output)
    assert set(definitions("3.8.1", "topic")) == set(parse_config_html(SAMPLE))
    run = next(c for c in calls if c[0] == "run")
    assert {"--rm", "none", "localhost", "brokerjepsen/kafka:3.8.1-debian"} <= set(run)
    assert (uncommitted / "3.8.1.json").is_file()
    configdefs.load.cache_clear()
    calls.clear()
    assert "node.id" in definitions("3.8.1", "broker")
    assert calls == []  # from the cache


def test_an_extraction_without_the_topic_table_is_refused(
    uncommitted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_docker(monkeypatch, image_present=True, output=SAMPLE)
    with pytest.raises(KafkaConfigDefsError, match="could not read Kafka 3.8.1's config"):
        definitions("3.8.1", "broker")
    assert not (uncommitted / "3.8.1.json").exists()
