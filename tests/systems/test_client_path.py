"""The clients' path faults on a real Toxiproxy (loopback: an echo server stands for a broker):
each recorded between an invoke and an ok, a heal of some brokers leaving the others' toxics."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from compose.proxy import ProxyServer
from nemesis.containers import NemesisError
from systems.client_path import ClientPath
from tests.compose.test_proxy import connect, echo, round_trip  # noqa: F401 - the fixture

Events = list[tuple[str, str, dict[str, Any]]]


@pytest.fixture
def path(echo: str) -> Iterator[tuple[ClientPath, Events]]:  # noqa: F811 - the fixture
    events: Events = []

    def logged(f: str, value: dict[str, Any], act: Callable[[], Any]) -> None:
        events.append(("invoke", f, value))
        events.append(("ok", f, {**value, **(act() or {})}))

    with ProxyServer() as proxy:
        for broker in ("kafka1", "kafka2"):
            proxy.create(broker, echo)
        yield ClientPath(proxy, logged), events


def test_a_delay_is_recorded_and_a_heal_of_one_broker_leaves_the_others(
    path: tuple[ClientPath, Events],
) -> None:
    client_path, events = path
    client_path.delay(["kafka1", "kafka2"], 700, 0, both_ways=True)
    assert events[-1] == (
        "ok",
        "start-delay",
        {"op": "delay", "nodes": ["kafka1", "kafka2"], "delay_ms": 700, "jitter_ms": 0,
         "both_ways": True},
    )  # fmt: skip
    with connect(client_path.proxy.proxies["kafka2"]) as conn:
        assert round_trip(conn) >= 1.4  # 700 ms each way
    client_path.heal(["kafka1"])
    assert events[-1] == (
        "ok",
        "release-clients",
        {"op": "heal", "nodes": ["kafka1"], "toxics": {"kafka1": ["delay-down", "delay-up"]},
         "remaining_toxics": {"kafka2": ["delay-down", "delay-up"]}},
    )  # fmt: skip
    # Healed in place: the toxics pass everything (what they held went on), none dropped.
    kept = client_path.proxy.toxics("kafka1")
    assert sorted(t["name"] for t in kept) == ["delay-down", "delay-up"]
    assert all(t["attributes"]["latency"] == 0 for t in kept)
    with connect(client_path.proxy.proxies["kafka1"]) as conn:
        assert round_trip(conn) < 0.7
    client_path.heal()
    assert events[-1][2]["nodes"] == "all" and events[-1][2]["remaining_toxics"] == {}
    assert not client_path.in_effect
    written = len(events)
    client_path.heal()  # nothing in effect: nothing to release, nothing written
    assert len(events) == written


def test_a_hold_delivers_what_it_held_at_the_heal(path: tuple[ClientPath, Events]) -> None:
    client_path, events = path
    client_path.hold(["kafka1"], both_ways=False)
    assert events[-1] == (
        "ok",
        "start-hold",
        {"op": "hold", "nodes": ["kafka1"], "both_ways": False},
    )
    with connect(client_path.proxy.proxies["kafka1"]) as conn:
        conn.settimeout(1.0)
        conn.sendall(b"late")
        with pytest.raises(TimeoutError):  # held, not dropped: no answer yet
            conn.recv(4)
        client_path.heal(["kafka1"])
        conn.settimeout(5)
        assert conn.recv(4) == b"late"
    assert events[-1][2]["toxics"] == {"kafka1": ["hold-up"]}


def test_a_second_delay_replaces_the_first(path: tuple[ClientPath, Events]) -> None:
    client_path, _ = path
    client_path.delay(["kafka1"], 3000, 0, both_ways=False)
    client_path.delay(["kafka1"], 200, 0, both_ways=False)
    (toxic,) = client_path.proxy.toxics("kafka1")
    assert toxic["attributes"]["latency"] == 200
    client_path.heal()
    client_path.delay(["kafka1"], 300, 0, both_ways=False)  # after a release in place
    (toxic,) = client_path.proxy.toxics("kafka1")
    assert toxic["attributes"]["latency"] == 300


def test_a_blackhole_and_a_reset_are_recorded(path: tuple[ClientPath, Events]) -> None:
    client_path, events = path
    client_path.blackhole(["kafka2"])
    client_path.reset(["kafka1"])
    assert [(kind, f) for kind, f, _ in events] == [
        ("invoke", "start-blackhole"),
        ("ok", "start-blackhole"),
        ("invoke", "reset-clients"),
        ("ok", "reset-clients"),
    ]
    assert [t["type"] for t in client_path.proxy.toxics("kafka2")] == ["timeout"]


def test_a_broker_without_a_proxy_is_refused(path: tuple[ClientPath, Events]) -> None:
    client_path, _ = path
    with pytest.raises(NemesisError, match="kafka3 has no proxy"):
        client_path.blackhole(["kafka3"])


def test_a_slow_link_limits_the_bandwidth_both_ways(path: tuple[ClientPath, Events]) -> None:
    client_path, events = path
    client_path.slow(["kafka1"], 800, both_ways=True)
    assert events[-1][1] == "start-slow-link" and events[-1][2]["rate_kbit"] == 800
    toxics = {t["name"]: t for t in client_path.proxy.toxics("kafka1")}
    assert sorted(toxics) == ["slow-down", "slow-up"]
    assert (
        toxics["slow-up"]["type"] == "bandwidth" and toxics["slow-up"]["attributes"]["rate"] == 100
    )
