"""PassageStore semantics, on memory and (when a server is up) on Neo4j.

Every test runs on both backends: the store API must behave identically.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from kag.datamodels.documents import Document
from kag.errors import EmbeddingError, InvalidInputError
from kag.examples.seed import City
from kag.graph.passages import ChunkRecord, DocumentRecord
from kag.graph.passages_memory import MemoryPassageStore
from kag.graph.passages_neo4j import Neo4jPassageStore, lucene_query
from kag.rag.splitter import RecursiveCharacterSplitter
from tests.knowledge.conftest import KnowledgeFactory, corpus_documents


@pytest.fixture(params=["memory", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_schema_documents_chunks_next_and_mentions(knowledge_factory: KnowledgeFactory) -> None:
    k = await knowledge_factory(splitter=RecursiveCharacterSplitter(60, 10))
    report = await k.add(corpus_documents())
    assert report.documents == 5 and report.chunks > 5 and report.mentions > 0 and not report.errors
    counts = await k.store.counts()
    assert counts == {"documents": 5, "chunks": report.chunks, "mentions": report.mentions}
    docs = await k.store.list_documents()
    assert [d.id for d in docs] == sorted(d.id for d in docs)
    paris = next(d for d in docs if d.source == "paris.md")
    assert paris.title == "Paris" and paris.metadata == {"source": "paris.md", "lang": "fr", "file": "paris.md", "n": 0}
    assert paris.origin_kind == "document" and len(paris.text_hash) == 64 and paris.chunk_count >= 2
    store = k.store
    if isinstance(store, MemoryPassageStore):
        chunk_ids = store.chunk_ids(paris.id)
        nexts = set(store.next_links())
    else:
        assert isinstance(store, Neo4jPassageStore)
        run = store.graph_store.run
        res = await run(
            "MATCH (d:Document {id: $id})-[:HAS_CHUNK]->(c:Chunk) RETURN c.id AS id ORDER BY c.index",
            {"id": paris.id},
            write=False,
            what="t",
        )
        chunk_ids = [r["id"] for r in res.records]
        res = await run("MATCH (a:Chunk)-[:NEXT]->(b:Chunk) RETURN a.id AS a, b.id AS b", None, write=False, what="t")
        nexts = {(r["a"], r["b"]) for r in res.records}
        # keyword search needs the fulltext index at once; the vector index populates in the background
        await store.graph_store.await_indexes(["kag_chunk_embedding"], "t")
        res = await run("SHOW INDEXES YIELD name, type, state RETURN name, type, state", None, write=False, what="t")
        indexes = {r["name"]: (r["type"], r["state"]) for r in res.records}
        assert indexes["kag_chunk_embedding"] == ("VECTOR", "ONLINE")
        assert indexes["kag_chunk_text"] == ("FULLTEXT", "ONLINE")
        assert "kag_document_ns_id" in indexes and "kag_chunk_ns_id" in indexes
        await store.vector_search((await k.kb.embed(["x"]))[0], 3, {"lang": "fr"})
        await store.keyword_search("Paris", 3, {"lang": "fr"})
        checked = store.graph_store._read_only  # every read went through the EXPLAIN guard
        assert any("vector.similarity.cosine(c.embedding" in q for q in checked)
        assert any("db.index.fulltext.queryNodes" in q for q in checked)
    assert len(chunk_ids) == paris.chunk_count
    rows = await store.get_chunks(chunk_ids)
    assert [r.index for r in rows] == list(range(len(chunk_ids)))
    assert set(itertools.pairwise(chunk_ids)) <= nexts
    assert len(nexts) == report.chunks - 5  # one chain per document
    text = next(d for d in corpus_documents() if d.source == "paris.md").text
    for r in rows:
        assert text[r.start : r.end] == r.text and r.source == "paris.md" and r.title == "Paris"
        assert r.metadata["document_id"] == paris.id and r.metadata["chunk_index"] == r.index
        assert r.metadata["lang"] == "fr"
    paris_city = City(name="Paris").id
    assert any(paris_city in r.mentions for r in rows)


async def test_rewrite_replaces_chunks_and_delete_removes_them(knowledge_factory: KnowledgeFactory) -> None:
    k = await knowledge_factory()
    doc = Document.from_text("Paris and Rome.\n\nTokyo too.", source="x")
    dims = k.kb.embedder.dimensions
    await k.ready()
    rec = DocumentRecord(id=doc.id, source="x", title="x", text_hash="h", metadata={"a": 1})

    def chunk(i: int, text: str) -> ChunkRecord:
        vec = np.zeros(dims, dtype=np.float32)
        vec[i] = 1.0
        return ChunkRecord(f"chk_{i}", doc.id, i, text, 0, len(text), "x", "x", {"i": i}, vec)

    await k.store.write(
        [rec], [chunk(0, "Paris"), chunk(1, "Rome"), chunk(2, "Tokyo")], [("chk_0", City(name="Paris").id)]
    )
    assert (await k.store.counts()) == {"documents": 1, "chunks": 3, "mentions": 1}
    await k.store.write([rec], [chunk(3, "Osaka")], [("chk_3", City(name="Osaka").id), ("chk_3", "e_missing")])
    assert (await k.store.counts()) == {"documents": 1, "chunks": 1, "mentions": 1}
    assert [r.chunk_id for r in await k.store.get_chunks(["chk_0", "chk_3"])] == ["chk_3"]
    with pytest.raises(InvalidInputError):
        await k.store.write([], [chunk(4, "orphan")], [])
    assert await k.store.delete_documents([doc.id, "doc_missing"]) == 1
    assert (await k.store.counts()) == {"documents": 0, "chunks": 0, "mentions": 0}
    assert await k.store.delete_documents([]) == 0


async def test_vector_search_is_exact_and_filtered(knowledge_factory: KnowledgeFactory) -> None:
    k = await knowledge_factory(splitter=RecursiveCharacterSplitter(80, 0))
    await k.add(corpus_documents())
    all_rows = await k.store.vector_search((await k.kb.embed(["x"]))[0], 1000)
    ids = [r.chunk_id for r in all_rows]
    vectors = await k.store.chunk_vectors(ids)
    matrix = np.stack([vectors[i] for i in ids])
    q = (await k.kb.embed(["capital city museum"]))[0]
    expected = np.clip((1.0 + matrix.astype(np.float64) @ q.astype(np.float64)) / 2.0, 0.0, 1.0)
    want = sorted(zip(ids, expected.tolist(), strict=True), key=lambda t: (-t[1], t[0]))
    got = await k.store.vector_search(q, 4)
    assert [r.chunk_id for r in got] == [i for i, _ in want[:4]]
    assert np.allclose([r.score for r in got], [s for _, s in want[:4]], atol=1e-6)
    where = {"lang": {"$in": ["fr", "it"]}}
    filtered = await k.store.vector_search(q, 100, where)
    assert filtered and all(r.metadata["lang"] in ("fr", "it") for r in filtered)
    assert [r.chunk_id for r in filtered] == [i for i, _ in want if i in {r.chunk_id for r in filtered}]
    subset = await k.store.vector_search(q, 10, None, ids=[*ids[:3], "chk_missing"])
    assert {r.chunk_id for r in subset} == set(ids[:3])
    assert await k.store.vector_search(q, 0) == []
    assert await k.store.vector_search(q, 5, None, ids=[]) == []
    with pytest.raises(EmbeddingError):
        await k.store.vector_search(np.zeros(k.kb.embedder.dimensions, dtype=np.float32), 3)
    with pytest.raises(EmbeddingError):
        await k.store.vector_search(np.ones(7, dtype=np.float32), 3)
    with pytest.raises(InvalidInputError):
        await k.store.vector_search(q, -1)
    with pytest.raises(InvalidInputError):
        await k.store.vector_search(q, 3, {"lang": {"$regex": "x"}})


async def test_keyword_search(knowledge_factory: KnowledgeFactory) -> None:
    k = await knowledge_factory()
    await k.add(corpus_documents())
    (top, *_) = await k.store.keyword_search("sourdough starter yeast", 3)
    assert top.source == "bread.md"
    assert {r.source for r in await k.store.keyword_search("Colosseum", 5)} == {"rome.md"}
    assert await k.store.keyword_search("Colosseum", 5, {"lang": "fr"}) == []
    assert await k.store.keyword_search("zzzunknownword", 5) == []
    assert await k.store.keyword_search("  ?! ", 5) == []
    assert await k.store.keyword_search("Colosseum", 0) == []
    # filter values are parameters, never query text
    assert await k.store.keyword_search("Colosseum", 5, {"lang": "it' OR true //"}) == []
    assert await k.store.keyword_search("Colosseum", 5, {"lang": {"$in": ['x") RETURN 1 //', "it"]}})


async def test_metadata_round_trip_and_selectors(knowledge_factory: KnowledgeFactory) -> None:
    k = await knowledge_factory()
    meta: dict[str, Any] = {"author": {"name": "Ada", "tags": ["x", "y"]}, "none": None, "empty": [], "mixed": [1, "a"]}
    await k.add(Document.from_text("Rome is old.", source="s1", metadata=meta))
    (row,) = await k.store.keyword_search("Rome", 1)
    assert row.metadata["author"] == {"name": "Ada", "tags": ["x", "y"]}
    assert row.metadata["none"] is None and row.metadata["empty"] == [] and row.metadata["mixed"] == [1, "a"]
    assert await k.store.keyword_search("Rome", 1, {"author.name": "Ada"})
    assert await k.store.keyword_search("Rome", 1, {"author.tags": {"$contains": "y"}})
    assert not await k.store.keyword_search("Rome", 1, {"none": {"$exists": True}})
    (doc,) = await k.store.list_documents(sources=["s1"])
    assert doc.metadata == {"source": "s1", **meta}
    assert await k.store.list_documents(origins=["s1"]) == [doc]
    assert await k.store.list_documents(ids=[doc.id], sources=["other"]) == []


async def test_entities_mentions_and_paging(knowledge_factory: KnowledgeFactory) -> None:
    k = await knowledge_factory(splitter=RecursiveCharacterSplitter(50, 0))
    await k.add(corpus_documents())
    names = {props["name"] for _, _, props in await k.store.entities()}
    assert {"Paris", "France", "Osaka"} <= names
    paris, tokyo = City(name="Paris").id, City(name="Tokyo").id
    assert await k.store.mentioned_by([paris, tokyo, "e_missing"], None) == {paris, tokyo}
    assert await k.store.mentioned_by([paris, tokyo], {"lang": "ja"}) == {tokyo}
    assert await k.store.mentioned_by([], None) == set()
    pages, after = [], None
    while page := await k.store.chunk_texts(after, 3):
        pages.extend(page)
        after = page[-1][0]
    assert [cid for cid, _ in pages] == sorted(cid for cid, _ in pages)
    assert len(pages) == (await k.store.counts())["chunks"]
    # deleting an entity removes its MENTIONS links on every backend
    before = (await k.store.counts())["mentions"]
    await k.kb.delete(paris)
    assert await k.store.mentioned_by([paris], None) == set()
    after = (await k.store.counts())["mentions"]
    assert after < before
    await k.kb.upsert([City(name="Paris")])  # the same id again: the old links stay gone
    assert await k.store.mentioned_by([paris], None) == set()
    assert (await k.store.counts())["mentions"] == after
    assert (await k.upsert([City(name="Paris")]))["mentions"] > 0  # Knowledge.upsert re-links
    assert await k.store.mentioned_by([paris], None) == {paris}


async def test_embedding_size_is_checked(knowledge_factory: KnowledgeFactory) -> None:
    k = await knowledge_factory()
    await k.ready()
    with pytest.raises(EmbeddingError):
        await k.store.ensure_schema(k.kb.embedder.dimensions + 1)


def test_lucene_query_quotes_words_only() -> None:
    assert (
        lucene_query('AND (title:"x") OR -y* ~z^2 ü') == '"and" OR "title" OR "x" OR "or" OR "y" OR "z" OR "2" OR "ü"'
    )
    assert lucene_query("!?") == ""


# -- approximate passage vector search (candidates=N) ---------------------------------------


def _numbered_documents(n: int) -> list[Document]:
    topics = ["rivers", "mountains", "cities", "languages", "currencies", "islands", "deserts"]
    return [
        Document(
            text=f"Note {i} on {topics[i % len(topics)]}: item {i * 7919 % 1000} of the {topics[(i * 3) % 7]} list.",
            metadata={"source": f"n{i}.md", "lang": "en" if i % 2 else "de", "n": i},
        )
        for i in range(n)
    ]


async def test_candidates_cover_the_corpus_give_the_exact_rows(
    backend: str, knowledge_factory: KnowledgeFactory
) -> None:
    k = await knowledge_factory()
    await k.add(_numbered_documents(120))
    total = (await k.store.counts())["chunks"]
    for query in ("rivers item 17", "notes about islands", "currencies list 404"):
        qvec = await k.kb.embedder.embed([query])
        exact = await k.store.vector_search(qvec[0], 10)
        # asking the index for every chunk leaves nothing for it to miss: same rows, order and scores
        approx = await k.store.vector_search(qvec[0], 10, candidates=total)
        assert [(r.chunk_id, round(r.score, 9)) for r in approx] == [(r.chunk_id, round(r.score, 9)) for r in exact]
        # a filter applies after the index: only matching chunks, never more than k
        scoped = await k.store.vector_search(qvec[0], 10, {"lang": "en"}, candidates=total)
        assert scoped and all(r.metadata["lang"] == "en" for r in scoped)
        exact_scoped = await k.store.vector_search(qvec[0], 10, {"lang": "en"})
        assert [r.chunk_id for r in scoped] == [r.chunk_id for r in exact_scoped]
    hits = await k.search("rivers item 17", k=5, mode="vector", candidates=total)
    assert [h.chunk_id for h in hits if h.chunk_id] == [
        h.chunk_id for h in await k.search("rivers item 17", k=5, mode="vector") if h.chunk_id
    ]
    with pytest.raises(InvalidInputError, match="candidates"):
        await k.store.vector_search(qvec[0], 10, candidates=0)
    if backend == "neo4j":
        store = k.store
        assert isinstance(store, Neo4jPassageStore)
        res = await store.graph_store.run(
            "SHOW VECTOR INDEXES YIELD name, options WHERE name = 'kag_chunk_embedding' RETURN options",
            None,
            write=False,
            what="t",
        )
        config = res.records[0]["options"]["indexConfig"]
        assert config["vector.quantization.enabled"] is False and config["vector.hnsw.m"] == 32
