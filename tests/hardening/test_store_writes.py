"""Writes under concurrency and failure, on the memory store and on Neo4j.

* 40 concurrent upserts of one entity (and one relation), each with its own source,
  keep all 40 sources (the merge happens inside the store's write, under its lock);
* one ``upsert`` call is all or nothing: a relation to an unknown node refuses the
  whole call, even when its nodes span several batches (one transaction on Neo4j);
* a caller's blocking Neo4j driver takes the same transactional path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import neo4j
import pytest

import kag
from kag.errors import ConfigError, StoreFormatError
from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, City, Country, IsCityOf
from kag.graph.base import NodeRecord, RelationRecord
from kag.graph.neo4j import Neo4jGraphStore

N = 40


@pytest.fixture(params=["memory", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def make_kb(request: pytest.FixtureRequest) -> Callable[..., Any]:
    if request.param == "memory":

        async def memory(**_: Any) -> kag.KnowledgeBase:
            return kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)

        return memory
    factory: Callable[..., Any] = request.getfixturevalue("neo4j_kb_factory")

    async def on_neo4j(**kwargs: Any) -> kag.KnowledgeBase:
        kb: kag.KnowledgeBase = await factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS, **kwargs)
        return kb

    return on_neo4j


async def test_concurrent_upserts_keep_every_source(make_kb: Callable[..., Any]) -> None:
    kb: kag.KnowledgeBase = await make_kb()
    fact = IsCityOf(subj=City(name="Paris"), obj=Country(name="France"))
    await kb.upsert(fact)
    sources = [f"chunk-{i:02d}" for i in range(N)]

    async def one(i: int) -> None:
        await kb.upsert(fact, sources={fact.subj.id: [sources[i]], fact.id: [sources[i]]})

    await asyncio.gather(*(one(i) for i in range(N)))
    assert await kb.provenance(fact.subj) == sources
    assert await kb.provenance(fact) == sources
    assert await kb.provenance(fact.obj) == []
    await kb.upsert(City(name="Paris", population=2_100_000))  # a later plain upsert keeps them
    assert await kb.provenance(fact.subj) == sources


async def test_an_upsert_is_all_or_nothing(make_kb: Callable[..., Any]) -> None:
    kb: kag.KnowledgeBase = await make_kb()
    await kb.ensure_ready()
    if isinstance(kb.store, Neo4jGraphStore):
        kb.store.batch_size = 2  # the nodes span three statements: still one transaction
    vector = (await kb.embed(["a town"]))[0]
    nodes = [NodeRecord(f"e_town{i}", "City", {"name": f"Town {i}"}, vector) for i in range(5)]
    good = RelationRecord("r_good", "IsCityOf", "e_town0", "e_town1", {})
    bad = RelationRecord("r_bad", "IsCityOf", "e_town0", "e_nowhere", {})
    with pytest.raises(StoreFormatError, match="e_nowhere"):
        await kb.store.upsert(nodes, [good, bad])
    assert await kb.store.get_nodes([n.id for n in nodes]) == {}
    assert await kb.store.get_relations(["r_good", "r_bad"]) == {}
    assert (await kb.store.counts())["nodes"] == 0
    await kb.store.upsert(nodes, [good])  # the same call without the bad relation: all of it
    assert sorted(await kb.store.get_nodes([n.id for n in nodes])) == [n.id for n in nodes]
    assert list(await kb.store.get_relations(["r_good"])) == ["r_good"]
    assert await kb.store.delete(["e_town0", "e_town4", "r_good", "e_unknown"]) == 3
    assert sorted(await kb.store.get_nodes([n.id for n in nodes])) == ["e_town1", "e_town2", "e_town3"]


@pytest.mark.neo4j
async def test_a_blocking_driver_writes_in_one_transaction(
    neo4j_config: dict[str, str], neo4j_kb_factory: Callable[..., Any]
) -> None:
    await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)  # clears the graph
    driver = neo4j.GraphDatabase.driver(neo4j_config["uri"], auth=(neo4j_config["user"], neo4j_config["password"]))
    try:
        kb = kag.KnowledgeBase(
            entity_models=ENTITY_MODELS,
            relation_models=RELATION_MODELS,
            driver=driver,
            database=neo4j_config["database"],
        )
        assert isinstance(kb.store, Neo4jGraphStore)
        fact = IsCityOf(subj=City(name="Lyon"), obj=Country(name="France"))
        await asyncio.gather(*(kb.upsert(fact, sources={fact.subj.id: [f"c{i:02d}"]}) for i in range(8)))
        assert await kb.provenance(fact.subj) == [f"c{i:02d}" for i in range(8)]
        vector = (await kb.embed(["x"]))[0]
        with pytest.raises(StoreFormatError):
            await kb.store.upsert(
                [NodeRecord("e_solo", "City", {"name": "Solo"}, vector)],
                [RelationRecord("r_x", "IsCityOf", "e_solo", "e_missing", {})],
            )
        assert await kb.store.get_nodes(["e_solo"]) == {}
        assert await kb.delete(fact) == 1
        await kb.aclose()
    finally:
        driver.close()


@pytest.mark.neo4j
async def test_a_large_upsert_is_written_in_resumable_batches(neo4j_kb_factory: Callable[..., Any]) -> None:
    kb: kag.KnowledgeBase = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    store = kb.store
    assert isinstance(store, Neo4jGraphStore) and store.atomic_rows == 5000  # the default
    store.atomic_rows, store.batch_size = 4, 2  # 5 nodes + 2 relations: above the limit, batches of 2
    vector = (await kb.embed(["a town"]))[0]
    nodes = [NodeRecord(f"e_town{i}", "City", {"name": f"Town {i}"}, vector) for i in range(5)]
    good = RelationRecord("r_good", "IsCityOf", "e_town0", "e_town1", {})
    bad = RelationRecord("r_bad", "IsCityOf", "e_town0", "e_nowhere", {})
    with pytest.raises(StoreFormatError, match="e_nowhere"):
        await store.upsert(nodes, [good, bad])
    # the node batches committed; the failing relation batch (good and bad together) did not
    assert sorted(await store.get_nodes([n.id for n in nodes])) == [n.id for n in nodes]
    assert await store.get_relations(["r_good", "r_bad"]) == {}
    await store.upsert(nodes, [good])  # re-running resumes: nothing is duplicated
    counts = await store.counts()
    assert counts["nodes"] == 5 and counts["relations"] == 1


@pytest.mark.neo4j
async def test_a_large_upsert_writes_relations_in_batches_of_relation_batch_size(
    neo4j_kb_factory: Callable[..., Any],
) -> None:
    kb: kag.KnowledgeBase = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    store = kb.store
    assert isinstance(store, Neo4jGraphStore) and store.relation_batch_size == 5000  # the default
    store.atomic_rows, store.relation_batch_size = 2, 1  # each relation its own transaction
    vector = (await kb.embed(["a town"]))[0]
    nodes = [NodeRecord(f"e_burg{i}", "City", {"name": f"Burg {i}"}, vector) for i in range(2)]
    good = RelationRecord("r_good", "IsCityOf", "e_burg0", "e_burg1", {})
    bad = RelationRecord("r_bad", "IsCityOf", "e_burg0", "e_nowhere", {})
    with pytest.raises(StoreFormatError, match="e_nowhere"):
        await store.upsert(nodes, [good, bad])
    # the good relation's batch committed before the bad one failed
    assert sorted(await store.get_relations(["r_good", "r_bad"])) == ["r_good"]
    with pytest.raises(ConfigError, match="relation_batch_size"):
        Neo4jGraphStore("bolt://127.0.0.1:1", relation_batch_size=0)
