"""JUnit XML of a matrix of claims: a reproduced claim passes, the rest fail, err or skip."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from reports.junit import matrix_case, suite


def test_junit_passes_a_reproduced_claim_and_fails_the_rest() -> None:
    cases = [
        matrix_case("K1/zk/3.9", "K1", "reproduced (2/3)", 300, "r1 r2 r3"),
        matrix_case("K4/kraft/3.9", "K4", "not reproduced (0/1)", 100, "r4"),
        matrix_case("K9/zk/3.9", "K9", "not run", 0, ""),
        matrix_case("R1/rabbitmq", "R1", "no verdict (the run failed)", 50, "r5"),
    ]
    root = ET.fromstring(ET.tostring(suite(cases).getroot()))
    node = root.find("testsuite")
    assert node is not None
    assert (node.get("tests"), node.get("failures"), node.get("errors"), node.get("skipped")) == (
        "4",
        "1",
        "1",
        "1",
    )
    failure = root.find("testsuite/testcase[@name='K4/kraft/3.9']/failure")
    assert failure is not None and failure.get("message", "").startswith("not reproduced")
