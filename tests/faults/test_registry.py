"""The fault registry is the one list of ops: every system's dispatcher handles exactly the ops
the registry gives it, and the checker knows every history name a nemesis writes."""

from __future__ import annotations

import pytest

from faults.registry import HISTORY_NAMES, OPS, check_op, is_step, op, ops_of, window_of
from systems.kafka.nemesis import HANDLERS as KAFKA
from systems.kafka_mock.nemesis import HANDLERS as MOCK
from systems.rabbitmq.nemesis import HANDLERS as RABBITMQ


@pytest.mark.parametrize(
    ("system", "handlers"), [("rabbitmq", RABBITMQ), ("kafka", KAFKA), ("kafka-mock", MOCK)]
)
def test_each_dispatcher_handles_exactly_its_systems_ops(system: str, handlers: dict) -> None:
    assert set(handlers) == set(ops_of(system))  # type: ignore[arg-type]


def test_names_are_declared_once() -> None:
    assert len({o.name for o in OPS}) == len(OPS)
    assert len({h.f for h in HISTORY_NAMES}) == len(HISTORY_NAMES)


def test_every_history_name_an_op_writes_is_declared() -> None:
    declared = {h.f for h in HISTORY_NAMES}
    assert {f for o in OPS for f in o.writes} <= declared


def test_every_recoverable_fault_is_healed_by_an_op_of_its_own_systems() -> None:
    for o in OPS:
        if o.healed_by is not None:
            assert o.systems <= op(o.healed_by).systems, o.name


def test_windows_as_the_checker_has_always_read_them() -> None:
    assert window_of("start-partition") == window_of("start-degrade") == "network-start"
    assert window_of("stop-partition") == "network-heal"
    assert window_of("heal") == "heal-all"
    assert {window_of(f) for f in ("kill", "stop", "pause")} == {"node-down"}
    assert {window_of(f) for f in ("start", "resume")} == {"node-up"}
    assert {window_of(f) for f in ("restart", "power-loss")} == {"node-bounce"}
    assert window_of("elect") == window_of("no-such-name") == "none"
    assert not is_step("leaders") and is_step("elect")


def test_a_paused_client_is_a_fault_of_its_own_healed_by_its_resume() -> None:
    assert (window_of("pause-client"), window_of("resume-client")) == ("client-down", "client-up")
    assert op("pause-client").healed_by == "resume-client"
    assert op("pause-client").arguments == op("resume-client").arguments == "client"
    with pytest.raises(ValueError, match="'pause-client' is not a rabbitmq fault op"):
        check_op("rabbitmq", "pause-client")


def test_disk_faults_are_a_window_of_their_own_mended_by_disk_ok_alone() -> None:
    assert {window_of(f) for f in ("disk-error", "disk-full")} == {"disk-start"}
    assert window_of("disk-ok") == "disk-heal"
    for name in ("disk-error", "disk-full"):
        fault = op(name)
        assert (
            fault.healed_by == "disk-ok" and fault.needs_lazy_disks and fault.arguments == "target"
        )
    assert op("disk-ok").arguments == "optional" and op("disk-ok").needs_lazy_disks
    assert op("heal").healed_by is None and "disk-ok" not in op("heal").writes
    with pytest.raises(ValueError, match="'disk-full' is not a kafka-mock fault op"):
        check_op("kafka-mock", "disk-full")


def test_membership_faults_are_rabbitmqs_each_healed_by_its_own_op_or_the_end() -> None:
    assert {window_of(f) for f in ("forget-node", "shrink-queue")} == {"member-out"}
    assert {window_of(f) for f in ("add-node", "grow-queue")} == {"member-in"}
    assert op("forget-node").healed_by == "add-node"
    assert op("shrink-queue").healed_by == "grow-queue"
    for name in ("forget-node", "shrink-queue"):
        assert op(name).arguments == "target" and op(name).systems == {"rabbitmq"}
    for name in ("add-node", "grow-queue"):  # none named: everything back
        assert op(name).arguments == "optional" and op(name).healed_by is None
    with pytest.raises(ValueError, match="'forget-node' is not a kafka fault op"):
        check_op("kafka", "forget-node")


def test_an_unknown_op_is_one_line_naming_the_systems_ops() -> None:
    with pytest.raises(ValueError, match="'explode' is not a rabbitmq fault op \\(ops: isolate"):
        check_op("rabbitmq", "explode")
    assert check_op("kafka", "degrade") == "degrade"
    with pytest.raises(ValueError):
        check_op("rabbitmq", "degrade")


def test_membership_ops_are_kafkas_and_each_says_what_ends_it() -> None:
    assert {window_of(f) for f in ("reassign", "add-broker")} == {"membership-start"}
    assert window_of("remove-broker") == "node-down"  # a decommissioned broker is down
    assert window_of("end-reassign") == "membership-heal" and not is_step("end-reassign")
    assert op("reassign").healed_by == "heal" and op("reassign").arguments == "optional"
    assert op("remove-broker").healed_by == "start" and op("remove-broker").arguments == "target"
    assert op("add-broker").healed_by is None
    assert "end-reassign" in op("heal").writes
    with pytest.raises(ValueError, match="'reassign' is not a rabbitmq fault op"):
        check_op("rabbitmq", "reassign")


def test_quorum_ops_are_kafkas_and_a_removed_controller_is_out_until_one_is_added() -> None:
    assert window_of("add-controller") == "membership-start"  # a voter joining, to its ok
    assert window_of("remove-controller") == "member-out"
    # The add-controller that puts a removed one back is a fault of its own, no heal: its ok
    # ends the removal's window (checkers.windows), the registry pairs no healing op with it.
    assert op("remove-controller").healed_by is None and op("add-controller").healed_by is None
    assert op("remove-controller").arguments == "target"
    assert op("add-controller").arguments == "optional"
    assert is_step("add-controller") and is_step("remove-controller")
    with pytest.raises(ValueError, match="'add-controller' is not a rabbitmq fault op"):
        check_op("rabbitmq", "add-controller")


def test_a_clock_skew_is_a_window_of_its_own_ended_by_clock_ok_alone() -> None:
    assert (window_of("clock"), window_of("clock-ok")) == ("clock-start", "clock-heal")
    skew, ok = op("clock"), op("clock-ok")
    assert skew.healed_by == "clock-ok" and skew.arguments == "target"
    assert ok.arguments == "optional" and ok.healed_by is None
    assert skew.needs_fake_clock and ok.needs_fake_clock and not skew.needs_lazy_disks
    assert not any(op(n).needs_fake_clock for n in ("kill", "heal", "disk-full"))
    assert "clock-ok" not in op("heal").writes
    with pytest.raises(ValueError, match="'clock' is not a kafka-mock fault op"):
        check_op("kafka-mock", "clock")
