"""The history line the checker reads: its columns, and why one line is malformed.

Spark's JSON reader parses the lines (checkers.read); parse_line states the same contract in
Python, and names the reason for the one malformed line a check reports.
"""

from __future__ import annotations

import json
from typing import Any

from contract.history import EVENT_TYPES

# The fields of an event the checker reads, as a Spark DDL schema; a row adds where it was.
EVENT_SCHEMA = (
    "time double, process string, type string, f string, stream string, `group` string, "
    "producer string, seq bigint, msg_id string, partition bigint, offset bigint, node string, "
    "error string, value string, redelivered boolean"
)
ROW_SCHEMA = f"{EVENT_SCHEMA}, file string, line bigint"
EVENT_COLUMNS = tuple(field.split()[0].strip("`") for field in EVENT_SCHEMA.split(", "))


def _opt(value: Any, kind: type | tuple[type, ...], name: str) -> Any:
    # JSON's true is a Python int too: a bool passes only where a bool is asked for.
    if value is None or (isinstance(value, kind) and (kind is bool or not isinstance(value, bool))):
        return value
    raise ValueError(f"{name} has the wrong type")


def parse_line(file: str, index: int, text: str) -> tuple[str, Any]:
    """("ok", row tuple), ("skip", None) for a blank line, or ("bad", (file, line, reason))."""
    line_no = index + 1
    if not text.strip():
        return ("skip", None)
    try:
        event = json.loads(text)
        if not isinstance(event, dict):
            raise ValueError("not a JSON object")
        time = event.get("time")
        if not isinstance(time, (int, float)) or isinstance(time, bool):
            raise ValueError("time is missing or not a number")
        process, type_, f = event.get("process"), event.get("type"), event.get("f")
        if not isinstance(process, str) or not isinstance(f, str):
            raise ValueError("process and f must be strings")
        if not isinstance(type_, str) or type_ not in EVENT_TYPES:  # a list is no set member
            raise ValueError(f"type {type_!r} is not one of invoke, ok, fail, info")
        msg_id = _opt(event.get("msg_id"), str, "msg_id")
        if f == "send" and msg_id is None:
            raise ValueError("a send needs msg_id")
        row = (
            float(time),
            process,
            type_,
            f,
            _opt(event.get("stream"), str, "stream"),
            _opt(event.get("group"), str, "group"),
            _opt(event.get("producer"), str, "producer"),
            _opt(event.get("seq"), int, "seq"),
            msg_id,
            _opt(event.get("partition"), int, "partition"),
            _opt(event.get("offset"), int, "offset"),
            _opt(event.get("node"), str, "node"),
            _opt(event.get("error"), str, "error"),
            None if event.get("value") is None else json.dumps(event["value"], sort_keys=True),
            _opt(event.get("redelivered"), bool, "redelivered"),
            file,
            line_no,
        )
    except ValueError as e:  # json.JSONDecodeError is a ValueError
        return ("bad", (file, line_no, str(e).split("\n")[0]))
    return ("ok", row)
