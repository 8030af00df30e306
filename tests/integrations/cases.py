"""Queries, searches and bad tool calls both adapters' tests run (the same cases for LangChain and LlamaIndex)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from kag.knowledge.hits import TripletHit

CAPITAL_OF_FRANCE: dict[str, Any] = {
    "subject_label": "City",
    "subject_similarity_search": "*",
    "relation_label": "IsCapitalOf",
    "object_label": "Country",
    "object_similarity_search": "France",
}

# a chain of two hops: the city's country, then that country's continent
LIMA_TO_ITS_CONTINENT: dict[str, Any] = {
    "hops": [
        {**CAPITAL_OF_FRANCE, "subject_similarity_search": "Lima", "relation_label": "IsCityOf"}
        | {"object_similarity_search": "*"},
        {
            "subject_label": "Country",
            "subject_similarity_search": "*",
            "relation_label": "IsInContinent",
            "object_label": "Continent",
            "object_similarity_search": "*",
        },
    ]
}

QUERIES: list[tuple[str, dict[str, Any]]] = [
    ("What is the capital of France?", {}),
    ("capital of Germany", {"k": 2}),
    ("Which continent is Peru in?", {"k": 4, "mode": "keyword"}),
    ("the capital city on a river", {"k": 3, "where": {"lang": "en"}}),
    ("Hauptstadt Japan", {"mode": "vector", "where": {"year": {"$gte": 2020}}}),
]

SEARCHES: list[dict[str, Any]] = [
    CAPITAL_OF_FRANCE,
    {**CAPITAL_OF_FRANCE, "subject_label": "*", "relation_label": "*", "object_similarity_search": "Japan"},
    {**CAPITAL_OF_FRANCE, "relation_label": "IsCityOf", "count": True},
    {
        **CAPITAL_OF_FRANCE,
        "relation_label": "IsCityOf",
        "object_similarity_search": "Germany",
        "order_by": {"side": "subject", "field": "population", "direction": "desc"},
        "limit": 2,
    },
]

BAD_CALLS: list[tuple[dict[str, Any], str]] = [
    ({**CAPITAL_OF_FRANCE, "subject_label": "Planet"}, re.escape("unknown entity label 'Planet'; allowed: ['City'")),
    ({**CAPITAL_OF_FRANCE, "relation_label": "IsInContinent"}, "IsInContinent"),  # a City is no subject of it
    ({**CAPITAL_OF_FRANCE, "limit": 1}, "order_by"),  # the planner refuses limit without order_by
    ({**CAPITAL_OF_FRANCE, "negated": "yes"}, "negated: Input should be a valid boolean"),  # no coercion
    ({"subject_label": "City"}, re.escape("missing required argument(s) ['relation_label', 'object_label']")),
]


def expected_facts(results: Sequence[TripletHit]) -> list[dict[str, Any]]:
    """What the tools show of each fact: ``to_dict()``, less ``path``/``relations`` when they repeat one fact."""
    return [
        hit.to_dict()
        if len(hit.relations) > 1
        else {k: v for k, v in hit.to_dict().items() if k not in ("path", "relations")}
        for hit in results
    ]
