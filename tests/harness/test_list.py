"""`harness list`: every shipped scenario, chaos bases and found schedules included, one row each
with the name `make test-scenario` takes."""

from __future__ import annotations

from tests.helpers import ROOT, harness


def test_list_names_every_shipped_scenario_with_its_claim_and_expectation() -> None:
    listed = harness("list")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line.split() for line in listed.stdout.splitlines()[1:]}
    shipped = {
        p.relative_to(ROOT / "scenarios").with_suffix("").as_posix()
        for p in (ROOT / "scenarios").rglob("*.yaml")
    }
    assert set(rows) == shipped
    assert rows["K4"][1:5] == ["K4", "kafka", "kraft-dedicated,zk,kraft", "safe"]
    assert any(name.startswith("chaos/") for name in rows)
    assert not any("invalid" in row[:5] for row in rows.values())
