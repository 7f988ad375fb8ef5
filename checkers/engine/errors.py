"""The one error a check says in a line: the engine raises it when it has no Spark to check on,
the analyses when the history cannot be checked; the commands print it and exit 2."""

from __future__ import annotations


class HistoryError(Exception):
    """A history that cannot be checked (malformed line, no files); one line for the user."""
