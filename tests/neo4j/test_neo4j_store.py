"""The Neo4j store against the real server: schema, guards, batching and typed errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import pytest

import kag
from kag.errors import BackendAuthError, BackendUnavailableError, EmbeddingError, UnsafeQueryError
from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, City, Country, IsCityOf, seed_facts
from kag.graph.neo4j import Neo4jGraphStore

pytestmark = pytest.mark.neo4j


async def test_constraints_and_vector_indexes_are_created_idempotently(neo4j_kb_factory: Callable[..., Any]) -> None:
    kb = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    store = kb.store
    assert isinstance(store, Neo4jGraphStore)
    await store.ensure_schema(kb.schema.entity_labels, kb.schema.relation_labels, 384)  # second time: no error
    res = await store.run(
        "SHOW CONSTRAINTS YIELD name, type, properties RETURN name, type, properties", None, write=False, what="t"
    )
    names = {r["name"]: (r["type"], r["properties"]) for r in res.records}
    # unique per namespace: (id, kag_ns), so two tenants may hold the same entity id
    assert names["kag_City_ns_id"] == ("UNIQUENESS", ["id", "kag_ns"])
    assert names["kag_Country_ns_id"] == ("UNIQUENESS", ["id", "kag_ns"])
    assert names["kag_IsCapitalOf_ns_id"] == ("RELATIONSHIP_UNIQUENESS", ["id", "kag_ns"])
    assert "kag_City_id" not in names and "kag_entity_id" not in names
    await store.await_indexes(["kag_City_embedding"], "t")  # populated in the background (see test_index_wait)
    res = await store.run("SHOW VECTOR INDEXES YIELD name, state, options RETURN *", None, write=False, what="t")
    vector = {r["name"]: r for r in res.records}
    assert vector["kag_City_embedding"]["state"] == "ONLINE"
    assert vector["kag_City_embedding"]["options"]["indexConfig"]["vector.dimensions"] == 384


async def test_seed_example_end_to_end(neo4j_kb_factory: Callable[..., Any]) -> None:
    kb = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    await kb.upsert(seed_facts())
    await kb.upsert(seed_facts())  # idempotent
    counts = await kb.counts()
    assert counts["City"] == 12 and counts["IsCityOf"] == 12
    hits = await kb.triplet_search(
        {
            "subject_label": "City",
            "relation_label": "IsCapitalOf",
            "object_label": "Country",
            "object_similarity_search": "Germny",
        }
    )
    assert [(h.subject.name, h.object.name) for h in hits] == [("Berlin", "Germany")]  # type: ignore[union-attr]
    assert hits[0].subject.population == 3_645_000  # type: ignore[attr-defined]


async def test_read_guard_refuses_writes(neo4j_kb_factory: Callable[..., Any]) -> None:
    kb = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    store = kb.store
    assert isinstance(store, Neo4jGraphStore)
    for query in [
        "CREATE (n:City {id: 'x'})",
        "MATCH (n) DETACH DELETE n",
        "MATCH (n:City) SET n.name = 'x' RETURN n",
        "MERGE (n:Country {id: 'y'}) RETURN n",
    ]:
        with pytest.raises(UnsafeQueryError, match="not read-only"):
            await store.read(query, {}, "test")
    assert (await kb.counts())["nodes"] == 0  # EXPLAIN never executed anything


async def test_batched_writes(neo4j_kb_factory: Callable[..., Any]) -> None:
    kb = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    assert isinstance(kb.store, Neo4jGraphStore)
    kb.store.batch_size = 300
    facts = [IsCityOf(subj=City(name=f"Town {i}"), obj=Country(name=f"Land {i % 40}")) for i in range(1000)]
    assert await kb.upsert(facts) == {"entities": 1040, "relations": 1000}
    counts = await kb.counts()
    assert counts["City"] == 1000 and counts["Country"] == 40 and counts["IsCityOf"] == 1000


async def test_embedding_dimension_mismatch(neo4j_kb_factory: Callable[..., Any]) -> None:
    await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    with pytest.raises(EmbeddingError, match="384-dimensional"):
        await neo4j_kb_factory(
            entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS, embedder=kag.HashEmbedder(dimensions=64)
        )


async def test_wrong_password_is_a_typed_error(neo4j_config: dict[str, str]) -> None:
    kb = kag.KnowledgeBase(
        neo4j_config["uri"], entity_models=ENTITY_MODELS, user=neo4j_config["user"], password="not-the-password"
    )
    with pytest.raises(BackendAuthError, match="NEO4J_PASSWORD"):
        await kb.counts()
    await kb.aclose()


async def test_unreachable_server_is_a_typed_error() -> None:
    kb = kag.KnowledgeBase(
        "bolt://127.0.0.1:1",
        entity_models=ENTITY_MODELS,
        password="x",
        max_retries=1,
        backoff=0.01,
        connection_timeout=1.0,
        max_transaction_retry_time=0.5,
    )
    with pytest.raises(BackendUnavailableError, match="make neo4j-start"):
        await kb.upsert(Country(name="France"))
    await kb.aclose()


async def test_subgraph_matches_memory(neo4j_kb_factory: Callable[..., Any]) -> None:
    neo = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    mem = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    for kb in (neo, mem):
        await kb.upsert(seed_facts())
    for depth in (0, 1, 2):
        a = await neo.subgraph(Country(name="Spain"), depth=depth)
        b = await mem.subgraph(Country(name="Spain"), depth=depth)
        assert a.nodes == b.nodes and a.edges == b.edges


class L64(kag.Entity):
    label: Literal["A234567890123456789012345678901234567890123456789012345678901234"] = (
        "A234567890123456789012345678901234567890123456789012345678901234"
    )
    name: str


async def test_longest_allowed_label_works(neo4j_kb_factory: Callable[..., Any]) -> None:
    kb = await neo4j_kb_factory(entity_models=[L64])
    await kb.upsert(L64(name="x"))
    assert (await kb.similarity_search(L64.graph_label or "", "x", k=1))[0].score > 0.99


async def test_the_read_only_cache_is_bounded(neo4j_kb_factory: Any) -> None:
    from kag.graph.neo4j import READ_ONLY_CACHE_SIZE

    kb = await neo4j_kb_factory(entity_models=ENTITY_MODELS)
    store = kb.store
    for i in range(READ_ONLY_CACHE_SIZE + 40):
        await store.read(f"RETURN $x AS c{i}", {"x": 1}, "probing the cache")
    assert len(store._read_only) == READ_ONLY_CACHE_SIZE
    assert f"RETURN $x AS c{READ_ONLY_CACHE_SIZE + 39}" in store._read_only  # the newest are kept
    assert "RETURN $x AS c0" not in store._read_only


async def test_write_transactions_share_the_read_bookmarks(neo4j_kb_factory: Callable[..., Any]) -> None:
    # on a cluster a read must wait for the member that saw the last write: the explicit write
    # transactions (upserts, deletes) record their bookmark where execute_query reads look for it
    kb = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    store = kb.store
    assert isinstance(store, Neo4jGraphStore)
    await kb.ensure_ready()
    manager = store.driver.execute_query_bookmark_manager
    before = set(await manager.get_bookmarks())
    async with store.session() as session:

        async def work(tx: Any) -> None:
            await (await tx.run("CREATE (:BookmarkProbe {id: 'probe'})")).consume()

        await session.execute_write(work)
        last = await session.last_bookmarks()
    after = set(await manager.get_bookmarks())
    assert after != before and set(last.raw_values) <= after
    await kb.upsert(seed_facts())
    assert set(await manager.get_bookmarks()) != after  # the store's own upsert transaction moved them on
    await store.run("MATCH (p:BookmarkProbe) DELETE p", None, write=True, what="cleanup")
