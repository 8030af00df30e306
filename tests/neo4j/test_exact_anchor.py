"""Exact searches on Neo4j score beside the driver (kag.graph.neo4j_anchor): the memory store's
scores bit for bit, the Cypher-only results, and a cache that follows other writers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from neo4j import AsyncGraphDatabase

import kag
from kag.errors import StoreFormatError
from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, City, Country, IsCapitalOf, IsCityOf, seed_facts
from kag.graph.base import NodeRecord, RelationRecord
from kag.graph.neo4j import Neo4jGraphStore
from kag.graph.neo4j_anchor import threshold_boundary

pytestmark = pytest.mark.neo4j

SEARCHES: list[tuple[dict[str, Any], float]] = [
    ({"subject_label": "City", "subject_similarity_search": "Pariss", "relation_label": "IsCityOf"}, 0.6),
    ({"subject_label": "City", "relation_label": "IsCapitalOf", "object_similarity_search": "Germny"}, 0.6),
    ({"subject_similarity_search": "Lyon", "object_similarity_search": "Frnace", "relation_label": "*"}, 0.55),
    ({"subject_similarity_search": "Japan", "bidirectional": True}, 0.0),
    ({"subject_similarity_search": "Osaka", "relation_label": "IsCityOf", "count": True}, 0.5),
    ({"subject_similarity_search": "Tokyo", "relation_label": "IsCityOf", "negated": True}, 0.5),
]


def rows(result: kag.TripletResults) -> list[tuple[tuple[str, ...], tuple[str, ...], float]]:
    return [(tuple(e.id for e in h.path), tuple(r.id for r in h.relations), h.score) for h in result]


async def kb_pair(factory: Callable[..., Any], linking: bool = True) -> tuple[kag.KnowledgeBase, kag.KnowledgeBase]:
    """Seed facts on memory and Neo4j (linking off: every text is scored by cosine, none resolved to a name)."""
    mem = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS, linking=linking)
    neo = await factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS, linking=linking)
    for kb in (mem, neo):
        await kb.upsert(seed_facts())
    return mem, neo


def store(kb: kag.KnowledgeBase) -> Neo4jGraphStore:
    assert isinstance(kb.store, Neo4jGraphStore)
    return kb.store


@pytest.mark.parametrize("linking", [True, False], ids=["linked", "cosine"])
async def test_scores_are_the_memory_stores_bit_for_bit(neo4j_kb_factory: Callable[..., Any], linking: bool) -> None:
    mem, neo = await kb_pair(neo4j_kb_factory, linking)
    for search, threshold in SEARCHES:
        a = await mem.triplet_search(search, k=20, threshold=threshold)
        b = await neo.triplet_search(search, k=20, threshold=threshold)
        assert a.count == b.count, search
        assert rows(a) == rows(b), search  # ids, order and scores exactly equal
        assert str(a.query) == str(b.query)  # the plan's own Cypher is what both report
    assert set(store(neo).anchor_scorer.cached) == {"City", "Country"}


async def test_same_rows_as_the_cypher_only_scan(neo4j_kb_factory: Callable[..., Any]) -> None:
    _, neo = await kb_pair(neo4j_kb_factory, linking=False)
    for search, threshold in SEARCHES:
        exact = await neo.triplet_search(search, k=20, threshold=threshold)
        store(neo).exact_anchor = False  # Neo4j's own vector.similarity.cosine, in float32
        try:
            scan = await neo.triplet_search(search, k=20, threshold=threshold)
        finally:
            store(neo).exact_anchor = True
        assert exact.count == scan.count, search
        assert [r[:2] for r in rows(exact)] == [r[:2] for r in rows(scan)], search
        assert [h.score for h in exact] == pytest.approx([h.score for h in scan], abs=1e-6)


async def test_an_anchor_cut_too_short_grows_until_the_answer_is_proven(neo4j_kb_factory: Callable[..., Any]) -> None:
    # many cities near the query text, only one of them a capital: the best anchors have no IsCapitalOf
    # linking off: the text is scored by cosine instead of resolved to the entities it names
    mem = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS, linking=False)
    neo = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS, linking=False)
    france = Country(name="France")
    facts: list[kag.Relation] = [IsCityOf(subj=City(name=f"Saint-Denis {i}"), obj=france) for i in range(40)]
    facts.append(IsCapitalOf(subj=City(name="Saint-Dizier"), obj=france))
    for kb in (mem, neo):
        await kb.upsert(facts)
    store(neo).anchor_first = 1  # the first try sends k = 1 anchor
    search = {"subject_label": "City", "subject_similarity_search": "Saint-Denis", "relation_label": "IsCapitalOf"}
    a = await mem.triplet_search(search, k=1, threshold=0.5)
    b = await neo.triplet_search(search, k=1, threshold=0.5)
    assert [h.subject.name for h in b] == ["Saint-Dizier"]
    assert rows(a) == rows(b)


async def test_a_write_by_another_store_is_seen_by_the_next_search(
    neo4j_kb_factory: Callable[..., Any], neo4j_config: dict[str, str]
) -> None:
    _, neo = await kb_pair(neo4j_kb_factory, linking=False)
    other = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)  # own driver
    search = {"subject_label": "City", "subject_similarity_search": "Kyotoo", "relation_label": "IsCityOf"}
    before = await neo.triplet_search(search, k=5, threshold=0.7)
    assert "Kyoto" not in {h.subject.name for h in before}  # type: ignore[attr-defined]
    loaded = store(neo).anchor_scorer.cached["City"]

    # a new node through another store: its label's counter and count change
    await other.upsert([IsCityOf(subj=City(name="Kyoto"), obj=Country(name="Japan"))])
    after = await neo.triplet_search(search, k=5, threshold=0.7)
    assert after[0].subject.name == "Kyoto"  # type: ignore[attr-defined]
    assert store(neo).anchor_scorer.cached["City"] != loaded

    # a changed embedding, no node added: only the counter tells; the scores follow the new vector
    kyoto = after[0].subject
    tokyo = next(iter(await neo.similarity_search("City", "Tokyo", k=1)))
    assert tokyo.entity.name == "Tokyo"  # type: ignore[attr-defined]
    count_before = store(neo).anchor_scorer.cached["City"][1]
    vector = (await neo.embedder.embed(["Kyotoo"]))[0]
    await store(other).upsert([NodeRecord(tokyo.entity.id, "City", {"name": "Tokyo"}, vector)], [])
    moved = await neo.triplet_search(search, k=5, threshold=0.7)
    assert store(neo).anchor_scorer.cached["City"][1] == count_before
    assert moved[0].subject.name == "Tokyo" and moved[0].score == pytest.approx(1.0)  # type: ignore[attr-defined]
    assert kyoto.name in {h.subject.name for h in moved}  # type: ignore[attr-defined]

    # the same change through a raw driver (no counter): not seen until the cache is invalidated
    driver = AsyncGraphDatabase.driver(neo4j_config["uri"], auth=(neo4j_config["user"], neo4j_config["password"]))
    try:
        far = (await neo.embedder.embed(["zzzz qqqq"]))[0]
        await driver.execute_query(
            "MATCH (n:City {id: $id}) SET n.embedding = $e",
            id=tokyo.entity.id,
            e=[float(x) for x in far],
            database_=neo4j_config["database"],
        )
    finally:
        await driver.close()
    stale = await neo.triplet_search(search, k=5, threshold=0.7)
    assert stale[0].subject.name == "Tokyo"  # type: ignore[attr-defined]
    store(neo).anchor_scorer.invalidate(["City"])
    fresh = await neo.triplet_search(search, k=5, threshold=0.7)
    assert "Tokyo" not in {h.subject.name for h in fresh}  # type: ignore[attr-defined]


async def test_approximate_mode_still_asks_the_vector_index(neo4j_kb_factory: Callable[..., Any]) -> None:
    _, neo = await kb_pair(neo4j_kb_factory, linking=False)
    search = {"subject_label": "City", "subject_similarity_search": "Lyon", "relation_label": "IsCityOf"}
    approx = await neo.triplet_search(search, threshold=0.6, candidates=20)
    assert "db.index.vector.queryNodes" in str(approx.query)
    assert rows(approx)[0][:2] == rows(await neo.triplet_search(search, threshold=0.6))[0][:2]


async def test_each_node_write_stamps_its_label_in_its_transaction(neo4j_kb_factory: Callable[..., Any]) -> None:
    _, neo = await kb_pair(neo4j_kb_factory, linking=False)
    other = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    scorer = store(neo).anchor_scorer
    before = await scorer.versions(["City", "Country"])
    await asyncio.gather(
        neo.upsert([City(name="Nara")]), other.upsert([City(name="Kobe")])
    )  # two writers at once: neither waits on a shared counter
    after = await scorer.versions(["City", "Country"])
    assert after["City"] == (before["City"][0] + 2, before["City"][1] + 2)
    assert after["Country"] == before["Country"]
    # a relation to an unknown node fails the upsert's one transaction: the node and its stamp roll back
    node = NodeRecord("e_nowhere", "City", {"name": "Nowhere"}, np.ones(384, dtype=np.float32))
    with pytest.raises(StoreFormatError):
        await store(neo).upsert([node], [RelationRecord("r_x", "IsCityOf", "e_nowhere", "e_missing", {})])
    assert await scorer.versions(["City"]) == {"City": after["City"]}


@pytest.mark.parametrize("threshold", [0.0, 0.1, 0.5, 0.6, 0.7, 0.7000001, 0.95, 1.0])
def test_threshold_boundary_decides_as_float32(threshold: float) -> None:
    b = threshold_boundary(threshold)
    t32 = np.float32(threshold)
    assert np.float32(b) >= t32
    assert np.float32(np.nextafter(b, -np.inf)) < t32
