"""The lightweight JSON-schema checker used for dict schemas."""

from __future__ import annotations

import json
from typing import Any, Literal

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kag.errors import JSONSchemaValidationError
from kag.lm import check_json_schema, validate_json_schema

PERSON: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "role": {"enum": ["admin", "user"]},
        "email": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    },
    "required": ["name", "role"],
    "additionalProperties": False,
}


def test_valid_object_passes() -> None:
    assert check_json_schema({"name": "Ada", "age": 36, "role": "admin"}, PERSON) == []
    validate_json_schema({"name": "Ada", "role": "user", "email": None}, PERSON)


def test_missing_required_property() -> None:
    assert check_json_schema({"name": "Ada"}, PERSON) == ["$: missing required property 'role'"]


def test_extra_property_rejected_when_additional_properties_false() -> None:
    errors = check_json_schema({"name": "Ada", "role": "user", "nick": "A"}, PERSON)
    assert len(errors) == 1
    assert "unexpected property 'nick'" in errors[0]
    assert "'name'" in errors[0]  # the allowed names are listed


def test_extra_property_allowed_by_default_and_checked_against_schema() -> None:
    assert check_json_schema({"a": 1, "b": 2}, {"type": "object"}) == []
    typed = {"type": "object", "additionalProperties": {"type": "integer"}}
    assert check_json_schema({"a": 1}, typed) == []
    assert check_json_schema({"a": "x"}, typed) == ['$.a: expected integer, got string "x"']


def test_enum_membership() -> None:
    errors = check_json_schema({"name": "Ada", "role": "root"}, PERSON)
    assert errors == ['$.role: "root" is not one of ["admin", "user"]']


def test_enum_distinguishes_bool_from_int() -> None:
    assert check_json_schema(True, {"enum": [1, 2]}) != []
    assert check_json_schema(1.0, {"enum": [1, 2]}) == []


@pytest.mark.parametrize(
    ("type_name", "good", "bad"),
    [
        ("string", "x", 1),
        ("integer", 3, 3.5),
        ("integer", 3.0, True),
        ("number", 3.5, "3.5"),
        ("number", 3, False),
        ("boolean", False, 0),
        ("array", [1], {"a": 1}),
        ("object", {"a": 1}, [1]),
        ("null", None, 0),
    ],
)
def test_basic_types(type_name: str, good: Any, bad: Any) -> None:
    schema = {"type": type_name}
    assert check_json_schema(good, schema) == []
    errors = check_json_schema(bad, schema)
    assert len(errors) == 1
    assert errors[0].startswith(f"$: expected {type_name}, got ")


def test_type_list() -> None:
    schema = {"type": ["string", "null"]}
    assert check_json_schema(None, schema) == []
    assert check_json_schema(1, schema) == ["$: expected string or null, got integer 1"]


def test_any_of_reports_failure_of_every_branch() -> None:
    errors = check_json_schema({"name": "Ada", "role": "user", "email": 5}, PERSON)
    assert len(errors) == 1
    assert errors[0].startswith("$.email: matches none of the allowed alternatives")
    assert "expected string" in errors[0] and "expected null" in errors[0]


def test_one_of_needs_exactly_one_match() -> None:
    schema = {"oneOf": [{"type": "integer"}, {"type": "number"}]}
    assert check_json_schema(1.5, schema) == []
    assert "matches 2 alternatives" in check_json_schema(1, schema)[0]


def test_all_of_and_const() -> None:
    schema = {"allOf": [{"type": "string"}, {"const": "x"}]}
    assert check_json_schema("x", schema) == []
    assert check_json_schema("y", schema) == ['$: expected "x", got "y"']


def test_nested_objects_and_arrays_report_paths() -> None:
    schema = {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"label": {"enum": ["City", "Country"]}},
                    "required": ["label"],
                },
            }
        },
    }
    value = {"items": [{"label": "City"}, {"label": "Town"}, {}]}
    assert check_json_schema(value, schema) == [
        '$.items[1].label: "Town" is not one of ["City", "Country"]',
        "$.items[2]: missing required property 'label'",
    ]


def test_ref_into_defs_and_definitions_and_root() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/Label"},
            "b": {"$ref": "#/definitions/Num"},
            "child": {"anyOf": [{"$ref": "#"}, {"type": "null"}]},
        },
        "$defs": {"Label": {"enum": ["x", "y"]}},
        "definitions": {"Num": {"type": "number"}},
    }
    assert check_json_schema({"a": "x", "b": 1, "child": {"a": "y", "child": None}}, schema) == []
    errors = check_json_schema({"a": "z", "b": "1", "child": {"a": "q"}}, schema)
    assert errors[0] == '$.a: "z" is not one of ["x", "y"]'
    assert errors[1] == '$.b: expected number, got string "1"'
    assert errors[2].startswith("$.child: matches none")


def test_unresolvable_ref_and_unknown_keywords_are_ignored() -> None:
    schema = {"$ref": "https://example.com/s.json", "format": "email", "x-custom": 1}
    assert check_json_schema("anything", schema) == []


def test_bounds() -> None:
    assert check_json_schema([1], {"type": "array", "minItems": 2}) != []
    assert check_json_schema([1, 2, 3], {"type": "array", "maxItems": 2}) != []
    assert check_json_schema("", {"type": "string", "minLength": 1}) != []
    assert check_json_schema("abc", {"type": "string", "maxLength": 2}) != []
    assert check_json_schema(0, {"type": "integer", "minimum": 1}) != []
    assert check_json_schema(11, {"type": "integer", "maximum": 10}) != []
    assert check_json_schema(5, {"type": "integer", "minimum": 1, "maximum": 10}) == []


def test_false_schema_rejects_everything() -> None:
    schema = {"type": "object", "properties": {"x": False}}
    assert check_json_schema({"x": 1}, schema) == ["$.x: no value is allowed here"]


def test_validate_raises_value_error_with_all_errors() -> None:
    with pytest.raises(JSONSchemaValidationError) as info:
        validate_json_schema({"role": "root", "x": 1}, PERSON)
    assert isinstance(info.value, ValueError)
    assert len(info.value.errors) == 3
    assert "missing required property 'name'" in str(info.value)


def test_long_error_lists_are_summarised() -> None:
    schema = {"type": "array", "items": {"type": "string"}}
    with pytest.raises(JSONSchemaValidationError, match=r"\.\.\. and 5 more"):
        validate_json_schema(list(range(15)), schema)


class Place(pydantic.BaseModel):
    label: Literal["City", "Country"]
    name: str
    population: int | None = None


class Atlas(pydantic.BaseModel):
    title: str
    places: list[Place]
    tags: dict[str, bool] = {}


@settings(max_examples=50, deadline=None)
@given(
    title=st.text(max_size=20),
    places=st.lists(
        st.builds(
            Place,
            label=st.sampled_from(["City", "Country"]),
            name=st.text(max_size=10),
            population=st.none() | st.integers(min_value=-(10**12), max_value=10**12),
        ),
        max_size=4,
    ),
    tags=st.dictionaries(st.text(max_size=5), st.booleans(), max_size=3),
)
def test_pydantic_dumps_satisfy_pydantic_schemas(title: str, places: list[Place], tags: dict[str, bool]) -> None:
    dumped = Atlas(title=title, places=places, tags=tags).model_dump(mode="json")
    assert check_json_schema(dumped, Atlas.model_json_schema()) == []


def test_pydantic_schema_catches_bad_nested_enum() -> None:
    value = {"title": "t", "places": [{"label": "Town", "name": "x"}]}
    errors = check_json_schema(value, Atlas.model_json_schema())
    assert errors == ['$.places[0].label: "Town" is not one of ["City", "Country"]']


# -- kag:default: strict schemas mark every property required, defaults fill omissions --------


def test_omitted_properties_with_a_declared_default_are_filled() -> None:
    import kag
    from kag.datamodels.schema import provider_schema
    from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS
    from kag.lm.jsonschema_check import fill_defaults

    schema = kag.triplet_search_schema(kag.GraphSchema(ENTITY_MODELS, RELATION_MODELS))
    old_style = {
        "subject_label": "City",
        "subject_similarity_search": "Paris",
        "relation_label": "IsCapitalOf",
        "object_label": "Country",
        "object_similarity_search": "*",
    }
    filled = fill_defaults(old_style, schema)
    assert filled["subject_where"] == [] and filled["order_by"] is None and filled["negated"] is False
    assert filled["subject_from"] == "previous_object"
    assert check_json_schema(filled, schema) == []
    assert "subject_where" not in old_style  # the input is not modified
    # a property without a default is still required
    missing_label = {k: v for k, v in old_style.items() if k != "relation_label"}
    assert check_json_schema(fill_defaults(missing_label, schema), schema) == [
        "$: missing required property 'relation_label'"
    ]
    # what a provider receives carries no kag annotation at any depth
    assert "kag:" not in json.dumps(provider_schema(schema)) and "kag:default" in json.dumps(schema)


def test_defaults_fill_inside_arrays_of_objects() -> None:
    from kag.lm.jsonschema_check import fill_defaults

    schema = {
        "type": "object",
        "properties": {
            "hops": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"a": {"type": "string"}, "b": {"type": "integer", "kag:default": 3}},
                    "required": ["a", "b"],
                },
            }
        },
        "required": ["hops"],
    }
    assert fill_defaults({"hops": [{"a": "x"}, {"a": "y", "b": 1}]}, schema) == {
        "hops": [{"a": "x", "b": 3}, {"a": "y", "b": 1}]
    }
