"""Counts as the README writes them (60k, 1M, 10M, 3) for every option and variable a user
sets; anything else is a one-line ValueError saying what was given."""

from __future__ import annotations

_SCALE = {"k": 1_000, "m": 1_000_000}


def parse_count(text: str) -> int:
    """ "3", "60k", "1M", "10M" -> a positive whole number."""
    word = text.strip().lower().replace("_", "")
    scale = _SCALE.get(word[-1:], 1)
    digits = word[:-1] if word[-1:] in _SCALE else word
    if not digits.isascii() or not digits.isdigit() or int(digits) == 0:
        raise ValueError(f"{text!r} is not a count such as 3, 60k, 1M or 10M")
    return int(digits) * scale


def parse_counts(text: str) -> list[int]:
    """ "60k,1M,10M" -> [60000, 1000000, 10000000]."""
    return [parse_count(word) for word in text.split(",")]
