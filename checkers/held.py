"""Transactions whose requests the clients' proxy held or delayed (the hold and delay faults):
the window the anomalies of a late request need, told from the proxy's spells and the clients'
own marks.

A request the proxy held reaches its broker only when the hold is healed, even when its client
gave up on it and closed the connection meanwhile. A transaction's requests go, from its begin to
its end (its records are flushed at its commit), to the leaders of the partitions it writes and
to its transactional id's coordinator (AddPartitionsToTxn under transaction version 1, EndTxn).
Per transaction, from its span (begin, commit asked, end as its client marked it, or its
client's last event) and whether its client learnt at its end that it had been fenced:
  held_past_end   it was open while a hold on one of those nodes began or lasted, and it ended
                  before that hold was healed: a request of it was delivered after its
                  transaction had ended (KIP-890's late produce or EndTxn). Or its commit was in
                  flight through a hold on its coordinator and its client learnt, at the end,
                  that it had been fenced: the coordinator had ended it meanwhile (its
                  transaction timeout), and the held EndTxn came after
  commits_delayed its commit was in flight (asked, not yet ended) while its coordinator's link
                  was delayed or held

The nodes' roles are those the step recorded as it began (its `resolve` event's `held`): a
leader that moved during the spell is not followed, and a transaction writing no partition of a
held leader is counted all the same (the workloads' transactions write every partition). Counts
of the window having opened, for the coverage; not anomalies.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from checkers.windows import PathSpell

HOLDING_OPS = frozenset({"hold"})
DELAYING_OPS = frozenset({"hold", "delay"})
COORDINATOR = "transaction-coordinator"


@dataclass(frozen=True)
class Span:
    """One transaction as its client marked it; `asked` None: its commit never asked, `end`
    None: it never ended; `fenced`: its end said its instance had been fenced."""

    producer: str
    txn: str
    begin: float
    asked: float | None
    end: float | None
    fenced: bool = False


def _coordinates(spell: PathSpell, transactional_ids: set[str]) -> bool:
    return any(f"{COORDINATOR} {tid}" in spell.roles for tid in transactional_ids)


def _leads(spell: PathSpell) -> bool:
    return any(role.startswith("leader ") for role in spell.roles)


def _open_in(span: Span, spell: PathSpell) -> bool:
    return span.begin < spell.end and (span.end is None or span.end > spell.start)


def _committing_in(span: Span, spell: PathSpell) -> bool:
    return span.asked is not None and span.asked < spell.end and _open_in(span, spell)


def held_past_end(span: Span, spells: Iterable[PathSpell], transactional_ids: set[str]) -> bool:
    for s in spells:
        if s.op not in HOLDING_OPS or not _open_in(span, s):
            continue
        coordinated = _coordinates(s, transactional_ids)
        if span.end is not None and span.end < s.end and (coordinated or _leads(s)):
            return True
        if coordinated and span.fenced and _committing_in(span, s):
            return True
    return False


def commit_delayed(span: Span, spells: Iterable[PathSpell], transactional_ids: set[str]) -> bool:
    return any(
        s.op in DELAYING_OPS and _committing_in(span, s) and _coordinates(s, transactional_ids)
        for s in spells
    )


def held_counts(
    spans: Iterable[Span], spells: list[PathSpell], transactional_ids: dict[str, set[str]]
) -> dict[str, int]:
    """The two counts of the module's docstring over every transaction; `transactional_ids`:
    each producer's (a restarted client's instances share one)."""
    held = delayed = 0
    for span in spans:
        ids = transactional_ids.get(span.producer, set())
        held += held_past_end(span, spells, ids)
        delayed += commit_delayed(span, spells, ids)
    return {"held_past_end": held, "commits_delayed": delayed}
