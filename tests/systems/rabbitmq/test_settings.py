"""The user's own RabbitMQ configuration on a scenario: rabbitmq.conf keys checked against the
release, the harness's own keys refused with the reason, one source per setting, advanced.config,
policies, queue arguments and client connections, and the record a run's manifest gets."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from contract.topology import Endpoint
from systems.rabbitmq import erlang_terms
from systems.rabbitmq.cluster import (
    ClusterConfig,
    RabbitMQCluster,
    render_advanced_config,
    render_config,
)
from systems.rabbitmq.run import RabbitMQRun
from systems.rabbitmq.run_settings import effective_policies, settings_of
from systems.rabbitmq.scenario import RabbitMQScenario
from systems.rabbitmq.settings import rendered
from systems.registry import parse_scenario
from systems.scenario import ScenarioError
from workloads.rabbitmq.topology import declare_arguments, params


@pytest.fixture(autouse=True)
def _no_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("BJ_CACHE_DIR", str(tmp_path / "cache"))
    yield


def scenario(cluster: str, workload: str = "", queue_type: str = "quorum") -> RabbitMQScenario:
    """A scenario with one queue; `cluster` and `workload`: more YAML lines of each."""
    text = f"""
id: t
expect: safe
cluster:
  queue_type: {queue_type}
{_indent(cluster)}
workload:
  queues: [q]
  publishers: [{{id: A, count: 10}}]
  consumers: [{{queue: q}}]
{_indent(workload)}
"""
    spec = parse_scenario(text, "t.yaml")
    assert isinstance(spec, RabbitMQScenario)
    return spec


def refused(cluster: str, workload: str = "", queue_type: str = "quorum") -> str:
    with pytest.raises(ScenarioError) as e:
        scenario(cluster, workload, queue_type)
    line = str(e.value)
    assert line.startswith("t.yaml: ") and "\n" not in line
    return line


def _indent(text: str) -> str:
    return "\n".join("  " + ln for ln in text.strip().splitlines())


def conf_file(spec: RabbitMQScenario) -> str:
    c = spec.cluster
    return render_config(
        ClusterConfig(
            partition_handling=c.partition_handling,
            net_ticktime=c.net_ticktime,
            pause_if_all_down_nodes=tuple(c.pause_if_all_down_nodes),
            pause_if_all_down_recover=c.pause_if_all_down_recover,
            rabbitmq_conf=tuple(rendered(c.rabbitmq_conf).items()),
        )
    )


# ---- rabbitmq.conf ------------------------------------------------------------------------------


def test_own_keys_are_written_after_the_harness_lines() -> None:
    spec = scenario(
        """
partition_handling: pause_minority
version: "4.3.6"
rabbitmq_conf:
  consumer_timeout: 900000
  vm_memory_high_watermark.relative: 0.6
  quorum_queue.continuous_membership_reconciliation.enabled: true
  listeners.ssl.default: 5671
"""
    )
    lines = conf_file(spec).splitlines()
    assert lines[:5] == [
        "cluster_formation.peer_discovery_backend = rabbit_peer_discovery_classic_config",
        "cluster_formation.classic_config.nodes.1 = rabbit@rabbit1",
        "cluster_formation.classic_config.nodes.2 = rabbit@rabbit2",
        "cluster_formation.classic_config.nodes.3 = rabbit@rabbit3",
        "loopback_users.guest = false",
    ]
    assert lines[5:] == [
        "cluster_partition_handling = pause_minority",
        "net_ticktime = 5",
        "consumer_timeout = 900000",
        "vm_memory_high_watermark.relative = 0.6",
        "quorum_queue.continuous_membership_reconciliation.enabled = true",
        "listeners.ssl.default = 5671",
    ]


@pytest.mark.parametrize(
    ("release", "key", "value"),
    [
        ("3.10.8", "queue_master_locator", "min-masters"),
        ("3.10.8", "mirroring_sync_batch_size", 4096),
        ("4.3.6", "quorum_queue.continuous_membership_reconciliation.enabled", "true"),
        ("4.3.6", "channel_max", 2047),  # 4.3 still takes the old name
    ],
)
def test_a_releases_own_keys_pass(release: str, key: str, value: Any) -> None:
    spec = scenario(
        f"partition_handling: autoheal\nversion: '{release}'\n"
        f"rabbitmq_conf: {{{key}: {json.dumps(value)}}}"
    )
    assert key in spec.cluster.rabbitmq_conf


def test_a_typo_is_one_line_with_the_nearest_setting() -> None:
    line = refused(
        "partition_handling: autoheal\nversion: '4.3.6'\n"
        "rabbitmq_conf: {cluster_partition_handlin: pause_minority}"
    )
    assert line == (
        't.yaml: cluster.rabbitmq_conf: "cluster_partition_handlin" is not a RabbitMQ '
        "4.3.6 setting (did you mean cluster_partition_handling?)"
    )


def test_a_key_of_another_release_is_refused_for_this_one() -> None:
    key = "quorum_queue.continuous_membership_reconciliation.enabled"
    line = refused(f"partition_handling: autoheal\nrabbitmq_conf: {{{key}: true}}")
    assert f'"{key}" is not a RabbitMQ 3.10.8 setting' in line
    assert "without cluster.version is checked against 3.10.8" in line


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        ("{heartbeat: abc}", 'heartbeat: "abc" is not a value RabbitMQ 4.3.6 takes'),
        ("{net_ticktime: 0}", "an integer of at least 1"),
        ("{delegate_count: -1}", "an integer of at least 0"),
        ("{cluster_partition_handling: pause-minority}", "one of ignore, pause_minority"),
        ("{log.console.level: loud}", "one of debug, info"),
    ],
)
def test_a_value_of_the_wrong_type_is_one_line(conf: str, expected: str) -> None:
    line = refused(f"version: '4.3.6'\nrabbitmq_conf: {conf}")
    assert expected in line and "RabbitMQ 4.3.6" in line


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("loopback_users.guest", "the clients log in as guest from the host"),
        ("loopback_users", "the clients log in as guest from the host"),
        ("listeners.tcp.default", "the port the compose file publishes"),
        ("cluster_formation.peer_discovery_backend", "the harness forms the cluster"),
        ("cluster_formation.classic_config.nodes.4", "the harness forms the cluster"),
        ("default_user", "guest/guest on vhost /"),
        ("log.console.formatter", "plain-text log from its console"),
        ("management.tcp.port", "publishes no management port"),
    ],
)
def test_the_harness_keys_are_refused_with_the_reason(key: str, reason: str) -> None:
    line = refused(f"partition_handling: autoheal\nrabbitmq_conf: {{{key}: x}}")
    assert f"rabbitmq_conf: {key} is the harness's (" in line and reason in line


def test_a_plugins_key_is_refused_where_the_nodes_run_no_plugin() -> None:
    line = refused("partition_handling: autoheal\nrabbitmq_conf: {mqtt.allow_anonymous: false}")
    assert "rabbitmq_mqtt plugin's setting" in line and "it would change nothing" in line


def test_a_typed_knob_and_its_key_together_are_refused() -> None:
    line = refused(
        "partition_handling: autoheal\nnet_ticktime: 7\nrabbitmq_conf: {net_ticktime: 9}"
    )
    assert "rabbitmq_conf sets net_ticktime, which the typed knob net_ticktime sets too" in line
    line = refused(
        "partition_handling: autoheal\nrabbitmq_conf: {cluster_partition_handling: ignore}"
    )
    assert "which the typed knob partition_handling sets too" in line


def test_a_key_alone_overrides_the_knobs_default() -> None:
    spec = scenario("rabbitmq_conf: {cluster_partition_handling: ignore, net_ticktime: 30}")
    assert spec.cluster.partition_handling is None
    text = conf_file(spec)
    assert "net_ticktime = 30\n" in text and "net_ticktime = 5" not in text
    assert text.count("cluster_partition_handling = ignore\n") == 1
    assert settings_of(spec)["rabbitmq_conf"] == {
        "cluster_partition_handling": "ignore",
        "net_ticktime": "30",
    }
    # With neither, the cluster has no partition handling to run with.
    assert "partition_handling is required" in refused("net_ticktime: 7")


def test_pause_if_all_down_nodes_may_come_from_the_keys() -> None:
    spec = scenario(
        """
rabbitmq_conf:
  cluster_partition_handling: pause_if_all_down
  cluster_partition_handling.pause_if_all_down.nodes.a: rabbit@rabbit1
"""
    )
    assert settings_of(spec)["rabbitmq_conf"] == {
        "net_ticktime": "5",
        "cluster_partition_handling.pause_if_all_down.recover": "autoheal",
        "cluster_partition_handling": "pause_if_all_down",
        "cluster_partition_handling.pause_if_all_down.nodes.a": "rabbit@rabbit1",
    }
    assert "needs pause_if_all_down_nodes" in refused(
        "rabbitmq_conf: {cluster_partition_handling: pause_if_all_down}"
    )


def test_a_value_must_be_one_line() -> None:
    line = refused('partition_handling: autoheal\nrabbitmq_conf: {cluster_name: "a\\nb"}')
    assert "is not a one-line value" in line
    line = refused("partition_handling: autoheal\nrabbitmq_conf: {cluster_name: [a, b]}")
    assert (
        line
        == "t.yaml: cluster.rabbitmq_conf.cluster_name: ['a', 'b'] is no string, number or boolean"
    )


# ---- advanced.config ----------------------------------------------------------------------------


def test_advanced_config_is_written_as_given_else_an_empty_list() -> None:
    terms = "[{rabbit, [{quorum_tick_interval, 1000}]}]."
    spec = scenario(f"partition_handling: autoheal\nadvanced_config: '{terms}'")
    assert spec.cluster.advanced_config == terms
    cfg = ClusterConfig(partition_handling="autoheal", advanced_config=terms)
    assert render_advanced_config(cfg) == terms + "\n"
    empty = render_advanced_config(ClusterConfig(partition_handling="autoheal"))
    assert empty.rstrip().endswith("\n[].") and erlang_terms.terms_refusal(empty) is None
    assert settings_of(spec)["advanced_config"] == {"advanced.config": terms}


@pytest.mark.parametrize(
    ("terms", "expected"),
    [
        ("[{rabbit, [{a, 1}]}", "advanced_config: the [ of line 1 is never closed"),
        ("[{rabbit, [{tcp_listeners, [5673]}]}].", "{rabbit, [{tcp_listeners, ...}]} is the"),
        ("[{rabbit, [{loopback_users, []}]}].", "the clients log in as guest"),
    ],
)
def test_advanced_config_is_checked(terms: str, expected: str) -> None:
    assert expected in refused(f"partition_handling: autoheal\nadvanced_config: '{terms}'")


def test_advanced_config_and_a_typed_knob_set_once() -> None:
    terms = "[{kernel, [{net_ticktime, 10}]}]."
    line = refused(f"partition_handling: autoheal\nnet_ticktime: 7\nadvanced_config: '{terms}'")
    assert "which the typed knob net_ticktime sets too" in line
    scenario(f"partition_handling: autoheal\nadvanced_config: '{terms}'")  # alone: fine
    terms = "[{rabbit, [{cluster_partition_handling, ignore}]}]."
    assert scenario(f"advanced_config: '{terms}'").cluster.partition_handling is None


# ---- policies -----------------------------------------------------------------------------------

POLICY = "policies: [{name: limit, pattern: '^q$', definition: {max-length: 100}, apply_to: %s}]"


def test_apply_to_is_what_the_release_takes() -> None:
    line = refused("partition_handling: autoheal\n" + POLICY % "quorum_queues")
    assert "RabbitMQ 3.10.8 applies a policy to queues, exchanges, all, not quorum_queues" in line
    spec = scenario("partition_handling: autoheal\nversion: '4.0'\n" + POLICY % "quorum_queues")
    assert effective_policies(spec.cluster, spec.workload.queues) == [
        {
            "name": "limit",
            "pattern": "^q$",
            "definition": {"max-length": 100},
            "apply_to": "quorum_queues",
            "priority": 0,
        }
    ]
    assert "cluster.policies.0.apply_to" in refused(
        "partition_handling: autoheal\n" + POLICY % "everything"
    )


def test_mirroring_keys_are_refused_where_mirrored_queues_are_gone() -> None:
    policy = "policies: [{name: p, pattern: '.', definition: {ha-mode: all}}]"
    line = refused(f"partition_handling: autoheal\nversion: '4.3.6'\n{policy}")
    assert "RabbitMQ 4.3.6 has no ha-mode (4.0 removed mirrored queues)" in line


def test_a_policy_on_a_mirrored_queue_keeps_it_mirrored() -> None:
    spec = scenario(
        "partition_handling: autoheal\n"
        "policies: [{name: limit, pattern: '^q', definition: {max-length: 100}, priority: 5}]",
        queue_type="mirrored",
    )
    mirror, limit = effective_policies(spec.cluster, spec.workload.queues)
    assert mirror["name"] == "ha-all" and mirror["pattern"] == "^(q)$"
    # A queue takes one policy: the scenario's carries the mirroring keys with its own.
    assert limit["definition"] == {"ha-mode": "all", "ha-sync-mode": "automatic", "max-length": 100}
    assert settings_of(spec)["policies"]["limit"] == (
        '{"apply_to":"all","definition":{"ha-mode":"all","ha-sync-mode":"automatic",'
        '"max-length":100},"pattern":"^q","priority":5}'
    )


def test_a_mirroring_key_a_typed_knob_sets_is_set_once() -> None:
    policy = "policies: [{name: p, pattern: '^q', definition: {ha-sync-mode: manual}}]"
    line = refused(
        f"partition_handling: autoheal\nha_sync_mode: automatic\n{policy}", queue_type="mirrored"
    )
    assert "sets ha-sync-mode on a workload queue, which the typed knob ha_sync_mode" in line
    # Alone, the policy's key overrides the knob's default on the queues it covers.
    spec = scenario(f"partition_handling: autoheal\n{policy}", queue_type="mirrored")
    _, p = effective_policies(spec.cluster, spec.workload.queues)
    assert p["definition"]["ha-sync-mode"] == "manual"


def test_policy_names_are_unique_and_ha_all_is_the_harness() -> None:
    two = (
        "policies: [{name: a, pattern: x, definition: {k: 1}}, "
        "{name: a, pattern: y, definition: {k: 2}}]"
    )
    assert "policies: names must be unique" in refused(f"partition_handling: autoheal\n{two}")
    mine = "policies: [{name: ha-all, pattern: x, definition: {max-length: 1}}]"
    line = refused(f"partition_handling: autoheal\n{mine}", queue_type="mirrored")
    assert "ha-all is the harness's mirroring policy" in line


# ---- queue arguments ----------------------------------------------------------------------------


def test_queue_arguments_go_into_the_declare() -> None:
    spec = scenario(
        "partition_handling: autoheal",
        "queue_arguments: {q: {x-max-length: 1000, x-overflow: reject-publish}}",
    )
    assert declare_arguments("quorum", spec.workload.queue_arguments["q"]) == {
        "x-queue-type": "quorum",
        "x-max-length": 1000,
        "x-overflow": "reject-publish",
    }
    assert settings_of(spec)["queue_arguments"] == {
        "q": '{"x-max-length":1000,"x-overflow":"reject-publish","x-queue-type":"quorum"}'
    }


@pytest.mark.parametrize(
    ("queue_type", "arguments", "expected"),
    [
        ("mirrored", "{q: {x-queue-type: quorum}}", "x-queue-type quorum contradicts"),
        ("quorum", "{q: {x-queue-type: classic}}", "the harness declares a quorum queue"),
        ("quorum", "{other: {x-max-length: 1}}", "queue_arguments: 'other' is not in queues"),
        ("quorum", "{q: {max-length: 1}}", "'max-length' is no x- argument"),
    ],
)
def test_queue_arguments_are_checked(queue_type: str, arguments: str, expected: str) -> None:
    line = refused("partition_handling: autoheal", f"queue_arguments: {arguments}", queue_type)
    assert expected in line


def test_the_queue_type_may_be_said_again() -> None:
    spec = scenario("partition_handling: autoheal", "queue_arguments: {q: {x-queue-type: quorum}}")
    assert declare_arguments("quorum", spec.workload.queue_arguments["q"]) == {
        "x-queue-type": "quorum"
    }


# ---- clients ------------------------------------------------------------------------------------


def test_a_clients_connection_overrides_the_harness_parameters() -> None:
    spec = scenario(
        "partition_handling: autoheal",
        "consumers: [{queue: q, prefetch: 10, connection: {heartbeat: 30, frame_max: 8192}}]",
    )
    overrides = spec.workload.consumers[0].connection.overrides()
    assert overrides == {"heartbeat": 30, "frame_max": 8192}
    p = params(Endpoint("rabbit1", "127.0.0.1", 5672), overrides)
    assert (p.heartbeat, p.frame_max, p.socket_timeout, p.connection_attempts) == (30, 8192, 5, 1)
    default = params(Endpoint("rabbit1", "127.0.0.1", 5672))
    assert (default.heartbeat, default.frame_max) == (5, 131072)
    clients = settings_of(spec)["clients"]
    assert clients["consumer1-q.heartbeat"] == "30" and clients["consumer1-q.prefetch"] == "10"
    assert clients["A.heartbeat"] == "5" and clients["A.in_flight"] == "1"


@pytest.mark.parametrize(
    ("connection", "field"),
    [
        ("{frame_max: 1024}", "frame_max"),
        ("{heartbeat: -1}", "heartbeat"),
        ("{channel_max: 0}", "channel_max"),
        ("{confirm_batch: 10}", "confirm_batch"),  # no such pika parameter
    ],
)
def test_connection_parameters_are_pikas(connection: str, field: str) -> None:
    line = refused(
        "partition_handling: autoheal",
        f"publishers: [{{id: A, count: 10, connection: {connection}}}]",
    )
    assert f"workload.publishers.0.connection.{field}" in line


# ---- the manifest's record ----------------------------------------------------------------------


def test_the_settings_record_has_every_section() -> None:
    spec = scenario("partition_handling: pause_minority")
    record = settings_of(spec)
    assert list(record) == [
        "rabbitmq_conf",
        "advanced_config",
        "policies",
        "queue_arguments",
        "clients",
    ]
    assert record["rabbitmq_conf"] == {
        "cluster_partition_handling": "pause_minority",
        "net_ticktime": "5",
    }
    assert record["advanced_config"] == {} and record["policies"] == {}
    assert all(isinstance(v, str) for section in record.values() for v in section.values())


# ---- when the run starts ------------------------------------------------------------------------


def test_the_run_checks_the_keys_against_the_release_it_starts() -> None:
    """`--rabbitmq 4.3` copies a scenario checked against 3.10.8 without checking it again:
    the run checks it against the image before any container starts."""
    spec = scenario("partition_handling: autoheal\nrabbitmq_conf: {ssl_options.cacerts.a: x}")
    on_43 = spec.model_copy(update={"cluster": spec.cluster.model_copy(update={"version": "4.3"})})
    with pytest.raises(ScenarioError, match='"ssl_options.cacerts.a" is not a RabbitMQ 4.3.6'):
        RabbitMQRun._check_conf_against_the_image(
            SimpleNamespace(scenario=on_43),  # type: ignore[arg-type]
            images(IMAGE_43),  # type: ignore[arg-type]
        )
    RabbitMQRun._check_conf_against_the_image(
        SimpleNamespace(scenario=spec),  # type: ignore[arg-type]
        images(IMAGE_310),  # type: ignore[arg-type]
    )


IMAGE_310, IMAGE_43 = "brokerjepsen/rabbitmq:3.10.8-debian", "brokerjepsen/rabbitmq:4.3.6-debian"


def images(start: str, *upgrades: str) -> SimpleNamespace:
    """A cluster starting on one local image, its upgrade steps naming others."""
    return SimpleNamespace(
        image=start,
        upgrade_images={image.split(":")[1][:3]: image for image in upgrades},
        release_of=lambda image: image.split(":")[1].removesuffix("-debian"),
    )


def test_the_run_checks_the_keys_against_each_release_an_upgrade_moves_nodes_to() -> None:
    """A key the start release takes and the upgrade's refuses would leave the upgraded node
    refusing its configuration mid-run: said before any container starts."""
    spec = scenario("partition_handling: autoheal\nrabbitmq_conf: {ssl_options.cacerts.a: x}")
    with pytest.raises(ScenarioError, match='"ssl_options.cacerts.a" is not a RabbitMQ 4.3.6'):
        RabbitMQRun._check_conf_against_the_image(
            SimpleNamespace(scenario=spec),  # type: ignore[arg-type]
            images(IMAGE_310, IMAGE_43),  # type: ignore[arg-type]
        )


class _Container:
    def __init__(self, log: str) -> None:
        self.log = log

    def logs(self, tail: int) -> bytes:
        return self.log.encode()


def test_a_node_that_refuses_its_configuration_is_named_with_what_it_said() -> None:
    said = (
        "2026-11-25 04:00:56.897798+00:00 [error] <0.144.0> Error preparing configuration in "
        "phase transform_datatypes:\n"
        "2026-11-25 04:00:56.897837+00:00 [error] <0.144.0>   - Error transforming datatype "
        "for: net_ticktime\n"
        '2026-11-25 04:00:56.897864+00:00 [error] <0.144.0>   - "abc" cannot be converted to '
        "a(n) integer\n"
    )
    cluster = RabbitMQCluster.__new__(RabbitMQCluster)
    cluster.nodes = ("rabbit1", "rabbit2")
    cluster.containers = lambda: {  # type: ignore[method-assign]
        "rabbit1": _Container("booting\n"),
        "rabbit2": _Container(said),
    }
    assert cluster._refused_configuration() == (
        'rabbit2 refused its configuration: net_ticktime: "abc" cannot be converted to a(n) integer'
    )


def test_every_rabbitmq_conf_key_refused_is_a_problem_at_its_key() -> None:
    with pytest.raises(ScenarioError) as e:
        scenario(
            "partition_handling: autoheal\nversion: '4.0.5'\nrabbitmq_conf:\n"
            "  consumer_timeout: lots\n  vm_memory_high_watermark.relatve: 0.6\n"
            "  cluster_partition_handling: ignore"
        )
    assert [p.split(": ", 1)[0] for p in e.value.problems] == [
        "t.yaml:9:5",
        "t.yaml:10:5",
        "t.yaml:11:5",
    ], e.value.problems
    assert "(and 2 more)" in str(e.value)
