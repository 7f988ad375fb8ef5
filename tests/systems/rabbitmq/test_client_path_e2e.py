"""The clients' path through Toxiproxy on real RabbitMQ (the nightly tier): delay-rabbitmq's
publisher, connected to rabbit1 through the proxy, has its confirms delayed by the 4 s link
delay (both ways) and hears nothing during the hold that outlasts its confirm timeout; the
nodes' own traffic stays direct, and the proxy is gone with the run."""

from __future__ import annotations

import json
import statistics
import subprocess
from pathlib import Path
from typing import Any

import pytest

from contract.process import alive
from tests.helpers import history_events, run_harness

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.e2e]


def test_a_delayed_and_held_node_link_delays_the_publishers_confirms(
    docker_client: Any, rabbitmq_image: str, tmp_path: Path
) -> None:
    result, run_dir = run_harness("delay-rabbitmq", tmp_path)
    assert result.returncode in (0, 1), result.stderr[-3000:]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert sorted(manifest["client_proxy"]) == ["rabbit1", "rabbit2", "rabbit3"]
    nemesis = history_events(run_dir / "history", "nemesis")
    delay = next(e for e in nemesis if e["f"] == "start-delay" and e["type"] == "ok")
    hold = next(e for e in nemesis if e["f"] == "start-hold" and e["type"] == "ok")
    releases = [e for e in nemesis if e["f"] == "release-clients" and e["type"] == "ok"]
    assert delay["value"]["nodes"] == hold["value"]["nodes"] == ["rabbit1"]
    assert len(releases) == 2 and "undelivered_chunks" not in releases[-1]["value"]
    # Confirms of messages published well inside the delay come no sooner than the delay both
    # ways less its jitter; inside the hold the publisher hears nothing at all, until RabbitMQ
    # drops its silent connection (heartbeats, 5 s twice) and it moves to another node.
    events = history_events(run_dir / "history", "A")
    sent = {e["seq"]: e["time"] for e in events if e["f"] == "send" and e["type"] == "invoke"}
    confirmed = {e["seq"]: e["time"] for e in events if e["f"] == "send" and e["type"] == "ok"}
    inside = [
        confirmed[s] - t
        for s, t in sent.items()
        if s in confirmed and delay["time"] + 1 < t < releases[0]["time"] - 9
    ]
    assert inside and statistics.median(inside) >= 7.0
    heard = [
        e["time"] - hold["time"]
        for e in events
        if e["f"] == "send" and e["type"] in ("ok", "info", "fail")
    ]
    assert not [t for t in heard if 0.5 < t < 8.0]
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["coverage"]["situations"].get("clients-delayed") == 2
    assert verdict["matched"] == (result.returncode == 0)
    pids = subprocess.run(
        ["pgrep", "-f", "toxiproxy-server"], capture_output=True, text=True
    ).stdout.split()
    assert not [p for p in pids if alive(int(p)) and str(p) in json.dumps(manifest)]
