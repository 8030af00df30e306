"""kag.lm.guards: bounded and grounded schemas, and the repetition detector (pure, no model)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from kag.datamodels.base import DataModel, Field
from kag.errors import InvalidInputError, JSONSchemaValidationError
from kag.lm.guards import NOT_FOUND_NOTE, NOT_FOUND_TEXT, RepetitionGuard, bound_schema, grounded_schema, grounded_text
from kag.lm.jsonschema_check import validate_json_schema


class Names(DataModel):
    """An answer that names entities."""

    names: list[str] = Field(description="The entities that answer the question")
    others: list[str] | None = Field(default=None, description="Other entities mentioned")
    explanation: str = Field(description="One short sentence")


def cut(text: str) -> str | None:
    """What the guard keeps of ``text`` plus its closer, or None when it sees no loop."""
    found = RepetitionGuard().feed(text)
    return None if found is None else text[: found.cut] + found.closer


# -- the repetition guard ---------------------------------------------------------------------


def test_a_looping_string_is_cut_after_its_first_occurrence() -> None:
    assert cut('{"answer": "Paris, Paris, Paris, Paris') == '{"answer": "Paris"'
    sentence = "The capital of France is Paris. "
    assert cut('{"answer": "' + sentence * 2) == '{"answer": "' + sentence.strip() + '"'
    assert cut('{"answer": "' + "na" * 12) is not None


def test_a_repeated_list_item_ends_the_list_after_the_last_distinct_item() -> None:
    assert cut('{"cities": ["Lyon", "Paris", "Lyon",') == '{"cities": ["Lyon", "Paris"]'
    assert cut('{"e": [{"n": "x", "l": "City"}, {"n": "x", "l": "City"}]') == '{"e": [{"n": "x", "l": "City"}]'


@pytest.mark.parametrize(
    "text",
    [
        '{"population": "1000000000000", "code": "..........", "pad": "          "}',
        '{"cities": ["Lyon", "Paris", "Nice"], "again": ["Lyon", "Paris"]}',  # items repeat across lists only
        '{"answer": "Paris is the capital of France and Lyon is a city of France."}',
        '{"answer": "a \\"quoted\\" word, then \\\\ a backslash"}',
        '{"keys": {"a": "x", "b": "x", "c": "x"}}',  # equal values in an object are no loop
    ],
)
def test_ordinary_answers_pass(text: str) -> None:
    json.loads(text)
    assert RepetitionGuard().feed(text) is None


def test_the_guard_reads_text_fed_piece_by_piece() -> None:
    guard = RepetitionGuard()
    pieces = ['{"c', 'ities": ["', "Ly", 'on", "Par', 'is", "', 'Lyon"', "]"]
    found = [guard.feed(piece) for piece in pieces]
    hits = [f for f in found if f is not None]
    assert len(hits) == 1 and guard.text[: hits[0].cut] + hits[0].closer == '{"cities": ["Lyon", "Paris"]'


# -- bounded schemas ----------------------------------------------------------------------------


def test_bound_schema_bounds_every_unbounded_array_and_keeps_the_original() -> None:
    schema = Names.model_json_schema()
    bounded = bound_schema(schema, 5)
    assert bounded["properties"]["names"]["maxItems"] == 5
    assert [v.get("maxItems") for v in bounded["properties"]["others"]["anyOf"]] == [5, None]
    assert "maxItems" not in schema["properties"]["names"]  # a copy
    enum_list = {"type": "object", "properties": {"l": {"type": "array", "items": {"enum": ["a", "b"]}}}}
    assert bound_schema(enum_list, 9)["properties"]["l"]["maxItems"] == 2
    with pytest.raises(InvalidInputError, match="max_items"):
        bound_schema(schema, 0)


# -- grounded schemas ---------------------------------------------------------------------------

NAME = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x24F), min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(
    allowed=st.lists(NAME, max_size=8, unique=True),
    answer=st.lists(NAME, max_size=10),
    others=st.none() | st.lists(NAME, max_size=4),
)
def test_no_answer_valid_under_the_grounded_schema_names_an_entity_outside_the_facts(
    allowed: list[str], answer: list[str], others: list[str] | None
) -> None:
    grounded = grounded_schema(Names.model_json_schema(), allowed)
    value: dict[str, Any] = {"names": answer, "others": others, "explanation": "x"}
    try:
        validate_json_schema(value, grounded)
    except JSONSchemaValidationError:
        return
    assert set(answer) <= set(allowed) and set(others or []) <= set(allowed)


@settings(max_examples=50, deadline=None)
@given(allowed=st.lists(NAME, max_size=8, unique=True))
def test_the_empty_list_always_says_not_found(allowed: list[str]) -> None:
    grounded = grounded_schema(Names.model_json_schema(), allowed)
    validate_json_schema({"names": [], "others": None, "explanation": "not found"}, grounded)
    validate_json_schema({"names": allowed, "others": [], "explanation": "all"}, grounded)
    assert NOT_FOUND_NOTE in grounded["properties"]["names"]["description"]


def test_grounded_schema_restricts_the_fields_asked_for_and_rejects_others() -> None:
    schema = Names.model_json_schema()
    only = grounded_schema(schema, ["Paris"], fields=["names"])
    assert only["properties"]["names"]["items"]["enum"] == ["Paris"]
    assert only["properties"]["others"] == schema["properties"]["others"]
    with pytest.raises(InvalidInputError, match="explanation"):
        grounded_schema(schema, ["Paris"], fields=["explanation"])
    with pytest.raises(InvalidInputError, match="strings"):
        grounded_schema(schema, [3])  # type: ignore[list-item]
    with pytest.raises(JSONSchemaValidationError):
        validate_json_schema({"names": ["Lyon"], "explanation": "x"}, grounded_schema(schema, []))


def test_text_spans_are_runs_of_words_as_written() -> None:
    from kag.lm.guards import text_spans

    spans = text_spans(["Which continent is New York City in?", "Is Côte d'Ivoire in Africa?"], max_words=3)
    assert {"New York City", "Côte d'Ivoire", "Africa", "Which"} <= set(spans)
    assert "New York City in" not in spans  # four words
    assert "City in?" not in spans and "Africa?" not in spans  # punctuation is not part of a word
    assert len(spans) == len(set(spans))


def test_spans_schema_narrows_only_the_named_string_fields() -> None:
    from kag.lm.guards import spans_schema

    schema = {
        "anyOf": [
            {
                "type": "object",
                "properties": {
                    "subject_similarity_search": {"type": "string", "description": "a name"},
                    "relation_label": {"type": "string", "enum": ["IsCapitalOf"]},
                },
            }
        ]
    }
    narrowed = spans_schema(schema, ["subject_similarity_search"], ["*", "France", "*"])
    properties = narrowed["anyOf"][0]["properties"]
    assert properties["subject_similarity_search"] == {
        "type": "string",
        "description": "a name",
        "enum": ["*", "France"],
    }
    assert properties["relation_label"] == {"type": "string", "enum": ["IsCapitalOf"]}
    assert "enum" not in schema["anyOf"][0]["properties"]["subject_similarity_search"]  # a copy
    validate_json_schema({"subject_similarity_search": "France"}, narrowed)
    with pytest.raises(JSONSchemaValidationError):
        validate_json_schema({"subject_similarity_search": "Paris"}, narrowed)


def test_choices_schema_narrows_enums_drops_unwritable_variants_and_refuses_an_empty_schema() -> None:
    from kag.lm.guards import choices_schema

    schema = {
        "anyOf": [
            {
                "type": "object",
                "properties": {"relation": {"type": "string", "enum": ["A", "B"]}, "flag": {"type": "boolean"}},
            },
            {
                "type": "object",
                "properties": {"relation": {"type": "string", "enum": ["C"]}, "flag": {"type": "boolean"}},
            },
        ]
    }
    narrowed = choices_schema(schema, {"relation": ["B", "Z"], "flag": [False]})
    assert narrowed["anyOf"] == [
        {
            "type": "object",
            "properties": {"relation": {"type": "string", "enum": ["B"]}, "flag": {"type": "boolean", "enum": [False]}},
        }
    ]
    assert schema["anyOf"][0]["properties"]["relation"]["enum"] == ["A", "B"]  # a copy
    with pytest.raises(InvalidInputError, match="no variant"):
        choices_schema(schema, {"relation": ["Z"]})


def test_whole_list_schema_allows_nothing_or_everything() -> None:
    from kag.lm.guards import whole_list_schema
    from kag.lm.jsonschema_check import validate_json_schema

    class Names(BaseModel):
        entities: list[str]

    whole = whole_list_schema(Names.model_json_schema(), ["Lyon", "Paris", "Lyon"], fields=["entities"])
    validate_json_schema({"entities": ["Lyon", "Paris"]}, whole)
    validate_json_schema({"entities": []}, whole)
    with pytest.raises(JSONSchemaValidationError):
        validate_json_schema({"entities": ["Lyon"]}, whole)
    assert NOT_FOUND_NOTE in whole["properties"]["entities"]["description"]
    assert whole_list_schema(Names.model_json_schema(), [], fields=["entities"])["properties"]["entities"]["enum"] == [
        []
    ]
    decided = whole_list_schema(Names.model_json_schema(), ["Lyon"], fields=["entities"], empty=False)
    assert decided["properties"]["entities"]["enum"] == [["Lyon"]]  # the search decided: no "not found"
    none = whole_list_schema(Names.model_json_schema(), [], fields=["entities"], empty=False)
    assert none["properties"]["entities"]["enum"] == [[]]  # nothing found: empty is the only answer
    with pytest.raises(InvalidInputError):
        whole_list_schema(Names.model_json_schema(), ["x"], fields=["missing"])


def test_grounded_numbers_allow_only_stated_numbers_or_null() -> None:
    from kag.lm.guards import grounded_numbers
    from kag.lm.jsonschema_check import validate_json_schema

    class Counted(BaseModel):
        number: int | None
        total: int
        label: str

    schema = Counted.model_json_schema()
    stated = grounded_numbers(schema, [4, 12, 4], fields=["number", "total"])
    validate_json_schema({"number": 12, "total": 4, "label": "x"}, stated)
    validate_json_schema({"number": None, "total": 4, "label": "x"}, stated)
    with pytest.raises(JSONSchemaValidationError):
        validate_json_schema({"number": 5, "total": 4, "label": "x"}, stated)
    nothing = grounded_numbers(schema, [], fields=["number", "total"])
    with pytest.raises(JSONSchemaValidationError):
        validate_json_schema({"number": 3, "total": 3, "label": "x"}, nothing)  # only null is left
    validate_json_schema({"number": None, "total": 3, "label": "x"}, nothing)  # nothing to ground `total` in
    required = grounded_numbers(schema, [4], fields=["number"], required=True)
    validate_json_schema({"number": 4, "total": 9, "label": "x"}, required)
    with pytest.raises(JSONSchemaValidationError):
        validate_json_schema({"number": None, "total": 9, "label": "x"}, required)  # a count is required
    with pytest.raises(InvalidInputError, match="not an integer"):
        grounded_numbers(schema, [1], fields=["label"])
    with pytest.raises(InvalidInputError, match="integers"):
        grounded_numbers(schema, [True], fields=["number"])


def test_text_spans_also_offer_a_possessive_s_stem() -> None:
    from kag.lm.guards import text_spans

    spans = text_spans(["What's Ghana's capital?"])
    assert "Ghana" in spans and "Ghana's" in spans and "Ghana's capital" in spans


def test_positional_schema_fixes_each_item_of_an_array_in_its_place() -> None:
    from kag.lm.guards import positional_schema
    from kag.lm.jsonschema_check import validate_json_schema
    from kag.lm.llamacpp import schema_grammar

    step = {"type": "object", "properties": {"op": {"type": "string", "enum": ["add", "mul", "sub"]}}}
    schema = {"type": "object", "properties": {"steps": {"type": "array", "items": step, "maxItems": 5}}}
    fixed = positional_schema(schema, "steps", [{"op": ["mul"]}, {"op": ["add", "sub"]}])
    validate_json_schema({"steps": [{"op": "mul"}, {"op": "sub"}]}, fixed)
    for wrong in ([{"op": "add"}, {"op": "mul"}], [{"op": "mul"}], [{"op": "mul"}, {"op": "add"}, {"op": "add"}]):
        with pytest.raises(JSONSchemaValidationError):
            validate_json_schema({"steps": wrong}, fixed)
    assert schema["properties"]["steps"]["items"] is step  # the input is not changed
    grammar = schema_grammar(fixed)  # llama.cpp samples the tuple, item by item
    assert "tuple-0" in grammar and "tuple-1" in grammar
    with pytest.raises(InvalidInputError, match="array"):
        positional_schema(schema, "missing", [{"op": ["add"]}])
    with pytest.raises(InvalidInputError):
        positional_schema(schema, "steps", [{"op": ["div"]}])  # no item can hold it


@settings(max_examples=60, deadline=None)
@given(options=st.lists(NAME, max_size=5, unique=True), text=st.text(max_size=20) | NAME)
def test_a_grounded_text_is_one_of_the_facts_answers_or_not_found(options: list[str], text: str) -> None:
    grounded = grounded_text(Names.model_json_schema(), options, fields=["explanation"])
    value: dict[str, Any] = {"names": [], "others": None, "explanation": text}
    try:
        validate_json_schema(value, grounded)
    except JSONSchemaValidationError:
        assert text not in options and text != NOT_FOUND_TEXT
        return
    assert text in options or text == NOT_FOUND_TEXT
    validate_json_schema({**value, "explanation": NOT_FOUND_TEXT}, grounded)


def test_grounded_text_refuses_a_field_that_is_not_free_text_and_may_leave_out_not_found() -> None:
    with pytest.raises(InvalidInputError, match="names"):
        grounded_text(Names.model_json_schema(), ["x"], fields=["names"])
    counted = grounded_text(Names.model_json_schema(), ["3"], fields=["explanation"], not_found=False)
    assert counted["properties"]["explanation"]["enum"] == ["3"]
    with pytest.raises(InvalidInputError, match="no option"):
        grounded_text(Names.model_json_schema(), [], fields=["explanation"], not_found=False)
