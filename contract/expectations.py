"""The words a scenario uses to say what its configuration promises, read by the scenario
schema and by the checker's judges alike.

loss / safe / unavailable: the claims catalogue's words. duplicates: at least one message
duplicated and nothing acknowledged lost; no-duplicates: nothing lost and nothing duplicated. On
Kafka a duplicate is a message written at two offsets (the observed log); elsewhere, one
delivered twice. reordered: at least one message first delivered after a later one of its
producer (FIFO per producer broken) and nothing acknowledged lost. A list of words (R7:
[duplicates, reordered]) expects every one of them; it is kept as one string joined by "+".
"""

from __future__ import annotations

from typing import Literal, get_args

# Each word and what a run must show for the verdict to match it.
MEANINGS: dict[str, str] = {
    "loss": "At least one acknowledged (confirmed) message is missing from what the readers and "
    "the final read saw: the configuration can lose data under these faults.",
    "safe": "No acknowledged message is lost and (Kafka) no offset held two different messages, "
    "with the faults in effect: a run whose faults never brought about what the scenario "
    "requires is inconclusive, never safe.",
    "unavailable": "Nothing acknowledged is lost, and sends were refused or left unknown while a "
    "fault was in effect (or a client blocked inside one): the configuration chooses "
    "unavailability over loss.",
    "duplicates": "At least one message duplicated (Kafka: written at two offsets; RabbitMQ: "
    "delivered twice) and nothing acknowledged lost.",
    "no-duplicates": "Nothing lost and nothing duplicated.",
    "reordered": "At least one message first delivered after a later one of its producer (FIFO "
    "per producer broken) and nothing acknowledged lost.",
}
EXPECTATIONS = tuple(MEANINGS)
COMBINABLE = frozenset({"duplicates", "reordered"})


def known_expectation(value: str) -> str:
    words = value.split("+")
    for word in words:
        if word not in EXPECTATIONS:
            raise ValueError(f"expect {word!r} is not one of {', '.join(EXPECTATIONS)}")
    if len(words) > 1 and not set(words) <= COMBINABLE:
        raise ValueError(f"only {' and '.join(sorted(COMBINABLE))} can be expected together")
    return value


# A metadata probe's answers (RabbitMQ's `declare` step: a throwaway queue declared through one
# node), each with what it means; a scenario's expect_declares lists the answers a side may get.
DECLARE_MEANINGS: dict[str, str] = {
    "accepted": "The node declared the queue (declare-ok).",
    "refused": "The broker answered with an error: it closed the channel or the connection, with "
    "its reply code and text (Khepri on a minority: 541 INTERNAL_ERROR, the metadata store "
    "operation timed out).",
    "timed-out": "No answer within the step's `within`: the probe gave up waiting.",
    "unreachable": "No AMQP connection to the node could be opened, or it was lost before an "
    "answer (a paused node's listener is closed; the clients' path was cut).",
}
DeclareWord = Literal["accepted", "refused", "timed-out", "unreachable"]
DECLARE_ANSWERS: tuple[str, ...] = get_args(DeclareWord)
# Where a probe's queue is found once the cluster has reunited: on no node, or on every node
# that answered.
AfterHeal = Literal["nowhere", "everywhere"]
AFTER_HEAL: tuple[str, ...] = get_args(AfterHeal)
