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

EXPECTATIONS = ("loss", "safe", "unavailable", "duplicates", "no-duplicates", "reordered")
COMBINABLE = frozenset({"duplicates", "reordered"})


def known_expectation(value: str) -> str:
    words = value.split("+")
    for word in words:
        if word not in EXPECTATIONS:
            raise ValueError(f"expect {word!r} is not one of {', '.join(EXPECTATIONS)}")
    if len(words) > 1 and not set(words) <= COMBINABLE:
        raise ValueError(f"only {' and '.join(sorted(COMBINABLE))} can be expected together")
    return value
