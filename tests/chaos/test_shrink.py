"""The shrinker against fake runners: it finds a planted minimal cause, never grows a schedule,
honours tries/need, and stops at its budget with the best schedule so far."""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chaos.generator import ChaosOptions, draw_schedule
from chaos.menu import ClusterShape
from chaos.schedule import chaos_scenario, options_for, shape_of
from chaos.shrink import Data, Shrinker, ShrinkOptions, fault_units, warmup_of
from systems.registry import load_scenario, parse_scenario
from systems.scenario import scenario_data, to_yaml
from tests.helpers import ROOT

KAFKA = ClusterShape(
    "kafka", ("kafka1", "kafka2", "kafka3"), ("kafka1", "kafka2", "kafka3"), partitions=1
)


def scenario(steps: list[dict[str, Any]]) -> Data:
    return {
        "id": "planted",
        "expect": "safe",
        "cluster": {"system": "kafka"},
        "workload": {"producers": [{"id": "P1", "count": 60_000, "rate": 500}]},
        "nemesis": steps,
    }


PLANTED = [
    {"at": 10.0, "op": "degrade", "from": "followers", "to": "leader", "loss_pct": 25.0},
    {"at": 20.0, "op": "heal"},
    {"at": 31.0, "op": "kill", "target": "leader", "label": "f2"},
    {"at": 45.0, "op": "start", "target": "@f2"},
    {"at": 50.0, "op": "pause", "target": "followers", "label": "f3"},
    {"at": 58.0, "op": "resume", "target": "@f3"},
    {"at": 60.0, "op": "cut-clients", "target": "leader", "label": "f4"},
    {"at": 70.0, "op": "heal"},
]


def loses_when_the_leader_is_killed(data: Data) -> bool:
    """The planted cause: a kill of the leader, whatever else happens."""
    return any(s["op"] == "kill" and s.get("target") == "leader" for s in data["nemesis"])


ONCE = ShrinkOptions(tries=1)


def shrinker(attempt: Any, opts: ShrinkOptions = ONCE, **kw: Any) -> Shrinker:
    return Shrinker(attempt, lambda _d: True, opts, **kw)


def test_the_planted_cause_is_all_that_is_left() -> None:
    result = shrinker(loses_when_the_leader_is_killed).shrink(scenario(PLANTED), set(), (1, 1))
    steps = result.minimal["nemesis"]
    assert [s["op"] for s in steps] == ["kill", "start"]
    assert steps[0]["at"] == 5.0  # moved earlier
    assert steps[1]["at"] - steps[0]["at"] < 14.0  # window halved
    # the load cut to the schedule: 20 s after its last step at 500/s
    assert result.minimal["workload"]["producers"][0]["count"] == 500 * (steps[1]["at"] + 20)
    assert result.original_steps == 8 and result.reproduced == 1


def test_the_steps_the_anomalies_were_tied_to_are_tried_alone_first() -> None:
    tried: list[int] = []

    def attempt(data: Data) -> bool:
        tried.append(len(data["nemesis"]))
        return loses_when_the_leader_is_killed(data)

    shrinker(attempt).shrink(scenario(PLANTED), {2}, (1, 1))
    assert tried[0] == 2  # the kill and its start, nothing else


def test_a_step_whose_heal_it_needs_is_never_left_without_it() -> None:
    assert fault_units(PLANTED) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    rabbit = [
        {"at": 5, "op": "kill", "nodes": ["rabbit1"]},
        {"at": 6, "op": "partition", "groups": [["rabbit1"], ["rabbit2", "rabbit3"]]},
        {"at": 8, "op": "start", "nodes": ["rabbit1"]},
        {"at": 9, "op": "heal"},
        {"at": 12, "op": "restart", "nodes": ["rabbit2"]},
    ]
    assert fault_units(rabbit) == [[0, 2], [1, 3], [4]]
    disks = [
        {"at": 5, "op": "disk-full", "target": ["rabbit1"]},
        {"at": 6, "op": "disk-error", "target": ["rabbit2"], "fail_on": "write"},
        {"at": 8, "op": "disk-ok", "target": ["rabbit2"]},
        {"at": 9, "op": "disk-ok"},  # every disk
    ]
    assert fault_units(disks) == [[0, 3], [1, 2]]
    # A drawn disk fault: mended and its node restarted by its label (Kafka's target, RabbitMQ's
    # nodes), one unit; a corruption, which nothing heals, a unit of its own.
    drawn = [
        {"at": 5, "op": "disk-error", "target": "leader", "fail_on": "fsync", "label": "f1"},
        {"at": 7, "op": "corrupt", "target": ["kafka2"], "path": "[!_]*/*.log", "seed": 4},
        {"at": 9, "op": "disk-ok", "target": "@f1"},
        {"at": 9, "op": "restart", "target": "@f1"},
        {"at": 11, "op": "disk-full", "nodes": ["leader"], "label": "f3"},
        {"at": 14, "op": "disk-ok", "nodes": ["@f3"]},
        {"at": 14, "op": "restart", "nodes": ["@f3"]},
    ]
    assert fault_units(drawn) == [[0, 2, 3], [1], [4, 5, 6]]
    membership = [
        {"at": 5, "op": "reassign", "throttle": 1024},
        {"at": 6, "op": "remove-broker", "target": "leader", "label": "gone"},
        {"at": 8, "op": "heal"},  # clears the reassignment's throttle
        {"at": 9, "op": "start", "target": "@gone"},
        {"at": 10, "op": "add-broker"},  # a one-off: nothing heals it
    ]
    assert fault_units(membership) == [[0, 2], [1, 3], [4]]

    skews = [
        {"at": 5, "op": "clock", "target": ["rabbit1"], "offset": 60},
        {"at": 6, "op": "clock", "target": ["rabbit2"], "offset": -60},
        {"at": 7, "op": "heal"},  # a network heal sets no clock true
        {"at": 8, "op": "clock-ok", "target": ["rabbit2"]},
        {"at": 9, "op": "clock-ok"},  # every clock
    ]
    assert fault_units(skews) == [[0, 4], [1, 3], [2]]


def test_a_membership_fault_pairs_with_its_own_heal_or_one_naming_no_node() -> None:
    steps = [
        {"at": 5, "op": "forget-node", "target": ["rabbit1"]},
        {"at": 6, "op": "shrink-queue", "target": ["rabbit2"]},
        {"at": 8, "op": "grow-queue", "target": ["rabbit3"]},  # another node's: no pair
        {"at": 9, "op": "grow-queue"},  # every member back
        {"at": 10, "op": "add-node", "target": ["rabbit1"]},
    ]
    assert fault_units(steps) == [[0, 4], [1, 3], [2]]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), planted=st.integers(0, 1000))
def test_a_shrink_never_grows_a_schedule(seed: int, planted: int) -> None:
    steps = draw_schedule(KAFKA, ChaosOptions(seed=seed, seconds=200))
    cause = steps[planted % len(steps)]

    def attempt(data: Data) -> bool:
        return any(s["op"] == cause["op"] for s in data["nemesis"])

    seen: list[int] = []

    def counting(data: Data) -> bool:
        seen.append(len(data["nemesis"]))
        return attempt(data)

    original = scenario(copy.deepcopy(steps))
    result = shrinker(counting).shrink(original, set(), (1, 1))
    assert len(result.minimal["nemesis"]) <= len(steps)
    assert all(n <= len(steps) for n in seen)
    assert any(s["op"] == cause["op"] for s in result.minimal["nemesis"])
    assert original["nemesis"] == steps  # the original is left as it was


def test_a_candidate_counts_when_need_of_tries_reproduce() -> None:
    """A flaky cause (two runs in three of a schedule with the kill lose): with need 2 of 3
    every candidate with the kill is kept, having cost at most three runs."""
    flips = itertools.cycle([True, True, False])

    def flaky(data: Data) -> bool:
        return loses_when_the_leader_is_killed(data) and next(flips)

    s = shrinker(flaky, ShrinkOptions(tries=3, need=2))
    result = s.shrink(scenario(PLANTED), set(), (1, 1))
    assert [x["op"] for x in result.minimal["nemesis"]] == ["kill", "start"]
    assert all(c.runs <= 3 for c in result.candidates)
    assert all(c.kept == (c.reproduced >= 2) for c in result.candidates)
    # a candidate that cannot reach `need` any more stops early
    assert all(c.runs - c.reproduced <= 2 for c in result.candidates)


def test_a_failed_run_does_not_count_as_reproducing() -> None:
    result = shrinker(lambda _d: None).shrink(scenario(PLANTED), set(), (1, 1))
    assert result.minimal["nemesis"] == PLANTED
    assert not any(c.kept for c in result.candidates)


def test_the_budget_stops_the_shrink_with_the_best_schedule_so_far() -> None:
    now = [0.0]

    def slow(data: Data) -> bool:
        now[0] += 100.0  # each run costs 100 s of a 250 s budget
        return loses_when_the_leader_is_killed(data)

    s = shrinker(slow, ShrinkOptions(tries=1, budget_s=250), clock=lambda: now[0])
    result = s.shrink(scenario(PLANTED), set(), (1, 1))
    assert result.budget_spent and result.runs_spent == 3
    assert 2 <= len(result.minimal["nemesis"]) < len(PLANTED)


def test_a_candidate_the_schema_refuses_is_never_run() -> None:
    ran: list[Data] = []

    def attempt(data: Data) -> bool:
        ran.append(data)
        return True

    Shrinker(attempt, lambda d: len(d["nemesis"]) >= 4, ShrinkOptions(tries=1)).shrink(
        scenario(PLANTED), set(), (1, 1)
    )
    assert all(len(d["nemesis"]) >= 4 for d in ran)


@pytest.mark.parametrize(("tries", "need"), [(1, 2), (3, 0)])
def test_need_must_fit_tries(tries: int, need: int) -> None:
    with pytest.raises(ValueError, match="--need"):
        ShrinkOptions(tries=tries, need=need).check()


def test_a_candidate_that_did_not_reproduce_is_never_run_again() -> None:
    ran: list[str] = []

    def attempt(data: Data) -> bool:
        ran.append(json.dumps(data, sort_keys=True))
        return loses_when_the_leader_is_killed(data)

    shrinker(attempt).shrink(scenario(PLANTED), set(), (1, 1))
    assert len(ran) == len(set(ran))


def copy_scenario(steps: list[dict[str, Any]]) -> Data:
    """The exactly-once copy: copiers that need 25 s before a fault tests anything."""
    data = scenario(steps)
    data["expect"] = "no-duplicates"
    data["chaos"] = {"warmup": 25.0}
    data["workload"]["producers"][0]["enable_idempotence"] = True
    data["workload"]["copiers"] = [{"id": "C1", "size": 50}, {"id": "C2", "size": 50}]
    data["workload"]["readers"] = [{"id": "copied", "topic": "output"}]
    return data


def test_a_schedule_is_moved_no_earlier_than_the_scenarios_own_warmup() -> None:
    later = [{**s, "at": s["at"] + 30} for s in PLANTED]  # the kill at +61 s
    seen: list[Data] = []

    def attempt(data: Data) -> bool:
        seen.append(data)
        return loses_when_the_leader_is_killed(data)

    result = shrinker(attempt).shrink(copy_scenario(later), set(), (1, 1))
    steps = result.minimal["nemesis"]
    assert [s["op"] for s in steps] == ["kill", "start"]
    assert steps[0]["at"] == 25.0  # moved earlier, to the warmup and not to 5 s
    assert all(d["nemesis"][0]["at"] >= 25.0 for d in seen if d["nemesis"])
    # every candidate kept the copy whole: its copiers, its reader of the output, its promise
    for d in [*seen, result.minimal]:
        assert d["workload"]["copiers"] == copy_scenario([])["workload"]["copiers"]
        assert d["workload"]["readers"] == [{"id": "copied", "topic": "output"}]
        assert d["chaos"] == {"warmup": 25.0} and d["expect"] == "no-duplicates"


def test_a_schedule_already_at_its_warmup_is_not_moved() -> None:
    at_warmup = [{**s, "at": s["at"] + 15} for s in PLANTED]  # the first fault at +25 s
    result = shrinker(lambda _d: False).shrink(copy_scenario(at_warmup[:2]), set(), (1, 1))
    tried = [c.what for c in result.candidates]
    assert tried and "the schedule moved earlier" not in tried
    assert warmup_of(copy_scenario([])) == 25.0
    assert warmup_of(scenario([])) == 5.0
    assert warmup_of({**scenario([]), "chaos": {"warmup": 1.0}}) == 5.0  # a floor, never less


def test_disk_faults_are_shrunk_away_like_any_other_leaving_the_corruption_that_loses() -> None:
    steps = [
        {"at": 10.0, "op": "disk-error", "target": "leader", "fail_on": "write", "label": "f1"},
        {"at": 20.0, "op": "disk-ok", "target": "@f1"},
        {"at": 20.0, "op": "restart", "target": "@f1"},
        {"at": 31.0, "op": "corrupt", "target": "leader", "path": "[!_]*/*.log", "seed": 9},
        {"at": 40.0, "op": "disk-full", "target": "follower", "label": "f3"},
        {"at": 50.0, "op": "disk-ok", "target": "@f3"},
        {"at": 50.0, "op": "restart", "target": "@f3"},
    ]

    def loses_when_corrupted(data: Data) -> bool:
        return any(s["op"] == "corrupt" for s in data["nemesis"])

    result = shrinker(loses_when_corrupted).shrink(scenario(steps), set(), (1, 1))
    assert [s["op"] for s in result.minimal["nemesis"]] == ["corrupt"]
    assert result.minimal["nemesis"][0]["seed"] == 9  # the same damage, replayed


# ---- the families drawn by name: each fault shrunk away with every step that heals it ---------

# What heals each fault of the disk, membership and clock families, in order (a one-off: none).
HEALS = {
    "clock": ["clock-ok"],
    "remove-broker": ["start"],
    "add-broker": [],
    "reassign": [],
    "forget-node": ["add-node", "grow-queue"],
    "shrink-queue": ["grow-queue"],
    "torn-write": ["power-loss", "disk-ok"],
    "disk-error": ["disk-ok", "restart"],
    "disk-full": ["disk-ok", "restart"],
    "corrupt": [],
}


def drawn(base: str, seed: int) -> list[dict[str, Any]]:
    spec = load_scenario(ROOT / "scenarios" / "chaos" / f"{base}.yaml")
    mode = getattr(spec.cluster, "modes", [None])[0]
    return draw_schedule(shape_of(spec, mode), options_for(spec, ChaosOptions(seed, 120.0)))


@pytest.mark.parametrize(
    "base",
    ["rabbitmq4-clock", "kafka-membership", "rabbitmq4-membership", "kafka-disk", "rabbitmq4-disk"],
)
def test_each_drawn_fault_is_one_unit_with_all_its_heals(base: str) -> None:
    for seed in range(20):
        steps = drawn(base, seed)
        units = fault_units(steps)
        assert sorted(i for u in units for i in u) == list(range(len(steps)))
        for unit in units:
            ops = [steps[i]["op"] for i in unit]
            assert ops[1:] == HEALS[ops[0]], (seed, ops)


@pytest.mark.parametrize(
    ("base", "cause"),
    [
        ("rabbitmq4-clock", "clock"),
        ("kafka-membership", "remove-broker"),
        ("kafka-membership", "add-broker"),
        ("rabbitmq4-membership", "forget-node"),
        ("rabbitmq4-membership", "shrink-queue"),
        ("kafka-disk", "torn-write"),
        ("rabbitmq4-disk", "torn-write"),
    ],
)
def test_a_drawn_fault_that_breaks_the_run_is_all_that_is_left_with_its_heals(
    base: str, cause: str
) -> None:
    """The planted cause is the schedule's last fault of one op (its target and arguments as
    drawn): every other fault goes with its heals, never one without the other."""
    steps = drawn(base, 3)
    planted = {k: v for k, v in [s for s in steps if s["op"] == cause][-1].items() if k != "at"}

    def breaks(data: Data) -> bool:
        return any({k: v for k, v in s.items() if k != "at"} == planted for s in data["nemesis"])

    result = shrinker(breaks).shrink(scenario(steps), set(), (1, 1))
    minimal = result.minimal["nemesis"]
    assert [s["op"] for s in minimal] == [cause, *HEALS[cause]]
    # Each heal names the nodes its fault resolved to: its label, or the nodes it named.
    again = [f"@{planted['label']}"] if "label" in planted else planted.get("nodes")
    for heal in minimal[1:]:
        named = heal.get("target", heal.get("nodes"))
        assert (named if isinstance(named, list) else [named]) == again


# ---- one-way paths: a shrunk schedule keeps each path a prefix of itself ------------------------

UPGRADED = [
    {"at": 5.0, "op": "upgrade", "release": "4.4", "within": 90, "target": ["kafka1"]},
    {"at": 30.0, "op": "kill", "target": "leader", "label": "f2"},
    {"at": 40.0, "op": "start", "target": "@f2"},
    {"at": 45.0, "op": "upgrade", "release": "4.4", "within": 90, "target": ["kafka2"]},
    {"at": 70.0, "op": "isolate", "target": "controller", "label": "f4"},
    {"at": 80.0, "op": "heal"},
    {"at": 85.0, "op": "upgrade", "release": "4.4", "within": 90, "target": ["kafka3"]},
    {"at": 110.0, "op": "finalize-feature", "feature": "metadata.version", "level": "4.4"},
]
MIGRATED = [
    {"at": 5.0, "op": "migrate", "phase": "controllers"},
    {"at": 45.0, "op": "migrate", "phase": "brokers"},
    {"at": 85.0, "op": "kill", "target": "leader", "label": "f3"},
    {"at": 95.0, "op": "start", "target": "@f3"},
    {"at": 100.0, "op": "migrate", "phase": "kraft"},
    {"at": 140.0, "op": "migrate", "phase": "finalize"},
]
PATH_OPS = ("upgrade", "finalize-feature", "migrate")


def path_steps(data: Data) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in s.items() if k != "at"} for s in data["nemesis"] if s["op"] in PATH_OPS
    ]


def is_path_prefix(candidate: Data, original: list[dict[str, Any]]) -> bool:
    """Whether the candidate's one-way steps are the first of the original's, in order."""
    mine = path_steps(candidate)
    return mine == path_steps({"nemesis": original})[: len(mine)]


def recording(tried: list[Data]) -> Any:
    def valid(data: Data) -> bool:
        tried.append(data)
        return True

    return valid


def test_a_one_way_step_dropped_takes_its_paths_later_steps_with_it() -> None:
    tried: list[Data] = []
    s = Shrinker(loses_when_the_leader_is_killed, recording(tried), ONCE)
    result = s.shrink(scenario(copy.deepcopy(UPGRADED)), set(), (1, 1))
    assert [x["op"] for x in result.minimal["nemesis"]] == ["kill", "start"]
    assert tried and all(is_path_prefix(d, UPGRADED) for d in tried)
    # Nothing kept: each candidate of the first round. Dropping the second upgrade drops the
    # third and the finalize with it, in one candidate.
    tried.clear()
    s = Shrinker(lambda _d: False, recording(tried), ONCE)
    whats = [c.what for c in s.shrink(scenario(copy.deepcopy(UPGRADED)), set(), (1, 1)).candidates]
    assert "without step 3 (upgrade) and its path's later steps" in whats
    ops = [[x["op"] for x in d["nemesis"]] for d in tried]
    assert ["upgrade", "kill", "start", "isolate", "heal"] in ops
    assert "without step 7 (finalize-feature)" in whats  # the last: nothing after it


def test_a_finalize_the_anomalies_were_tied_to_keeps_the_upgrades_before_it() -> None:
    def loses_when_finalized(data: Data) -> bool:
        return any(s["op"] == "finalize-feature" for s in data["nemesis"])

    tried: list[Data] = []
    s = Shrinker(loses_when_finalized, recording(tried), ONCE)
    result = s.shrink(scenario(copy.deepcopy(UPGRADED)), {7}, (1, 1))
    assert [x["op"] for x in tried[0]["nemesis"]] == ["upgrade"] * 3 + ["finalize-feature"]
    assert path_steps(result.minimal) == path_steps({"nemesis": UPGRADED})
    assert all(is_path_prefix(d, UPGRADED) for d in tried)


def test_a_migrations_phase_that_breaks_the_run_keeps_the_phases_before_it_and_drops_the_rest() -> (
    None
):
    def loses_in_kraft(data: Data) -> bool:
        return any(s.get("phase") == "kraft" for s in data["nemesis"])

    tried: list[Data] = []
    result = Shrinker(loses_in_kraft, recording(tried), ONCE).shrink(
        scenario(copy.deepcopy(MIGRATED)), set(), (1, 1)
    )
    assert [s["phase"] for s in result.minimal["nemesis"]] == ["controllers", "brokers", "kraft"]
    assert all(is_path_prefix(d, MIGRATED) for d in tried)


def test_a_one_way_step_is_never_narrowed() -> None:
    steps = [{"at": 5.0, "op": "upgrade", "release": "4.4", "target": ["kafka1", "kafka2"]}]
    tried: list[Data] = []
    upgraded = Shrinker(lambda d: bool(d["nemesis"]), recording(tried), ONCE)
    result = upgraded.shrink(scenario(steps), set(), (1, 1))
    assert result.minimal["nemesis"][0]["target"] == ["kafka1", "kafka2"]
    assert all(d["nemesis"][0]["target"] == ["kafka1", "kafka2"] for d in tried if d["nemesis"])


PATH_BASES = {"kafka-upgrade": "kraft", "rabbitmq-upgrade": None, "kafka-migration": "zk"}


@settings(max_examples=25, deadline=None)
@given(
    base=st.sampled_from(sorted(PATH_BASES)),
    seed=st.integers(0, 10_000),
    planted=st.integers(0, 1000),
    tied=st.booleans(),
)
def test_every_candidate_of_a_drawn_path_schedule_keeps_its_path_a_prefix_and_is_valid(
    base: str, seed: int, planted: int, tied: bool
) -> None:
    """A drawn schedule, any step of it the cause (tied to the anomalies or not): every
    candidate the shrinker makes holds the first steps of the schedule's path, in order, and is
    one the system's own schema takes."""
    spec = load_scenario(ROOT / "scenarios" / "chaos" / f"{base}.yaml")
    generated, steps = chaos_scenario(spec, ChaosOptions(seed, 120.0), PATH_BASES[base])
    original = scenario_data(generated)
    i = planted % len(steps)
    cause = {k: v for k, v in steps[i].items() if k != "at"}

    def attempt(data: Data) -> bool:
        return any({k: v for k, v in s.items() if k != "at"} == cause for s in data["nemesis"])

    tried: list[Data] = []
    result = Shrinker(attempt, recording(tried), ONCE).shrink(
        original, {i} if tied else set(), (1, 1)
    )
    assert attempt(result.minimal)
    for candidate in tried:
        assert is_path_prefix(candidate, steps)
        parse_scenario(to_yaml(candidate), "<candidate>")  # raises if the schema refuses it
