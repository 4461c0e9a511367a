"""The sandbox's hostile modes: parameters checked like the fault modes' (the pages
themselves are exercised by tests/test_limits.py, tests/test_dropped.py and tests/chaos/)."""

from __future__ import annotations

import pytest

from pricewatch.sandbox import ModeError
from pricewatch.sandbox._modes import validate


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        pytest.param("bomb", {"size": 0}, "bomb.size must be an integer >= 1", id="bomb-size"),
        pytest.param("huge", {"size": 1.5}, "huge.size must be an integer", id="huge-float"),
        pytest.param("huge", {"chunked": "yes"}, "huge.chunked must be true", id="chunked"),
        pytest.param("trickle", {"interval": -1}, "trickle.interval must be", id="interval"),
        pytest.param("trickle", {"chunk": True}, "trickle.chunk must be", id="chunk-bool"),
        pytest.param("inject", {"fraction": 2}, "inject.fraction must be <= 1", id="fraction"),
        pytest.param("malformed", {"size": 1}, "unknown parameter", id="unknown"),
    ],
)
def test_bad_parameters_are_refused_naming_them(name: str, params: dict, message: str) -> None:
    with pytest.raises(ModeError, match=message):
        validate(name, params)


def test_defaults_are_filled_in() -> None:
    params, duration = validate("huge", {"fraction": 0.5})
    assert params == {"fraction": 0.5, "size": 16 * 1024 * 1024, "chunked": False}
    assert duration is None
