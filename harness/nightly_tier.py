"""The nightly tier (`make test-nightly`, `.ci/nightly`): what the fast gate leaves out, in three
phases, each a subprocess bounded in time:

1. pytest's nightly tier: every end-to-end test but the smokes, every kill point, the engine
   restart and the full disk (tests/tiers.py decides which);
2. the claims matrix on the default release lines (`harness claims`: resumes where the last
   night stopped, starts no run after its budget);
3. chaos (`harness nightly --hours H`): seeded schedules over the base matrix, violations shrunk;
   with --hunt (HUNT, default T2), the last half of its budget hunts those scenarios' rare
   anomalies (harness hunt).

It writes one folder, results/nightly/<UTC time>/: each phase's log, summary.md (what ran, what
failed, where the reports are) and junit.xml, which holds every phase's own test cases (pytest's,
a case per claims cell judged by what the night changed, the chaos runs) and one case per phase
for how the phase itself ended, so a dashboard shows a phase that timed out or crashed before it
wrote its own file.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from harness.claims import NOT_RUN, matrix_words
from reports.junit import Case, suite

ROOT = Path(__file__).resolve().parent.parent
SLACK_S = 1800.0  # past a phase's own budget: its last run, its shrink, its report


@dataclass(frozen=True)
class Phase:
    name: str
    command: tuple[str, ...]
    timeout_s: float
    junit: Path | None  # the JUnit file the phase writes, if it writes one
    reports: str  # where a person reads what it found
    # Instead of the phase's own file: its test cases judged from what changed during the night
    # (the claims matrix: snapshot before, cases after).
    judge: Callable[[], Callable[[], list[Case]]] | None = None
    junit_in_log: bool = False  # the phase names its JUnit file in a `junit: PATH` line


@dataclass
class Counts:
    tests: int = 0
    failures: int = 0
    errors: int = 0
    skipped: int = 0
    suites: list[ET.Element] = field(default_factory=list)


@dataclass
class Outcome:
    phase: Phase
    exit_code: int | None  # None: it ran out of time and was stopped
    seconds: float
    log: Path
    counts: Counts

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and self.counts.failures == 0 and self.counts.errors == 0

    @property
    def how(self) -> str:
        if self.exit_code is None:
            return f"stopped after its {self.phase.timeout_s / 60:.0f} min"
        return f"exit {self.exit_code}"


def phases(
    out: Path,
    results: Path,
    hours: float,
    claims_minutes: float,
    python: str = sys.executable,
    hunt: str = "",
) -> list[Phase]:
    harness = (python, "-m", "harness.cli")
    return [
        Phase(
            "pytest",
            (python, "-m", "pytest", "--tier", "nightly", "--record-durations",
             f"--junitxml={out / 'pytest-junit.xml'}"),
            4 * 3600.0,
            out / "pytest-junit.xml",
            f"{out / 'pytest.log'}; each end-to-end run's report under test-artifacts/",
        ),
        Phase(
            "claims",
            (*harness, "claims", "--budget-minutes", f"{claims_minutes:g}",
             "--results", str(results)),
            claims_minutes * 60 + SLACK_S,
            None,
            f"docs/claims-results.md (commit it); runs indexed in {results / 'index.html'}",
            judge=claims_judge,
        ),
        Phase(
            "chaos",
            (*harness, "nightly", "--hours", f"{hours:g}", "--results", str(results),
             *(("--hunt", hunt) if hunt else ())),
            hours * 3600 + SLACK_S,
            None,  # its folder is named by the date chaos starts: its log says the file
            f"{results / 'chaos'}/<date>/summary.md; minimal schedules in scenarios/found/",
            junit_in_log=True,
        ),
    ]  # fmt: skip


def run_phase(phase: Phase, out: Path) -> Outcome:
    """Runs one phase in its own process group, its output to out/<name>.log; a phase past its
    timeout is stopped with its children (SIGTERM: the harness heals what it broke)."""
    log = out / f"{phase.name}.log"
    if phase.junit is not None:
        phase.junit.unlink(missing_ok=True)  # a file left by an earlier night is not this one's
    judged = phase.judge() if phase.judge is not None else None
    started = time.monotonic()
    with log.open("w") as sink:
        proc = subprocess.Popen(
            phase.command, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code: int | None = proc.wait(timeout=phase.timeout_s)
        except subprocess.TimeoutExpired:
            code = None
            _stop(proc)
    seconds = time.monotonic() - started
    if judged is not None:
        counts = case_counts(judged())
    else:
        counts = junit_counts(_junit_said(log) if phase.junit_in_log else phase.junit)
    return Outcome(phase, code, seconds, log, counts)


def _junit_said(log: Path) -> Path | None:
    """The JUnit file a phase's log names last (`junit: PATH`)."""
    lines = log.read_text(errors="replace").splitlines()
    paths = [ln.removeprefix("junit: ").strip() for ln in lines if ln.startswith("junit: ")]
    return Path(paths[-1]) if paths else None


def claims_judge() -> Callable[[], list[Case]]:
    """The matrix's cells before the night; after it, a case per cell. A cell whose verdict
    changed to anything but "reproduced" fails (a claim that stopped reproducing, a refuted
    guarantee, a run without a verdict); a reproduced cell passes; any other word the cell
    already had is skipped with that word: a standing finding (a claim not reproduced on a
    line, as docs/claims-findings.md explains) or a cell the night did not reach. So a night
    fails on what changed, not on what the table has long said."""
    before = matrix_words()

    def cases() -> list[Case]:
        after = matrix_words()
        out = []
        for key, now in after.items():
            word, was = now.word, before[key].word if key in before else NOT_RUN
            claim = key.split("/", 1)[0]
            base, was_base = _base(word), _base(was)
            if now.unfinished:
                out.append(Case(f"claims.{claim}", key, 0.0, skipped=f"unfinished: {word}"))
            elif base != was_base and base != "reproduced":
                out.append(Case(f"claims.{claim}", key, 0.0, failure=f"{was} -> {word}"))
            elif base == "reproduced":
                out.append(Case(f"claims.{claim}", key, 0.0, output=word))
            else:
                out.append(Case(f"claims.{claim}", key, 0.0, skipped=f"standing: {word}"))
        return out

    return cases


def _base(word: str) -> str:
    """A cell's word without its run counts: "not reproduced (1/3)" -> "not reproduced"."""
    return word.split(" (", 1)[0].split(":", 1)[0]


def case_counts(cases: list[Case]) -> Counts:
    root = suite(cases, "claims matrix").getroot()
    assert root is not None  # a tree made here always has its root
    return junit_counts_of(root)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    for sig, wait in ((signal.SIGTERM, 120.0), (signal.SIGKILL, 30.0)):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=wait)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def junit_counts(path: Path | None) -> Counts:
    """The counts and suites of a JUnit file; none when the phase wrote none (or a torn one)."""
    if path is None or not path.exists():
        return Counts()
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        return Counts()
    return junit_counts_of(root)


def junit_counts_of(root: ET.Element) -> Counts:
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    counts = Counts(suites=suites)
    for s in suites:
        counts.tests += int(s.get("tests", 0))
        counts.failures += int(s.get("failures", 0))
        counts.errors += int(s.get("errors", 0))
        counts.skipped += int(s.get("skipped", 0))
    return counts


def write_junit(outcomes: Sequence[Outcome], path: Path) -> Path:
    """Every phase's own suites, renamed after their phase, and a suite of the phases."""
    root = ET.Element("testsuites", name="brokerjepsen-nightly")
    for o in outcomes:
        for s in o.counts.suites:
            s.set("name", f"{o.phase.name}: {s.get('name', '')}")
            root.append(s)
    phase_suite = ET.SubElement(
        root,
        "testsuite",
        name="nightly phases",
        tests=str(len(outcomes)),
        failures=str(sum(not o.passed for o in outcomes)),
        errors="0",
        skipped="0",
        time=f"{sum(o.seconds for o in outcomes):.1f}",
    )
    for o in outcomes:
        case = ET.SubElement(
            phase_suite, "testcase", classname="nightly", name=o.phase.name, time=f"{o.seconds:.1f}"
        )
        if not o.passed:
            failure = ET.SubElement(case, "failure", message=_failed_line(o))
            failure.text = f"log: {o.log}"
    ET.indent(root)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
    return path


def _failed_line(o: Outcome) -> str:
    c = o.counts
    return f"{o.phase.name}: {o.how}; {c.failures} failed, {c.errors} errors of {c.tests}"


def retention(results: Path) -> list[str]:
    """The default retention policy applied to the results folder (contract.retention): the
    summary's lines on what it removed and the disk the results use."""
    from contract.retention import Policy, apply_policy

    policy = Policy()
    pruning = apply_policy(results, policy)
    removed = len(pruning.removed)
    kept = len(pruning.decisions) - removed
    return [
        f"Results use {pruning.left / 1024**3:.2f} GB in {kept} runs ({results}).",
        f"Retention (passes {policy.keep_days:g} days, failures {policy.keep_failures_days:g} "
        f"days, the newest {policy.keep_last} of each scenario, every run the repository refers "
        f"to) removed {removed} runs, {pruning.freed / 1024**3:.2f} GB.",
    ]


def write_summary(
    outcomes: Sequence[Outcome], path: Path, started: datetime, disk: Sequence[str] = ()
) -> Path:
    failed = [o for o in outcomes if not o.passed]
    lines = [
        f"# Nightly tier, {started:%Y-%m-%d %H:%M} UTC",
        "",
        f"**{'passed' if not failed else 'FAILED: ' + ', '.join(o.phase.name for o in failed)}**"
        f" in {sum(o.seconds for o in outcomes) / 60:.1f} min.",
        "",
        "| phase | ended | minutes | tests | failed | errors | skipped | reports |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        c = o.counts
        lines.append(
            f"| {o.phase.name} | {o.how} | {o.seconds / 60:.1f} | {c.tests} | {c.failures} | "
            f"{c.errors} | {c.skipped} | {o.phase.reports} |"
        )
    lines += ["", "## Commands", ""]
    lines += [f"- {o.phase.name}: `{' '.join(o.phase.command)}` (log: {o.log})" for o in outcomes]
    if disk:
        lines += ["", "## Disk", "", *disk]
    failing = [(o, case) for o in outcomes for case in _failing_cases(o)]
    if failing:
        lines += ["", "## What failed", ""]
        lines += [f"- {o.phase.name}: {name}" for o, name in failing]
    path.write_text("\n".join(lines) + "\n")
    return path


def _failing_cases(o: Outcome) -> list[str]:
    names = []
    for s in o.counts.suites:
        for case in s.iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                names.append(f"{case.get('classname', '')}::{case.get('name', '')}")
    return names


app = typer.Typer(add_completion=False)


@app.command()
def main(
    hours: Annotated[float, typer.Option(min=0.01, max=24, help="chaos budget")] = 1.0,
    claims_minutes: Annotated[
        float, typer.Option(min=1, help="claims matrix budget: no run starts after")
    ] = 240.0,
    only: Annotated[str, typer.Option(help="phases, e.g. pytest,claims")] = "pytest,claims,chaos",
    results: Annotated[Path, typer.Option(help="results root")] = ROOT / "results",
    hunt: Annotated[
        str, typer.Option(help="scenarios chaos hunts in the last half of its budget, e.g. T2")
    ] = "",
) -> None:
    """Runs the nightly tier; exit 0 when every phase passed, 1 otherwise."""
    started = datetime.now(UTC)
    out = results / "nightly" / started.strftime("%Y%m%dT%H%M%SZ")
    wanted = {p.strip() for p in only.split(",") if p.strip()}
    every = phases(out, results, hours, claims_minutes, hunt=hunt)
    chosen = [p for p in every if p.name in wanted]
    if not chosen or len(chosen) != len(wanted):
        raise typer.BadParameter(f"takes pytest, claims, chaos; not {only!r}", param_hint="--only")
    out.mkdir(parents=True, exist_ok=True)
    outcomes = []
    for phase in chosen:
        print(f"nightly: {phase.name} ({' '.join(phase.command)})", flush=True)
        outcome = run_phase(phase, out)
        print(
            f"nightly: {phase.name} {outcome.how} after {outcome.seconds / 60:.1f} min", flush=True
        )
        outcomes.append(outcome)
    disk = retention(results)
    print(f"summary: {write_summary(outcomes, out / 'summary.md', started, disk)}")
    print(f"junit: {write_junit(outcomes, out / 'junit.xml')}")
    raise typer.Exit(0 if all(o.passed for o in outcomes) else 1)


if __name__ == "__main__":
    from harness.cli import run_app

    run_app(app)
