"""Namespaces (tenants) on one Neo4j database: no read, write or delete crosses from one to another.

Both tenants hold the SAME ids (entity ids are derived from names, document ids from content),
so a query or delete that forgot the namespace would visibly touch the other tenant.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

import kag
from kag.errors import ConfigError
from kag.examples.seed import City, Country, IsCapitalOf, IsCityOf, seed_facts
from kag.graph.neo4j import Neo4jGraphStore
from kag.knowledge.knowledge import Knowledge

pytestmark = pytest.mark.neo4j

SHARED = "Paris is the capital of France. The Seine flows through Paris."


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def tenants(neo4j_kb_factory: Callable[..., Any]) -> AsyncIterator[Callable[[], Any]]:
    """``await make()`` -> two tenants' Knowledge; both namespaces are emptied afterwards."""
    made: list[Knowledge] = []

    async def make() -> tuple[Knowledge, Knowledge]:
        pair = await two_tenants(neo4j_kb_factory)
        made.extend(pair)
        return pair

    yield make
    for knowledge in made:  # leave nothing behind on the shared server
        store = knowledge.kb.store
        assert isinstance(store, Neo4jGraphStore)
        await store.clear()
        await knowledge.store.clear()


async def two_tenants(make: Callable[..., Any]) -> tuple[Knowledge, Knowledge]:
    a = await make(entity_models=[City, Country], relation_models=[IsCapitalOf, IsCityOf], namespace=tenant())
    b = await make(entity_models=[City, Country], relation_models=[IsCapitalOf, IsCityOf], namespace=tenant())
    ka, kb = Knowledge(a), Knowledge(b)
    await a.upsert(seed_facts())
    # b holds a different Paris (another population) and one city a lacks
    await b.upsert(
        [
            IsCapitalOf(subj=City(name="Paris", population=1), obj=Country(name="France")),
            IsCityOf(subj=City(name="Atlantis"), obj=Country(name="France")),
        ]
    )
    # the same document and chunk ids in both (ids hash source and text), told apart by their metadata
    await ka.add(kag.Document.from_text(SHARED, source="shared.md", metadata={"owner": "a"}))
    await kb.add(kag.Document.from_text(SHARED, source="shared.md", metadata={"owner": "b"}))
    await ka.add(kag.Document.from_text("Only tenant A knows the word zanzibarian.", source="a.md"))
    return ka, kb


async def test_same_ids_live_apart_and_reads_stay_inside(tenants: Callable[[], Any]) -> None:
    ka, kb = await tenants()
    paris = City(name="Paris").id
    got_a, got_b = await ka.kb.get(paris), await kb.kb.get(paris)
    assert isinstance(got_a, City) and isinstance(got_b, City)
    assert got_b.population == 1 and got_a.population != 1
    assert await kb.kb.get(City(name="Tokyo").id) is None and await ka.kb.get(City(name="Atlantis").id) is None
    counts_a, counts_b = await ka.counts(), await kb.counts()
    assert counts_b["City"] == 2 and counts_a["City"] > 2
    assert counts_a["documents"] == 2 and counts_b["documents"] == 1

    # triplet search, exact and approximate (the vector index spans every tenant)
    search = {"subject_label": "City", "relation_label": "IsCapitalOf", "object_label": "Country"}
    for candidates in (None, 50):
        hits_b = await kb.kb.triplet_search(search, k=50, threshold=0.0, candidates=candidates)
        assert [h.subject.name for h in hits_b] == ["Paris"] and hits_b[0].subject.population == 1
        assert "kag_ns: $ns" in hits_b.query.text  # type: ignore[union-attr]
        assert hits_b.query.params["ns"] == kb.kb.namespace  # type: ignore[union-attr]
        hits_a = await ka.kb.triplet_search(search, k=50, threshold=0.0, candidates=candidates)
        assert len(hits_a) > 1 and all(h.subject.population != 1 for h in hits_a)
    sim = await kb.kb.similarity_search("City", "Tokyo", k=10)
    assert {h.entity.name for h in sim} <= {"Paris", "Atlantis"}

    # passages: vector, keyword, hybrid; tenant B never sees A's private document
    for mode in ("vector", "keyword", "hybrid"):
        hits = await kb.search("zanzibarian", k=10, mode=mode)
        assert all("zanzibarian" not in h.text for h in hits)
        assert any("zanzibarian" in h.text for h in await ka.search("zanzibarian", k=10, mode=mode))
    assert [d.source for d in await kb.documents()] == ["shared.md"]
    # the same chunk ids in both: every passage path returns the caller's own copy only
    for mode in ("vector", "keyword", "hybrid"):
        for knowledge, owner in ((ka, "a"), (kb, "b")):
            found = await knowledge.search("Seine flows through Paris", k=10, mode=mode)
            hits = [h for h in found if h.kind == "passage" and h.source == "shared.md"]
            assert hits and {h.metadata.get("owner") for h in hits} == {owner}, (mode, owner)

    # a raw read-only query gets the store's namespace as $ns
    rows = await kb.kb.query("MATCH (n:City) WHERE n.kag_ns = $ns RETURN count(n) AS n")
    assert rows == [{"n": 2}]


async def test_writes_and_deletes_never_cross(tenants: Callable[[], Any]) -> None:
    ka, kb = await tenants()
    paris, france = City(name="Paris").id, Country(name="France").id
    before = await ka.counts()
    # deleting an id that both hold removes it from b only
    assert await kb.kb.delete([paris]) == 1
    assert await kb.kb.get(paris) is None and await ka.kb.get(paris) is not None
    # deleting the shared document by id (and by source) in b leaves a's copy
    shared_id = next(d.id for d in await kb.documents())
    await kb.delete(document_ids=[shared_id])
    assert [d.id for d in await ka.documents() if d.id == shared_id] == [shared_id]
    assert await kb.documents() == []
    # an id only a holds cannot be deleted through b
    tokyo = City(name="Tokyo").id
    assert await kb.kb.delete([tokyo]) == 0 and await ka.kb.get(tokyo) is not None
    # clearing b's graph and passages leaves a untouched
    store_b = kb.kb.store
    assert isinstance(store_b, Neo4jGraphStore)
    await store_b.clear()
    await kb.store.clear()
    assert await ka.counts() == before
    assert (await kb.counts())["nodes"] == 0
    # upserting into b again does not merge into a's node of the same id
    await kb.kb.upsert([IsCityOf(subj=City(name="Paris", population=2), obj=Country(name="France"))])
    got = await ka.kb.get(paris)
    assert isinstance(got, City) and got.population != 2
    assert (await ka.kb.get(france)) is not None


@pytest.mark.parametrize("bad", ["", "a' OR 1=1 //", "x" * 65, "../etc", "-lead", "sp ace", "ns\n", None, 7])
def test_namespace_names_are_checked(bad: Any) -> None:
    with pytest.raises(ConfigError, match="namespace"):
        Neo4jGraphStore("neo4j://127.0.0.1:1", namespace=bad)
    if bad is not None:  # namespace=None is the default namespace
        with pytest.raises(ConfigError, match="namespace"):
            kag.KnowledgeBase("memory://", namespace=bad)
