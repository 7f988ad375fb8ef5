"""What the commands say of scenarios and their release lines: a row of `harness list`, where
a chaos schedule runs, the shipped scenarios in order, and a scenario judged on each of several
release lines before a series of runs (compare, hunt) starts.

Apart from the command line so that it needs the scenarios' and the engine's modules only in
the commands that use them: `harness check` on a warm server is a few seconds, and importing
them was a third of a second of it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from systems.kafka.scenario import KafkaScenario
from systems.loading import load_checked
from systems.scenario import ScenarioError


def judge_on_lines(
    path: Path,
    option: str,
    lines: list[str | None],
    mode: str | None,
    configs: list[str] | None = None,
    config_wins: bool = False,
) -> None:
    """Before a series of runs of one scenario on several release lines (`option`: --kafka or
    --rabbitmq; None: the scenario's own line): every line known, its image built and the
    scenario's keys, a team's files taken in, judged by its release, so that no run starts when
    one line would refuse."""
    for line in lines:
        if option == "--rabbitmq" and line is not None:
            load_checked(path, rabbitmq=line, config_files=configs or (), config_wins=config_wins)
            continue
        on_line = line is not None
        load_checked(
            path,
            kafka=line,
            mode=mode,
            config_files=configs or (),
            config_wins=config_wins,
            kafka_as="line",
            build=on_line,
            release_keys=on_line,
        )


def scenario_row(path: Path, root: Path) -> tuple[str, str, str, str, str]:
    """A row of `harness list`: the name to run it by, its claim, where it runs, what it
    expects, its description (an invalid file's first problem)."""
    name = path.relative_to(root).with_suffix("").as_posix()
    try:
        s = load_checked(path).scenario
    except ScenarioError as e:
        return name, "", "", "invalid", e.problems[0]
    if isinstance(s, KafkaScenario):
        return name, s.claim or "-", "kafka " + ",".join(s.cluster.modes), s.expect, s.description
    return name, s.claim or "-", s.cluster.system, s.expect, s.description


def where_it_runs(scenario: Any) -> str:
    """ ", mode M" for a Kafka scenario (its first mode), else nothing."""
    return f", mode {scenario.cluster.modes[0]}" if isinstance(scenario, KafkaScenario) else ""


def scenarios_in_order(root: Path) -> list[Path]:
    """The scenario files under `root`, each folder's files before its subfolders', and in a
    folder by name with their numbers compared as numbers: K1, K2, ..., K10, not K1, K10, K2."""

    def key(path: Path) -> tuple[tuple[str, ...], tuple[str | int, ...]]:
        parts = re.split(r"(\d+)", path.stem)
        return path.relative_to(root).parent.parts, tuple(
            int(part) if part.isdigit() else part for part in parts
        )

    return sorted(root.rglob("*.yaml"), key=key)
