"""Nemesis rule planning: faults -> directed cuts -> per-node iptables rules."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from nemesis import network
from nemesis.network import CLIENTS, NetworkState

NODES = ("rabbit1", "rabbit2", "rabbit3")
ADDRESSES = {
    "rabbit1": "10.0.0.11",
    "rabbit2": "10.0.0.12",
    "rabbit3": "10.0.0.13",
    CLIENTS: "10.0.0.1",
}


def test_isolate_is_002s_inbound_drop_on_the_isolated_node() -> None:
    state = NetworkState().with_cuts(network.isolate(["rabbit3"], NODES))
    assert state.rules_on("rabbit3") == ["rabbit1", "rabbit2"]
    assert state.rules_on("rabbit1") == [] and state.rules_on("rabbit2") == []
    assert not state.can_reach("rabbit1", "rabbit3")
    assert state.can_reach("rabbit1", "rabbit2")
    assert state.can_reach(CLIENTS, "rabbit3")  # clients are not cut


def test_002_sequence_leaves_rabbit2_and_rabbit3_together_and_rabbit1_alone() -> None:
    state = NetworkState()
    for node in ("rabbit3", "rabbit1", "rabbit2"):
        state = state.with_cuts(network.isolate([node], NODES))
    assert all(not state.can_reach(a, b) for a in NODES for b in NODES if a != b)
    state = state.healed(["rabbit3"])
    # rabbit1 and rabbit2 still drop what rabbit3 sends: healing one side is not enough.
    assert not state.can_reach("rabbit2", "rabbit3")
    state = state.healed(["rabbit2"])
    assert state.can_reach("rabbit2", "rabbit3")
    assert not state.can_reach("rabbit1", "rabbit2")
    assert not state.can_reach("rabbit1", "rabbit3")
    assert state.healed().cuts == frozenset()


def test_partition_groups_and_bridge() -> None:
    halves = network.partition([["rabbit1"], ["rabbit2", "rabbit3"]], NODES)
    state = NetworkState().with_cuts(halves)
    assert not state.can_reach("rabbit1", "rabbit2") and not state.can_reach("rabbit3", "rabbit1")
    assert state.can_reach("rabbit2", "rabbit3")
    bridge = NetworkState().with_cuts(
        network.partition([["rabbit1", "rabbit2"], ["rabbit2", "rabbit3"]], NODES)
    )
    assert bridge.can_reach("rabbit1", "rabbit2") and bridge.can_reach("rabbit2", "rabbit3")
    assert not bridge.can_reach("rabbit1", "rabbit3")


def test_a_node_in_no_group_is_alone() -> None:
    state = NetworkState().with_cuts(network.partition([["rabbit1", "rabbit2"]], NODES))
    assert not state.can_reach("rabbit3", "rabbit1") and not state.can_reach("rabbit3", "rabbit2")
    assert state.can_reach("rabbit1", "rabbit2")


def test_one_way_cut_drops_only_on_the_destination() -> None:
    cuts = network.one_way(["rabbit1"], ["rabbit2", "rabbit3"])
    assert cuts == {("rabbit1", "rabbit2"), ("rabbit1", "rabbit3")}


def test_cut_clients_keeps_node_links() -> None:
    state = NetworkState().with_cuts(network.cut_clients(["rabbit2"]))
    assert not state.can_reach(CLIENTS, "rabbit2")
    assert all(state.can_reach(a, b) for a in NODES for b in NODES)


def test_iptables_script_sets_exactly_the_nodes_rules_in_our_chain() -> None:
    state = NetworkState().with_cuts(network.isolate(["rabbit3"], NODES))
    state = state.with_cuts(network.cut_clients(["rabbit3"]))
    script = network.iptables_restore_script("rabbit3", state, ADDRESSES)
    lines = script.splitlines()
    assert lines[0] == "*filter" and lines[-1] == "COMMIT"
    assert f":{network.CHAIN} - [0:0]" in lines  # declaring the chain flushes it: idempotent
    assert f"-A {network.CHAIN} -i lo -j RETURN" in lines
    drops = [ln for ln in lines if ln.endswith("-j DROP")]
    assert drops == [
        f"-A {network.CHAIN} -s 10.0.0.1/32 -j DROP",
        f"-A {network.CHAIN} -s 10.0.0.11/32 -j DROP",
        f"-A {network.CHAIN} -s 10.0.0.12/32 -j DROP",
    ]
    assert "nat" not in script and "DOCKER" not in script
    healed = network.iptables_restore_script("rabbit3", state.healed(["rabbit3"]), ADDRESSES)
    assert "-j DROP" not in healed


def test_apply_command_quotes_the_script_and_jumps_once() -> None:
    cmd = network.apply_command("a'b\n")
    assert "iptables-restore --noflush" in cmd
    assert f"iptables -C INPUT -j {network.CHAIN}" in cmd  # no second jump on re-apply
    assert "'\"'\"'" in cmd


node_lists = st.lists(st.sampled_from(NODES), min_size=1, max_size=3, unique=True)
faults = st.one_of(
    node_lists.map(lambda ns: network.isolate(ns, NODES)),
    st.lists(node_lists, min_size=1, max_size=3).map(lambda gs: network.partition(gs, NODES)),
    st.tuples(node_lists, node_lists).map(lambda t: network.one_way(*t)),
    node_lists.map(network.cut_clients),
)


@given(st.lists(faults, max_size=6), node_lists)
def test_heal_removes_exactly_the_rules_on_the_healed_nodes(fault_list, healed) -> None:
    state = NetworkState()
    for cuts in fault_list:
        state = state.with_cuts(cuts)
        assert all(src != dst for src, dst in cuts)
    after = state.healed(healed)
    for node in healed:
        assert after.rules_on(node) == []
    for node in set(NODES) - set(healed):
        assert after.rules_on(node) == state.rules_on(node)
    assert state.healed().cuts == frozenset()
    for a in NODES:
        for b in NODES:
            assert state.can_reach(a, b) == state.can_reach(b, a)
