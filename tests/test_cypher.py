"""Golden tests of the emitted Cypher, and the guarantees of the compiler."""

import itertools
import os
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
