"""Which transactions the clients' proxy held past their end or delayed in their commit, from
planted spans and spells (checkers.held)."""

from __future__ import annotations

from checkers.held import Span, held_counts
from checkers.windows import PathSpell

COORDINATOR = ("transaction-coordinator P",)
LEADER = ("leader p1",)
IDS = {"P": {"P"}, "P.2": {"P"}, "Q": {"Q"}}


def test_a_transaction_that_ended_inside_a_hold_on_its_leader_was_held_past_its_end() -> None:
    hold = PathSpell("hold", "k1", 10.0, 40.0, LEADER)
    spans = [
        Span("P", "t1", 9.5, None, 32.0),  # open as the hold began, aborted at +32: held
        Span("P", "t2", 33.0, 33.1, 33.2),  # began and committed inside it: held
        Span("P", "t3", 2.0, 3.0, 3.5),  # all over before the hold
        Span("P", "t4", 35.0, 36.0, 45.0),  # still open at the release: delivered in time
        Span("Q", "t5", 41.0, 41.5, 42.0),  # after the release
    ]
    assert held_counts(spans, [hold], IDS) == {"held_past_end": 2, "commits_delayed": 0}


def test_a_commit_in_flight_through_a_held_coordinator_link_is_delayed() -> None:
    hold = PathSpell("hold", "k2", 10.0, 40.0, COORDINATOR)
    spans = [
        Span("P", "t1", 5.0, 9.9, 20.0),  # asked just before: in flight, ended inside: held
        Span("P.2", "t2", 30.0, 39.0, 60.0),  # a later instance of P: delayed, ended after
        Span("Q", "t3", 12.0, 13.0, 14.0),  # another id's coordinator: neither
        Span("P", "t4", 1.0, 2.0, 3.0),  # over before the hold
    ]
    assert held_counts(spans, [hold], IDS) == {"held_past_end": 1, "commits_delayed": 2}


def test_a_commit_fenced_at_the_release_was_ended_by_the_coordinator_while_held() -> None:
    """Its EndTxn waited in the hold while the coordinator aborted the transaction on its
    timeout; the client learnt it was fenced only when the request was delivered."""
    hold = PathSpell("hold", "k2", 10.0, 40.0, COORDINATOR)
    fenced = Span("P", "t1", 9.8, 9.9, 40.01, fenced=True)
    unfenced = Span("P", "t2", 40.02, 40.03, 40.1)
    assert held_counts([fenced, unfenced], [hold], IDS) == {
        "held_past_end": 1,
        "commits_delayed": 1,
    }
    leader_only = PathSpell("hold", "k1", 10.0, 40.0, LEADER)  # not its coordinator
    assert held_counts([fenced], [leader_only], IDS)["held_past_end"] == 0


def test_a_delay_delays_commits_but_holds_nothing_and_a_follower_holds_nothing() -> None:
    spells = [
        PathSpell("delay", "k2", 10.0, 40.0, COORDINATOR),
        PathSpell("hold", "k3", 10.0, 40.0, ("follower p1",)),
    ]
    spans = [Span("P", "t1", 11.0, 12.0, 13.0), Span("P", "t2", 14.0, None, None)]
    assert held_counts(spans, spells, IDS) == {"held_past_end": 0, "commits_delayed": 1}
