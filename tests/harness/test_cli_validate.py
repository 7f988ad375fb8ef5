"""`harness validate` checks offline, in one pass, everything `harness run` checks before it
starts; `harness run` refuses a bad scenario before it has a run folder."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tests.helpers import harness as run_harness_cli

pytestmark = pytest.mark.unit

# One mistake of each kind: a structural field, a mistyped broker key, a topic value of the
# wrong type, and a client key librdkafka does not have.
FOUR_MISTAKES = """\
id: four
expect: safe
cluster:
  system: kafka
  modes: [kraft]
  brokers: many
  broker_config:
    num.replica.fetcher: 4
  topic_config:
    min.insync.replicas: two
workload:
  producers:
  - id: P1
    count: 1000
    rate: 100
    config:
      batch.sise: 65536
  readers:
  - id: R1
"""

GOOD = """\
id: good
expect: safe
cluster:
  system: kafka
  modes: [kraft]
  broker_config: {num.replica.fetchers: 4}
workload:
  producers: [{id: P1, count: 1000, rate: 100}]
  readers: [{id: R1}]
"""


def harness(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """`harness ARGS...` with no Docker engine to reach."""
    return run_harness_cli(*args, cwd=cwd, no_engine=True)


def errors(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("error: ")]


def test_every_problem_of_a_file_is_a_line_at_its_key_with_no_docker(tmp_path: Path) -> None:
    f = tmp_path / "four.yaml"
    f.write_text(FOUR_MISTAKES)
    done = harness("validate", str(f))
    assert done.returncode == 2
    assert errors(done) == [
        f"error: {f}:6:3: cluster.brokers: Input should be a valid integer, unable to parse "
        "string as an integer",
        f'error: {f}:8:5: cluster.broker_config: "num.replica.fetcher" is not a Kafka 3.9.2 '
        "broker setting (did you mean num.replica.fetchers?)",
        f'error: {f}:10:5: cluster.topic_config: "min.insync.replicas" takes an int of at least '
        '1 on Kafka 3.9.2, not "two"',
        f"error: {f}:17:7: workload.producers.0.config: No such configuration property: "
        '"batch.sise" (librdkafka)',
    ], done.stderr
    assert "Traceback" not in done.stderr


def test_kafka_picks_the_release_the_keys_are_judged_by(tmp_path: Path) -> None:
    f = tmp_path / "four.yaml"
    f.write_text(FOUR_MISTAKES)
    done = harness("validate", str(f), "--kafka", "4.4")
    assert len(errors(done)) == 4 and "Kafka 4.4.0 broker setting" in done.stderr, done.stderr
    said = harness("validate", str(f), "--kafka", "4.x")
    assert said.returncode == 2 and errors(said) == [
        "error: --kafka takes a release line or release (4.4, 4.4.0), not '4.x'"
    ]


def test_a_release_whose_definitions_are_not_shipped_is_a_warning(tmp_path: Path) -> None:
    f = tmp_path / "good.yaml"
    f.write_text(GOOD.replace("modes: [kraft]", 'modes: [kraft]\n  release: "4.3.1"'))
    done = harness("validate", str(f))
    assert done.returncode == 0, done.stderr
    assert (
        f"warning: {f}: Kafka 4.3.1's config definitions are not shipped: the broker and topic "
        "keys are checked when the run reads them from the image"
    ) in done.stderr.splitlines()


def test_a_kafka_scenario_s_version_points_at_its_release(tmp_path: Path) -> None:
    f = tmp_path / "v.yaml"
    f.write_text(GOOD.replace("modes: [kraft]", 'modes: [kraft]\n  version: "4.4"'))
    assert errors(harness("validate", str(f))) == [
        f"error: {f}:6:3: cluster.version: Extra inputs are not permitted; use cluster.release "
        "(or --kafka)"
    ]


def test_a_scenario_is_named_by_its_id_or_its_file_in_the_scenarios_folder(
    tmp_path: Path,
) -> None:
    by_id = harness("validate", "K1")
    assert by_id.returncode == 0 and by_id.stdout.strip().endswith("scenarios/K1.yaml: ok")
    by_file = harness("validate", "K1.yaml", cwd=tmp_path)
    assert by_file.returncode == 0, by_file.stderr
    assert by_file.stdout.strip() == f"{ROOT / 'scenarios' / 'K1.yaml'}: ok"
    missing = harness("validate", "nosuch.yaml", cwd=tmp_path)
    assert missing.returncode == 2 and "nosuch.yaml: cannot read" in missing.stderr


def test_run_refuses_a_bad_scenario_before_it_has_a_run_folder(tmp_path: Path) -> None:
    f = tmp_path / "four.yaml"
    f.write_text(FOUR_MISTAKES)
    results = tmp_path / "results"
    done = harness("run", str(f), "--results", str(results))
    assert done.returncode == 2
    assert len(errors(done)) == 4 and "->" not in done.stderr, done.stderr
    assert not results.exists()
