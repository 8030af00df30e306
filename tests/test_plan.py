"""Plan validation: labels, endpoint types, texts, k and threshold."""

import math
from typing import Literal

import numpy as np
import pytest

import kag
from kag.errors import InvalidInputError, SchemaError
from kag.query import plan_triplet_search
from kag.query.plan import FilterSpec, OrderSpec


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


class Land(kag.Entity):
    label: Literal["Land"] = "Land"
    name: str
    population: int | None = None
    area: float | None = None
    code: str | None = None
    tags: list[str] = []
    member: bool = False


class Town(kag.Entity):
    label: Literal["Town"] = "Town"
    name: str
    population: int | None = None
    area: str | None = None  # a different kind than Land.area


class Borders(kag.Relation, symmetric=True):
    subj: Land
    label: Literal["Borders"] = "Borders"
    obj: Land


class Owes(kag.Relation):
    subj: Land
    label: Literal["Owes"] = "Owes"
    obj: Land


class TownOf(kag.Relation):
    subj: Town
    label: Literal["TownOf"] = "TownOf"
    obj: Land


LANDS = kag.GraphSchema([Land, Town], [Borders, Owes, TownOf])


def hop(**fields: object) -> dict[str, object]:
    return {"subject_label": "Land", "relation_label": "Owes", "object_label": "Land", **fields}


def test_symmetric_relations_are_recorded_and_matched_either_way() -> None:
    assert LANDS.relations["Borders"].symmetric and not LANDS.relations["Owes"].symmetric
    assert LANDS.relations["Borders"].arrow() == "Land <-> Land (symmetric)"
    only = plan_triplet_search(hop(relation_label="Borders"), LANDS).hops[0]
    assert only.bidirectional and only.undirected and only.symmetric == ("Borders",)
    mixed = plan_triplet_search(hop(relation_label="*"), LANDS).hops[0]
    assert mixed.relation_labels == ("Borders", "Owes") and not mixed.bidirectional
    assert mixed.mixed and mixed.both_ways == ("Borders",)
    directed = plan_triplet_search(hop(), LANDS).hops[0]
    assert not directed.both_ways and not directed.mixed


def test_first_subject_hops_constrain_the_same_entity() -> None:
    plan = plan_triplet_search(
        [hop(object_similarity_search="Austria"), hop(relation_label="Borders", subject_from="first_subject")], LANDS
    )
    assert [plan.source(h) for h in range(2)] == [0, 0] and plan.hops[1].source == 0
    assert plan.row_nodes == (0, 1, 2) and plan.row_ends == ((0, 1), (0, 2)) and plan.sides == 4
    # previous_object after a first_subject hop is that hop's object
    plan = plan_triplet_search(
        [hop(), hop(relation_label="Borders", subject_from="first_subject"), hop(relation_label="Borders")], LANDS
    )
    assert [plan.source(h) for h in range(3)] == [0, 0, 2]
    assert plan.row_ends == ((0, 1), (0, 2), (2, 3))
    # the first subject must fit every hop that starts from it
    with pytest.raises(SchemaError, match="hop 1 starts at"):
        plan_triplet_search(
            [{"subject_label": "Town", "relation_label": "TownOf"}, hop(subject_from="first_subject")], LANDS
        )
    # on hop 1 the field has nothing to choose
    assert plan_triplet_search(hop(subject_from="first_subject"), LANDS) == plan_triplet_search(hop(), LANDS)


def test_negated_hops_inside_a_chain() -> None:
    plan = plan_triplet_search([hop(), hop(relation_label="Borders", negated=True)], LANDS)
    assert plan.negated and plan.row_hops == (0,) and plan.row_nodes == (0, 1) and plan.row_ends == ((0, 1),)
    assert plan.sides == 2  # a negated hop adds no sides
    # the chain stays where it was: the next hop starts from the negated hop's subject
    plan = plan_triplet_search(
        [{"subject_label": "Town", "relation_label": "TownOf"}, hop(negated=True), hop(relation_label="Borders")],
        LANDS,
    )
    assert [plan.source(h) for h in range(3)] == [0, 1, 1] and plan.row_nodes == (0, 1, 3)
    plan = plan_triplet_search([hop(negated=True), hop(relation_label="Borders")], LANDS)
    assert [plan.source(h) for h in range(2)] == [0, 0] and plan.row_nodes == (0, 2)
    single = plan_triplet_search(hop(negated=True), LANDS)
    assert single.row_nodes == (0,) and single.sides == 1


def test_conditions_are_typed_by_the_declared_field() -> None:
    def node_filters(cond: dict[str, object], side: str = "subject_where") -> tuple[FilterSpec, ...]:
        return plan_triplet_search(hop(**{side: [cond]}), LANDS).nodes[0 if side == "subject_where" else 1].filters

    assert node_filters({"field": "population", "op": ">", "value": 5_000_000}) == (
        FilterSpec("population", ">", 5_000_000),
    )
    assert node_filters({"field": "population", "op": "<=", "value": "5,000,000"})[0].value == 5_000_000
    assert node_filters({"field": "population", "op": ">=", "value": 5e6})[0] == FilterSpec(
        "population", ">=", 5_000_000
    )
    # an integer field compares with an integer: a fraction moves to the equivalent whole bound
    assert [
        node_filters({"field": "population", "op": op, "value": 2.5})[0].value for op in ("<", "<=", ">", ">=")
    ] == [
        3,
        2,
        2,
        3,
    ]
    assert type(node_filters({"field": "area", "op": "<", "value": 3})[0].value) is float
    assert node_filters({"field": "code", "op": "=", "value": "AT"}, "object_where") == (FilterSpec("code", "=", "AT"),)
    bad: list[tuple[dict[str, object], type[Exception], str]] = [
        ({"field": "population", "op": "=", "value": 2.5}, InvalidInputError, "whole number"),
        ({"field": "population", "op": ">", "value": "many"}, InvalidInputError, "expected a number"),
        ({"field": "population", "op": ">", "value": 2**70}, InvalidInputError, "64-bit"),
        ({"field": "area", "op": ">", "value": "nan"}, InvalidInputError, "finite"),
        ({"field": "code", "op": "=", "value": 5}, InvalidInputError, "text field"),
        ({"field": "tags", "op": "=", "value": "x"}, SchemaError, "no comparable field 'tags'"),
        ({"field": "member", "op": "=", "value": "true"}, SchemaError, "no comparable field"),
        ({"field": "label", "op": "=", "value": "Land"}, SchemaError, "no comparable field"),
        ({"field": "`) DETACH DELETE n //", "op": "=", "value": "x"}, SchemaError, "no comparable field"),
        ({"field": "*", "op": "=", "value": "x"}, SchemaError, "not a declared field"),
    ]
    for cond, error, message in bad:
        with pytest.raises(error, match=message):
            node_filters(cond)
    for cond in ({"field": "population", "op": "~", "value": 1}, {"field": "population", "op": ">"}):
        with pytest.raises(InvalidInputError):
            node_filters(cond)


def test_conditions_narrow_star_labels_and_refuse_mixed_kinds() -> None:
    any_side = {"subject_label": "*", "relation_label": "*", "object_label": "Land", "bidirectional": True}
    plan = plan_triplet_search({**any_side, "subject_where": [{"field": "code", "op": "=", "value": "AT"}]}, LANDS)
    assert plan.nodes[0].labels == ("Land",)  # Town declares no code: it could never pass
    plan = plan_triplet_search({**any_side, "subject_where": [{"field": "population", "op": ">", "value": 1}]}, LANDS)
    assert plan.nodes[0].labels == ("Land", "Town")
    with pytest.raises(SchemaError, match="different types"):
        plan_triplet_search({**any_side, "subject_where": [{"field": "area", "op": ">", "value": 1}]}, LANDS)


def test_order_by_and_limit() -> None:
    desc = {"side": "subject", "field": "population", "direction": "desc"}
    plan = plan_triplet_search(hop(order_by=desc, limit=1), LANDS, k=10)
    assert plan.order == OrderSpec(0, "population", True, "number") and plan.k == 1 and plan.limit == 1
    assert plan_triplet_search(hop(order_by=desc, limit=50), LANDS, k=10).k == 10
    by_object = plan_triplet_search(
        [hop(), hop(relation_label="Borders", order_by={**desc, "side": "object", "field": "code"})], LANDS
    )
    assert by_object.order == OrderSpec(2, "code", True, "string") and by_object.limit is None
    # ordering does not narrow "*": entities without the field come last instead
    star = plan_triplet_search(
        {"relation_label": "*", "bidirectional": True, "order_by": {**desc, "field": "code"}}, LANDS
    )
    assert set(star.nodes[0].labels) == {"Land", "Town"}
    refused: list[tuple[object, type[Exception], str]] = [
        (hop(limit=1), InvalidInputError, "limit needs order_by"),
        (hop(order_by=desc, limit=0), InvalidInputError, "limit must be"),
        ([hop(order_by=desc), hop(order_by=desc, subject_from="first_subject")], InvalidInputError, "at most one"),
        (hop(negated=True, order_by={**desc, "side": "object"}), InvalidInputError, "negated"),
        (hop(order_by={**desc, "field": "tags"}), SchemaError, "no comparable field"),
        (hop(order_by={**desc, "direction": "up"}), InvalidInputError, "direction"),
    ]
    for search, error, message in refused:
        with pytest.raises(error, match=message):
            plan_triplet_search(search, LANDS)  # type: ignore[arg-type]


def test_old_searches_plan_as_before(schema: kag.GraphSchema) -> None:
    old = {"subject_label": "City", "subject_similarity_search": "Paris", "relation_label": "IsCapitalOf"}
    spelled = {
        **old,
        "subject_from": "previous_object",
        "subject_where": [],
        "object_where": [],
        "order_by": None,
        "limit": None,
    }
    plan = plan_triplet_search(old, schema)
    assert plan == plan_triplet_search(spelled, schema)
    assert plan.order is None and plan.limit is None and all(not n.filters for n in plan.nodes)
    assert plan.hops[0].source is None and not plan.hops[0].negated and not plan.hops[0].symmetric
    assert kag.TripletSearch.from_dict(old).to_dict() == {**kag.TripletSearch().to_dict(), **old}
