"""A RabbitMQ scenario's settings as RabbitMQ spells them: the rabbitmq.conf every node gets, its
advanced.config, the policies set once the cluster has formed, each queue's declare arguments,
and each client's connection.

The user's own configuration passes straight through (`cluster.rabbitmq_conf`,
`cluster.advanced_config`, `cluster.policies`, `workload.queue_arguments`, a client's
`connection`); the typed knobs the claims grew up with (`partition_handling`, `net_ticktime`,
`ha_sync_mode`, ...) are the same settings under friendlier names. Each setting has one source:
a passthrough key that a typed knob the scenario set explicitly also sets is refused, and a
passthrough key alone overrides the knob's default (`net_ticktime` is the harness's 5 s until
rabbitmq_conf says otherwise). What wires the cluster to the harness (peer discovery, the AMQP
listener, the guest login, the console log) is the harness's and is refused with the reason.

The scenario's schema checks itself against what is here, so this reads no scenario: a whole
scenario's rabbitmq.conf, policies and manifest record are systems.rabbitmq.run_settings'.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Annotated, Any

from pydantic import BeforeValidator

from compose.releases import setup_releases
from contract.versions import version_key
from systems.rabbitmq import confschema, erlang_terms, key_check
from systems.rabbitmq.policy import Policy
from workloads.rabbitmq.topology import CONNECTION_DEFAULTS, declare_arguments

# A rabbitmq.conf value (or a queue argument) as YAML gives it.
Scalar = bool | int | float | str


def _one_scalar(value: object) -> object:
    if not isinstance(value, bool | int | float | str):
        raise ValueError(f"{value!r} is no string, number or boolean")
    return value


# The same, refused in one line when it is something else (a list, a map, nothing).
ScalarField = Annotated[Scalar, BeforeValidator(_one_scalar)]
# The release a scenario without a version is checked against: the local image a run without
# one falls back to.
DEFAULT_RELEASE = setup_releases("rabbitmq")[0]

_AMQP = "clients and the health check reach each node on 5672, the port the compose file publishes"
_GUEST = (
    "the clients log in as guest from the host, not from localhost: the harness sets "
    "loopback_users.guest = false"
)
_LOGIN = "the clients and rabbitmqctl use guest/guest on vhost /"
_LOG = "the harness reads each node's plain-text log from its console (docker logs)"
# Keys the harness's wiring depends on, as patterns (`*`: any rest), with why.
OWNED: tuple[tuple[str, str], ...] = (
    ("cluster_formation.*", "the harness forms the cluster: classic peer discovery of its nodes"),
    ("listeners.tcp", _AMQP),
    ("listeners.tcp.*", _AMQP),
    ("management.tcp.*", "the compose file publishes no management port"),
    ("management.listener.*", "the compose file publishes no management port"),
    ("loopback_users", _GUEST),
    ("loopback_users.*", _GUEST),
    ("default_user", _LOGIN),
    ("default_pass", _LOGIN),
    ("default_vhost", _LOGIN),
    ("default_permissions.*", _LOGIN),
    ("log.console", _LOG),
    ("log.console.stdio", _LOG),
    ("log.console.formatter", _LOG),
    ("log.console.formatter.*", _LOG),
)
# The same wiring as advanced.config's application settings.
OWNED_APP_ENV: dict[tuple[str, str], str] = {
    ("rabbit", "cluster_nodes"): OWNED[0][1],
    ("rabbit", "cluster_formation"): OWNED[0][1],
    ("rabbit", "tcp_listeners"): _AMQP,
    ("rabbit", "loopback_users"): _GUEST,
    ("rabbit", "default_user"): _LOGIN,
    ("rabbit", "default_pass"): _LOGIN,
    ("rabbit", "default_vhost"): _LOGIN,
    ("rabbit", "default_permissions"): _LOGIN,
}
# Typed knob -> the rabbitmq.conf keys it sets (patterns).
TYPED_CONF: dict[str, tuple[str, ...]] = {
    "partition_handling": ("cluster_partition_handling",),
    "pause_if_all_down_nodes": ("cluster_partition_handling.pause_if_all_down.nodes.*",),
    "pause_if_all_down_recover": ("cluster_partition_handling.pause_if_all_down.recover",),
    "net_ticktime": ("net_ticktime",),
}
# advanced.config's (application, setting) -> the typed knobs that set it.
TYPED_APP_ENV: dict[tuple[str, str], tuple[str, ...]] = {
    ("rabbit", "cluster_partition_handling"): (
        "partition_handling",
        "pause_if_all_down_nodes",
        "pause_if_all_down_recover",
    ),
    ("kernel", "net_ticktime"): ("net_ticktime",),
}
# Typed knob -> the policy key it sets in the harness's mirroring policy.
TYPED_POLICY: dict[str, str] = {
    "ha_sync_mode": "ha-sync-mode",
    "ha_promote_on_shutdown": "ha-promote-on-shutdown",
    "ha_promote_on_failure": "ha-promote-on-failure",
}
MIRRORING_POLICY = "ha-all"  # the harness's own, on the workload's queues
# What `set_policy --apply-to` takes, as each release's rabbit_policy validates it: queue
# types by name from 4.0.
APPLY_TO_3 = ("queues", "exchanges", "all")
APPLY_TO_4 = (*APPLY_TO_3, "classic_queues", "quorum_queues", "streams")
# The queue type each scenario queue type is declared as.
DECLARED_TYPE = {
    "quorum": "quorum",
    "stream": "stream",
    "classic": "classic",
    "mirrored": "classic",
}

_KEY = re.compile(r"[A-Za-z0-9_\-@]+(?:\.[A-Za-z0-9_\-@]+)*")


def to_conf(value: Scalar) -> str:
    """A YAML value as rabbitmq.conf writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def rendered(passthrough: Mapping[str, Scalar]) -> dict[str, str]:
    return {key: to_conf(value) for key, value in passthrough.items()}


def owned_refusal(key: str) -> str | None:
    """Why the harness keeps a rabbitmq.conf key to itself; None when a scenario may set it."""
    return next((why for pattern, why in OWNED if fnmatchcase(key, pattern)), None)


def typed_knob(key: str, chosen: Iterable[str]) -> str | None:
    """The typed knob the scenario set explicitly that sets this key too, if any."""
    chosen = set(chosen)
    for knob, patterns in TYPED_CONF.items():
        if knob in chosen and any(fnmatchcase(key, p) for p in patterns):
            return knob
    return None


def typed_conf(
    partition_handling: str | None,
    net_ticktime: int,
    pause_if_all_down_nodes: Sequence[str],
    pause_if_all_down_recover: str,
    passthrough: Mapping[str, str],
) -> dict[str, str]:
    """The typed knobs as the rabbitmq.conf keys they become, then the passthrough keys over
    them: what every node's rabbitmq.conf says besides the harness's wiring."""
    handling = passthrough.get("cluster_partition_handling", partition_handling)
    conf: dict[str, str] = {}
    if partition_handling is not None:
        conf["cluster_partition_handling"] = partition_handling
    conf["net_ticktime"] = str(net_ticktime)
    if handling == "pause_if_all_down":
        conf["cluster_partition_handling.pause_if_all_down.recover"] = pause_if_all_down_recover
        for i, name in enumerate(pause_if_all_down_nodes, 1):
            conf[f"cluster_partition_handling.pause_if_all_down.nodes.{i}"] = f"rabbit@{name}"
    return {**conf, **passthrough}


# ---- checking the cluster's configuration ------------------------------------------------------


def conf_refusal(
    conf: Mapping[str, Scalar], chosen: Iterable[str], version: str | None, image: str | None
) -> str | None:
    """One line on the first rabbitmq_conf key the scenario may not set: malformed, the
    harness's, a typed knob's the scenario set too, or one its release refuses (key, value,
    or a plugin's the nodes do not run). Without an image of its own, the release is the
    scenario's version (none: the default local one); an image of its own is checked when the
    run starts it."""
    chosen = set(chosen)
    for key, value in conf.items():
        text = to_conf(value)
        if not _KEY.fullmatch(key):
            return f"rabbitmq_conf: {json.dumps(key)} is not a rabbitmq.conf key"
        if not text or text != text.strip() or any(ch in text for ch in "\r\n"):
            return f"rabbitmq_conf: {key}: {json.dumps(text)} is not a one-line value"
        if why := owned_refusal(key):
            return f"rabbitmq_conf: {key} is the harness's ({why})"
        if knob := typed_knob(key, chosen):
            return (
                f"rabbitmq_conf sets {key}, which the typed knob {knob} sets too: keep one "
                "(the knob, or the key alone)"
            )
    if not conf or image:
        return None
    schema = confschema.for_version(version, DEFAULT_RELEASE)
    if schema is None:
        return None
    refused = next(iter(key_check.refusals(schema, rendered(conf))), None)
    if refused and version is None:
        refused += f" (a scenario without cluster.version is checked against {schema.release})"
    return f"rabbitmq_conf: {refused}" if refused else None


def _app_settings(terms: Any) -> Iterable[tuple[str, str]]:
    """(application, key) of each setting a plain-data advanced.config holds."""
    if not isinstance(terms, list):
        return
    for app in terms:
        if isinstance(app, tuple) and len(app) == 2 and isinstance(app[1], list):
            for setting in app[1]:
                if isinstance(setting, tuple) and len(setting) == 2:
                    yield str(app[0]), str(setting[0])


def advanced_refusal(text: str, chosen: Iterable[str]) -> str | None:
    """One line when advanced_config is not one balanced Erlang list ending with `].`, or when
    (read as plain data) it sets the harness's wiring or a typed knob the scenario set."""
    if why := erlang_terms.terms_refusal(text):
        return f"advanced_config: {why}"
    try:
        terms = erlang_terms.parse_terms(text)
    except ValueError:
        return None  # funs and the like: the node reads it
    chosen = set(chosen)
    for app, key in _app_settings(terms):
        if why := OWNED_APP_ENV.get((app, key)):
            return f"advanced_config: {{{app}, [{{{key}, ...}}]}} is the harness's ({why})"
        knob = next((k for k in TYPED_APP_ENV.get((app, key), ()) if k in chosen), None)
        if knob:
            return (
                f"advanced_config sets {{{app}, [{{{key}, ...}}]}}, which the typed knob "
                f"{knob} sets too: keep one"
            )
    return None


def sets_partition_handling(conf: Mapping[str, Scalar], advanced: str | None) -> bool:
    if "cluster_partition_handling" in conf:
        return True
    try:
        terms = erlang_terms.parse_terms(advanced) if advanced else None
    except ValueError:
        return False
    return ("rabbit", "cluster_partition_handling") in set(_app_settings(terms))


def apply_to_refusal(apply_to: str, version: str | None) -> str | None:
    """One line when the release's set_policy does not take this apply-to."""
    four = version is not None and version_key(version) >= (4,)
    if apply_to in (APPLY_TO_4 if four else APPLY_TO_3):
        return None
    release = f"RabbitMQ {version}" if version else f"RabbitMQ {DEFAULT_RELEASE}"
    return f"{release} applies a policy to {', '.join(APPLY_TO_3)}, not {apply_to}"


def covers(policy: Policy, queue: str) -> bool:
    """Whether a policy would apply to a classic workload queue (RabbitMQ's patterns are
    regular expressions searched in the name; one Python cannot compile is left to it)."""
    if policy.apply_to not in ("queues", "all", "classic_queues"):
        return False
    try:
        return re.search(policy.pattern, queue) is not None
    except re.error:
        return False


def policies_refusal(
    policies: Sequence[Policy],
    queues: Sequence[str],
    queue_type: str,
    version: str | None,
    chosen: Iterable[str],
    where: str = "",
) -> str | None:
    """One line on the first of a cluster's policies the scenario may not set (on its release,
    `version`; `chosen`: the cluster's knobs the scenario set); with the workload's queues, also
    a mirroring key of a typed knob set twice."""
    names = [p.name for p in policies]
    if len(names) != len(set(names)):
        return f"{where}policies: names must be unique"
    mirrored = queue_type == "mirrored"
    chosen = set(chosen)
    for i, p in enumerate(policies):
        at = f"{where}policies.{i} ({p.name})"
        if mirrored and p.name == MIRRORING_POLICY:
            return f"{at}: {MIRRORING_POLICY} is the harness's mirroring policy"
        if refused := apply_to_refusal(p.apply_to, version):
            return f"{at}: {refused}"
        ha = sorted(k for k in p.definition if k.startswith("ha-"))
        if ha and version is not None and version_key(version) >= (4,):
            return f"{at}: RabbitMQ {version} has no {ha[0]} (4.0 removed mirrored queues)"
        if not (mirrored and any(covers(p, q) for q in queues)):
            continue
        for knob, key in TYPED_POLICY.items():
            if knob in chosen and key in p.definition:
                return (
                    f"{at} sets {key} on a workload queue, which the typed knob {knob} sets "
                    "too: keep one"
                )
    return None


def queue_arguments_refusal(
    queue_type: str, arguments: Mapping[str, Mapping[str, Any]]
) -> str | None:
    """One line when a queue's arguments contradict the queue type the harness declares."""
    declared = DECLARED_TYPE[queue_type]
    for queue, args in arguments.items():
        given = args.get("x-queue-type")
        if given is not None and given != declared:
            return (
                f"workload.queue_arguments.{queue}: x-queue-type {given} contradicts "
                f"cluster.queue_type {queue_type} (the harness declares a {declared} queue)"
            )
    return None


# ---- what a run applies ------------------------------------------------------------------------


def declare_arguments_of(
    queue_type: str, queue: str, arguments: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """queue.declare's arguments for one workload queue: the queue type's, then the
    scenario's."""
    return declare_arguments(queue_type, arguments.get(queue)) or {}


def connection_of(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A client's pika connection parameters: the harness's, then the scenario's."""
    return {**CONNECTION_DEFAULTS, **overrides}


def consumer_process(i: int, queue: str) -> str:
    """The process name of the i-th consumer (from 1), as its history and logs name it."""
    return f"consumer{i}-{queue}"
