"""The schedule generator: deterministic by seed, every fault healed, faults of one kind never
overlapping, and every step one the system's own schema takes."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chaos.generator import ChaosError, ChaosOptions, draw_schedule
from chaos.menu import RABBITMQ_ROLES, ClusterShape
from chaos.schedule import chaos_scenario, shape_of, steps_yaml
from systems.registry import load_scenario, parse_scenario
from systems.scenario import scenario_data, to_yaml
from tests.helpers import ROOT

BASES = sorted((ROOT / "scenarios" / "chaos").glob("*.yaml"))
KAFKA = ClusterShape(
    "kafka", ("kafka1", "kafka2", "kafka3"), ("kafka1", "kafka2", "kafka3"), partitions=2
)
KAFKA_ZK = ClusterShape(
    "kafka",
    ("kafka1", "kafka2", "kafka3"),
    ("zk1", "zk2", "zk3", "kafka1", "kafka2", "kafka3"),
    partitions=2,
    quorum_apart=True,
    lazy_disks=True,
)
RABBITMQ = ClusterShape(
    "rabbitmq", ("rabbit1", "rabbit2", "rabbit3"), ("rabbit1", "rabbit2", "rabbit3")
)
RABBITMQ_QUORUM = ClusterShape(
    "rabbitmq",
    ("rabbit1", "rabbit2", "rabbit3"),
    ("rabbit1", "rabbit2", "rabbit3"),
    roles=RABBITMQ_ROLES,
)
MOCK = ClusterShape("kafka-mock", ("1", "2", "3"), ("1", "2", "3"), partitions=3)
SHAPES = (KAFKA, KAFKA_ZK, RABBITMQ, RABBITMQ_QUORUM, MOCK)

seeds = st.integers(min_value=0, max_value=2**32)
lengths = st.floats(min_value=40, max_value=600)


NETWORK = {"isolate", "partition", "cut", "cut-clients", "degrade", "cut-from-quorum"}
DOWN = {"kill", "stop", "pause"}  # brought back by start / resume
MOCK_FAULTS = {"broker-down", "rtt", "produce-errors"}  # the mock's heal ends them all


class Overlap(AssertionError):
    pass


def replay(steps: list[dict]) -> list[str]:
    """Plays the steps; raises Overlap when a fault begins while one of its kind is in effect;
    returns what is still in effect after the last step."""
    network: str | None = None
    down: str | None = None
    for s in steps:
        op = s["op"]
        if op in NETWORK or op in MOCK_FAULTS:
            if network is not None:
                raise Overlap(f"{op} at {s['at']} while {network} is in effect")
            network = op
        elif op == "heal":
            network = None
        elif op in DOWN:
            if down is not None:
                raise Overlap(f"{op} at {s['at']} while {down} is in effect")
            down = s.get("label") or str(s.get("nodes"))
        elif op in ("start", "resume"):
            ref, nodes = s.get("target"), s.get("nodes") or []
            if isinstance(ref, str) and ref.startswith("@"):
                back = ref[1:]
            elif len(nodes) == 1 and nodes[0].startswith("@"):
                back = nodes[0][1:]
            else:
                back = str(nodes)
            assert back == down, f"{op} of {back} while {down} is the one down"
            down = None
    return [x for x in (network, down) if x is not None]


@settings(max_examples=150, deadline=None)
@given(seed=seeds, seconds=lengths, shape=st.sampled_from(SHAPES))
def test_the_same_seed_gives_the_same_schedule(
    seed: int, seconds: float, shape: ClusterShape
) -> None:
    opts = ChaosOptions(seed=seed, seconds=seconds)
    assert draw_schedule(shape, opts) == draw_schedule(shape, opts)


@settings(max_examples=300, deadline=None)
@given(seed=seeds, seconds=lengths, shape=st.sampled_from(SHAPES))
def test_every_schedule_is_healed_by_its_end_and_before_the_quiet(
    seed: int, seconds: float, shape: ClusterShape
) -> None:
    opts = ChaosOptions(seed=seed, seconds=seconds)
    steps = draw_schedule(shape, opts)
    assert steps, "a schedule with room for faults draws some"
    assert replay(steps) == []
    times = [s["at"] for s in steps]
    assert times == sorted(times)
    assert times[0] >= opts.warmup
    assert times[-1] <= seconds - opts.quiet + 0.05


@settings(max_examples=200, deadline=None)
@given(seed=seeds, shape=st.sampled_from(SHAPES))
def test_two_faults_of_one_kind_never_overlap(seed: int, shape: ClusterShape) -> None:
    """At most one network and one process fault at a time: a heal never ends a fault it was
    not drawn for, and a start brings back the very nodes its fault took down."""
    replay(draw_schedule(shape, ChaosOptions(seed=seed, seconds=300)))


@pytest.mark.parametrize("base", BASES, ids=lambda p: p.stem)
@pytest.mark.parametrize("seed", range(25))
def test_every_generated_scenario_is_valid_and_replays_from_its_file(base: Path, seed: int) -> None:
    spec = load_scenario(base)
    modes = getattr(spec.cluster, "modes", [None])
    for mode in modes:
        scenario, steps = chaos_scenario(spec, ChaosOptions(seed=seed, seconds=120), mode)
        assert scenario.generated is not None and scenario.generated.seed == seed
        again = parse_scenario(to_yaml(scenario_data(scenario)))
        assert again == scenario
        assert len(scenario.nemesis) == len(steps)


def test_a_dry_run_prints_the_steps_as_a_scenario_files_nemesis() -> None:
    text = steps_yaml(draw_schedule(KAFKA, ChaosOptions(seed=5, seconds=90)))
    assert text.startswith("nemesis:\n- {at: 5.0, op: ")
    assert "&id" not in text  # no YAML anchors for a person to decode


def test_the_workload_lasts_as_long_as_the_schedule_asks() -> None:
    spec = load_scenario(ROOT / "scenarios" / "chaos" / "kafka-safe.yaml")
    scenario, _ = chaos_scenario(spec, ChaosOptions(seed=1, seconds=300))
    producer = scenario.workload.producers[0]
    assert producer.count == producer.rate * 300
    assert scenario.timeouts.workload >= 300


def test_families_that_need_what_the_cluster_lacks_are_not_drawn() -> None:
    for seed in range(50):
        for s in draw_schedule(KAFKA, ChaosOptions(seed=seed, seconds=200)):
            assert s["op"] not in ("cut-from-quorum", "power-loss")


@pytest.mark.parametrize(
    ("opts", "shape", "message"),
    [
        (ChaosOptions(seed=1, seconds=20), KAFKA, "leaves no room for a fault"),
        (ChaosOptions(seed=1, seconds=90, interval=(5, 1)), KAFKA, "--interval needs"),
        (ChaosOptions(seed=1, seconds=90, faults=frozenset({"bogus"})), KAFKA, "no fault family"),
        (ChaosOptions(seed=1, seconds=90, faults=frozenset({"power-loss"})), KAFKA, "none of the"),
    ],
)
def test_options_a_schedule_cannot_be_drawn_from_say_so(
    opts: ChaosOptions, shape: ClusterShape, message: str
) -> None:
    with pytest.raises(ChaosError, match=message):
        draw_schedule(shape, opts)


def test_a_base_without_producer_rates_is_refused() -> None:
    spec = load_scenario(ROOT / "scenarios" / "R1.yaml")
    with pytest.raises(ChaosError, match="needs a rate"):
        chaos_scenario(spec, ChaosOptions(seed=1, seconds=90))


def test_a_rabbitmq_base_with_a_leader_draws_roles_and_heals_what_they_named() -> None:
    quorum = shape_of(load_scenario(ROOT / "scenarios" / "chaos" / "rabbitmq4-quorum.yaml"))
    mirrored = load_scenario(ROOT / "scenarios" / "chaos" / "rabbitmq-autoheal-mirrored.yaml")
    assert quorum.roles == RABBITMQ_ROLES and shape_of(mirrored).roles == ()
    steps = [
        s for seed in range(10) for s in draw_schedule(quorum, ChaosOptions(seed=seed, seconds=120))
    ]
    aimed = [
        s for s in steps if "leader" in s.get("nodes", []) and s["op"] in ("kill", "stop", "pause")
    ]
    assert aimed and all(s.get("label") for s in aimed)
    labels = {s["label"] for s in aimed}
    assert {s["nodes"][0][1:] for s in steps if s.get("nodes", [""])[0].startswith("@")} <= {
        s["label"] for s in steps if s.get("label")
    }
    assert labels


def test_shape_of_a_zookeeper_cluster_has_its_quorum_apart() -> None:
    spec = load_scenario(ROOT / "scenarios" / "chaos" / "kafka-safe.yaml")
    shape = shape_of(spec, "zk")
    assert shape.quorum_apart and shape.brokers == ("kafka1", "kafka2", "kafka3")
    assert "zk1" in shape.nodes
    assert not shape_of(spec, "kraft").quorum_apart
