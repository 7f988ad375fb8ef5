"""One scenario on several release lines (`harness compare`, `make test-scenario KAFKA=3.9,4.4`):
a run per line, each its own bounded `harness run` process, and one table of their verdicts
written beside them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from harness.sequence import Job, Trial, run_jobs


@dataclass(frozen=True)
class LineRun:
    line: str
    trial: Trial

    @property
    def matched(self) -> bool:
        return bool(self.trial.verdict and self.trial.verdict.get("matched"))

    def cells(self) -> list[str]:
        v = self.trial.verdict or {}
        if v == {}:
            return [self.line, "-", "no verdict", "-", "-", self.trial.failure or "", "-"]
        lost = sum(int(g.get("lost", 0)) for g in (v.get("groups") or {}).values())
        version = str(v.get("kafka_version") or v.get("rabbitmq_version") or self.line)
        run = self.trial.run_dir.name if self.trial.run_dir else "-"
        return [
            self.line,
            version,
            str(v.get("outcome")),
            str(v.get("claim_verdict") or ("matched" if v.get("matched") else "not matched")),
            str(lost),
            str(v.get("reason", "")).replace("|", "/"),
            f"`{run}`",
        ]


HEADER = ["line", "release", "outcome", "verdict", "lost", "reason", "run"]


def compare(
    scenario: str,
    scenario_id: str,
    option: str,
    lines: list[str],
    results: Path,
    extra: list[str],
    timeout: float,
    say: Callable[[str], None],
    pipelined: bool = True,
) -> tuple[list[LineRun], Path]:
    """Runs the scenario once per line (`option` is --kafka or --rabbitmq) and writes
    RESULTS/compare/<scenario>-<time>.md; returns the runs and the table's path. Pipelined, a
    line's cluster comes up while the line before is checked (harness.sequence)."""
    runs: list[LineRun] = []

    def jobs() -> Iterator[Job]:
        for line in lines:
            say(f"compare: {scenario_id} on {line}")
            yield Job(scenario, scenario_id, results, timeout, (option, line, *extra), line)

    def tabled(job: Job, trial: Trial) -> bool:
        runs.append(LineRun(job.tag, trial))
        say(f"compare: {job.tag}: " + " | ".join(runs[-1].cells()[2:5]))
        return True

    run_jobs(jobs(), tabled, pipelined)
    return runs, write_table(scenario_id, runs, results)


def table_lines(scenario_id: str, runs: list[LineRun]) -> list[str]:
    rows = [HEADER, ["---"] * len(HEADER), *(r.cells() for r in runs)]
    return [f"# {scenario_id} across release lines", ""] + [
        "| " + " | ".join(r) + " |" for r in rows
    ]


def write_table(scenario_id: str, runs: list[LineRun], results: Path) -> Path:
    out = results / "compare"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{scenario_id}-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.md"
    path.write_text("\n".join(table_lines(scenario_id, runs)) + "\n")
    return path
