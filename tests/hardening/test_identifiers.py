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


# --------------------------------------------------------------------------- every other identifier check

NEWLINE_TAILS = ("\n", "\r\n", "\n\n")


@pytest.mark.parametrize("tail", NEWLINE_TAILS)
def test_metadata_keys_with_a_trailing_newline_are_not_filterable(tail: str) -> None:
    from kag.query.filters import flatten_metadata, matches

    assert flatten_metadata({f"lang{tail}": "en", "ok": 1, "nested": {f"x{tail}": 2}}) == {"meta__ok": 1}
    assert not matches({"lang": "en"}, {f"lang{tail}": "en"})


@pytest.mark.parametrize("tail", NEWLINE_TAILS)
def test_field_paths_aliases_and_prefixes_with_a_trailing_newline_are_refused(tail: str) -> None:
    from kag.query.filters import property_name

    with pytest.raises(InvalidInputError):
        property_name(f"author.name{tail}")
    with pytest.raises(InvalidInputError):
        compile_cypher({"lang": "en"}, f"n{tail}", {})
    with pytest.raises(InvalidInputError):
        compile_cypher({"lang": "en"}, "n", {}, prefix=f"f{tail}")


@pytest.mark.parametrize("tail", NEWLINE_TAILS)
def test_labels_and_field_names_with_a_trailing_newline_are_refused(tail: str) -> None:
    from kag.datamodels.base import check_identifier

    for what in ("label", "field"):
        with pytest.raises(SchemaError):
            check_identifier(f"City{tail}", what)
    assert check_identifier("City", "label") == "City"


@pytest.mark.parametrize("tail", NEWLINE_TAILS)
def test_names_with_a_trailing_newline_are_refused(tail: str) -> None:
    from kag.errors import ConfigError
    from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS
    from kag.programs.module import _check_name

    kb = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    with pytest.raises(ConfigError):
        kag.Knowledge(kb, name=f"docs{tail}")
    with pytest.raises(ConfigError):
        _check_name(f"retriever{tail}", "module name")
    assert _check_name("retriever", "module name") == "retriever"


async def test_a_schema_name_with_a_trailing_newline_is_refused() -> None:
    from kag.lm.lexical import LexicalLM

    lm = LexicalLM()
    with pytest.raises(InvalidInputError, match="schema_name"):
        await lm.generate([{"role": "user", "content": "hi"}], {"type": "object"}, schema_name="answer\n")
