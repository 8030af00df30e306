"""Defaults and errors of tagged ``anyOf`` alternatives: an answer never takes the defaults of a guessed branch."""

from __future__ import annotations

from typing import Any

import pytest

from kag.errors import JSONSchemaValidationError
from kag.lm.jsonschema_check import fill_defaults, validate_json_schema


def entity(label: str, **extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"label": {"type": "string", "enum": [label], "kag:default": label}, "name": {"type": "string"}}
        | extra,
        "required": ["label", "name", *extra],
        "additionalProperties": False,
    }


POP = {"population": {"anyOf": [{"type": "integer"}, {"type": "null"}], "kag:default": None}}
SCHEMA = {
    "type": "object",
    "properties": {"items": {"type": "array", "items": {"anyOf": [entity("Country"), entity("City", **POP)]}}},
    "required": ["items"],
}


def test_the_tag_selects_the_alternative_whose_defaults_are_filled() -> None:
    filled = fill_defaults({"items": [{"label": "City", "name": "Paris"}]}, SCHEMA)
    assert filled == {"items": [{"label": "City", "name": "Paris", "population": None}]}
    validate_json_schema(filled, SCHEMA)  # the second alternative's defaults, not the first's


def test_without_the_tag_nothing_is_filled_and_the_error_lists_the_allowed_values() -> None:
    answer = {"items": [{"name": "Paris"}]}
    assert fill_defaults(answer, SCHEMA) == answer  # no label guessed from the first alternative
    with pytest.raises(JSONSchemaValidationError) as caught:
        validate_json_schema(fill_defaults(answer, SCHEMA), SCHEMA)
    assert '$.items[0]: missing required property \'label\' (one of ["Country", "City"])' in str(caught.value)


def test_an_unknown_tag_is_named_with_the_allowed_values() -> None:
    with pytest.raises(JSONSchemaValidationError, match=r'\$\.items\[0\]\.label: "Planet" is not one of'):
        validate_json_schema({"items": [{"label": "Planet", "name": "Mars"}]}, SCHEMA)


def test_a_single_alternative_still_takes_its_defaults() -> None:
    schema = {"type": "object", "properties": {"x": {"anyOf": [entity("City", **POP), {"type": "null"}]}}}
    assert fill_defaults({"x": {"name": "Paris"}}, schema) == {
        "x": {"name": "Paris", "label": "City", "population": None}
    }
