"""``kag.validation``'s bound checks: the one place the library's integer and number arguments are checked."""

from __future__ import annotations

import math

import pytest

from kag.errors import ConfigError, InvalidInputError
from kag.validation import check_int, check_number


def test_check_int_returns_the_value_within_its_bounds() -> None:
    assert check_int(3, name="epochs") == 3
    assert check_int(0, name="patience", minimum=0) == 0
    assert check_int(12, name="max_ngram", minimum=1, maximum=12) == 12
    assert check_int(-5, name="offset", minimum=None) == -5


@pytest.mark.parametrize(
    ("value", "bounds", "message"),
    [
        (0, {}, "epochs must be a positive integer, got 0."),
        (True, {}, "epochs must be a positive integer, got True."),  # bool is not a count
        (2.0, {}, "epochs must be a positive integer, got 2.0."),
        ("3", {}, "epochs must be a positive integer, got '3'."),
        (-1, {"minimum": 0}, "epochs must be an integer >= 0, got -1."),
        (13, {"maximum": 12}, "epochs must be an integer between 1 and 12, got 13."),
        (13, {"minimum": None, "maximum": 12}, "epochs must be an integer <= 12, got 13."),
    ],
)
def test_check_int_names_the_argument_and_its_range(value: object, bounds: dict[str, int], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        check_int(value, name="epochs", **bounds)  # type: ignore[arg-type]
    assert str(raised.value) == message


def test_check_number_accepts_finite_numbers_and_refuses_the_rest() -> None:
    assert check_number(1, name="weight", minimum=0, exclusive_minimum=True) == 1.0
    assert check_number(0.5, name="ratio", minimum=0.5, maximum=1) == 0.5
    for bad in (0, -1.0, math.nan, math.inf, True, "1"):
        with pytest.raises(ConfigError, match=r"weight must be a finite number > 0, got"):
            check_number(bad, name="weight", minimum=0, exclusive_minimum=True)
    with pytest.raises(InvalidInputError, match=r"score must be a finite number, got nan"):
        check_number(math.nan, name="score", error=InvalidInputError)
