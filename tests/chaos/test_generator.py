"""The schedule generator: deterministic by seed, every fault healed, faults of one kind never
overlapping, and every step one the system's own schema takes."""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chaos.generator import ChaosError, ChaosOptions, draw_schedule
from chaos.menu import (
    CLOCK_OFFSETS,
    RABBITMQ_ROLES,
    ClusterShape,
    Draws,
    migration_steps,
    upgrade_steps,
)
from chaos.schedule import chaos_scenario, coordinators_of, shape_of, steps_yaml
from checkers.coverage import COORDINATOR_ROLES
from systems.kafka.migration import PHASES
from systems.kafka.scenario import KafkaScenario
from systems.registry import AnyScenario, load_scenario, parse_scenario
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
KAFKA_TXN = ClusterShape(
    "kafka",
    ("kafka1", "kafka2", "kafka3"),
    ("kafka1", "kafka2", "kafka3"),
    partitions=3,
    coordinators=("transaction-coordinator", "group-coordinator"),
)
SHAPES = (KAFKA, KAFKA_ZK, RABBITMQ, RABBITMQ_QUORUM, MOCK, KAFKA_TXN)

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


# ---- coordinators as targets -------------------------------------------------------------------

CHAOS = ROOT / "scenarios" / "chaos"
TXN_ISOLATION = CHAOS / "kafka-txn-isolation.yaml"
TXN_EOS = CHAOS / "kafka-txn-eos.yaml"
# What takes a target the generator draws (kill, pause, stop, restart, power loss; isolate,
# cut-clients, cut-from-quorum): the ops a coordinator may be aimed by.
TARGETED = {"kill", "pause", "stop", "restart", "power-loss", "isolate", "cut-clients"}


def kafka_base(path: Path) -> KafkaScenario:
    base = load_scenario(path)
    assert isinstance(base, KafkaScenario)
    return base


def digest(steps: list[dict]) -> str:
    return hashlib.sha256(json.dumps(steps, sort_keys=True).encode()).hexdigest()[:16]


# Drawn by the generator before coordinators were targets (commit c6c3e4c): base, mode, seed,
# seconds, --faults, the schedule's digest. A base without transactions must keep them, or a
# night's seeds and a found scenario's generated.seed would name other schedules.
BEFORE_COORDINATORS = [
    ("kafka-safe", "kraft", 1, 120, None, "a02aa4b6bf739f6e"),
    ("kafka-safe", "kraft", 2, 120, None, "51c2b83f454de17b"),
    ("kafka-safe", "kraft", 42, 120, None, "f82257bbab2f64e5"),
    ("kafka-safe", "zk", 1, 120, None, "ab3bc180f17c86af"),
    ("kafka-safe", "zk", 2, 120, None, "cff8581c7f2f8e36"),
    ("kafka-safe", "zk", 42, 120, None, "d604f86458499189"),
    ("kafka-safe", "kraft-dedicated", 42, 120, None, "d604f86458499189"),
    ("kafka-acks1", "kraft", 7, 600, None, "ef6816e23b7334ae"),
    ("kafka-acks1", "zk", 3, 300, None, "b000ddfdd930e238"),
    ("kafka-safe", "kraft-dedicated", 3, 300, "kill,pause,partition,quorum", "5aff9aa546ce14c5"),
    ("kafka-acks1", "kraft", 11, 300, "partition,restart,stop", "86f6963c88c1515a"),
]


@pytest.mark.parametrize(
    ("base", "mode", "seed", "seconds", "faults", "expected"),
    BEFORE_COORDINATORS,
    ids=[f"{b}-{m}-s{s}-{t}{'-' + f if f else ''}" for b, m, s, t, f, _ in BEFORE_COORDINATORS],
)
def test_a_base_without_transactions_draws_the_schedule_it_always_drew(
    base: str, mode: str, seed: int, seconds: int, faults: str | None, expected: str
) -> None:
    spec = kafka_base(CHAOS / f"{base}.yaml")
    wanted = frozenset(faults.split(",")) if faults else None
    _, steps = chaos_scenario(spec, ChaosOptions(seed=seed, seconds=seconds, faults=wanted), mode)
    assert digest(steps) == expected


def test_a_group_reader_alone_adds_no_coordinator() -> None:
    """A group-mode reader has a coordinator the schema would take, but a base without
    transactions keeps its old draws."""
    data = scenario_data(kafka_base(CHAOS / "kafka-safe.yaml"))
    data["workload"]["readers"] = [{"id": "reader", "mode": "group"}]
    grouped = parse_scenario(to_yaml(data))
    assert isinstance(grouped, KafkaScenario)
    assert "group-coordinator" in grouped.workload.coordinated()
    assert coordinators_of(grouped) == ()
    _, steps = chaos_scenario(grouped, ChaosOptions(seed=1, seconds=120), "kraft")
    assert digest(steps) == "a02aa4b6bf739f6e"  # kafka-safe's, seed 1, above


@pytest.mark.parametrize(
    ("path", "roles"),
    [
        (TXN_ISOLATION, ("transaction-coordinator",)),  # its readers are not in a group
        (TXN_EOS, ("transaction-coordinator", "group-coordinator")),  # the copiers' group
        (CHAOS / "kafka-safe.yaml", ()),
        (CHAOS / "kafka-acks1.yaml", ()),
    ],
    ids=lambda v: v.stem if isinstance(v, Path) else ",".join(v) or "none",
)
def test_a_transactional_base_offers_the_coordinators_its_clients_have(
    path: Path, roles: tuple[str, ...]
) -> None:
    base = kafka_base(path)
    assert shape_of(base).coordinators == roles
    assert set(roles) <= set(base.workload.coordinated())


@pytest.mark.parametrize("path", [TXN_ISOLATION, TXN_EOS], ids=lambda p: p.stem)
def test_a_transactional_base_draws_its_coordinators_as_targets(path: Path) -> None:
    base = kafka_base(path)
    offered = shape_of(base).coordinators
    aimed: list[dict] = []
    for seed in range(40):
        scenario, steps = chaos_scenario(base, ChaosOptions(seed=seed, seconds=120))
        assert scenario.nemesis  # the schema took every step (only the workload's roles)
        aimed += [s for s in steps if s.get("target") in COORDINATOR_ROLES]
    assert {s["target"] for s in aimed} == set(offered)  # each one, and nothing else
    assert {s["op"] for s in aimed} <= TARGETED
    ops = {s["op"] for s in aimed}
    assert ops & {"kill", "pause", "stop", "restart"} and ops & {"isolate", "cut-clients"}
    # A coordinator is found by its client's id: a partition would say nothing.
    assert all("partition" not in s for s in aimed)


def test_a_coordinator_taken_down_is_brought_back_by_its_label() -> None:
    steps = [
        s
        for seed in range(30)
        for s in draw_schedule(KAFKA_TXN, ChaosOptions(seed=seed, seconds=200))
    ]
    down = [s for s in steps if s["op"] in DOWN and s.get("target") in COORDINATOR_ROLES]
    assert down and all(s.get("label") for s in down)
    back = {s["target"][1:] for s in steps if s["op"] in ("start", "resume")}
    assert {s["label"] for s in down} <= back


def test_the_same_seed_draws_the_same_coordinator_schedule() -> None:
    opts = ChaosOptions(seed=1, seconds=120)
    eos = kafka_base(TXN_EOS)
    first, again = chaos_scenario(eos, opts)[1], chaos_scenario(eos, opts)[1]
    assert first == again
    assert {"at": 65.4, "op": "restart", "target": "transaction-coordinator"} in first


CLIENT_PATH = {"hold", "delay", "blackhole", "slow-link", "reset-clients"}


def test_the_clients_path_family_draws_proxy_faults_healed_and_valid() -> None:
    base = kafka_base(TXN_ISOLATION)
    opts = ChaosOptions(seed=0, seconds=120, faults=frozenset({"client-path"}))
    drawn: list[dict] = []
    for seed in range(30):
        scenario, steps = chaos_scenario(base, replace(opts, seed=seed))
        assert scenario.nemesis  # the schema took every step
        faults = [s for s in steps if s["op"] != "heal"]
        assert {s["op"] for s in faults} <= CLIENT_PATH
        # Every fault but a reset is healed; one network fault at a time.
        healed = [s for s in faults if s["op"] != "reset-clients"]
        assert len([s for s in steps if s["op"] == "heal"]) == len(healed)
        drawn += faults
    ops = [s["op"] for s in drawn]
    assert set(ops) == CLIENT_PATH
    assert ops.count("hold") + ops.count("delay") > len(ops) / 2  # the weighted ones
    coordinator = [s for s in drawn if s.get("target") == "transaction-coordinator"]
    assert {s["op"] for s in coordinator} >= {"hold", "delay"}


def test_the_clients_family_bounces_the_workloads_clients_only_when_asked() -> None:
    eos = kafka_base(TXN_EOS)
    assert shape_of(eos).restartable == tuple(eos.workload.client_ids())
    opts = ChaosOptions(seed=3, seconds=120, faults=frozenset({"clients"}))
    scenario, steps = chaos_scenario(eos, opts)
    assert scenario.nemesis
    ends = [s for s in steps if s["op"] in ("kill-client", "stop-client")]
    restarts = [s for s in steps if s["op"] == "restart-client"]
    assert ends and len(restarts) == len(ends)
    assert {s["client"] for s in ends} <= set(shape_of(eos).restartable)
    # Not drawn by default: the base draws what it always drew.
    default = chaos_scenario(eos, ChaosOptions(seed=3, seconds=120))[1]
    assert not {s["op"] for s in default} & (CLIENT_PATH | {"kill-client", "restart-client"})
    with pytest.raises(ChaosError, match="none of the fault families"):
        draw_schedule(KAFKA, ChaosOptions(seed=3, seconds=120, faults=frozenset({"clients"})))


def test_a_rabbitmq_base_draws_clients_path_faults_unless_behind_a_load_balancer() -> None:
    opts = ChaosOptions(seed=5, seconds=120, faults=frozenset({"client-path"}))
    steps = draw_schedule(RABBITMQ_QUORUM, opts)
    assert {s["op"] for s in steps} - {"heal"} <= CLIENT_PATH
    behind = ClusterShape(
        "rabbitmq", RABBITMQ.brokers, RABBITMQ.nodes, roles=RABBITMQ_ROLES, load_balancer=True
    )
    with pytest.raises(ChaosError, match="none of the fault families"):
        draw_schedule(behind, opts)
    for base in BASES:
        spec = load_scenario(base)
        if spec.cluster.system == "rabbitmq" and not spec.cluster.load_balancer:
            scenario, _ = chaos_scenario(spec, opts)
            assert scenario.nemesis  # the schema took every step


DISK = {"disk-error", "disk-full", "corrupt", "torn-write"}


def with_lazy_disks(path: Path) -> AnyScenario:
    """A shipped chaos base with its data directories on lazy disks."""
    data = scenario_data(load_scenario(path))
    data["cluster"]["lazy_disks"] = True
    return parse_scenario(to_yaml(data), path.name)


def aimed_at(step: dict) -> str | None:
    """The @label a heal names (Kafka's target, RabbitMQ's nodes), else None."""
    named = step.get("target") or step.get("nodes") or [None]
    named = named if isinstance(named, list) else [named]
    return named[0][1:] if len(named) == 1 and str(named[0]).startswith("@") else None


@pytest.mark.parametrize("base", ["kafka-safe.yaml", "rabbitmq4-quorum.yaml"])
def test_the_disk_family_draws_disk_faults_each_mended_and_its_node_restarted(base: str) -> None:
    spec = with_lazy_disks(CHAOS / base)
    opts = ChaosOptions(seed=0, seconds=120, faults=frozenset({"disk"}))
    drawn: list[dict] = []
    for seed in range(40):
        scenario, steps = chaos_scenario(spec, replace(opts, seed=seed))
        assert scenario.nemesis  # the schema took every step
        faults = [s for s in steps if s["op"] in DISK]
        assert {s["op"] for s in steps} <= DISK | {"disk-ok", "restart", "power-loss"}
        for fault in faults:
            if fault["op"] == "corrupt":  # nothing mends it
                assert "label" not in fault
                continue
            heals = [s for s in steps if aimed_at(s) == fault["label"]]
            if fault["op"] == "torn-write":  # torn at a power loss, then mended
                assert [s["op"] for s in heals] == ["power-loss", "disk-ok"]
            else:  # mended, then its node restarted at once
                assert [s["op"] for s in heals] == ["disk-ok", "restart"]
            assert len({s["at"] for s in heals}) <= 1
            assert all(s["at"] > fault["at"] for s in heals)
        # Every other step is one of those heals.
        assert len(steps) == len(faults) + sum(2 for s in faults if s["op"] != "corrupt")
        drawn += faults
    ops = [s["op"] for s in drawn]
    assert set(ops) == DISK
    assert ops.count("disk-error") > ops.count("disk-full") > ops.count("corrupt")  # weighted
    assert {s["fail_on"] for s in drawn if s["op"] == "disk-error"} == {"write", "fsync", "read"}
    corrupts = [s for s in drawn if s["op"] == "corrupt"]
    # On a stopped node (the default), the workload's data only, with a seed that replays it.
    assert all("while" not in s and isinstance(s["seed"], int) for s in corrupts)
    assert all(not s["path"].startswith("_") for s in corrupts)
    torn = [s for s in drawn if s["op"] == "torn-write"]
    assert all(0 < s["keep"] < 1 for s in torn) and {s["path"] for s in torn} > {"*"}


def test_the_disk_family_is_drawn_only_when_asked_and_only_on_lazy_disks() -> None:
    spec = with_lazy_disks(CHAOS / "kafka-safe.yaml")
    default = chaos_scenario(spec, ChaosOptions(seed=3, seconds=120))[1]
    assert not {s["op"] for s in default} & (DISK | {"disk-ok"})
    opts = ChaosOptions(seed=3, seconds=120, faults=frozenset({"disk"}))
    with pytest.raises(ChaosError, match="none of the fault families"):
        chaos_scenario(kafka_base(CHAOS / "kafka-safe.yaml"), opts)
    with pytest.raises(ChaosError, match="none of the fault families"):
        draw_schedule(RABBITMQ, opts)


def test_a_kafka_base_with_a_spare_broker_never_draws_it() -> None:
    base = load_scenario(ROOT / "scenarios" / "remove-leader-broker.yaml")
    spare = parse_scenario(
        to_yaml(
            scenario_data(base)
            | {"cluster": {**scenario_data(base)["cluster"], "spare_brokers": 1}}
        ),
        "x.yaml",
    )
    shape = shape_of(spare)
    assert shape.brokers == ("kafka1", "kafka2", "kafka3", "kafka4")
    assert "kafka5" not in shape.nodes and "controller1" in shape.nodes


def test_the_membership_family_is_drawn_only_when_asked_and_puts_back_what_it_took() -> None:
    opts = ChaosOptions(seed=3, seconds=120, faults=frozenset({"membership"}))
    quorum = load_scenario(CHAOS / "rabbitmq4-quorum.yaml")
    assert shape_of(quorum).quorum_queues
    scenario, steps = chaos_scenario(quorum, opts)
    assert scenario.nemesis
    forgets = [s for s in steps if s["op"] == "forget-node"]
    shrinks = [s for s in steps if s["op"] == "shrink-queue"]
    adds = [s for s in steps if s["op"] == "add-node"]
    grows = [s for s in steps if s["op"] == "grow-queue"]
    assert forgets and shrinks and len(adds) == len(forgets)
    assert len(grows) == len(forgets) + len(shrinks)  # every member taken out grown back
    kafka_steps = chaos_scenario(kafka_base(CHAOS / "kafka-safe.yaml"), opts)[1]
    assert kafka_steps and {s["op"] for s in kafka_steps} == {"reassign"}
    # Not drawn by default, and not on a stream's cluster (no members to grow back).
    default = chaos_scenario(quorum, ChaosOptions(seed=3, seconds=120))[1]
    assert not {s["op"] for s in default} & {
        "forget-node",
        "shrink-queue",
        "add-node",
        "grow-queue",
    }
    with pytest.raises(ChaosError, match="none of the fault families"):
        chaos_scenario(load_scenario(CHAOS / "rabbitmq4-stream.yaml"), opts)


# ---- bags, clocks, Kafka's membership, bases that name their families ---------------------------


def test_a_schedules_draws_give_random_randoms_numbers_and_deal_whole_bags() -> None:
    draws, plain = Draws(11), random.Random(11)
    assert [draws.random() for _ in range(5)] == [plain.random() for _ in range(5)]
    weights = {"a": 3, "b": 2, "c": 1}
    dealt = [draws.deal("x", weights) for _ in range(12)]
    for bag in (dealt[:6], dealt[6:]):  # each bag: every op, as often as its weight
        assert sorted(bag) == ["a", "a", "a", "b", "b", "c"]
    # An op not allowed now is passed over; a bag of nothing allowed is dealt anew.
    assert {draws.deal("y", weights, lambda op: op == "c") for _ in range(4)} == {"c"}
    with pytest.raises(ValueError, match="no op of z"):
        draws.deal("z", weights, lambda _op: False)


CLOCK_BASE = CHAOS / "rabbitmq4-clock.yaml"


def test_the_clock_family_skews_one_clock_at_a_time_and_sets_it_true_again() -> None:
    spec = load_scenario(CLOCK_BASE)
    shape = shape_of(spec)
    assert shape.fake_clock and spec.chaos is not None and spec.chaos.faults == ["clock"]
    offsets: list[int] = []
    for seed in range(30):
        scenario, steps = chaos_scenario(spec, ChaosOptions(seed=seed, seconds=120))
        assert scenario.nemesis and {s["op"] for s in steps} == {"clock", "clock-ok"}
        skewed: list[str] | None = None
        for s in steps:  # in time order: a skew, then its clock-ok of the same nodes
            if s["op"] == "clock":
                assert skewed is None, f"seed {seed}: two skews at once"
                skewed = [f"@{s['label']}"] if "label" in s else s["nodes"]
                offsets.append(s["offset"])
            else:
                assert s["nodes"] == skewed
                skewed = None
        assert skewed is None
    magnitudes = {abs(o) for o in offsets}
    assert magnitudes == set(CLOCK_OFFSETS) and min(offsets) < 0 < max(offsets)
    # By name only: a RabbitMQ base with a fake clock draws none by default.
    quorum = replace(shape, roles=RABBITMQ_ROLES)
    default = draw_schedule(quorum, ChaosOptions(seed=1, seconds=120))
    assert not {s["op"] for s in default} & {"clock", "clock-ok"}


def test_a_clock_fault_overlaps_other_kinds_of_fault() -> None:
    spec = load_scenario(CLOCK_BASE)
    opts = ChaosOptions(seed=0, seconds=300, faults=frozenset({"clock", "kill"}))
    skewed_while_down = False
    for seed in range(10):
        steps = chaos_scenario(spec, replace(opts, seed=seed))[1]
        clock = down = False
        for s in steps:
            clock = {"clock": True, "clock-ok": False}.get(s["op"], clock)
            down = {"kill": True, "start": False}.get(s["op"], down)
            skewed_while_down |= clock and down
    assert skewed_while_down


def test_the_clock_family_is_no_clusters_without_a_fake_clock() -> None:
    opts = ChaosOptions(seed=3, seconds=120, faults=frozenset({"clock"}))
    with pytest.raises(ChaosError, match="none of the fault families"):
        draw_schedule(KAFKA, opts)
    with pytest.raises(ChaosError, match="none of the fault families"):
        chaos_scenario(load_scenario(CHAOS / "rabbitmq4-quorum.yaml"), opts)


def test_families_drawn_by_name_each_come_once_before_any_comes_again() -> None:
    spec = kafka_base(CHAOS / "kafka-controllers.yaml")
    for seed in range(40):
        ops = [s["op"] for s in chaos_scenario(spec, ChaosOptions(seed=seed, seconds=120))[1]]
        faults = [op for op in ops if op in ("clock", "remove-controller")]
        # The controllers' first fault may be the spare added (a one-off, no removal).
        assert "clock" in faults[:2] and ("remove-controller" in faults or "add-controller" in ops)


def test_kafkas_clock_family_labels_each_skew_and_sets_the_same_nodes_true() -> None:
    spec = kafka_base(CHAOS / "kafka-controllers.yaml")
    assert shape_of(spec).fake_clock
    for seed in range(20):
        scenario, steps = chaos_scenario(spec, ChaosOptions(seed=seed, seconds=120))
        assert scenario.nemesis and {s["op"] for s in steps} >= {"clock", "clock-ok"}, seed
        skews = [s for s in steps if s["op"] == "clock"]
        oks = [s for s in steps if s["op"] == "clock-ok"]
        assert [f"@{s['label']}" for s in skews] == [s["target"] for s in oks], seed


MEMBERSHIP_BASE = CHAOS / "kafka-membership.yaml"


def test_kafkas_membership_decommissions_brokers_and_starts_them_and_adds_each_spare_once() -> None:
    spec = kafka_base(MEMBERSHIP_BASE)
    shape = shape_of(spec)
    assert (len(shape.brokers), shape.spares, shape.keep_brokers) == (4, 1, 3)
    for seed in range(30):
        scenario, steps = chaos_scenario(spec, ChaosOptions(seed=seed, seconds=120))
        assert scenario.nemesis  # the schema's membership check took it
        ops = [s["op"] for s in steps]
        assert set(ops) == {"reassign", "remove-broker", "start", "add-broker"}, seed
        assert ops.count("add-broker") == 1  # as many as the spares
        removals = [s for s in steps if s["op"] == "remove-broker"]
        starts = [s for s in steps if s["op"] == "start"]
        assert [f"@{s['label']}" for s in removals] == [s["target"] for s in starts]
        # One broker each: a role naming one, or a broker by name (never the spare).
        for s in removals:
            assert s["target"] in ("leader", "follower", "non-controller") or (
                len(s["target"]) == 1 and s["target"][0] in shape.brokers
            )


def test_a_decommission_is_drawn_only_while_the_cluster_has_a_broker_to_spare() -> None:
    """Three brokers and a spare, replication factor 3: no decommission before the spare
    joined, and none while another broker is out."""
    data = scenario_data(kafka_base(MEMBERSHIP_BASE))
    data["cluster"] |= {"brokers": 3}
    spec = parse_scenario(to_yaml(data), "three.yaml")
    seen_removal = False
    for seed in range(40):
        scenario, steps = chaos_scenario(spec, ChaosOptions(seed=seed, seconds=120))
        assert scenario.nemesis
        ops = [s["op"] for s in steps]
        if "remove-broker" in ops:
            seen_removal = True
            assert "add-broker" in ops[: ops.index("remove-broker")]
    assert seen_removal


def test_a_base_names_the_families_it_draws_and_faults_asked_for_override_them() -> None:
    spec = load_scenario(CHAOS / "rabbitmq4-disk.yaml")
    own = chaos_scenario(spec, ChaosOptions(seed=4, seconds=120))[0]
    assert own.generated is not None and own.generated.options["faults"] == ["disk"]
    asked = ChaosOptions(seed=4, seconds=120, faults=frozenset({"kill"}))
    steps = chaos_scenario(spec, asked)[1]
    assert {s["op"] for s in steps} == {"kill", "start"}
    data = scenario_data(spec)
    data["chaos"] = {"faults": ["disks"]}
    typo = parse_scenario(to_yaml(data), "typo.yaml")
    with pytest.raises(ChaosError, match=r"no fault family 'disks'.*chaos-rabbitmq4-disk's chaos"):
        chaos_scenario(typo, ChaosOptions(seed=4, seconds=120))


# ---- paths (upgrades, a migration), the controller quorum, probes ------------------------------

PATH_BASES = {
    "kafka-upgrade": "kraft",
    "rabbitmq-upgrade": None,
    "kafka-migration": "zk",
}
ONE_WAY = {"upgrade", "finalize-feature", "migrate"}


def base_steps(name: str, seed: int, seconds: float = 120, **kw: object) -> list[dict]:
    spec = load_scenario(CHAOS / f"{name}.yaml")
    mode = getattr(spec.cluster, "modes", [None])[0]
    return chaos_scenario(spec, ChaosOptions(seed=seed, seconds=seconds, **kw), mode)[1]  # type: ignore[arg-type]


def path_of(name: str) -> list[dict]:
    """Every step of the base's path, in order, as the generator draws them."""
    spec = load_scenario(CHAOS / f"{name}.yaml")
    mode = getattr(spec.cluster, "modes", [None])[0]
    shape = shape_of(spec, mode)
    return upgrade_steps(shape) if shape.upgrade_path else migration_steps(shape)


def test_a_path_is_the_bases_own_upgrade_node_by_node_or_kafkas_migration_phases() -> None:
    assert [s.get("target") for s in path_of("kafka-upgrade")] == [
        ["kafka1"], ["kafka2"], ["kafka3"], None
    ]  # fmt: skip
    assert [s.get("nodes") or s["feature"] for s in path_of("rabbitmq-upgrade")] == [
        ["rabbit1"], ["rabbit2"], ["rabbit3"], "khepri_db"
    ]  # fmt: skip
    assert [s["phase"] for s in path_of("kafka-migration")] == list(PHASES)
    # Dedicated controllers first, as the upgrade op itself takes them.
    dedicated = load_scenario(CHAOS / "kafka-safe.yaml")
    assert shape_of(dedicated, "kraft-dedicated").upgradable[:3] == (
        "controller1", "controller2", "controller3"
    )  # fmt: skip
    named = replace(
        shape_of(load_scenario(CHAOS / "kafka-upgrade.yaml"), "kraft"),
        upgrade_path=({"op": "upgrade", "release": "4.4", "target": "leader"},),
    )
    assert upgrade_steps(named) == [{"op": "upgrade", "release": "4.4", "target": "leader"}]


@pytest.mark.parametrize("base", sorted(PATH_BASES))
@pytest.mark.parametrize("seed", range(30))
def test_a_path_is_drawn_in_order_each_step_once_on_a_calm_cluster_a_fault_between(
    base: str, seed: int
) -> None:
    steps = base_steps(base, seed)
    drawn = [s for s in steps if s["op"] in ONE_WAY]
    path = path_of(base)
    assert [{k: v for k, v in s.items() if k != "at"} for s in drawn] == path[: len(drawn)]
    assert len(drawn) == len(path), "the base's traffic holds its whole path"
    where = [i for i, s in enumerate(steps) if s["op"] in ONE_WAY]
    for i, j in itertools.pairwise(where):
        between = {s["op"] for s in steps[i + 1 : j]}
        assert between - ONE_WAY - {"heal", "start", "declare"}, (seed, steps[i:j])
    for i in where:  # no fault in effect when a path's step begins
        assert replay(steps[:i]) == [], (seed, steps[i])


def test_a_path_drawn_to_its_end_is_never_drawn_again() -> None:
    steps = base_steps("kafka-upgrade", 7, seconds=900)
    drawn = [s for s in steps if s["op"] in ONE_WAY]
    assert len(drawn) == len(path_of("kafka-upgrade"))
    last = max(i for i, s in enumerate(steps) if s["op"] in ONE_WAY)
    assert len(steps) - last > 10  # the other families go on drawing


def test_the_first_step_of_a_path_comes_first_and_the_one_way_steps_push_the_next_back() -> None:
    steps = base_steps("kafka-migration", 3)
    assert steps[0]["op"] == "migrate" and steps[0]["at"] == 5.0
    # The controllers' phase keeps the nemesis busy about 3 x 12 s: nothing is drawn meanwhile.
    assert steps[1]["at"] >= 5.0 + 3 * 12


@pytest.mark.parametrize(
    ("base", "mode", "family"),
    [
        ("kafka-safe", "kraft", "upgrade"),
        ("kafka-safe", "zk", "migrate"),
        ("kafka-safe", "kraft-dedicated", "controllers"),
        ("rabbitmq4-quorum", None, "upgrade"),
    ],
)
def test_a_path_or_quorum_family_is_drawn_only_on_a_cluster_that_has_one(
    base: str, mode: str | None, family: str
) -> None:
    spec = load_scenario(CHAOS / f"{base}.yaml")
    opts = ChaosOptions(seed=1, seconds=120, faults=frozenset({family}))
    with pytest.raises(ChaosError, match="none of the fault families"):
        chaos_scenario(spec, opts, mode)
    default = chaos_scenario(spec, replace(opts, faults=None), mode)[1]
    assert not {s["op"] for s in default} & (ONE_WAY | {"add-controller", "remove-controller"})


CONTROLLERS_BASE = CHAOS / "kafka-controllers.yaml"


@pytest.mark.parametrize("spares", [1, 0])
def test_the_controllers_family_takes_one_voter_out_at_a_time_and_adds_each_spare_once(
    spares: int,
) -> None:
    data = scenario_data(kafka_base(CONTROLLERS_BASE))
    data["cluster"]["spare_controllers"] = spares
    spec = parse_scenario(to_yaml(data), "controllers.yaml")
    shape = shape_of(spec, "kraft-dedicated")
    assert shape.voters == ("controller1", "controller2", "controller3")
    for seed in range(30):
        scenario, steps = chaos_scenario(spec, ChaosOptions(seed=seed, seconds=120))
        assert scenario.nemesis  # the schema's quorum check took it
        assert {s["op"] for s in steps} <= {
            "remove-controller",
            "add-controller",
            "clock",
            "clock-ok",
        }
        steps = [s for s in steps if s["op"] in ("remove-controller", "add-controller")]
        voters, out, added = 3, None, 0
        for s in steps:
            if s["op"] == "remove-controller":
                assert out is None, f"seed {seed}: a second voter out"
                assert voters - 1 > voters // 2  # the voters left are a majority
                assert s["target"] == "controller" or s["target"][0] in shape.voters
                out, voters = f"@{s['label']}", voters - 1
            elif "target" in s:
                assert s["target"] == out
                out, voters = None, voters + 1
            else:
                added, voters = added + 1, voters + 1
        assert out is None and added == spares
        assert any(s["op"] == "remove-controller" for s in steps)


def test_a_quorum_of_two_voters_takes_its_spare_before_any_removal() -> None:
    shape = ClusterShape(
        "kafka", ("kafka1",), ("controller1", "controller2", "kafka1"),
        voters=("controller1", "controller2"), spare_controllers=1,
    )  # fmt: skip
    for seed in range(20):
        ops = [
            s["op"]
            for s in draw_schedule(shape, ChaosOptions(seed, 120, frozenset({"controllers"})))
        ]
        assert ops[0] == "add-controller"  # three voters before the first removal
    lone = replace(shape, spare_controllers=0)
    with pytest.raises(ChaosError, match="none of the fault families"):
        draw_schedule(lone, ChaosOptions(1, 120, frozenset({"controllers"})))


def network_windows(steps: list[dict]) -> list[tuple[float, float]]:
    """The (start, heal) of each network fault of a schedule."""
    windows, start = [], None
    for s in steps:
        if s["op"] in NETWORK:
            start = s["at"]
        elif s["op"] == "heal" and start is not None:
            windows.append((start, s["at"]))
            start = None
    return windows


@pytest.mark.parametrize("seed", range(30))
def test_a_declare_rides_every_other_network_fault_inside_its_window_on_every_node(
    seed: int,
) -> None:
    steps = base_steps("rabbitmq-upgrade", seed)
    windows = network_windows(steps)
    declares = [s for s in steps if s["op"] == "declare"]
    assert declares and len(declares) == len(windows[::2])
    for d, (start, heal) in zip(declares, windows[::2], strict=True):
        assert start < d["at"] < heal
        assert d["nodes"] == ["rabbit1", "rabbit2", "rabbit3"] and d["within"] > 30


def test_a_probe_alone_is_refused_naming_what_it_rides() -> None:
    spec = load_scenario(CHAOS / "rabbitmq-upgrade.yaml")
    opts = ChaosOptions(seed=1, seconds=120, faults=frozenset({"declare"}))
    with pytest.raises(ChaosError, match="declare rides a network fault: name a family"):
        chaos_scenario(spec, opts)


def drawn_by_name(base: str, mode: str | None) -> tuple[ClusterShape, frozenset[str]]:
    """A base's shape and the families it names (chaos.faults)."""
    spec = load_scenario(CHAOS / f"{base}.yaml")
    assert spec.chaos is not None and spec.chaos.faults is not None
    return shape_of(spec, mode), frozenset(spec.chaos.faults)


PATH_SHAPES = st.sampled_from(
    [
        drawn_by_name(b, m)
        for b, m in [*PATH_BASES.items(), ("kafka-controllers", "kraft-dedicated")]
    ]
)


@settings(max_examples=150, deadline=None)
@given(seed=seeds, seconds=lengths, chosen=PATH_SHAPES)
def test_a_schedule_with_paths_is_deterministic_ordered_healed_and_keeps_its_paths_order(
    seed: int, seconds: float, chosen: tuple[ClusterShape, frozenset[str]]
) -> None:
    shape, faults = chosen
    opts = ChaosOptions(seed=seed, seconds=seconds, faults=faults)
    steps = draw_schedule(shape, opts)
    assert steps == draw_schedule(shape, opts)
    times = [s["at"] for s in steps]
    assert times == sorted(times) and times[0] >= opts.warmup
    assert replay(steps) == []
    path = upgrade_steps(shape) if shape.upgrade_path else migration_steps(shape)
    drawn = [{k: v for k, v in s.items() if k != "at"} for s in steps if s["op"] in ONE_WAY]
    assert drawn == path[: len(drawn)]


def test_a_share_groups_base_aims_faults_at_its_share_coordinator_too() -> None:
    spec = kafka_base(CHAOS / "kafka-share.yaml")
    shape = shape_of(spec)
    assert "share-coordinator" in shape.coordinators and "group-coordinator" in shape.coordinators
    targets = set()
    for seed in range(20):
        steps = chaos_scenario(spec, ChaosOptions(seed=seed, seconds=120))[1]
        targets |= {s["target"] for s in steps if isinstance(s.get("target"), str)}
    assert "share-coordinator" in targets
