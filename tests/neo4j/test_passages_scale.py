"""Exact passage search on Neo4j from the cached chunk matrix: the same answer as a full Cypher scan,
and the cache follows writes made by another store (another driver)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kag.graph.passages import ChunkRecord, DocumentRecord
from kag.graph.passages_neo4j import CHUNK, Neo4jPassageStore
from tests.neo4j.conftest import DIMS

pytestmark = pytest.mark.neo4j
SCAN = (
    "MATCH (c:Chunk {kag_ns: $ns}) WHERE $lang IS NULL OR c.meta__lang = $lang "
    "WITH c, vector.similarity.cosine(c.embedding, $vector) AS score "
    "ORDER BY score DESC, c.id ASC LIMIT $k RETURN c.id AS id, score"
)


def _doc(name: str, vectors: np.ndarray, langs: list[str]) -> tuple[DocumentRecord, list[ChunkRecord]]:
    doc = DocumentRecord(id=f"doc_{name}", source=name, title=name, text_hash=name)
    chunks = [
        ChunkRecord(f"chk_{name}_{i:04d}", doc.id, i, f"text {i}", 0, 6, name, name, {"lang": langs[i]}, vec)
        for i, vec in enumerate(vectors)
    ]
    return doc, chunks


async def _scan(store: Neo4jPassageStore, vec: np.ndarray, k: int, lang: str | None = None) -> list[tuple[Any, Any]]:
    params = {"vector": [float(x) for x in vec], "k": k, "lang": lang, "ns": store.graph_store.namespace}
    res = await store.graph_store.read(SCAN, params, "test scan")
    return [(r["id"], r["score"]) for r in res.records]


async def test_matrix_path_gives_the_scan_answer(stores: tuple[Neo4jPassageStore, Neo4jPassageStore]) -> None:
    store, _ = stores
    rng = np.random.default_rng(5)
    base = rng.standard_normal((400, DIMS)).astype(np.float32)
    base[200:210] = base[5]  # exact ties: broken by chunk id, as the scan does
    doc, chunks = _doc("a", base, [["en", "fr"][i % 2] for i in range(400)])
    await store.write([doc], chunks, [])
    for q in (base[5], base[17] + 0.01, rng.standard_normal(DIMS).astype(np.float32)):
        for k in (1, 5, 12):
            got = await store.vector_search(q, k)
            assert [(r.chunk_id, r.score) for r in got] == await _scan(store, q, k)
            filtered = await store.vector_search(q, k, where={"lang": "fr"})
            assert [(r.chunk_id, r.score) for r in filtered] == await _scan(store, q, k, "fr")
            assert all(r.metadata["lang"] == "fr" for r in filtered)
    assert CHUNK in store.graph_store.anchor_scorer.cached  # the matrix path ran (not the scan fallback)


async def test_writes_and_deletes_by_another_store_are_seen(
    stores: tuple[Neo4jPassageStore, Neo4jPassageStore],
) -> None:
    store, other = stores
    rng = np.random.default_rng(9)
    doc, chunks = _doc("a", rng.standard_normal((50, DIMS)).astype(np.float32), ["en"] * 50)
    await store.write([doc], chunks, [])
    probe = rng.standard_normal(DIMS).astype(np.float32)
    before = await store.vector_search(probe, 3)
    assert before[0].chunk_id.startswith("chk_a_")
    # another driver adds a chunk equal to the probe: it must come first at once
    doc_b, chunks_b = _doc("b", probe.reshape(1, -1), ["en"])
    await other.write([doc_b], chunks_b, [])
    after = await store.vector_search(probe, 3)
    assert after[0].chunk_id == "chk_b_0000" and after[0].score == pytest.approx(1.0)
    assert [(r.chunk_id, r.score) for r in after] == await _scan(store, probe, 3)
    # ... and deletes it: it must be gone at once
    await other.delete_documents([doc_b.id])
    assert [r.chunk_id for r in await store.vector_search(probe, 3)] == [r.chunk_id for r in before]
    # a rewrite of a document with the same number of chunks (count unchanged) is seen through the counter
    moved = chunks[0].embedding
    doc_c, chunks_c = _doc("a", np.vstack([probe, *rng.standard_normal((49, DIMS)).astype(np.float32)]), ["en"] * 50)
    await other.write([doc_c], chunks_c, [])
    top = await store.vector_search(probe, 1)
    assert top[0].chunk_id == "chk_a_0000" and top[0].score == pytest.approx(1.0)
    assert not np.allclose(moved, probe)


async def test_raw_cypher_embedding_change_is_seen_after_invalidate(
    stores: tuple[Neo4jPassageStore, Neo4jPassageStore],
) -> None:
    store, _ = stores
    rng = np.random.default_rng(11)
    doc, chunks = _doc("a", rng.standard_normal((30, DIMS)).astype(np.float32), ["en"] * 30)
    await store.write([doc], chunks, [])
    probe = rng.standard_normal(DIMS).astype(np.float32)
    await store.vector_search(probe, 1)  # loads the matrix
    await store.graph_store.run(
        "MATCH (c:Chunk {id: 'chk_a_0029', kag_ns: $ns}) SET c.embedding = $v",
        {"v": [float(x) for x in probe], "ns": store.graph_store.namespace},
        write=True,
        what="t",
    )
    store.graph_store.anchor_scorer.invalidate([CHUNK])
    top = await store.vector_search(probe, 1)
    assert top[0].chunk_id == "chk_a_0029" and top[0].score == pytest.approx(1.0)


async def test_background_reload_answers_from_cypher_then_from_the_matrix(
    stores: tuple[Neo4jPassageStore, Neo4jPassageStore],
) -> None:
    store, other = stores
    store.graph_store.anchor_scorer.background = True  # as matrix_reload="background"
    rng = np.random.default_rng(13)
    doc, chunks = _doc("a", rng.standard_normal((60, DIMS)).astype(np.float32), ["en"] * 60)
    await store.write([doc], chunks, [])
    probe = rng.standard_normal(DIMS).astype(np.float32)
    scorer = store.graph_store.anchor_scorer
    first = await store.vector_search(probe, 4)  # no matrix yet: the Cypher scan, the load started beside it
    assert CHUNK in scorer._loading
    assert [(r.chunk_id, r.score) for r in first] == await _scan(store, probe, 4)
    await scorer.settle()
    assert [(r.chunk_id, r.score) for r in await store.vector_search(probe, 4)] == await _scan(store, probe, 4)
    # another store writes a chunk equal to the probe: seen at once, while the matrix reloads
    loaded = scorer.cached[CHUNK]
    doc_b, chunks_b = _doc("b", probe.reshape(1, -1), ["en"])
    await other.write([doc_b], chunks_b, [])
    during = await store.vector_search(probe, 4)
    assert during[0].chunk_id == "chk_b_0000"
    assert [(r.chunk_id, r.score) for r in during] == await _scan(store, probe, 4)
    await scorer.settle()
    assert scorer.cached[CHUNK] != loaded
    assert [(r.chunk_id, r.score) for r in await store.vector_search(probe, 4)] == await _scan(store, probe, 4)
