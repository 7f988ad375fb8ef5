"""A Kafka run's clients, their processes recorded instead of started: those a nemesis may
pause, the final read after the live readers drained, and a copier restarted."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from contract.manifest import Manifest
from nemesis.containers import NemesisError
from systems.kafka.scenario import KafkaScenario
from systems.registry import parse_scenario
from tests.helpers import ROOT


def test_the_clients_a_nemesis_may_pause_are_those_still_running() -> None:
    from systems.kafka.clients_run import KafkaClientsRun

    run = object.__new__(KafkaClientsRun)
    run.clients = {  # type: ignore[dict-item]
        "P1": SimpleNamespace(pid=4242, poll=lambda: None),
        "P2": SimpleNamespace(pid=4343, poll=lambda: 0),  # ended
        "C1": SimpleNamespace(pid=4444, poll=lambda: -9),  # killed, then restarted as C1.2
        "C1.2": SimpleNamespace(pid=4545, poll=lambda: None),
    }
    run.client_of = {"C1.2": "C1"}
    # A restarted client answers to its own name, with its current instance's group.
    assert run.running_clients() == {"P1": 4242, "C1": 4545}
    assert run.current("C1") == "C1.2" and run.current("P1") == "P1"


def recorded_drain(final_exit: int) -> tuple[Any, list[Any]]:
    """A Kafka run's drain with its client processes recorded instead of started."""
    from systems.kafka.clients_run import KafkaClientsRun

    class Recorded(KafkaClientsRun):
        bootstrap_servers = "b:9092"  # type: ignore[assignment]

    log: list[Any] = []
    run = object.__new__(Recorded)
    workload = SimpleNamespace(
        readers=[SimpleNamespace(id="r")], copiers=[], drain_timeout=5.0, final_read=True
    )
    run.scenario = SimpleNamespace(workload=workload, cluster=SimpleNamespace(topic="t"))
    run.manifest = Manifest()
    run.clients = {"r": SimpleNamespace(send_signal=lambda s: log.append("signal"))}  # type: ignore[dict-item]
    run.client_of = {}
    exits = {"r": 0, "final": final_exit}
    run._spawn = lambda role, name, cfg: log.append((role, name, cfg))  # type: ignore[method-assign]
    run._wait_client = lambda name, deadline: log.append(name) or exits[name]  # type: ignore[method-assign]
    return run, log


@pytest.mark.parametrize(("final_exit", "complete"), [(0, True), (3, False)])
def test_the_final_read_starts_after_the_live_readers_drained(
    final_exit: int, complete: bool
) -> None:
    run, log = recorded_drain(final_exit)
    run._drain()
    assert log[:2] == ["signal", "r"]  # the live reader drained first
    role, name, cfg = log[2]
    assert (role, name, cfg["group"], cfg["final"], cfg["topic"]) == (
        "reader",
        "final",
        "final",
        True,
        "t",
    )
    assert log[3] == "final" and run.manifest.drain_complete is complete
    assert run.manifest.consumer_exit_codes == {"r": 0, "final": final_exit}


def test_a_copier_restarted_is_a_new_process_with_the_same_transactional_id() -> None:
    """restart-client: C1 killed, a new instance C1.2 started with C1's transactional id and
    group; the run's clients then answer to C1 with C1.2's group."""
    from systems.kafka.clients_run import KafkaClientsRun

    spawned: list[tuple[str, str, dict[str, Any]]] = []

    class Recorded(KafkaClientsRun):
        bootstrap_servers = "b:9092"  # type: ignore[assignment]

        def _spawn(self, role: str, process: str, config: dict[str, Any]) -> None:
            spawned.append((role, process, config))
            self.clients[process] = SimpleNamespace(pid=7000 + len(spawned), poll=lambda: None)  # type: ignore[assignment]

    run = object.__new__(Recorded)
    spec = parse_scenario((ROOT / "scenarios" / "T7.yaml").read_text(), "T7.yaml")
    assert isinstance(spec, KafkaScenario)
    run.scenario = spec
    run.read_deadline = 1234.0
    run.client_of = {}
    run.clients = {"C1": SimpleNamespace(pid=4444, poll=lambda: -9)}  # type: ignore[dict-item]
    assert run.restart_client("C1") == 7001
    ((role, process, config),) = spawned
    assert (role, process) == ("copier", "C1.2")
    assert config["process"] == "C1.2" and config["transactional_id"] == "C1"
    assert config["deadline"] == 1234.0
    assert run.running_clients() == {"C1": 7001}
    with pytest.raises(NemesisError, match="C1 still runs"):
        run.restart_client("C1")
    with pytest.raises(NemesisError, match="restarts a copier; P1 is none"):
        run.restart_client("P1")
