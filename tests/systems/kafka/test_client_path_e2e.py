"""The clients' path through Toxiproxy on real Kafka (the nightly tier): delay-leader's 6 s
delay on the leader's client link is seen from the producer's side, the brokers advertise the
proxy and the harness keeps its own listener, and the proxy is gone with the run."""

from __future__ import annotations

import json
import statistics
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from contract.process import alive
from tests.helpers import history_events, run_harness
from tests.systems.kafka.test_real_cluster import kafka_image_or_missing

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.e2e]


def test_a_delayed_leader_link_delays_the_producers_acks_and_nothing_else(
    docker_client: Any, tmp_path: Path
) -> None:
    kafka_image_or_missing(docker_client, "kraft", "4.4")
    result, run_dir = run_harness("delay-leader", tmp_path, "--kafka", "4.4")
    assert result.returncode in (0, 1), result.stderr
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert sorted(manifest["client_proxy"]) == ["kafka1", "kafka2", "kafka3"]
    nemesis = history_events(run_dir / "history", "nemesis")
    start = next(e for e in nemesis if e["f"] == "start-delay" and e["type"] == "ok")
    heal = next(e for e in nemesis if e["f"] == "stop-partition" and e["type"] == "invoke")
    assert start["value"]["delay_ms"] == 6000 and len(start["value"]["nodes"]) == 1
    # Sends made well inside the delay are acknowledged no sooner than the delay less its
    # jitter: the requests waited in the proxy (the producer's other latencies are far below).
    events = history_events(run_dir / "history", "P1")
    invoked = {e["seq"]: e["time"] for e in events if e["f"] == "send" and e["type"] == "invoke"}
    inside = [
        e["time"] - invoked[e["seq"]]
        for e in events
        if e["f"] == "send"
        and e["type"] == "ok"
        and start["time"] + 1 < invoked.get(e["seq"], 0) < heal["time"] - 7
    ]
    assert inside and statistics.median(inside) >= 5.0
    verdict = json.loads((run_dir / "verdict.json").read_text())
    situations = verdict["coverage"]["situations"]
    assert situations.get("clients-delayed") == 1 and "controller-faulted" not in situations
    assert verdict["matched"] == (result.returncode == 0)
    # The proxy ended with the run.
    log = (run_dir / "logs" / "toxiproxy.log").read_text()
    assert "kafka1" in log
    pids = subprocess.run(
        ["pgrep", "-f", "toxiproxy-server"], capture_output=True, text=True
    ).stdout.split()
    assert not [p for p in pids if alive(int(p))]


def test_a_hold_delivers_requests_after_their_transaction_ended_and_the_broker_says_so(
    docker_client: Any, tmp_path: Path
) -> None:
    """T6 on 4.4 (confluent-kafka, transaction version 1): the records held on the brokers
    that are not the coordinator outlive the transactions that wrote them, and the producer
    whose requests the coordinator's hold held takes a new epoch after it (its own log says
    so). Whether the coordinator also rolled a transaction back on its timeout depends on
    where the hold caught the producer (a commit in flight, or AddPartitionsToTxn): not
    asserted."""
    kafka_image_or_missing(docker_client, "kraft", "4.4")
    result, run_dir = run_harness("T6", tmp_path, "--kafka", "4.4")
    assert result.returncode in (0, 1), result.stderr
    nemesis = history_events(run_dir / "history", "nemesis")
    holds = [e for e in nemesis if e["f"] == "start-hold" and e["type"] == "ok"]
    releases = [e for e in nemesis if e["f"] == "release-clients" and e["type"] == "ok"]
    assert len(holds) == 2 and len(releases) == 2
    assert all(r["value"]["remaining_toxics"] == {} for r in releases)
    verdict = json.loads((run_dir / "verdict.json").read_text())
    situations = verdict["coverage"]["situations"]
    assert situations.get("request-held-past-end-txn", 0) >= 1
    assert situations.get("commit-delayed", 0) >= 1
    assert verdict["transactions"]["held_past_end"] == situations["request-held-past-end-txn"]
    # What the held requests cost the producer, in the coordinator's own log: a new epoch for
    # P1 after the hold on the coordinator began (the bump after its timed-out or rolled-back
    # transaction, or a new instance after it was fenced).
    coordinator = holds[1]["value"]["nodes"][0]
    log = (run_dir / "logs" / f"{coordinator}.log").read_text().splitlines()
    inits = [
        datetime.fromisoformat(line.split(" ", 1)[0].rstrip("Z")[:26]).replace(tzinfo=UTC)
        for line in log
        if "Initialized transactionalId P1 with producerId" in line
    ]
    assert [t for t in inits if t.timestamp() > holds[1]["time"]], "no new epoch after the hold"
    assert verdict["matched"] == (result.returncode == 0)
