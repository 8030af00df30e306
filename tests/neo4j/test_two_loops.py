"""A Neo4j knowledge base used from one event loop after another (its driver is reopened in each)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

import kag
from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, City, Country, IsCityOf

pytestmark = pytest.mark.neo4j


def facts(start: int, n: int = 30) -> list[IsCityOf]:
    return [
        IsCityOf(subj=City(name=f"Town {i}", population=i), obj=Country(name=f"Land {i % 5}"))
        for i in range(start, start + n)
    ]


def test_two_asyncio_runs_in_a_row_with_concurrent_use(neo4j_config: dict[str, str]) -> None:
    kb = kag.KnowledgeBase(
        neo4j_config["uri"],
        entity_models=ENTITY_MODELS,
        relation_models=RELATION_MODELS,
        username=neo4j_config["user"],
        password=neo4j_config["password"],
        database=neo4j_config["database"],
        namespace=f"t-{uuid.uuid4().hex[:12]}",
    )
    search = {"subject_label": "City", "relation_label": "IsCityOf", "object_label": "Country"}

    async def busy(start: int) -> int:
        await asyncio.gather(*(kb.upsert(facts(start + 100 * j)) for j in range(3)))
        found = await asyncio.gather(*(kb.triplet_search(search, k=5, threshold=0.0) for _ in range(4)))
        assert all(len(r) == 5 for r in found)
        return (await kb.counts())["IsCityOf"]

    try:
        assert asyncio.run(busy(0)) == 90
        assert asyncio.run(busy(1000)) == 180  # a new loop: before, the first loop's driver failed here
        assert kb.sync.counts()["IsCityOf"] == 180  # and the blocking facade's own loop
    finally:

        async def clean() -> None:
            await kb.store.clear()  # type: ignore[attr-defined]
            await kb.aclose()

        asyncio.run(clean())
