"""Golden tests of the emitted Cypher, and the guarantees of the compiler."""

import itertools
import os
import re
from pathlib import Path

import numpy as np
import pytest

import kag
from kag.query import QueryPlan, compile_plan, plan_triplet_search

GOLDEN = Path(__file__).parent / "golden" / "cypher"
UPDATE = os.environ.get("KAG_UPDATE_GOLDEN") == "1"


def bound(plan: QueryPlan) -> QueryPlan:
    return plan.bind(np.ones((len(plan.texts()), 4), dtype=np.float32))


def cases() -> list[tuple[str, dict]]:
    out = []
    for negated, bidirectional, count in itertools.product([False, True], repeat=3):
        for texts in ("none", "object", "both"):
            search = {
                "subject_label": "City",
                "subject_similarity_search": "Paris" if texts == "both" else "*",
                "relation_label": "IsCapitalOf",
                "object_label": "Country",
                "object_similarity_search": "France" if texts in ("object", "both") else "*",
                "negated": negated,
                "bidirectional": bidirectional,
                "count": count,
            }
            name = f"neg{int(negated)}_bi{int(bidirectional)}_cnt{int(count)}_{texts}"
            out.append((name, search))
    out.append(("any_labels", {"subject_similarity_search": "Paris"}))
    out.append(
        (
            "chain2",
            {
                "hops": [
                    {
                        "subject_label": "City",
                        "subject_similarity_search": "Lyon",
                        "relation_label": "IsCityOf",
                        "object_label": "Country",
                    },
                    {
                        "subject_label": "Country",
                        "relation_label": "IsCapitalOf",
                        "object_label": "City",
                        "bidirectional": True,
                        "object_similarity_search": "capital",
                    },
                ]
            },
        )
    )
    return out


@pytest.mark.parametrize(("name", "search"), cases(), ids=[c[0] for c in cases()])
def test_golden(schema: kag.GraphSchema, name: str, search: dict) -> None:
    query = compile_plan(bound(plan_triplet_search(search, schema, k=7, threshold=0.6)))
    path = GOLDEN / f"{name}.cypher"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(query.text + "\n")
    assert query.text + "\n" == path.read_text(), f"regenerate with KAG_UPDATE_GOLDEN=1 after review: {path}"
    # every value is a parameter
    assert query.params["threshold"] == float(np.float32(0.6))  # at the precision Neo4j reports cosines
    if search.get("count") or any(h.get("count") for h in search.get("hops", [])):
        assert "k" not in query.params and "count(*)" in query.text
    else:
        assert query.params["k"] == 7 and query.text.endswith("LIMIT $k")
    assert "0.6" not in query.text and "Paris" not in query.text and "France" not in query.text
    for key, value in query.params.items():
        if key.startswith("v"):
            assert f"${key}" in query.text and len(value) == 4


def test_deterministic(schema: kag.GraphSchema) -> None:
    search = {"subject_label": "City", "subject_similarity_search": "x", "relation_label": "*"}
    a = compile_plan(bound(plan_triplet_search(search, schema)))
    b = compile_plan(bound(plan_triplet_search(search, schema)))
    assert a == b


def test_identifiers_are_backtick_quoted(schema: kag.GraphSchema) -> None:
    text = compile_plan(bound(plan_triplet_search({"relation_label": "*"}, schema))).text
    assert "[r1:`IsCapitalOf`|`IsCityOf`]" in text
    assert "(n0:`City`)" in text  # "*" narrowed to the relations' declared endpoints


def test_unbound_plan_refused(schema: kag.GraphSchema) -> None:
    plan = plan_triplet_search({"subject_similarity_search": "Paris"}, schema)
    with pytest.raises(ValueError, match="bind"):
        compile_plan(plan)


def test_quote_rejects_unsafe_identifier() -> None:
    from kag.query.cypher import quote

    with pytest.raises(kag.errors.SchemaError):
        quote("City`) DETACH DELETE n //")


def test_approximate_anchor_uses_the_vector_index(schema: kag.GraphSchema) -> None:
    search = {
        "subject_label": "City",
        "relation_label": "IsCapitalOf",
        "object_label": "Country",
        "object_similarity_search": "France",
    }
    query = compile_plan(bound(plan_triplet_search(search, schema, candidates=50)))
    assert query.text.startswith("CALL db.index.vector.queryNodes($index, $candidates, $v1_0) YIELD node AS n1")
    assert query.params["index"] == "kag_Country_embedding" and query.params["candidates"] == 50
    # several anchor labels cannot use one index: exact scan
    multi = {"subject_similarity_search": "x", "bidirectional": True}  # City|Country
    any_label = compile_plan(bound(plan_triplet_search(multi, schema, candidates=50)))
    assert "queryNodes" not in any_label.text
    with pytest.raises(kag.errors.InvalidInputError, match="candidates"):
        plan_triplet_search(search, schema, k=10, candidates=5)


def language_cases() -> list[tuple[str, dict]]:
    """The grown language over tests.test_plan.LANDS (Borders symmetric, Owes directed)."""
    owes = {"subject_label": "Land", "relation_label": "Owes", "object_label": "Land"}
    borders = {**owes, "relation_label": "Borders"}
    town = {"subject_label": "Town", "relation_label": "TownOf", "object_label": "Land"}
    desc = {"side": "subject", "field": "population", "direction": "desc"}
    return [
        ("symmetric", {**borders, "object_similarity_search": "Austria"}),
        ("symmetric_mixed", {**owes, "relation_label": "*", "object_similarity_search": "Austria"}),
        (
            "first_subject",
            {
                "hops": [
                    {**owes, "object_similarity_search": "Austria"},
                    {**borders, "subject_from": "first_subject", "object_similarity_search": "Italy"},
                ]
            },
        ),
        (
            "first_subject_then_path",
            {
                "hops": [
                    {**owes, "object_similarity_search": "Austria"},
                    {**owes, "subject_from": "first_subject"},
                    {**borders, "object_similarity_search": "Italy"},
                ]
            },
        ),
        ("negated_in_chain", {"hops": [town, {**owes, "object_similarity_search": "Austria", "negated": True}]}),
        (
            "negated_first_subject_mixed",
            {
                "hops": [
                    {**town, "subject_similarity_search": "Graz"},
                    {**owes, "relation_label": "*", "negated": True, "object_similarity_search": "Italy"},
                ]
            },
        ),
        (
            "negated_only",
            {
                "hops": [
                    {**owes, "negated": True, "object_where": [{"field": "code", "op": "=", "value": "IT"}]},
                    {**borders, "negated": True, "object_similarity_search": "Italy"},
                ]
            },
        ),
        (
            "where",
            {
                **town,
                "subject_similarity_search": "Graz",
                "subject_where": [{"field": "population", "op": ">", "value": 5_000_000}],
                "object_where": [
                    {"field": "area", "op": "<=", "value": 1.5},
                    {"field": "code", "op": "!=", "value": "`) DETACH DELETE n //"},
                ],
            },
        ),
        ("order_limit", {**town, "object_similarity_search": "Japan", "order_by": desc, "limit": 1}),
        ("order_object_count", {**town, "order_by": {**desc, "side": "object"}, "limit": 3, "count": True}),
    ]


@pytest.mark.parametrize(("name", "search"), language_cases(), ids=[c[0] for c in language_cases()])
def test_golden_language(name: str, search: dict) -> None:
    from tests.test_plan import LANDS

    query = compile_plan(bound(plan_triplet_search(search, LANDS, k=7, threshold=0.6)))
    path = GOLDEN / f"lang_{name}.cypher"
    if UPDATE:
        path.write_text(query.text + "\n")
    assert query.text + "\n" == path.read_text(), f"regenerate with KAG_UPDATE_GOLDEN=1 after review: {path}"
    # identifiers: declared labels and field names, backtick-quoted; values: parameters only
    bare = re.sub(r"`[^`]*`", "", query.text)
    for ident in re.findall(r"`([^`]*)`", query.text):
        assert ident in {*LANDS.entity_labels, *LANDS.relation_labels, *LANDS.filterable_fields()}, ident
    assert "DETACH" not in query.text and not re.search(r"\b(5000000|1\.5|IT|Austria|Italy)\b", query.text)
    assert not re.search(r"['\"]", bare) and "//" not in query.text
    for name_, value in query.params.items():
        assert f"${name_}" in query.text or name_ == "threshold"
        if re.fullmatch(r"w\d+_\d+", name_):
            assert isinstance(value, int | float | str)
        if re.fullmatch(r"t\d+", name_):
            assert value == ["Borders"]  # relation types matched either way, as a parameter list


def test_property_names_are_quoted_from_the_schema() -> None:
    from tests.test_plan import LANDS

    search = {
        "subject_label": "Land",
        "relation_label": "Owes",
        "subject_where": [{"field": "population", "op": ">=", "value": "7"}],
        "order_by": {"side": "object", "field": "code", "direction": "asc"},
    }
    query = compile_plan(bound(plan_triplet_search(search, LANDS)))
    assert "n0.`population` >= $w0_0" in query.text and query.params["w0_0"] == 7
    assert "ORDER BY n1.`code` IS NULL, n1.`code` ASC, score DESC, n0_id, r1_id, n1_id" in query.text
