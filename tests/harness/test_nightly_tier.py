"""The nightly tier's runner: phases bounded in time, one summary and one JUnit file a CI
dashboard reads, with every phase's own cases and how each phase ended."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness import nightly_tier
from harness.claims import CellWord
from harness.nightly_tier import Phase, phases, run_phase, write_junit, write_summary

JUNIT = """<?xml version="1.0"?>
<testsuites><testsuite name="pytest" tests="3" failures="{failures}" errors="0" skipped="1">
<testcase classname="tests.x" name="test_a"/>
<testcase classname="tests.x" name="test_b">{failure}</testcase>
<testcase classname="tests.x" name="test_c"><skipped/></testcase>
</testsuite></testsuites>
"""


def writer(junit: Path, failures: int, exit_code: int) -> tuple[str, ...]:
    failure = '<failure message="boom"/>' if failures else ""
    text = JUNIT.format(failures=failures, failure=failure)
    code = f"import pathlib,sys; pathlib.Path({str(junit)!r}).write_text({text!r}); "
    return (sys.executable, "-c", code + f"print('ran'); sys.exit({exit_code})")


def test_phases_run_and_one_summary_and_junit_say_what_passed_and_what_failed(
    tmp_path: Path,
) -> None:
    good = Phase("pytest", writer(tmp_path / "a.xml", 0, 0), 60, tmp_path / "a.xml", "here")
    bad = Phase("claims", writer(tmp_path / "b.xml", 1, 1), 60, tmp_path / "b.xml", "there")
    slow = Phase("chaos", (sys.executable, "-c", "import time; time.sleep(60)"), 1, None, "")
    outcomes = [run_phase(p, tmp_path) for p in (good, bad, slow)]
    assert [o.passed for o in outcomes] == [True, False, False]
    assert outcomes[2].exit_code is None and outcomes[2].seconds < 30
    assert (tmp_path / "pytest.log").read_text() == "ran\n"

    summary = write_summary(outcomes, tmp_path / "summary.md", datetime.now(UTC)).read_text()
    assert "FAILED: claims, chaos" in summary
    assert "| claims | exit 1 |" in summary and "| chaos | stopped after its 0 min |" in summary
    assert "- claims: tests.x::test_b" in summary

    root = ET.parse(write_junit(outcomes, tmp_path / "junit.xml")).getroot()
    names = [s.get("name") for s in root.iter("testsuite")]
    assert names == ["pytest: pytest", "claims: pytest", "nightly phases"]
    phase_suite = root.findall("testsuite")[-1]
    assert phase_suite.get("tests") == "3" and phase_suite.get("failures") == "2"
    failed = [c.get("name") for c in phase_suite.iter("testcase") if c.find("failure") is not None]
    assert failed == ["claims", "chaos"]


def test_a_junit_file_an_earlier_night_left_is_not_counted(tmp_path: Path) -> None:
    stale = tmp_path / "old.xml"
    stale.write_text(JUNIT.format(failures=1, failure="<failure/>"))
    phase = Phase("claims", (sys.executable, "-c", "pass"), 60, stale, "")
    outcome = run_phase(phase, tmp_path)
    assert outcome.passed and outcome.counts.tests == 0


def test_the_default_phases_are_pytests_nightly_tier_the_matrix_and_chaos(tmp_path: Path) -> None:
    pytest_phase, claims, chaos = phases(tmp_path / "out", tmp_path, hours=2, claims_minutes=90)
    assert "--tier" in pytest_phase.command and "nightly" in pytest_phase.command
    assert claims.command[-5:] == ("claims", "--budget-minutes", "90", "--results", str(tmp_path))
    assert claims.timeout_s > 90 * 60 and claims.judge is nightly_tier.claims_judge
    assert ("--hours", "2") == chaos.command[-4:-2] and chaos.timeout_s > 2 * 3600
    assert "--hunt" not in chaos.command
    *_, hunting = phases(tmp_path / "out", tmp_path, hours=2, claims_minutes=90, hunt="T2")
    assert hunting.command[-2:] == ("--hunt", "T2")


def test_the_claims_phase_fails_on_what_the_night_changed_not_on_standing_findings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nights = iter(
        [
            {"K1/zk/3.9": "reproduced (1/1)", "K2/zk/3.9": "not reproduced (0/3)",
             "K4/kraft/4.4": "not run", "K9/kraft/4.4": "reproduced", "K6/kraft/4.4": "not run",
             "K12/zk/3.9": "reproduced (1/1)"},
            {"K1/zk/3.9": "reproduced (3/3)", "K2/zk/3.9": "not reproduced (1/3)",
             "K4/kraft/4.4": "refuted", "K9/kraft/4.4": "not reproduced (0/1)",
             "K6/kraft/4.4": "reproduced", "K12/zk/3.9": "not reproduced (1/2)"},
        ]
    )  # fmt: skip
    unfinished = {"K12/zk/3.9"}  # a loss cell the budget stopped at its second run

    def words() -> dict[str, CellWord]:
        return {k: CellWord(w, k in unfinished) for k, w in next(nights).items()}

    monkeypatch.setattr(nightly_tier, "matrix_words", words)
    phase = Phase(
        "claims", (sys.executable, "-c", "pass"), 60, None, "", judge=nightly_tier.claims_judge
    )
    outcome = run_phase(phase, tmp_path)
    cases = {c.get("name"): c for s in outcome.counts.suites for c in s.iter("testcase")}
    failed = sorted(k for k, c in cases.items() if c.find("failure") is not None)
    assert failed == ["K4/kraft/4.4", "K9/kraft/4.4"]
    assert cases["K2/zk/3.9"].find("skipped") is not None  # a standing finding
    assert cases["K12/zk/3.9"].find("skipped") is not None  # no verdict yet
    assert outcome.counts.tests == 6 and not outcome.passed


def test_a_phase_that_names_its_junit_file_in_its_log_is_counted_from_it(tmp_path: Path) -> None:
    junit = tmp_path / "chaos" / "2026-11-26" / "junit.xml"
    junit.parent.mkdir(parents=True)
    junit.write_text(JUNIT.format(failures=0, failure=""))
    said = f"print('summary: x'); print('junit: {junit}')"
    phase = Phase("chaos", (sys.executable, "-c", said), 60, None, "", junit_in_log=True)
    outcome = run_phase(phase, tmp_path)
    assert outcome.passed and outcome.counts.tests == 3


def test_the_night_prunes_its_results_and_the_summary_says_the_disk_used(tmp_path: Path) -> None:
    from harness.nightly_tier import retention
    from tests.contract.test_retention import plant

    old = plant(tmp_path, "K4", 30, size=1024**2)
    newest = [plant(tmp_path, "K4", days) for days in (3, 2, 1)]
    disk = retention(tmp_path)
    assert not old.exists() and all(r.exists() for r in newest)
    assert disk[0].startswith("Results use 0.00 GB in 3 runs")
    assert "removed 1 runs" in disk[1]
    summary = write_summary([], tmp_path / "summary.md", datetime.now(UTC), disk)
    assert "## Disk" in summary.read_text()
