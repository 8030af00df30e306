"""JSON schemas handed to language models: dynamic enums, strictness, and files in schemas/."""

from pathlib import Path
from typing import Any

import pytest

import kag
from kag.datamodels.schema import find_refs
from kag.errors import SchemaError
from kag.examples.export import example_schemas, render

ROOT = Path(__file__).resolve().parents[1]


def assert_openai_strict(node: Any) -> None:
    """The subset OpenAI strict structured outputs accepts: closed objects, all required."""
    if isinstance(node, dict):
        assert "$ref" not in node and "$defs" not in node and "default" not in node
        if node.get("type") == "object":
            assert node["additionalProperties"] is False
            assert sorted(node["required"]) == sorted(node["properties"])
        for v in node.values():
            assert_openai_strict(v)
    elif isinstance(node, list):
        for v in node:
            assert_openai_strict(v)


def test_dynamic_enum_adds_star_and_keeps_description() -> None:
    base = kag.TripletSearch.model_json_schema()
    out = kag.dynamic_enum(base, "subject_label", ["City", "Country"], "pick one")
    assert out["properties"]["subject_label"] == {
        "type": "string",
        "enum": ["City", "Country", "*"],
        "description": "pick one",
    }
    assert base["properties"]["subject_label"].get("enum") is None  # input not mutated


def test_dynamic_enum_unknown_property() -> None:
    with pytest.raises(SchemaError):
        kag.dynamic_enum({"properties": {}}, "nope", ["A"])


def test_triplet_schema_is_self_contained_and_strict(schema: kag.GraphSchema) -> None:
    out = kag.triplet_search_schema(schema)
    assert find_refs(out) == []
    assert_openai_strict(out)
    assert out["properties"]["relation_label"]["enum"] == ["IsCapitalOf", "IsCityOf", "*"]
    assert out["properties"]["object_label"]["enum"] == ["Country", "City", "*"]
    chain = kag.triplet_chain_schema(schema, 3)
    assert_openai_strict(chain)
    assert chain["properties"]["hops"]["maxItems"] == 3


def test_strict_schema_inlines_nested_models() -> None:
    class Inner(kag.DataModel):
        x: int

    class Outer(kag.DataModel):
        inner: Inner
        maybe: Inner | None = None

    out = kag.strict_schema(Outer.model_json_schema())
    assert find_refs(out) == []
    assert_openai_strict(out)
    assert out["properties"]["inner"]["properties"]["x"]["type"] == "integer"


@pytest.mark.parametrize("name", sorted(example_schemas()))
def test_schema_files_are_current(name: str) -> None:
    path = ROOT / "schemas" / name
    assert path.exists(), f"{path} missing: run `python -m kag.examples.export`"
    assert path.read_text(encoding="utf-8") == render(example_schemas()[name]), (
        f"{path} is stale: run `python -m kag.examples.export`"
    )


def _lands() -> kag.GraphSchema:
    from tests.test_plan import LANDS

    return LANDS


def full_search(**extra: Any) -> dict[str, Any]:
    """A search with every property spelled out, as a strict-mode model must write it."""
    return {
        "subject_label": "Land",
        "subject_similarity_search": "*",
        "relation_label": "Borders",
        "object_label": "Land",
        "object_similarity_search": "Austria",
        "negated": False,
        "bidirectional": False,
        "count": False,
        "subject_from": "previous_object",
        "subject_where": [{"field": "population", "op": ">", "value": 5000000}],
        "object_where": [],
        "order_by": {"side": "subject", "field": "population", "direction": "desc"},
        "limit": 1,
        **extra,
    }


def test_language_fields_are_strict_enums_of_the_declared_fields() -> None:
    out = kag.triplet_search_schema(_lands())
    assert_openai_strict(out)
    assert "anyOf" not in out  # OpenAI strict: no anyOf at the root
    props = out["properties"]
    assert props["subject_from"]["enum"] == ["previous_object", "first_subject"]
    condition = props["subject_where"]["items"]
    assert condition["properties"]["field"]["enum"] == ["name", "population", "area", "code"]  # scalars only
    assert "population (Land|Town)" in condition["properties"]["field"]["description"]
    assert condition["properties"]["op"]["enum"] == ["=", "!=", "<", "<=", ">", ">="]
    assert condition["properties"]["value"]["anyOf"] == [{"type": "number"}, {"type": "string"}]
    assert props["object_where"]["items"] == condition
    order = next(v for v in props["order_by"]["anyOf"] if v.get("type") == "object")
    assert order["properties"]["field"]["enum"] == condition["properties"]["field"]["enum"]
    assert {"type": "null"} in props["order_by"]["anyOf"] and {"type": "null"} in props["limit"]["anyOf"]
    assert "Borders: Land <-> Land (symmetric)" in props["relation_label"]["description"]
    chain = kag.triplet_chain_schema(_lands(), 3)
    assert_openai_strict(chain)
    assert chain["properties"]["hops"]["items"] == out


def test_language_fields_validate_as_the_repair_loop_checks_them() -> None:
    from kag.lm.jsonschema_check import check_json_schema

    out = kag.triplet_search_schema(_lands())
    assert check_json_schema(full_search(), out) == []
    assert check_json_schema(full_search(order_by=None, limit=None, subject_where=[]), out) == []
    assert check_json_schema(full_search(subject_where=[{"field": "code", "op": "=", "value": "AT"}]), out) == []
    for bad in (
        full_search(subject_where=[{"field": "tags", "op": "=", "value": "x"}]),  # not a comparable field
        full_search(subject_where=[{"field": "population", "op": "~", "value": 1}]),
        full_search(subject_where=[{"field": "population", "op": ">", "value": [1]}]),
        full_search(subject_from="second_subject"),
        full_search(order_by={"side": "subject", "field": "population"}),  # direction missing
    ):
        assert check_json_schema(bad, out), bad
    old = {k: v for k, v in full_search().items() if k not in ("subject_from", "subject_where", "object_where")}
    old = {k: v for k, v in old.items() if k not in ("order_by", "limit")}
    assert check_json_schema(old, out)  # strict: every property must be written


def test_language_schema_compiles_to_a_local_grammar() -> None:
    from llama_cpp import LlamaGrammar  # the [local] extra, part of [dev]

    from kag.lm.llamacpp import schema_grammar

    for schema in (kag.triplet_search_schema(_lands()), kag.triplet_chain_schema(_lands(), 3)):
        grammar = schema_grammar(schema, max_string_length=64)
        assert "first_subject" in grammar and "population" in grammar
        LlamaGrammar.from_string(grammar, verbose=False)  # raises when llama.cpp cannot parse it
