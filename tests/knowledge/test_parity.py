"""Memory and Neo4j passages agree: vector results exactly, keyword results on simple cases.

Vector search is exact on both backends (cosine over every chunk that passes the
filter, mapped to [0, 1]), so ids, order and scores (to 1e-6) must be equal.
Keyword scores differ by design (BM25Index on memory, Lucene fulltext on
Neo4j), so keyword results are compared by top hit and by the set of matching
chunks on single-term queries.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kag.examples.seed import City
from kag.knowledge.hits import SearchHit
from kag.knowledge.knowledge import Knowledge
from kag.rag.splitter import RecursiveCharacterSplitter
from tests.knowledge.conftest import KnowledgeFactory, corpus_documents, memory_knowledge, topic_documents

pytestmark = pytest.mark.neo4j

TOL = 1e-6
QUERIES = [
    "how do I catch exceptions with try",
    "with statement context manager",
    "for loop over a sequence",
    "class definition inheritance",
    "operator precedence",
    "Paris capital",
]
FILTERS: list[dict[str, Any] | None] = [
    None,
    {"initial": {"$in": ["a", "b", "c"]}},
    {"$or": [{"rank": {"$lt": 10}}, {"topic": "with"}]},
    {"meta.long": True, "topic": {"$ne": "class"}},
    {"rank": {"$gte": 5, "$lte": 30}},
]


@pytest.fixture
def backend() -> str:
    return "neo4j"


async def build(knowledge_factory: KnowledgeFactory, **options: Any) -> tuple[Knowledge, Knowledge]:
    splitter = RecursiveCharacterSplitter(400, 50)
    docs = topic_documents(40) + corpus_documents()
    memory = await memory_knowledge(splitter=splitter, **options)
    neo4j = await knowledge_factory(splitter=splitter, **options)
    for k in (memory, neo4j):
        report = await k.add(docs)
        assert report.documents == len(docs) and report.ok
    return memory, neo4j


def assert_same_ranking(a: list[SearchHit], b: list[SearchHit]) -> None:
    """Same hits, same order and scores to 1e-6; runs of tied scores may list ids in any order."""
    assert len(a) == len(b)
    assert np.allclose([h.score for h in a], [h.score for h in b], atol=TOL)
    i = 0
    while i < len(a):
        j = i
        while j + 1 < len(a) and abs(a[j + 1].score - a[i].score) <= TOL:
            j += 1
        if j < len(a) - 1:  # a tie run cut by the limit may keep different members of the run
            assert {h.ids for h in a[i : j + 1]} == {h.ids for h in b[i : j + 1]}, (i, j)
        i = j + 1
    by_id = {h.ids: h for h in b}
    for h in a:
        other = by_id.get(h.ids)
        if other is None:
            assert abs(h.score - a[-1].score) <= TOL  # only at the cut
            continue
        assert (h.text, h.source, h.title, h.metadata, h.mentions) == (
            other.text,
            other.source,
            other.title,
            other.metadata,
            other.mentions,
        )


async def test_indexing_is_identical(knowledge_factory: KnowledgeFactory) -> None:
    memory, neo4j = await build(knowledge_factory)
    assert await memory.store.counts() == await neo4j.store.counts()
    assert await memory.store.list_documents() == await neo4j.store.list_documents()
    ids = [cid for cid, _ in await memory.store.chunk_texts(None, 10_000)]
    assert ids == [cid for cid, _ in await neo4j.store.chunk_texts(None, 10_000)]
    assert await memory.store.get_chunks(ids) == await neo4j.store.get_chunks(ids)
    mv, nv = await memory.store.chunk_vectors(ids), await neo4j.store.chunk_vectors(ids)
    assert all(np.allclose(mv[i], nv[i], atol=1e-7) for i in ids)
    entities = [City(name=n).id for n in ("Paris", "Tokyo", "Rome", "Osaka")]
    for where in FILTERS:
        assert await memory.store.mentioned_by(entities, where) == await neo4j.store.mentioned_by(entities, where)


async def test_vector_search_agrees_exactly(knowledge_factory: KnowledgeFactory) -> None:
    memory, neo4j = await build(knowledge_factory, mode="vector", facts=False)
    for query in QUERIES:
        for where in FILTERS:
            for k in (1, 7, 400):
                a = await memory.search(query, k=k, where=where)
                b = await neo4j.search(query, k=k, where=where)
                assert a, (query, where)
                assert_same_ranking(a, b)


async def test_vector_with_mmr_and_scope_agree(knowledge_factory: KnowledgeFactory) -> None:
    memory, neo4j = await build(
        knowledge_factory, mode="vector", mmr_lambda=0.5, fetch_k=15, where={"meta.long": False}
    )
    for query in QUERIES:
        a, b = await memory.search(query, k=5), await neo4j.search(query, k=5, where={"rank": {"$gt": 2}})
        b_plain = await neo4j.search(query, k=5)
        assert_same_ranking(a, b_plain)
        assert all(h.metadata["meta"]["long"] is False for h in a if h.kind == "passage")
        assert all(h.metadata["rank"] > 2 and h.metadata["meta"]["long"] is False for h in b if h.kind == "passage")


async def test_facts_agree(knowledge_factory: KnowledgeFactory) -> None:
    memory, neo4j = await build(knowledge_factory, mode="vector")
    for query in ("What is the capital of France?", "Tokyo and Osaka", "Paris", "nothing named here"):
        a = [h for h in await memory.search(query, k=4) if h.kind == "fact"]
        b = [h for h in await neo4j.search(query, k=4) if h.kind == "fact"]
        assert [(h.ids, h.text) for h in a] == [(h.ids, h.text) for h in b]
        assert np.allclose([h.score for h in a], [h.score for h in b], atol=TOL)
    scoped_a = await memory.search("Tokyo and Paris", where={"source": "tokyo.md"})
    scoped_b = await neo4j.search("Tokyo and Paris", where={"source": "tokyo.md"})
    assert [h.ids for h in scoped_a] == [h.ids for h in scoped_b]
    assert {h.metadata["subject"]["name"] for h in scoped_a if h.kind == "fact"} == {"Tokyo"}


async def test_keyword_agrees_on_simple_cases(knowledge_factory: KnowledgeFactory) -> None:
    memory, neo4j = await build(knowledge_factory, mode="keyword", facts=False)
    for term in ("Colosseum", "sourdough", "finally", "nonlocal", "Louvre"):
        a, b = await memory.search(term, k=500), await neo4j.search(term, k=500)
        assert a and {h.ids for h in a} == {h.ids for h in b}, term
        assert a[0].ids == b[0].ids or (len(a) > 1 and a[0].ids in {h.ids for h in b[:3]}), term
    for query in ("Eiffel Tower 1889", "Berlin Wall", "sourdough starter yeast"):
        a, b = await memory.search(query, k=3), await neo4j.search(query, k=3)
        assert a[0].ids == b[0].ids, query
    where = {"initial": "b"}
    a, b = await memory.search("break", k=50, where=where), await neo4j.search("break", k=50, where=where)
    assert {h.ids for h in a} == {h.ids for h in b} and all(h.metadata["initial"] == "b" for h in b)


async def test_hybrid_top_hits_agree(knowledge_factory: KnowledgeFactory) -> None:
    memory, neo4j = await build(knowledge_factory, mode="hybrid", facts=False)
    for query in ("Colosseum amphitheatre", "sourdough bread starter", "Berlin Wall fell"):
        a, b = await memory.search(query, k=3), await neo4j.search(query, k=3)
        assert a[0].ids == b[0].ids, query
        assert all(0.0 <= h.score <= 1.0 for h in a + b)


async def test_refresh_and_delete_on_neo4j(knowledge_factory: KnowledgeFactory, corpus_dir: Any) -> None:
    k = await knowledge_factory(splitter=RecursiveCharacterSplitter(200, 20))
    await k.add(corpus_dir)
    (corpus_dir / "rome.md").write_text("# Rome\n\nRome now has a metro line C.", encoding="utf-8")
    (corpus_dir / "bread.md").unlink()
    report = await k.refresh(delete_missing=True)
    assert (report.documents, report.skipped, report.deleted, report.errors) == (1, 3, 2, [])
    counts = await k.counts()
    assert counts["documents"] == 4 and counts["City"] == 12
    assert [h.text for h in await k.search("metro", mode="keyword", k=3) if h.kind == "passage"] == [
        "# Rome\n\nRome now has a metro line C."
    ]
    assert await k.delete(str(corpus_dir)) == 4
    assert (await k.store.counts()) == {"documents": 0, "chunks": 0, "mentions": 0}
