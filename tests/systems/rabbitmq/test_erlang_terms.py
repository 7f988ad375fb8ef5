"""Erlang terms as RabbitMQ's files hold them: the shape of an advanced.config."""

from __future__ import annotations

import pytest

from systems.rabbitmq.erlang_terms import terms_refusal


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[].", None),
        ("[{rabbit, [{quorum_tick_interval, 1000}]}].\n", None),
        ('[{rabbit, [{a, "]}"}, {b, $]}]}]. % done\n', None),
        ("[{rabbit, [{a, 1}]}\n", "the [ of line 1 is never closed"),
        ("[{rabbit, [{a, 1}]]}].", "] at line 1 does not close the { of line 1"),
        ("[{rabbit,\n [{a, 1}]}]}].", "} at line 2 closes nothing"),
        ('[{rabbit, [{a, "x}]}].', 'the quote " at line 1 is never closed'),
        ("[{rabbit, []}]. [].", "more than one term"),
        ("{rabbit, []}.", "it must be one list ending with ]."),
        ("[{rabbit, []}]", "it must be one list ending with ]."),
    ],
)
def test_advanced_config_is_one_balanced_list(text: str, expected: str | None) -> None:
    line = terms_refusal(text)
    if expected is None:
        assert line is None
    else:
        assert line is not None and expected in line
