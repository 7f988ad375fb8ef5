"""Reading RabbitMQ's log of its mirrored queues (R5), on lines as 3.10.8 wrote them in a run."""

from __future__ import annotations

import pytest

from checkers.summary import summary_lines
from systems.rabbitmq.broker_log import mirror_story

T = "2026-11-23T12:27:27.000000000Z 2026-11-23 12:27:{s}+00:00 [info] <0.1098.0> "
Q = "Mirrored queue 'jepsen.primary' in vhost '/': "

MASTER = "\n".join(
    T.format(s=s) + text
    for s, text in [
        ("02.000000", Q + "Adding mirror on node rabbit@rabbit3: <13089.789.0>"),
        ("12.758788", Q + "Synchronising: 17359 messages to synchronise"),
        ("12.759397", Q + "Synchronising: batch size: 4096"),
        ("12.972654", Q + "Synchronising: all mirrors already synced"),
        ("27.634470", Q + "Synchronising: 23065 messages to synchronise"),
        ("27.869101", Q + "Synchronising: mirrors [rabbit@rabbit3] to sync"),
        ("28.170018", Q + "Synchronising: complete"),
    ]
)
MIRROR = "\n".join(
    T.format(s=s) + text
    for s, text in [
        ("01.000000", "Recovering 0 queues of type rabbit_classic_queue took 40ms"),
        ("12.484131", "SIGTERM received - shutting down"),
        ("26.262798", "Recovering 0 queues of type rabbit_classic_queue took 49ms"),
        ("26.264982", Q + "Adding mirror on node rabbit@rabbit3: <0.528.0>"),
        ("40.000000", Q + "Synchronising: 9 messages to synchronise"),  # never completed
        ("40.100000", Q + "Synchronising: mirrors [rabbit@rabbit1, rabbit@rabbit2] to sync"),
    ]
)


def test_a_restarted_mirror_and_the_sync_that_refilled_it() -> None:
    story = mirror_story({"rabbit1": MASTER, "rabbit3": MIRROR})
    assert [(r["node"], r["classic_queues"]) for r in story["recoveries"]] == [
        ("rabbit3", 0),
        ("rabbit3", 0),
    ]
    assert [(a["queue"], a["node"]) for a in story["mirrors_added"]] == [
        ("jepsen.primary", "rabbit3"),
        ("jepsen.primary", "rabbit3"),
    ]
    # rabbit3 mirrored the queue from +2 s, left, and came back with nothing: what it threw
    # away is the queue as the master counted it when rabbit3 left, every mirror in step.
    (discarded,) = story["discarded"]
    assert (discarded["node"], discarded["queue"], discarded["messages"]) == (
        "rabbit3",
        "jepsen.primary",
        17359,
    )
    # The sync with every mirror already in step copied nothing: left out.
    first, second = story["syncs"]
    assert (first["master"], first["messages"], first["mirrors"]) == ("rabbit1", 23065, ["rabbit3"])
    assert first["seconds"] == pytest.approx(0.536, abs=1e-3)
    assert second["mirrors"] == ["rabbit1", "rabbit2"] and second["end"] is None


def test_the_summary_says_what_the_broker_logged() -> None:
    story = mirror_story({"rabbit1": MASTER, "rabbit3": MIRROR})
    verdict = {
        "outcome": "unavailable",
        "matched": True,
        "expect": "unavailable",
        "reason": "",
        "sends": {"ok": 1},
        "groups": {},
        "mirrored_queues": story,
        "history_span": {"first": story["recoveries"][0]["at"]},
    }
    lines = summary_lines(verdict)
    assert "broker log: rabbit3 started again at +25.3 s and recovered 0 classic queues" in lines
    assert (
        "broker log: rabbit1 synchronised jepsen.primary to rabbit3: 23065 messages at +26.6 s,"
        " in 0.54 s" in lines
    )
    assert (
        "broker log: rabbit3 came back without its copy of jepsen.primary; a master's last count"
        " of it before then, at +11.8 s, was 17359 messages" in lines
    )
    assert any(line.endswith("never completed") for line in lines)


def test_lines_that_are_not_the_brokers_are_passed_over() -> None:
    assert mirror_story({"rabbit1": "no timestamp\n\n  ##  ##  RabbitMQ 3.10.8\n"}) == {
        "recoveries": [],
        "mirrors_added": [],
        "discarded": [],
        "syncs": [],
    }


# A node that refused its configuration at boot, as 3.10.8 and 4.3.6 logged it (one run each).
E = "2026-11-25 04:00:52.470125+00:00 [error] <0.132.0> "
REFUSED_CONF = "\n".join(
    [
        E
        + "You've tried to set cluster_partition_handlin, but there is no setting with that name.",
        E + "  Did you mean one of these?",
        E + "    cluster_partition_handling",
        E + "Error preparing configuration in phase transform_datatypes:",
        E + "  - Error transforming datatype for: net_ticktime",
        E + '  - "abc" cannot be converted to a(n) integer',
        E + "  - Conf file attempted to set unknown variable: cluster_partition_handlin",
        E,
        E + "BOOT FAILED",
    ]
)
REFUSED_ADVANCED = "\n".join(
    [
        E + 'Failed to load advanced configuration file "/etc/rabbitmq/advanced.config": {badfile,',
        E + "                                             {parse_error,",
        E + "                                              {1,",
        E + "                                               erl_parse,",
        E + '                                               ["syntax error before: ",',
        E + "                                                []]}}}",
        E,
        E + "BOOT FAILED",
    ]
)
REFUSED_TRANSLATION = "\n".join(
    [
        E + "Error preparing configuration in phase apply_translations:",
        E + "  - Translation for 'rabbit.classic_queue_default_version' found invalid "
        "configuration: Classic queues v1 are no longer supported",
        E,
    ]
)


def test_what_a_node_said_of_the_configuration_it_refused() -> None:
    from systems.rabbitmq.broker_log import boot_errors

    assert boot_errors(REFUSED_CONF) == [
        'net_ticktime: "abc" cannot be converted to a(n) integer',
        "Conf file attempted to set unknown variable: cluster_partition_handlin",
    ]
    assert boot_errors(REFUSED_ADVANCED) == [
        'advanced.config: "/etc/rabbitmq/advanced.config": {badfile, {parse_error, {1, '
        'erl_parse, ["syntax error before: ", []]}}}'
    ]
    assert boot_errors(REFUSED_TRANSLATION) == [
        "Translation for 'rabbit.classic_queue_default_version' found invalid configuration: "
        "Classic queues v1 are no longer supported"
    ]
    # The saved logs carry Docker's timestamp first.
    saved = "\n".join(f"2026-11-25T04:00:52.470125000Z {ln}" for ln in REFUSED_CONF.splitlines())
    assert boot_errors(saved) == boot_errors(REFUSED_CONF)
    assert boot_errors(MASTER) == []
