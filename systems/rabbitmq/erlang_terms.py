"""Erlang terms as RabbitMQ's files are written in them (cuttlefish schemas, enabled_plugins,
advanced.config): the plain data they hold (atoms, numbers, strings, lists, tuples), read form by
form with the comments above each, and the shape of an advanced.config checked."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


class Atom(str):
    """An Erlang atom, told apart from a string (a char list)."""


class Unreadable(Exception):
    """A term outside the plain data a mapping is written in (a fun, a variable)."""


_TOKEN = re.compile(
    r"""
      (?P<ws>\s+)
    | (?P<comment>%[^\n]*)
    | (?P<string>"(?:[^"\\]|\\.)*")
    | (?P<qatom>'(?:[^'\\]|\\.)*')
    | (?P<char>\$(?:\\(?:x\{[0-9A-Fa-f]+\}|[0-7]{1,3}|\^.|.)|.))
    | (?P<number>\d[\d_]*\#[0-9A-Za-z_]+|\d[\d_]*(?:\.\d[\d_]*(?:[eE][+-]?\d+)?)?)
    | (?P<atom>[a-z][A-Za-z0-9_@]*)
    | (?P<var>[A-Z_][A-Za-z0-9_@]*)
    | (?P<dot>\.(?=\s|%|\Z))
    | (?P<op>->|=>|:=|<<|>>|\|\||=:=|=/=|==|/=|=<|>=|\+\+|--|::|\.\.\.|\.\.|<-|<=|.)
    """,
    re.VERBOSE | re.DOTALL,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "s": " ", "e": "\x1b", "d": "\x7f", "b": "\b"}


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str


@dataclass
class Form:
    tokens: list[_Tok]
    comments: list[str]  # the comment lines between the form before and this one


def unescape(body: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m[1], m[1]), body)


def forms(text: str) -> Iterator[Form]:
    """The top-level forms of an Erlang terms file, each with the comments above it."""
    tokens: list[_Tok] = []
    comments: list[str] = []
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup or "op"
        if kind == "ws":
            continue
        if kind == "comment":
            if not tokens:
                comments.append(m.group().lstrip("%").strip())
            continue
        if kind == "dot":
            if tokens:
                yield Form(tokens, comments)
            tokens, comments = [], []
            continue
        tokens.append(_Tok(kind, m.group()))


class Terms:
    """Plain Erlang data (atoms, numbers, strings, lists, tuples) from a form's tokens."""

    def __init__(self, tokens: list[_Tok]) -> None:
        self.tokens = tokens
        self.i = 0

    def _next(self) -> _Tok:
        if self.i >= len(self.tokens):
            raise Unreadable("the form ends early")
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def _peek(self) -> _Tok | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def term(self) -> Any:
        tok = self._next()
        if tok.kind == "atom":
            return Atom(tok.text)
        if tok.kind == "qatom":
            return Atom(unescape(tok.text[1:-1]))
        if tok.kind == "string":
            parts = [unescape(tok.text[1:-1])]
            while (nxt := self._peek()) is not None and nxt.kind == "string":
                parts.append(unescape(self._next().text[1:-1]))
            return "".join(parts)
        if tok.kind == "number":
            return _number(tok.text)
        if tok.kind == "char":
            body = tok.text[1:]
            return ord(unescape(body)[0]) if body.startswith("\\") else ord(body)
        if tok.text == "-" and (nxt := self._peek()) is not None and nxt.kind == "number":
            return -_number(self._next().text)
        if tok.text in ("{", "["):
            close = "}" if tok.text == "{" else "]"
            items = self._sequence(close)
            return tuple(items) if close == "}" else items
        raise Unreadable(f"{tok.text!r} is not plain data")

    def _sequence(self, close: str) -> list[Any]:
        items: list[Any] = []
        if (nxt := self._peek()) is not None and nxt.text == close:
            self.i += 1
            return items
        while True:
            items.append(self.term())
            sep = self._next()
            if sep.text == close:
                return items
            if sep.text != ",":
                raise Unreadable(f"{sep.text!r} in a {close} sequence")


def _number(text: str) -> int | float:
    text = text.replace("_", "")
    if "#" in text:
        base, digits = text.split("#", 1)
        return int(digits, int(base))
    return float(text) if "." in text else int(text)


def parse_terms(text: str) -> Any:
    """The first term of an Erlang terms text (an enabled_plugins file); ValueError if none."""
    for form in forms(text):
        try:
            return Terms(form.tokens).term()
        except Unreadable as e:
            raise ValueError(str(e)) from None
    raise ValueError("no term")


_OPENERS = {"(": ")", "[": "]", "{": "}", "<<": ">>"}
_CLOSERS = set(_OPENERS.values())


def terms_refusal(text: str) -> str | None:
    """Why a text is not one Erlang list closed by `].` with its brackets balanced (the shape
    of advanced.config), else None. What the terms mean is the node's to say."""
    stack: list[tuple[str, int]] = []
    tokens: list[str] = []
    for m in _TOKEN.finditer(text):
        kind, tok = m.lastgroup or "op", m.group()
        if kind in ("ws", "comment"):
            continue
        line = text.count("\n", 0, m.start()) + 1
        if tokens and tokens[-1] == "." and not stack:
            return f"more than one term (line {line}): it holds one list, [{{app, [...]}}]."
        if kind == "op" and tok in ('"', "'"):
            return f"the quote {tok} at line {line} is never closed"
        if kind == "op" and tok in _OPENERS:
            stack.append((tok, line))
        elif kind == "op" and tok in _CLOSERS:
            if not stack:
                return f"{tok} at line {line} closes nothing"
            opened, at = stack.pop()
            if _OPENERS[opened] != tok:
                return f"{tok} at line {line} does not close the {opened} of line {at}"
        elif kind == "dot" and stack:
            opened, at = stack[-1]
            return f"the term ends at line {line} inside the {opened} of line {at}"
        tokens.append("." if kind == "dot" else tok)
    if stack:
        opened, at = stack[-1]
        return f"the {opened} of line {at} is never closed"
    if tokens[-2:] != ["]", "."] or tokens[0] != "[":
        return "it must be one list ending with ].: [{rabbit, [{key, value}]}]."
    return None
