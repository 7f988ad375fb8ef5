"""The clients' path through Toxiproxy on real Kafka (the nightly tier): delay-leader's 6 s
delay on the leader's client link is seen from the producer's side, the brokers advertise the
proxy and the harness keeps its own listener, and the proxy is gone with the run."""

from __future__ import annotations

import json
import statistics
import subprocess
from pathlib import Path

import pytest

from contract.process import alive
from tests.helpers import ROOT, history_events
from tests.systems.kafka.test_real_cluster import kafka_image_or_missing

pytestmark = [pytest.mark.spark, pytest.mark.e2e]


def test_a_delayed_leader_link_delays_the_producers_acks_and_nothing_else(
    tmp_path: Path,
) -> None:
    kafka_image_or_missing("4.4")
    command = [".venv/bin/harness", "run", "delay-leader", "--kafka", "4.4"]
    result = subprocess.run(
        [*command, "--results", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=1500,
        cwd=ROOT,
    )
    run_dir = (tmp_path / "latest").resolve()
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
