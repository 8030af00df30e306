"""``Neo4jGraphStore.bulk_upsert`` on the real server: the graph ``upsert`` writes, every batch one
transaction whatever ``atomic_rows`` says, idempotent, and seen by exact and approximate searches."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import kag
from kag.errors import StoreFormatError
from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, City, Country, IsCityOf, seed_facts
from kag.graph.base import NodeRecord, RelationRecord
from kag.graph.neo4j import Neo4jGraphStore
from kag.graph.neo4j_write_cypher import Rows
from tests.neo4j.test_exact_anchor import SEARCHES, rows

pytestmark = pytest.mark.neo4j


def store(kb: kag.KnowledgeBase) -> Neo4jGraphStore:
    assert isinstance(kb.store, Neo4jGraphStore)
    return kb.store


async def records(kb: kag.KnowledgeBase, facts: list[Any]) -> tuple[list[NodeRecord], list[RelationRecord]]:
    """The node and relation records ``kb.upsert(facts)`` hands its store (kept, not written)."""
    kept: tuple[list[NodeRecord], list[RelationRecord]] = ([], [])
    real = kb.store.upsert

    async def keep(nodes: Any, relations: Any) -> None:
        kept[0].extend(nodes)
        kept[1].extend(relations)

    kb.store.upsert = keep  # type: ignore[method-assign]
    try:
        await kb.upsert(facts)
    finally:
        kb.store.upsert = real  # type: ignore[method-assign]
    return kept


async def test_rows_travel_as_a_plain_list_with_a_short_repr(neo4j_kb_factory: Callable[..., Any]) -> None:
    neo = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    batch = [{"id": str(i), "embedding": (np.arange(384, dtype=np.float32) / (i + 1)).tolist()} for i in range(3)]
    got = await store(neo).query("RETURN $rows AS rows", {"rows": Rows(batch)})
    assert got == [{"rows": batch}]
    assert repr({"rows": Rows(batch)}) == "{'rows': <3 rows>}"  # what the driver formats for its debug log


async def test_bulk_upsert_matches_upsert_and_is_idempotent(neo4j_kb_factory: Callable[..., Any]) -> None:
    mem = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS, linking=False)
    await mem.upsert(seed_facts())
    neo = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS, linking=False)
    nodes, relations = await records(neo, seed_facts())
    assert len({r.label for r in relations}) > 1
    # a store whose upserts are never atomic: bulk_upsert's batches are still one transaction each
    store(neo).atomic_rows = 0
    # small batches of mixed relation types: many transactions, the same graph as upsert writes
    await store(neo).bulk_upsert(nodes, relations, batch_size=4, concurrency=3, relation_batch_size=5)
    want = await mem.counts()
    assert await neo.counts() == want
    for search, threshold in SEARCHES:
        a = await mem.triplet_search(search, k=20, threshold=threshold)
        b = await neo.triplet_search(search, k=20, threshold=threshold)
        assert rows(a) == rows(b), search

    # the same call again duplicates nothing and changes no answer
    await store(neo).bulk_upsert(nodes, relations, batch_size=4, concurrency=3, relation_batch_size=5)
    assert await neo.counts() == want
    for search, threshold in SEARCHES:
        assert rows(await mem.triplet_search(search, k=20, threshold=threshold)) == rows(
            await neo.triplet_search(search, k=20, threshold=threshold)
        ), search


async def test_new_nodes_are_seen_by_exact_and_approximate_searches(neo4j_kb_factory: Callable[..., Any]) -> None:
    neo = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS, linking=False)
    await neo.upsert(seed_facts())
    search = {"subject_label": "City", "subject_similarity_search": "Kyotoo", "relation_label": "IsCityOf"}
    before = await neo.triplet_search(search, k=5, threshold=0.7)
    assert "Kyoto" not in {h.subject.name for h in before}
    assert "City" in store(neo).anchor_scorer.cached  # the exact search's matrix is loaded

    nodes, relations = await records(neo, [IsCityOf(subj=City(name="Kyoto"), obj=Country(name="Japan"))])
    await store(neo).bulk_upsert(nodes, relations)
    exact = await neo.triplet_search(search, k=5, threshold=0.7)
    assert exact[0].subject.name == "Kyoto"  # the write stamp moved the matrix on
    approx = await neo.triplet_search(search, k=5, threshold=0.7, candidates=20)  # from the vector index
    assert [h.subject.name for h in approx] == [h.subject.name for h in exact]


async def test_a_relation_batch_with_a_missing_endpoint_writes_none_of_its_rows(
    neo4j_kb_factory: Callable[..., Any],
) -> None:
    neo = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    nodes, relations = await records(neo, seed_facts())
    store(neo).atomic_rows = 0
    # of the type written last: the batch's statements for the other types come before it
    dangling = RelationRecord("r_x", max(r.label for r in relations), nodes[0].id, "e_missing", {})
    with pytest.raises(StoreFormatError, match="e_missing"):
        await store(neo).bulk_upsert(nodes, [*relations, dangling], relation_batch_size=len(relations) + 1)
    counts = await neo.counts()
    assert counts["nodes"] == len({n.id for n in nodes}) and counts["relations"] == 0  # one batch: all or none
    # re-run without the bad row: completes the load
    await store(neo).bulk_upsert(nodes, relations)
    assert (await neo.counts())["relations"] == len({r.id for r in relations})


async def test_relations_are_written_beside_the_later_node_batches(neo4j_kb_factory: Callable[..., Any]) -> None:
    neo = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS, linking=False)
    nodes, relations = await records(neo, seed_facts())
    events: list[tuple[str, str]] = []
    write = store(neo)._write

    async def traced(n: Any, r: Any, **kw: Any) -> None:
        kind = "nodes" if n else "relations"
        events.append(("start", kind))
        await write(n, r, **kw)
        events.append(("end", kind))

    store(neo)._write = traced  # type: ignore[method-assign]
    await store(neo).bulk_upsert(nodes, relations, batch_size=2, concurrency=1, relation_batch_size=4)
    first_relations = events.index(("start", "relations"))
    last_nodes = len(events) - 1 - events[::-1].index(("end", "nodes"))
    assert first_relations < last_nodes  # not every node batch first
    assert (await neo.counts())["relations"] == len({r.id for r in relations})


async def test_a_failing_node_batch_stops_the_load_and_a_rerun_completes_it(
    neo4j_kb_factory: Callable[..., Any],
) -> None:
    neo = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS, linking=False)
    nodes, relations = await records(neo, seed_facts())
    bad = [*nodes]
    mid = bad[len(bad) // 2]  # the same node with a property the store refuses
    bad[len(bad) // 2] = NodeRecord(mid.id, mid.label, {**mid.properties, "kag_ns": "x"}, mid.embedding)
    with pytest.raises(StoreFormatError, match="reserved for the namespace"):
        await store(neo).bulk_upsert(bad, relations, batch_size=3, concurrency=2, relation_batch_size=5)
    # nothing hangs; relations waiting on the failed batch were not written, the re-run completes it
    assert (await neo.counts())["relations"] < len({r.id for r in relations})
    await store(neo).bulk_upsert(nodes, relations, batch_size=3, concurrency=2, relation_batch_size=5)
    assert (await neo.counts())["relations"] == len({r.id for r in relations})
