"""JUnit XML, so that a CI dashboard shows our verdicts without reading our JSON.

A run is one test suite with one test case: the claim it checked (or, for a scenario with no
claim, its expectation). It passes when the claim was reproduced (the expectation matched);
a run whose claim was not reproduced, refuted or left inconclusive fails with the verdict's
words; a run that ended before a verdict is an error. The claims matrix is one suite with a
test case per cell (scenario x mode x Kafka line), judged over the cell's runs.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contract.manifest import Manifest

JUNIT_NAME = "junit.xml"
CLAIMS_JUNIT = "claims-junit.xml"  # make claims: the whole matrix, at the results root
SUITE = "brokerjepsen"


@dataclass(frozen=True)
class Case:
    classname: str  # claims.K4, scenarios.baseline: how a dashboard groups them
    name: str
    seconds: float
    failure: str | None = None  # the verdict's words when the claim did not hold
    error: str | None = None  # why there is no verdict
    skipped: str | None = None
    output: str = ""


def run_case(manifest: Manifest, verdict: dict[str, Any] | None) -> Case:
    """The test case of one run."""
    scenario = str(manifest.scenario or "?")
    claim = manifest.claim
    where = " ".join(
        str(x) for x in (manifest.kafka_mode, (verdict or {}).get("kafka_version")) if x
    )
    name = f"{claim or scenario} {where}".strip() + f" (scenario {scenario})"
    classname = f"claims.{claim}" if claim else f"scenarios.{scenario}"
    seconds = max(0.0, float(manifest.ended or 0) - float(manifest.started or 0))
    if verdict is None:
        return Case(classname, name, seconds, error=str(manifest.error or "no verdict"))
    word = verdict.get("claim_verdict")
    text = f"{word or verdict.get('outcome')}: {verdict.get('reason', '')}"
    held = word == "reproduced" if claim else bool(verdict.get("matched"))
    output = f"{text}\nrun: {manifest.run_id}"
    return Case(classname, name, seconds, failure=None if held else text, output=output)


def suite(cases: list[Case], name: str = SUITE) -> ET.ElementTree:
    root = ET.Element("testsuites", name=name)
    node = ET.SubElement(
        root,
        "testsuite",
        name=name,
        tests=str(len(cases)),
        failures=str(sum(c.failure is not None for c in cases)),
        errors=str(sum(c.error is not None for c in cases)),
        skipped=str(sum(c.skipped is not None for c in cases)),
        time=f"{sum(c.seconds for c in cases):.1f}",
    )
    for c in cases:
        case = ET.SubElement(
            node, "testcase", classname=c.classname, name=c.name, time=f"{c.seconds:.1f}"
        )
        if c.failure is not None:
            ET.SubElement(case, "failure", message=c.failure[:500], type="verdict").text = c.failure
        if c.error is not None:
            ET.SubElement(case, "error", message=c.error[:500], type="run").text = c.error
        if c.skipped is not None:
            ET.SubElement(case, "skipped", message=c.skipped)
        if c.output:
            ET.SubElement(case, "system-out").text = c.output
    ET.indent(root)
    return ET.ElementTree(root)


def write(tree: ET.ElementTree, path: Path) -> Path:
    tree.write(path, encoding="utf-8", xml_declaration=True)
    return path


def write_run_junit(run_dir: Path, manifest: Manifest, verdict: dict[str, Any] | None) -> Path:
    return write(suite([run_case(manifest, verdict)]), run_dir / JUNIT_NAME)


def matrix_case(key: str, claim: str, word: str, seconds: float, runs_text: str) -> Case:
    """One cell of the claims matrix; word: harness.claims.cell_word."""
    classname = f"claims.{claim}"
    if word == "not run":
        return Case(classname, key, 0.0, skipped="not run (budget or selection)")
    # Never run by design, not by chance: a line the matrix runs only when named, or one that
    # cannot hold the cell. A skip, with the table's reason.
    if word == "outside the default lines" or word.startswith("cannot run"):
        return Case(classname, key, 0.0, skipped=word)
    if word.startswith("reproduced"):
        return Case(classname, key, seconds, output=f"{word}\n{runs_text}")
    if word.startswith("no verdict"):
        return Case(classname, key, seconds, error=f"{word}\n{runs_text}")
    return Case(classname, key, seconds, failure=f"{word}\n{runs_text}")
