"""matrix_reload="background": a stale label matrix reloads in a background task while searches run
in Cypher; once it is loaded, searches are the memory store's bit for bit again."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

import kag
from kag.errors import ConfigError
from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, City, Country, IsCityOf, seed_facts
from kag.graph.neo4j import Neo4jGraphStore
from tests.neo4j.test_exact_anchor import SEARCHES, rows, store

pytestmark = pytest.mark.neo4j

KYOTO = {"subject_label": "City", "subject_similarity_search": "Kyotoo", "relation_label": "IsCityOf"}


async def test_a_stale_matrix_reloads_in_the_background_and_searches_run_in_cypher_meanwhile(
    neo4j_kb_factory: Callable[..., Any],
) -> None:
    mem = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS, linking=False)
    neo = await neo4j_kb_factory(
        entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS, linking=False, matrix_reload="background"
    )
    writer = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    for kb in (mem, writer):
        await kb.upsert(seed_facts())
    scorer = store(neo).anchor_scorer
    assert scorer.background and scorer.cached == {}

    # nothing loaded yet: the first search answers from Cypher and starts the load beside it
    first = await neo.triplet_search(KYOTO, k=5, threshold=0.6)
    assert set(scorer._loading) == {"City"}
    await scorer.settle()
    assert set(scorer.cached) == {"City"}
    for search, threshold in SEARCHES:  # loaded: bit for bit the memory store's rows and scores
        await scorer.settle()
        want = await mem.triplet_search(search, k=20, threshold=threshold)
        got = await neo.triplet_search(search, k=20, threshold=threshold)
        assert want.count == got.count, search
        if not search.get("count"):
            await scorer.settle()
            again = await neo.triplet_search(search, k=20, threshold=threshold)
            assert rows(again) == rows(want), search
    assert [r[:2] for r in rows(first)] == [r[:2] for r in rows(await mem.triplet_search(KYOTO, k=5, threshold=0.6))]

    # a write makes the City matrix stale: the next search does not wait for the reload
    loaded = scorer.cached["City"]
    fact = IsCityOf(subj=City(name="Kyoto"), obj=Country(name="Japan"))
    for kb in (mem, writer):
        await kb.upsert([fact])
    during = await neo.triplet_search(KYOTO, k=5, threshold=0.6)
    want = await mem.triplet_search(KYOTO, k=5, threshold=0.6)
    assert during[0].subject.name == "Kyoto"  # type: ignore[attr-defined]  # the write is seen at once
    assert [r[:2] for r in rows(during)] == [r[:2] for r in rows(want)]
    assert [h.score for h in during] == pytest.approx([h.score for h in want], abs=1e-6)
    await scorer.settle()
    assert scorer.cached["City"] != loaded
    assert rows(await neo.triplet_search(KYOTO, k=5, threshold=0.6)) == rows(want)


async def test_wait_is_the_default_and_closing_stops_reloads(
    neo4j_kb_factory: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KAG_NEO4J_MATRIX_RELOAD", raising=False)
    neo = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS, linking=False)
    await neo.upsert(seed_facts())
    assert store(neo).matrix_reload == "wait"
    await neo.triplet_search(KYOTO, k=5, threshold=0.6)
    assert "City" in store(neo).anchor_scorer.cached  # loaded before answering

    monkeypatch.setenv("KAG_NEO4J_MATRIX_RELOAD", "background")
    bg = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS, linking=False)
    assert store(bg).matrix_reload == "background"
    assert store(bg).in_namespace("other").matrix_reload == "background"
    await bg.triplet_search(KYOTO, k=5, threshold=0.6)
    running = [t for t in store(bg).anchor_scorer._loading.values() if not t.done()]
    await store(bg).aclose()
    await asyncio.sleep(0)
    assert all(t.cancelled() or t.done() for t in running)

    monkeypatch.setenv("KAG_NEO4J_MATRIX_RELOAD", "sometimes")
    with pytest.raises(ConfigError, match="matrix_reload must be one of wait, background"):
        Neo4jGraphStore("neo4j://127.0.0.1:1")
