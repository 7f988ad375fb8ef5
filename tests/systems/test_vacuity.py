"""Static vacuity: a schedule whose faults cannot meet the traffic is said before it runs, by
`harness validate` (an error with --strict) and `harness run`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from faults.registry import OPS
from harness.cli import app
from systems.registry import load_scenario, parse_scenario
from systems.vacuity import is_fault, vacuity_warnings
from tests.helpers import ROOT
from tests.test_docs import SCENARIOS as DOC_SCENARIOS

pytestmark = pytest.mark.unit

SHIPPED = sorted((ROOT / "scenarios").rglob("*.y*ml"))

# The README's example as it stood: no rate, a kill at +10 s.
README_EXAMPLE = """
id: orders
expect: safe
cluster:
  system: kafka
  modes: [kraft]
  min_insync_replicas: 2
workload:
  producers: [{id: P1, count: 20k, acks: all}]
  readers: [{id: reader}]
nemesis:
  - {at: 10, op: kill, target: leader}
  - {at: 25, op: start, target: stopped}
"""

LATE_KILLS = """
id: late
expect: safe
cluster: {system: kafka, modes: [kraft]}
workload:
  producers: [{id: P1, count: 60k, rate: 1000}]
  readers: [{id: reader}]
nemesis:
  - {at: 35, op: kill, target: leader}
  - {at: 45, op: start, target: stopped}
  - {at: 45, op: kill, target: leader}
timeouts: {workload: 30}
"""

RABBITMQ = """
id: rabbit
expect: safe
cluster: {system: rabbitmq, partition_handling: pause_minority, queue_type: quorum}
workload:
  queues: [q]
  publishers: [{id: A, count: 60000, in_flight: 1}]
  consumers: [{queue: q, delay: DELAY}]
nemesis:
  - {at: 40, op: isolate, nodes: [rabbit3]}
  - {at: 60, op: heal}
timeouts: {workload: 120}
"""


def test_the_readme_example_without_a_rate_is_said_to_test_nothing() -> None:
    [warning] = vacuity_warnings(parse_scenario(README_EXAMPLE))
    assert warning.startswith("nemesis.0 (kill) at +10 s, the first fault")
    assert "producer P1" in warning and "20 000 messages" in warning
    assert "assumed at most 100 000/s: by +0.2 s" in warning
    assert "rate ≤ 2 000/s" in warning


def test_a_rate_that_spans_the_kill_is_no_warning() -> None:
    spans = README_EXAMPLE.replace("acks: all", "rate: 1000, acks: all")
    assert vacuity_warnings(parse_scenario(spans)) == []


def test_a_throttled_producer_done_before_the_first_fault_is_said_with_its_own_rate() -> None:
    done_early = README_EXAMPLE.replace("count: 20k, acks: all", "count: 5k, rate: 1000")
    [warning] = vacuity_warnings(parse_scenario(done_early))
    assert "(at 1 000/s: by +5 s)" in warning
    assert "rate ≤ 500/s or a count above 10 000" in warning
    few = README_EXAMPLE.replace("count: 20k, acks: all", "count: 5")
    [warning] = vacuity_warnings(parse_scenario(few))
    assert "may come after" in warning and "rate ≤ 0.5/s" in warning  # never 0: unthrottled


def test_a_producer_that_starts_late_sends_across_the_fault() -> None:
    late = README_EXAMPLE.replace("acks: all", "rate: 1000, start_at: 9.5")
    late = late.replace("count: 20k", "count: 1k")
    assert vacuity_warnings(parse_scenario(late)) == []


def test_faults_after_the_workload_s_end_are_each_said() -> None:
    warnings = vacuity_warnings(parse_scenario(LATE_KILLS))
    assert [w.split(" at ")[0] for w in warnings] == ["nemesis.0 (kill)", "nemesis.2 (kill)"]
    assert "timeouts.workload 30" in warnings[0] and "more than 35" in warnings[0]


def test_heals_count_for_no_fault() -> None:
    heals = README_EXAMPLE.replace("{at: 10, op: kill, target: leader}", "{at: 10, op: heal}")
    assert vacuity_warnings(parse_scenario(heals)) == []
    assert not is_fault("start") and not is_fault("heal") and not is_fault("resume-client")
    assert not is_fault("elect") and not is_fault("wait-drained")
    assert is_fault("kill") and is_fault("restart") and is_fault("pause-client")
    assert is_fault("produce-errors") and is_fault("rtt") and is_fault("broker-down")


def test_every_op_is_a_fault_or_a_recovery_as_the_registry_pairs_them() -> None:
    """An op another op heals is a fault; the healing op never is."""
    for o in OPS:
        if o.healed_by is not None:
            assert is_fault(o.name) and not is_fault(o.healed_by), o.name


def test_a_scenario_without_faults_gets_no_warning() -> None:
    no_faults = README_EXAMPLE.split("nemesis:")[0]
    assert vacuity_warnings(parse_scenario(no_faults)) == []


def test_a_slow_consumer_s_backlog_is_traffic_a_late_fault_still_meets() -> None:
    # 60 000 messages at most 2 500/s: sent by +24 s, before the isolate at +40 s.
    fast = parse_scenario(RABBITMQ.replace("DELAY", "0"))
    [warning] = vacuity_warnings(fast)
    assert "publisher A" in warning and "assumed at most 2 500/s" in warning
    # One message each 2 ms: the backlog lasts until +120 s at the soonest.
    assert vacuity_warnings(parse_scenario(RABBITMQ.replace("DELAY", "0.002"))) == []


def test_a_publisher_s_bound_grows_with_its_confirms_in_flight() -> None:
    many = RABBITMQ.replace("DELAY", "0").replace("in_flight: 1", "in_flight: 100")
    [warning] = vacuity_warnings(parse_scenario(many))
    assert "assumed at most 25 000/s" in warning


def test_a_kafka_mock_schedule_is_judged_too() -> None:
    mock = """
id: mock
expect: safe
cluster: {system: kafka-mock}
workload:
  producers: [{id: P1, count: 1000}]
  readers: [{id: reader}]
nemesis:
  - {at: 5, op: broker-down, target: leader}
  - {at: 10, op: broker-up, target: leader}
"""
    [warning] = vacuity_warnings(parse_scenario(mock))
    assert warning.startswith("nemesis.0 (broker-down)")


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT / "scenarios")))
def test_every_shipped_scenario_passes_strict(path: Path) -> None:
    assert vacuity_warnings(load_scenario(path)) == []


@pytest.mark.parametrize(("where", "body"), DOC_SCENARIOS, ids=[w for w, _ in DOC_SCENARIOS])
def test_every_scenario_of_the_docs_passes_strict(where: str, body: str) -> None:
    """A user copies them: the README's first of all."""
    assert vacuity_warnings(parse_scenario(body, where)) == []


def test_a_step_marked_after_the_traffic_is_not_counted() -> None:
    """R7-merge's restart is its merge: it comes after the traffic on purpose."""
    spec = load_scenario(ROOT / "scenarios" / "R7-merge.yaml")
    assert spec.nemesis[-1].after_traffic and vacuity_warnings(spec) == []
    data = yaml.safe_load((ROOT / "scenarios" / "R7-merge.yaml").read_text())
    del data["nemesis"][-1]["after_traffic"]
    [warning] = vacuity_warnings(parse_scenario(yaml.safe_dump(data)))
    assert warning.startswith("nemesis.6 (restart) at +111 s") and "after_traffic" in warning


def _validate(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["validate", *args])
    return result.exit_code, result.stdout, result.stderr


def test_validate_warns_and_strict_fails(tmp_path: Path) -> None:
    late = tmp_path / "late.yaml"
    late.write_text(LATE_KILLS)
    code, out, err = _validate(str(late))
    assert code == 0, err
    assert f"{late}: ok" in out
    lines = err.strip().splitlines()
    assert len(lines) == 2 and all(w.startswith(f"warning: {late}: nemesis.") for w in lines)
    code, out, err = _validate(str(late), "--strict")
    assert code == 2 and "ok" not in out
    assert err.count("warning: ") == 2


def test_validate_json_is_one_document(tmp_path: Path) -> None:
    late, good, bad = tmp_path / "late.yaml", tmp_path / "good.yaml", tmp_path / "bad.yaml"
    late.write_text(LATE_KILLS)
    good.write_text(README_EXAMPLE.replace("acks: all", "rate: 1000, acks: all"))
    bad.write_text("id: x\n")
    code, out, _ = _validate(str(good), str(late), "--json", "--strict")
    assert code == 2
    reports = json.loads(out)
    assert [(r["file"], r["ok"], r["errors"]) for r in reports] == [
        (str(good), True, []),
        (str(late), False, []),
    ]
    assert reports[0]["warnings"] == [] and len(reports[1]["warnings"]) == 2
    code, out, _ = _validate(str(good), str(late), "--json")
    assert code == 0 and [r["ok"] for r in json.loads(out)] == [True, True]
    code, out, _ = _validate(str(bad), "--json")
    [report] = json.loads(out)
    assert code == 2 and not report["ok"] and report["errors"] and report["warnings"] == []


def test_run_strict_stops_before_anything_starts(tmp_path: Path) -> None:
    late = tmp_path / "late.yaml"  # the mock: nothing of it needs an engine, whatever runs
    late.write_text(
        LATE_KILLS.replace("system: kafka, modes: [kraft]", "system: kafka-mock")
        .replace("op: kill", "op: broker-down")
        .replace("op: start, target: stopped", "op: broker-up, target: leader")
    )
    result = CliRunner().invoke(app, ["run", str(late), "--strict", "--results", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr.count("warning: nemesis.") == 2
    assert "--strict: not run" in result.stderr and "->" not in result.stderr
    assert list(tmp_path.iterdir()) == [late]  # no run folder
