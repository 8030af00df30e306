"""Exact ties list in the same order on both backends: by id.

Chunks with identical embeddings score exactly alike on the memory store (a per-row
float64 reduction, not a BLAS product that may round rows apart) and on Neo4j; both then
list them by id ascending. Neo4j's ORDER BY sorts stored strings by code point (unlike
its ``<`` between a stored string and a parameter, which compares UTF-16 code units), so
ids with characters on both sides of the surrogate range check the order really used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import kag
from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS
from kag.graph.factory import passage_store_for
from kag.graph.passages import ChunkRecord, DocumentRecord, PassageStore

pytestmark = pytest.mark.neo4j
DIMS = 384  # the default embedder's, which the Neo4j test database is indexed with

IDS = ["c\uffff", "c\U00010000", "c\U0001f600", "ca", "c\u00e9", "cZ", "c\ufb01", "c\U00010000a"]


def _records(dims: int) -> tuple[DocumentRecord, list[ChunkRecord]]:
    same = np.ones(dims, dtype=np.float32) / np.sqrt(dims)
    doc = DocumentRecord(id="d_ties", source="ties", title="Ties", text_hash="0" * 64)
    chunks = [
        ChunkRecord(
            id=cid,
            document_id=doc.id,
            index=i,
            text="grain harbour grain",
            start=0,
            end=19,
            source="ties",
            title="Ties",
            metadata={"n": i},
            embedding=same,
        )
        for i, cid in enumerate(IDS)
    ]
    return doc, chunks


async def _store(kb: kag.KnowledgeBase) -> PassageStore:
    await kb.ensure_ready()
    store = passage_store_for(kb.store)
    assert kb.embedder.dimensions == DIMS
    await store.ensure_schema(DIMS)
    await store.clear()
    doc, chunks = _records(DIMS)
    await store.write([doc], chunks, [])
    return store


async def test_exact_ties_are_ordered_alike(neo4j_kb_factory: Callable[..., Any]) -> None:
    neo4j = await _store(await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS))
    memory = await _store(kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS))
    expected = sorted(IDS)  # code points
    query = np.ones(DIMS, dtype=np.float32)
    for k in (3, len(IDS)):
        for where in (None, {"n": {"$gte": 1}}):
            got = [[r.chunk_id for r in await s.vector_search(query, k, where)] for s in (memory, neo4j)]
            want = [i for i in expected if where is None or IDS.index(i) >= 1][:k]
            assert got == [want, want], (k, where)
    for store in (memory, neo4j):
        assert [cid for cid, _ in await store.chunk_texts(None, 100)] == expected
        assert [cid for cid, _ in await store.chunk_texts("cZ", 2)] == ["ca", "c\u00e9"]  # BMP-only paging
