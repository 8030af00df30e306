"""Plan validation: labels, endpoint types, texts, k and threshold."""

import math

import numpy as np
import pytest

import kag
from kag.errors import InvalidInputError, SchemaError
from kag.query import plan_triplet_search


def test_unknown_label_names_allowed(schema: kag.GraphSchema) -> None:
    with pytest.raises(SchemaError, match=r"unknown entity label 'Planet'; allowed: \['City', 'Country'\]"):
        plan_triplet_search({"subject_label": "Planet"}, schema)
    with pytest.raises(SchemaError, match="IsCapitalOf"):
        plan_triplet_search({"relation_label": "Orbits"}, schema)


def test_endpoint_type_mismatch(schema: kag.GraphSchema) -> None:
    with pytest.raises(SchemaError, match="cannot link subject 'Country' to object 'City'"):
        plan_triplet_search(
            {"subject_label": "Country", "relation_label": "IsCapitalOf", "object_label": "City"}, schema
        )
    # the same pattern read in either direction is fine
    plan = plan_triplet_search(
        {"subject_label": "Country", "relation_label": "IsCapitalOf", "object_label": "City", "bidirectional": True},
        schema,
    )
    assert plan.hops[0].bidirectional


def test_star_narrows_to_declared_endpoints(schema: kag.GraphSchema) -> None:
    plan = plan_triplet_search({"relation_label": "IsCapitalOf"}, schema)
    assert plan.nodes[0].labels == ("City",) and plan.nodes[1].labels == ("Country",)


@pytest.mark.parametrize("text", ["", "   ", "\n"])
def test_empty_text(schema: kag.GraphSchema, text: str) -> None:
    with pytest.raises(InvalidInputError, match='"\\*"'):
        plan_triplet_search({"subject_similarity_search": text}, schema)


def test_huge_text(schema: kag.GraphSchema) -> None:
    with pytest.raises(InvalidInputError, match="limit"):
        plan_triplet_search({"subject_similarity_search": "x" * 100_000}, schema)


@pytest.mark.parametrize("k", [0, -1, 10_001, 10**12, 2.5, True, "10"])
def test_bad_k(schema: kag.GraphSchema, k: object) -> None:
    with pytest.raises(InvalidInputError, match="k must be"):
        plan_triplet_search({}, schema, k=k)  # type: ignore[arg-type]


@pytest.mark.parametrize("threshold", [-0.1, 1.5, math.nan, "0.5", None])
def test_bad_threshold(schema: kag.GraphSchema, threshold: object) -> None:
    with pytest.raises(InvalidInputError, match="threshold"):
        plan_triplet_search({}, schema, threshold=threshold)  # type: ignore[arg-type]


def test_nan_and_zero_vectors_refused(schema: kag.GraphSchema) -> None:
    plan = plan_triplet_search({"subject_similarity_search": "Paris"}, schema)
    with pytest.raises(InvalidInputError, match="NaN"):
        plan.bind(np.array([[np.nan, 1.0]]))
    with pytest.raises(InvalidInputError, match="zeros"):
        plan.bind(np.zeros((1, 4)))
    with pytest.raises(InvalidInputError, match="expected 1"):
        plan.bind(np.ones((2, 4)))


def test_chain_validation(schema: kag.GraphSchema) -> None:
    with pytest.raises(SchemaError, match="share an entity label"):
        plan_triplet_search([{"relation_label": "IsCityOf"}, {"relation_label": "IsCapitalOf"}], schema)
    with pytest.raises(InvalidInputError, match="negated"):
        plan_triplet_search(
            [{"relation_label": "IsCityOf", "negated": True}, {"relation_label": "IsCapitalOf", "bidirectional": True}],
            schema,
        )
    with pytest.raises(InvalidInputError, match="at most"):
        plan_triplet_search([{"bidirectional": True}] * 5, schema)


def test_extra_fields_in_lm_output_rejected(schema: kag.GraphSchema) -> None:
    with pytest.raises(InvalidInputError, match="Extra inputs"):
        plan_triplet_search({"subject_label": "City", "cypher": "MATCH (n) DETACH DELETE n"}, schema)


def test_star_relation_narrowed_to_fitting_types() -> None:
    from kag.examples import world

    schema = kag.GraphSchema(world.ENTITY_MODELS, world.RELATION_MODELS)
    plan = plan_triplet_search({"subject_label": "City", "object_label": "Country"}, schema)
    assert plan.hops[0].relation_labels == ("IsCapitalOf", "IsCityOf")
    plan = plan_triplet_search({"subject_label": "Country"}, schema)
    assert plan.hops[0].relation_labels == ("IsInContinent",) and plan.nodes[1].labels == ("Continent",)
    with pytest.raises(SchemaError, match="no declared relation links subject 'Continent'"):
        plan_triplet_search({"subject_label": "Continent", "object_label": "City"}, schema)
    plan = plan_triplet_search({"subject_label": "Continent", "bidirectional": True}, schema)
    assert plan.hops[0].relation_labels == ("IsInContinent",)
