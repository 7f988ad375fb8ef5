"""A Kafka run's clients, their processes recorded instead of started: those a nemesis may
pause, the final read after the live readers drained, and a copier restarted."""

from __future__ import annotations

import json
from pathlib import Path
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
        readers=[SimpleNamespace(id="r")],
        copiers=[],
        drain_timeout=5.0,
        final_read=True,
        share_consumers=None,
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


def recorded_run(scenario: str, history: Path) -> tuple[Any, list[tuple[str, str, dict[str, Any]]]]:
    """A run of `scenario` that records what it would spawn, its clients all ended."""
    from systems.kafka.clients_run import KafkaClientsRun

    spawned: list[tuple[str, str, dict[str, Any]]] = []

    class Recorded(KafkaClientsRun):
        bootstrap_servers = "b:9092"  # type: ignore[assignment]

        def _spawn(self, role: str, process: str, config: dict[str, Any]) -> None:
            spawned.append((role, process, config))
            self.clients[process] = SimpleNamespace(pid=7000 + len(spawned), poll=lambda: None)  # type: ignore[assignment]

    run = object.__new__(Recorded)
    spec = parse_scenario(scenario, "x.yaml")
    assert isinstance(spec, KafkaScenario)
    run.scenario, run.history_dir = spec, history
    run.read_deadline, run.write_deadline = 2000.0, 1000.0
    run.client_of = {}
    ended = SimpleNamespace(pid=4444, poll=lambda: -9)
    run.clients = {c: ended for c in spec.workload.client_ids()}  # type: ignore[misc]
    return run, spawned


def test_a_copier_restarted_is_a_new_process_with_the_same_transactional_id(
    tmp_path: Path,
) -> None:
    """restart-client: C1 killed, a new instance C1.2 started with C1's transactional id and
    group; the run's clients then answer to C1 with C1.2's group."""
    run, spawned = recorded_run((ROOT / "scenarios" / "T7.yaml").read_text(), tmp_path)
    assert run.restart_client("C1") == 7001
    ((role, process, config),) = spawned
    assert (role, process) == ("copier", "C1.2")
    assert config["process"] == "C1.2" and config["transactional_id"] == "C1"
    assert config["deadline"] == 2000.0
    assert run.running_clients() == {"C1": 7001}
    with pytest.raises(NemesisError, match="C1 still runs"):
        run.restart_client("C1")


def test_a_plain_producer_restarted_goes_on_in_its_id_space(tmp_path: Path) -> None:
    """P1 killed after it began seq 41: P1.2 sends P1's messages from 42 on, so the checker
    sees one producer; a reader restarted keeps its group."""
    history = tmp_path / "history"
    history.mkdir()
    lines = [{"f": "send", "type": "invoke", "producer": "P1", "seq": n} for n in (1, 40, 41)]
    lines.append({"f": "send", "type": "ok", "producer": "P1", "seq": 57})  # not a begun send
    (history / "P1.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines) + '{"f": "se')
    run, spawned = recorded_run((ROOT / "scenarios" / "K4.yaml").read_text(), history)
    run.restart_client("P1")
    ((role, process, config),) = spawned
    assert (role, process) == ("producer", "P1.2")
    assert (config["producer_id"], config["first_seq"], config["deadline"]) == ("P1", 42, 1000.0)
    assert config["not_before"] == 0.0
    reader = run.scenario.workload.readers[0].id
    run.restart_client(reader)
    role, process, config = spawned[-1]
    assert (role, process, config["group"]) == ("reader", f"{reader}.2", reader)
    assert config["deadline"] == 2000.0


def test_a_transactional_producer_restarted_keeps_its_transactional_id(tmp_path: Path) -> None:
    run, spawned = recorded_run((ROOT / "scenarios" / "T2.yaml").read_text(), tmp_path)
    run.restart_client("P1")
    ((role, process, config),) = spawned
    assert (role, process) == ("producer", "P1.2")
    assert config["transaction"]["transactional_id"] == "P1"
    assert "producer_id" not in config  # its own id space: its transactions are its own


def test_share_consumers_start_with_the_readers_drain_with_them_and_restart_in_their_group(
    tmp_path: Path,
) -> None:
    run, spawned = recorded_run((ROOT / "scenarios" / "S4-java.yaml").read_text(), tmp_path)
    run.manifest = Manifest(images={"kafka": {"version": "4.4.0"}})
    run._start_clients(1000.0)
    roles = [(role, process) for role, process, _ in spawned]
    assert roles[:4] == [
        ("reader", "R"),
        ("share", "share-consumer-0"),
        ("share", "share-consumer-1"),
        ("share", "share-consumer-2"),
    ]
    assert roles[4] == ("producer", "P1")  # the consumers are members before the first send
    config = spawned[1][2]
    assert (config["group"], config["topic"], config["client"]) == ("share", "jepsen", "java")
    assert (config["acknowledgement"], config["delay"], config["max_poll_records"]) == (
        "explicit",
        0.05,
        20,
    )
    assert (config["accept"], config["release"], config["reject"]) == (1.0, 0.0, 0.0)
    assert config["idle_s"] == 15 + 5 and config["java_version"] == "4.4.0"
    assert config["deadline"] == run.read_deadline
    spawned.clear()
    run.clients["share-consumer-1"] = SimpleNamespace(pid=1, poll=lambda: -9)  # type: ignore[assignment]
    run.restart_client("share-consumer-1")
    ((role, process, again),) = spawned
    assert (role, process) == ("share", "share-consumer-1.2")
    assert again["group"] == "share" and again["deadline"] == run.read_deadline


def test_the_drain_signals_share_consumers_with_the_readers() -> None:
    run, log = recorded_drain(0)
    share = SimpleNamespace(processes=lambda: ["s-0", "s-1"])
    run.scenario.workload.share_consumers = share
    for name in ("s-0", "s-1"):
        run.clients[name] = SimpleNamespace(send_signal=lambda s: log.append("signal"))
    exits = {"r": 0, "s-0": 0, "s-1": 3, "final": 0}

    def wait(name: str, deadline: float) -> int:
        log.append(name)
        return exits[name]

    run._wait_client = wait
    run._drain()
    assert log[:6] == ["signal", "signal", "signal", "r", "s-0", "s-1"]
    assert run.manifest.consumer_exit_codes == {"r": 0, "s-0": 0, "s-1": 3, "final": 0}
    assert run.manifest.drain_complete is False  # a consumer that did not drain


@pytest.mark.parametrize(("scenario", "client"), [("S1", "python"), ("S1-java", "java")])
def test_the_settings_shown_for_share_consumers_are_their_clients_and_their_groups(
    scenario: str, client: str
) -> None:
    from systems.kafka.clients_run import KafkaClientsRun

    run = object.__new__(KafkaClientsRun)
    spec = parse_scenario((ROOT / "scenarios" / f"{scenario}.yaml").read_text(), "x.yaml")
    run.scenario = spec  # client_settings reads the scenario alone
    shown = run.client_settings()
    assert shown["share group share"] == {
        "share.auto.offset.reset": "earliest",
        "share.delivery.count.limit": "5",
        "share.record.lock.duration.ms": "15000",
    }
    consumer = shown["share consumer share-consumer-2"]
    assert consumer["group.id"] == "share" and consumer["client.id"] == "share-consumer-2"
    assert consumer["share.acknowledgement.mode"] == "explicit"
    assert ("share.acquire.mode" in consumer) is (client == "java")
    assert "bootstrap.servers" not in consumer
