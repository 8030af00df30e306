"""Approximate search (vector-index anchor) on the real server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, seed_facts

pytestmark = pytest.mark.neo4j


@pytest.mark.parametrize("linking", [False, True], ids=["cosine", "linked"])
async def test_vector_index_anchor_agrees_with_exact_on_small_data(
    neo4j_kb_factory: Callable[..., Any], linking: bool
) -> None:
    kb = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS, linking=linking)
    await kb.upsert(seed_facts())
    for search in (
        {
            "subject_label": "City",
            "relation_label": "IsCapitalOf",
            "object_label": "Country",
            "object_similarity_search": "Germny",
        },
        {"subject_label": "City", "subject_similarity_search": "Lyon", "relation_label": "IsCityOf"},
        {
            "subject_label": "Country",
            "subject_similarity_search": "Spain",
            "relation_label": "IsCityOf",
            "bidirectional": True,
        },
    ):
        exact = await kb.triplet_search(search, threshold=0.6)
        approx = await kb.triplet_search(search, threshold=0.6, candidates=20)
        if not linking:  # the anchor side comes from the vector index (linked: its nearest entities do)
            assert "db.index.vector.queryNodes" in approx.query.text  # type: ignore[union-attr]
        assert [h.text() for h in approx] == [h.text() for h in exact] and len(exact) > 0
        assert [h.score for h in approx] == pytest.approx([h.score for h in exact], abs=1e-6)
