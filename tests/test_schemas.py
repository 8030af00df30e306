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
