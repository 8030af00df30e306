"""A trailing newline is not part of an identifier: every identifier check matches the whole string."""

from __future__ import annotations

from typing import Literal

import pytest

import kag
from kag.errors import InvalidInputError, SchemaError
from kag.query.cypher import quote, quote_name
from kag.query.filters import compile_cypher, validate_filter


@pytest.mark.parametrize("key", ["lang\n", "lang\r\n", "a.b\n"])
def test_filter_keys_with_a_trailing_newline_are_refused(key: str) -> None:
    with pytest.raises(InvalidInputError):
        validate_filter({key: "en"})


def test_a_label_with_a_trailing_newline_is_refused() -> None:
    with pytest.raises((SchemaError, ValueError)):

        class Bad(kag.Entity):
            label: Literal["Label\n"] = "Label\n"
            name: str


def test_quoting_refuses_a_trailing_newline() -> None:
    for text in ("City\n", "City\n\n"):
        with pytest.raises((SchemaError, ValueError)):
            quote(text)
        with pytest.raises(ValueError):
            quote_name(text)


def test_compiled_filter_keeps_newlines_out_of_the_query_text() -> None:
    params: dict[str, object] = {}
    text = compile_cypher({"lang": "en"}, "n", params)
    assert "\n" not in text and "en" not in text
    with pytest.raises(InvalidInputError):
        compile_cypher({"lang\n": "en"}, "n", {})
