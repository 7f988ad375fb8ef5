"""Whether what happened matches what the claim expects."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from checkers.share_groups import broken_words, judged_counts, lost_by_group
from checkers.windows import overlap

METRICS = (
    "acked",
    "received",
    "lost",
    "unseen",
    "duplicated",
    "unflagged",
    "reordered",
    "unexpected",
    "recovered",
    "dead_lettered",
    "both",
)
DEAD_LETTER_METRICS = ("dead_lettered", "both")


@dataclass(frozen=True)
class Judgement:
    outcome: str  # safe | loss | unavailable | anomalies | inconclusive
    matched: bool
    reason: str


@dataclass(frozen=True)
class Counts:
    """What the judges read of a checked history: every count already added up."""

    acked: int
    refused: int  # sends refused or left unknown, anywhere
    lost: int  # the most any group lost: groups read the same acknowledged messages
    lost_where: str  # " in g", or " (g1 n, g2 m)" for several losing groups
    unexpected: int
    inconsistent_offsets: int
    duplicated: int
    duplicated_how: str  # "written at two offsets or more" (Kafka) or "delivered twice or more"
    replay_flags: str  # how replays were marked, where the broker marks them
    reordered: int
    in_fault_sends: int  # sends refused or unknown while a fault was in effect
    stalls: dict[str, Any]
    drain_complete: bool = True
    # Transactions (checkers.transactions), summed over the read_committed groups: records of
    # aborted transactions read, and committed transactions seen in part.
    aborted_reads: int = 0
    torn: int = 0
    # Transactions of unknown outcome one read_committed group saw and another read past
    # without any of their records: committed and lost to it, or aborted and read.
    unknown_missed: int = 0
    # Commits of instances a newer instance of their transactional id had fenced, which took
    # effect (acknowledged, or read by a read_committed group): KIP-98's zombie fencing broken.
    zombie_commits: int = 0
    # An exactly-once copy's output duplicates that its input already held (checkers.eos):
    # left out of `duplicated`, said beside the verdict.
    duplicated_from_input: int = 0
    # Share groups (checkers.share_groups): records delivered again after a confirmed accept,
    # past the delivery count limit, or again after a confirmed reject. (Their lost messages
    # count in `lost`, each share group as a group.)
    share_duplicated: int = 0
    share_over_limit: int = 0
    share_rejected_redelivered: int = 0
    share_broken: str = ""  # those counts in words, empty for none

    @property
    def share_anomalies(self) -> int:
        return self.share_duplicated + self.share_over_limit + self.share_rejected_redelivered

    @classmethod
    def of(
        cls,
        groups: dict[str, dict[str, int]],
        sends: dict[str, int],
        drain_complete: bool = True,
        log: dict[str, Any] | None = None,
        stalls: dict[str, Any] | None = None,
        unavailability: dict[str, Any] | None = None,
        transactions: dict[str, Any] | None = None,
        share_groups: dict[str, Any] | None = None,
    ) -> Counts:
        shared = {f"share group {g}": {"lost": n} for g, n in lost_by_group(share_groups).items()}
        lost, where = _lost_in({**groups, **shared})
        share = judged_counts(share_groups)
        txn_groups = (transactions or {}).get("groups", {}).values()
        duplicated, how = _duplicates_of(groups, log)
        # An exactly-once copy owes each input record one copy: a record its producer wrote
        # twice is in the output twice by the input's doing (checkers.eos).
        copy = (transactions or {}).get("copy") or {}
        from_input = (
            copy.get("output_duplicates_from_input", 0) if log and log.get("positions") else 0
        )
        duplicated = max(0, duplicated - from_input)
        if from_input:
            how += f" (besides {from_input} the input's producer wrote twice, copied once each)"
        return cls(
            acked=sends.get("ok", 0),
            refused=sends.get("fail", 0) + sends.get("info", 0),
            lost=lost,
            lost_where=where,
            unexpected=sum(g["unexpected"] for g in groups.values()),
            inconsistent_offsets=(log or {}).get("inconsistent_offsets", 0),
            duplicated=duplicated,
            duplicated_how=how,
            replay_flags=_replay_flags(groups, log),
            reordered=sum(g["reordered"] for g in groups.values()),
            in_fault_sends=sum(u.get("in_fault_sends", 0) for u in (unavailability or {}).values()),
            stalls=stalls or {},
            drain_complete=drain_complete,
            aborted_reads=sum(g["aborted_reads"] for g in txn_groups),
            torn=sum(g["torn"] for g in txn_groups),
            unknown_missed=int((transactions or {}).get("unknown_missed") or 0),
            zombie_commits=int((transactions or {}).get("zombie_commits") or 0),
            duplicated_from_input=from_input,
            share_duplicated=share["duplicated"],
            share_over_limit=share["over_limit"],
            share_rejected_redelivered=share["rejected_redelivered"],
            share_broken=broken_words(share_groups),
        )


def judge(c: Counts, expect: str | None) -> Judgement:
    """The verdict. Without an expectation, any anomaly is a failure; with several words
    ("duplicates+reordered"), each must hold. First what no expectation survives (a loss the
    drain cannot confirm, nothing acknowledged, messages never sent, a loss where the
    expectation promises none besides its own effect), then the expectation's own judge."""
    if expect and "+" in expect:
        return _every(c, expect.split("+"))
    if c.lost and not c.drain_complete:
        # A message still sitting in a queue is not lost: we did not finish reading.
        return Judgement(
            "inconclusive",
            False,
            f"{c.lost} acknowledged messages not received, but a queue still held messages "
            "when the drain timed out",
        )
    if expect is None:
        return _no_expectation(c)
    if c.acked == 0 and expect != "unavailable":
        return Judgement("inconclusive", False, "no message was acknowledged: nothing was tested")
    if c.unexpected:
        return Judgement("anomalies", False, f"{c.unexpected} received messages were never sent")
    if c.aborted_reads or c.torn or c.unknown_missed or c.zombie_commits or c.share_anomalies:
        return Judgement("anomalies", False, _isolation_broken(c))
    if c.lost and expect in NOTHING_LOST_BESIDES:
        return Judgement("loss", False, f"{c.lost} acknowledged messages lost{c.lost_where}")
    if expect not in JUDGES:
        raise ValueError(f"unknown expectation {expect!r}")
    return JUDGES[expect](c)


def _isolation_broken(c: Counts) -> str:
    """What read_committed groups saw that the isolation level promises they never see, and
    the commits of fenced instances that fencing promises never take effect."""
    broken = []
    if c.aborted_reads:
        broken.append(f"{c.aborted_reads} records of aborted transactions read (aborted read)")
    if c.torn:
        broken.append(f"{c.torn} committed transactions seen in part (torn)")
    if c.unknown_missed:
        broken.append(
            f"{c.unknown_missed} transactions of unknown outcome seen by one group and read past "
            "unseen by another"
        )
    said = ["read_committed broken: " + ", ".join(broken)] if broken else []
    if c.zombie_commits:
        said.append(
            f"fencing broken: {c.zombie_commits} commits of fenced instances took effect "
            "(zombie commit)"
        )
    if c.share_broken:
        said.append(c.share_broken)
    return "; ".join(said)


# Each of these says what else happened, on top of nothing acknowledged lost.
NOTHING_LOST_BESIDES = frozenset({"unavailable", "reordered", "duplicates", "no-duplicates"})


def _every(c: Counts, words: list[str]) -> Judgement:
    each = [judge(c, word) for word in words]
    if failed := [j for j in each if not j.matched]:
        return failed[0]
    return Judgement("+".join(j.outcome for j in each), True, "; ".join(j.reason for j in each))


def _no_expectation(c: Counts) -> Judgement:
    anomalies = {
        "lost": c.lost,
        "unexpected": c.unexpected,
        "duplicated": c.duplicated,
        "reordered": c.reordered,
        "inconsistent offsets": c.inconsistent_offsets,
        "aborted reads": c.aborted_reads,
        "torn transactions": c.torn,
        "unknown transactions read past unseen": c.unknown_missed,
        "zombie commits": c.zombie_commits,
        "share records accepted twice or delivered after a confirmed accept": c.share_duplicated,
        "share records delivered past the delivery count limit": c.share_over_limit,
        "share records delivered again after a confirmed reject": c.share_rejected_redelivered,
    }
    if found := {k: v for k, v in anomalies.items() if v}:
        return Judgement("anomalies", False, ", ".join(f"{v} {k}" for k, v in found.items()))
    return Judgement("safe", True, f"{c.acked} acknowledged, none lost")


def _loss(c: Counts) -> Judgement:
    if c.lost:
        return Judgement(
            "loss", True, f"reproduced: {c.lost} acknowledged messages lost{c.lost_where}"
        )
    return Judgement("safe", False, f"not reproduced: all {c.acked} acknowledged were received")


def _safe(c: Counts) -> Judgement:
    """Where the history names offsets (Kafka), the observed log speaks too: an offset holding
    two different messages refutes a safe claim."""
    if c.lost:
        return Judgement(
            "loss", False, f"refuted: {c.lost} acknowledged messages lost{c.lost_where}"
        )
    if c.inconsistent_offsets:
        return Judgement(
            "anomalies",
            False,
            f"refuted: {c.inconsistent_offsets} offsets held two different messages (a log "
            "truncated after a fail-over), though no acknowledged message was lost",
        )
    return Judgement("safe", True, f"no acknowledged message lost ({c.acked} acknowledged)")


def _unavailable(c: Counts) -> Judgement:
    """Sends refused or left unknown while a fault was in effect, or a group blocked inside a
    fault (no send acknowledged and nothing delivered for a second or more: a queue
    synchronising a mirror holds its publishers' confirms rather than refuse them). Sends
    refused or unknown outside every fault window (a publisher's in-flight sends when it stops
    at its deadline) are not the unavailability a claim speaks of."""
    if c.in_fault_sends:
        return Judgement(
            "unavailable",
            True,
            f"{c.in_fault_sends} sends refused or unknown while a fault was in effect, none "
            "acknowledged lost",
        )
    if blocked := longest_stall_in_faults(c.stalls):
        group, stall = blocked
        return Judgement(
            "unavailable",
            True,
            f"{group} blocked {stall['in_fault_seconds']:.1f} s inside a fault (no send "
            "acknowledged, nothing delivered), none acknowledged lost",
        )
    if blocked := longest_stall_in_faults(c.stalls, SYNC_SECONDS):
        group, stall = blocked
        return Judgement(
            "unavailable",
            True,
            f"{group} blocked {stall[SYNC_SECONDS]:.1f} s while the broker synchronised a "
            "mirror (its log), after the fault (no send acknowledged, nothing delivered), "
            "none acknowledged lost",
        )
    if c.refused:
        return Judgement(
            "safe",
            False,
            f"not reproduced: {c.refused} sends refused or unknown, but none while a fault "
            "was in effect, and no group blocked inside one",
        )
    return Judgement("safe", False, "not reproduced: every send was acknowledged")


def _reordered(c: Counts) -> Judgement:
    if c.reordered:
        return Judgement(
            "reordered",
            True,
            f"reproduced: {c.reordered} messages first delivered after a later one of their "
            "producer",
        )
    return Judgement("safe", False, "not reproduced: every producer's messages came first in order")


def _duplicates(c: Counts) -> Judgement:
    """On a Kafka log a duplicate is a message written at two offsets (a retry written twice),
    not a redelivery of one offset."""
    if c.duplicated:
        return Judgement(
            "duplicates",
            True,
            f"reproduced: {c.duplicated} messages {c.duplicated_how}{c.replay_flags}",
        )
    return Judgement("safe", False, f"not reproduced: no message {c.duplicated_how}")


def _no_duplicates(c: Counts) -> Judgement:
    if c.duplicated:
        return Judgement(
            "duplicates", False, f"refuted: {c.duplicated} messages {c.duplicated_how}"
        )
    besides = (
        f"; {c.duplicated_from_input} records the input's producer wrote twice are in the "
        "output twice, copied once each"
        if c.duplicated_from_input
        else ""
    )
    return Judgement("safe", True, f"no loss, no duplicate ({c.acked} acknowledged){besides}")


# One judge per expectation word (contract.expectations.EXPECTATIONS).
JUDGES: dict[str, Callable[[Counts], Judgement]] = {
    "loss": _loss,
    "safe": _safe,
    "unavailable": _unavailable,
    "reordered": _reordered,
    "duplicates": _duplicates,
    "no-duplicates": _no_duplicates,
}


# A stall's seconds inside the windows in which the broker logged a mirror synchronisation
# (checkers.run adds them from the run's manifest).
SYNC_SECONDS = "in_sync_seconds"


def longest_stall_in_faults(
    stalls: dict[str, Any] | None, key: str = "in_fault_seconds"
) -> tuple[str, dict[str, Any]] | None:
    """The group and stall with the most seconds inside fault windows (or, with key
    SYNC_SECONDS, inside the broker's logged synchronisations), if any had any."""
    best = max(
        ((g, s) for g, v in (stalls or {}).items() for s in v["longest"]),
        key=lambda gs: gs[1].get(key, 0.0),
        default=None,
    )
    return best if best and best[1].get(key, 0.0) > 0 else None


def with_sync_windows(
    stalls: dict[str, Any], mirrored_queues: dict[str, Any] | None, run_end: float
) -> dict[str, Any]:
    """Each stall with SYNC_SECONDS: its seconds inside a synchronisation RabbitMQ logged
    (a sync with no "complete" lasts to the end of the run). R5's claim is that the sync,
    which follows the restart once the node has booted, blocks the queue."""
    syncs = (mirrored_queues or {}).get("syncs") or []
    windows = [(s["start"], s["end"] if s["end"] is not None else run_end) for s in syncs]
    for group in stalls.values():
        for stall in group["longest"]:
            stall[SYNC_SECONDS] = round(overlap(stall["start"], stall["end"], windows), 3)
    return stalls


def _duplicates_of(
    groups: dict[str, dict[str, int]], log: dict[str, Any] | None
) -> tuple[int, str]:
    """How many messages were duplicated, and in what words."""
    if log and log.get("positions"):
        return log.get("duplicate_offsets", 0), "written at two offsets or more"
    return sum(g["duplicated"] for g in groups.values()), "delivered twice or more"


def _replay_flags(groups: dict[str, dict[str, int]], log: dict[str, Any] | None) -> str:
    """How the replays were marked, where the broker marks them (RabbitMQ's redelivered flag):
    a replay without it is not the redelivery the broker promises to announce."""
    if log and log.get("positions"):
        return ""  # Kafka: a duplicate is a second offset, and no delivery carries a flag
    unflagged = sum(g.get("unflagged", 0) for g in groups.values())
    if unflagged:
        return f", {unflagged} of them replayed without the redelivered flag"
    return ", every replay flagged redelivered"


def _lost_in(groups: dict[str, dict[str, int]]) -> tuple[int, str]:
    """The most any group lost, and where: " in g" for one losing group, " (g1 n, g2 m)" for
    several."""
    losing = {name: g["lost"] for name, g in sorted(groups.items()) if g["lost"]}
    most = max(losing.values(), default=0)
    if len(losing) <= 1:
        return most, "".join(f" in {name}" for name in losing)
    return most, " (" + ", ".join(f"{name} {n}" for name, n in losing.items()) + ")"


def missing_errors(expected: list[dict[str, str]], errors: dict[str, dict[str, int]]) -> list[str]:
    """The expected client errors (scenario expect_errors) that no outcome showed."""
    missing = []
    for want in expected:
        f, text = want.get("f", "send"), want.get("error", "")
        seen = errors.get(f, {})
        if not any(text in name for name in seen):
            missing.append(f"no {f} failed with {text}" if text else f"no {f} failed")
    return missing


def placement_mismatches(placement: list[dict[str, Any]]) -> list[str]:
    """Leader-placement snapshots whose balance is not what the step expected."""
    out = []
    for snap in placement:
        want = snap.get("expect_balanced")
        if want is not None and bool(snap.get("balanced")) != want:
            label = snap.get("label") or "snapshot"
            state = "balanced" if snap.get("balanced") else "not balanced"
            out.append(f"leaders at {label} {state} (leaders per broker {snap.get('per_broker')})")
    return out


def with_producers_ended(j: Judgement, exit_codes: dict[str, int] | None) -> Judgement:
    """A pass that says nothing went wrong is inconclusive when a producer ended with an error
    (an exit code above 0: a crash; one the harness killed at its deadline had sent what it
    could): what it never sent was never tested (a loss found stands)."""
    failed = {name: code for name, code in sorted((exit_codes or {}).items()) if code > 0}
    if not failed or not j.matched or j.outcome not in ("safe", "no-duplicates", "unavailable"):
        return j
    said = ", ".join(f"{name} exited {code}" for name, code in failed.items())
    return Judgement(
        "inconclusive", False, f"{said} (see logs/): it would have been {j.outcome}: {j.reason}"
    )


def with_client_expectations(j: Judgement, missing: list[str], placement: list[str]) -> Judgement:
    """A matching judgement stays one only if the clients saw what the claim says they see."""
    problems = missing + placement
    if not j.matched or not problems:
        return j
    return Judgement(j.outcome, False, f"{j.reason}; but {'; '.join(problems)}")


CLAIM_WORDS = ("reproduced", "not reproduced", "refuted", "inconclusive")


def claim_word(verdict: dict[str, Any]) -> str:
    """What a run says of its claim, in one of CLAIM_WORDS.

    reproduced: the run showed what the claim says (the loss, the refusal, or, for a safe
    claim, no loss under the fault); refuted: it showed the opposite of a guarantee (an
    acknowledged message lost, or duplicated, where the claim says none is); not reproduced:
    the claimed effect did not appear (nothing lost where loss was claimed, or the error the
    claim names never seen); inconclusive: the run cannot say (nothing acknowledged, or the
    drain could not read everything)."""
    if verdict["outcome"] == "inconclusive":
        return "inconclusive"
    if verdict["matched"]:
        return "reproduced"
    guaranteed_no_loss = verdict.get("expect") in ("safe", "unavailable", "no-duplicates")
    lost = sum(g.get("lost", 0) for g in verdict["groups"].values())
    lost += sum(lost_by_group(verdict.get("share_groups")).values())
    if (guaranteed_no_loss and lost) or verdict["outcome"] == "anomalies":
        return "refuted"
    if verdict.get("expect") == "no-duplicates" and verdict["outcome"] == "duplicates":
        return "refuted"
    return "not reproduced"
