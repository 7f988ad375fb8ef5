"""The local Kafka images' entrypoint (compose/images/kafka-entrypoint.sh), run here with stand-ins
for Kafka's storage tool and server: the KAFKA_* variables become the server's properties, and a
KRaft node's first start formats its log directory, a dynamic quorum's with the initial voters
or without initial controllers, as the harness's variables say."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.helpers import ROOT

ENTRYPOINT = ROOT / "compose" / "images" / "kafka-entrypoint.sh"
# A stand-in tool: its name and arguments, one per line, appended to $CALLS.
STAND_IN = '#!/bin/bash\n{ echo "$(basename "$0")"; printf "%s\\n" "$@"; echo --; } >>"$CALLS"\n'


def run_entrypoint(
    tmp_path: Path, formatted: bool = False, **env: str
) -> tuple[list[list[str]], dict[str, str]]:
    """The tools the entrypoint ran (each its name then its arguments) and the properties it
    wrote; `formatted`: the log directory was formatted by an earlier start."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("kafka-storage.sh", "kafka-server-start.sh"):
        (bin_dir / tool).write_text(STAND_IN)
        (bin_dir / tool).chmod(0o755)
    data, props, calls = tmp_path / "data", tmp_path / "server.properties", tmp_path / "calls"
    data.mkdir()
    if formatted:
        (data / "meta.properties").write_text("version=1\n")
    environment = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "CALLS": str(calls),
        "BROKERJEPSEN_PROPERTIES": str(props),
        "KAFKA_PROCESS_ROLES": "controller",
        "KAFKA_LOG_DIRS": str(data),
        "CLUSTER_ID": "MkU3OEVBNTcwNTJENDM2Qg",
        **env,
    }
    subprocess.run(["bash", str(ENTRYPOINT), "kafka"], env=environment, check=True, timeout=30)
    runs = [block.strip("\n").split("\n") for block in calls.read_text().split("--\n") if block]
    lines = props.read_text().splitlines()
    return runs, dict(line.split("=", 1) for line in lines)


def test_a_static_quorums_node_is_formatted_with_the_cluster_id_alone(tmp_path: Path) -> None:
    runs, props = run_entrypoint(tmp_path, KAFKA_CONTROLLER_QUORUM_VOTERS="101@controller1:9093")
    storage, server = runs
    assert storage == [
        "kafka-storage.sh",
        "format",
        "--ignore-formatted",
        "--cluster-id=MkU3OEVBNTcwNTJENDM2Qg",
        "-c",
        str(tmp_path / "server.properties"),
    ]
    assert server == ["kafka-server-start.sh", str(tmp_path / "server.properties")]
    assert props["controller.quorum.voters"] == "101@controller1:9093"


def test_a_dynamic_quorums_first_voter_is_formatted_with_the_initial_controllers(
    tmp_path: Path,
) -> None:
    voters = ",".join(
        [
            "101@controller1:9093:AAAAAAAAAAAAAAAAAAAAAQ",
            "102@controller2:9093:AAAAAAAAAAAAAAAAAAAAAg",
        ]
    )
    runs, props = run_entrypoint(tmp_path, BROKERJEPSEN_INITIAL_CONTROLLERS=voters)
    assert runs[0][-2:] == ["--initial-controllers", voters]
    # The harness's variables are the entrypoint's, never the server's properties.
    assert not any("initial" in key or "brokerjepsen" in key for key in props)


def test_every_other_node_of_a_dynamic_quorum_is_formatted_without_initial_controllers(
    tmp_path: Path,
) -> None:
    runs, props = run_entrypoint(tmp_path, BROKERJEPSEN_NO_INITIAL_CONTROLLERS="1")
    assert runs[0][-1] == "--no-initial-controllers" and runs[0].count("-c") == 1
    assert "no.initial.controllers" not in props


def test_a_formatted_directory_is_not_formatted_again(tmp_path: Path) -> None:
    runs, _ = run_entrypoint(tmp_path, formatted=True, BROKERJEPSEN_NO_INITIAL_CONTROLLERS="1")
    assert [run[0] for run in runs] == ["kafka-server-start.sh"]


def test_a_cluster_id_that_begins_with_a_dash_is_no_option(tmp_path: Path) -> None:
    """A ZooKeeper-mode cluster's id, which a migration's controllers are formatted with, may
    begin with "-" (one did: -5gvkvvTSd-PWVeY8CM1TQ, and `-t ID` made the tool refuse)."""
    runs, _ = run_entrypoint(tmp_path, CLUSTER_ID="-5gvkvvTSd-PWVeY8CM1TQ")
    assert "--cluster-id=-5gvkvvTSd-PWVeY8CM1TQ" in runs[0] and "-t" not in runs[0]
