"""InMemoryVectorStore and SQLiteVectorStore: the VectorStore protocol, durability, one transaction per call."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kag
from kag.datamodels.documents import Chunk
from kag.errors import InvalidInputError, VectorBackendConfigError
from kag.knowledge.vector_backends import vector_knowledge
from kag.rag.embedders import HashEmbedder
from kag.rag.vectorstores import (
    AtomicVectorStore,
    InMemoryVectorStore,
    SQLiteVectorStore,
    VectorStore,
    VectorStoreRetriever,
)


def _chunk(cid: str, text: str, source: str, **metadata: Any) -> Chunk:
    return Chunk(id=cid, document_id=f"doc-{source}", index=0, text=text, source=source, metadata=metadata)


@pytest.fixture(params=["memory", "sqlite"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Any]:
    if request.param == "memory":
        return InMemoryVectorStore
    return lambda: SQLiteVectorStore(tmp_path / "vectors.db", namespace="main")


AXES = np.eye(3, dtype=np.float32)


async def _fill(store: Any) -> None:
    chunks = [
        _chunk("a", "alpha", "s1.md", year=2024, team="red"),
        _chunk("b", "beta", "s1.md", year=2025, team="blue"),
        _chunk("c", "gamma", "s2.md", year=2026, team="red"),
    ]
    assert await store.upsert(chunks, AXES) == 3


async def test_both_stores_implement_the_protocols(make_store: Callable[[], Any]) -> None:
    store = make_store()
    assert isinstance(store, VectorStore)
    assert isinstance(store, AtomicVectorStore)


async def test_search_is_exact_cosine_best_first(make_store: Callable[[], Any]) -> None:
    store = make_store()
    await _fill(store)
    query = np.array([0.6, 0.8, 0.0])
    hits = await store.search(query, k=3)
    assert [h["chunk_id"] for h in hits] == ["b", "a", "c"]
    assert [h["score"] for h in hits] == pytest.approx([0.8, 0.6, 0.0], abs=1e-6)
    assert hits[0]["text"] == "beta" and hits[0]["source"] == "s1.md" and hits[0]["document_id"] == "doc-s1.md"
    assert hits[0]["metadata"]["team"] == "blue"
    assert [h["chunk_id"] for h in await store.search(query, k=1)] == ["b"]


async def test_search_filters_on_metadata_and_source(make_store: Callable[[], Any]) -> None:
    store = make_store()
    await _fill(store)
    query = np.array([0.6, 0.8, 0.1])
    red = await store.search(query, k=5, where={"team": "red"})
    assert [h["chunk_id"] for h in red] == ["a", "c"]
    recent = await store.search(query, k=5, where={"year": {"$gte": 2025}, "source": {"$ne": "s2.md"}})
    assert [h["chunk_id"] for h in recent] == ["b"]
    assert await store.search(query, k=5, where={"team": "green"}) == []


async def test_upsert_replaces_by_id_and_checks_dimensions(make_store: Callable[[], Any]) -> None:
    store = make_store()
    await _fill(store)
    await store.upsert([_chunk("a", "alpha v2", "s1.md", year=2027)], [[0.0, 0.0, 1.0]])
    hits = await store.search([0.0, 0.0, 1.0], k=3)
    assert {h["chunk_id"]: h["text"] for h in hits[:2]} == {"a": "alpha v2", "c": "gamma"}
    assert len(hits) == 3  # replaced, not added
    with pytest.raises(InvalidInputError, match="3-dimensional"):
        await store.upsert([_chunk("d", "delta", "s3.md")], [[1.0, 0.0, 0.0, 0.0]])
    with pytest.raises(InvalidInputError, match="3-dimensional"):
        await store.search([1.0, 0.0], k=1)
    with pytest.raises(InvalidInputError, match="embedding rows"):
        await store.upsert([_chunk("d", "delta", "s3.md")], AXES)


async def test_delete_by_each_selector(make_store: Callable[[], Any]) -> None:
    store = make_store()
    await _fill(store)
    assert await store.delete(ids=["a"]) == 1
    assert await store.delete(ids=["missing"]) == 0
    assert await store.delete(where={"team": "red"}) == 1  # c
    assert await store.list_sources() == ["s1.md"]
    await _fill(store)
    assert await store.delete(sources=["s1.md"]) == 2
    assert await store.delete(document_ids=["doc-s2.md"]) == 1
    assert await store.list_sources() == []
    assert await store.search([1.0, 0.0, 0.0], k=3) == []


async def test_replace_swaps_one_source(make_store: Callable[[], Any]) -> None:
    store = make_store()
    await _fill(store)
    dropped = await store.replace("s1.md", [_chunk("e", "epsilon", "s1.md")], [[1.0, 1.0, 0.0]])
    assert dropped == 2
    hits = await store.search([1.0, 1.0, 0.0], k=5)
    assert sorted(h["chunk_id"] for h in hits) == ["c", "e"]
    assert await store.list_sources() == ["s1.md", "s2.md"]


async def test_failed_replace_changes_nothing(make_store: Callable[[], Any]) -> None:
    store = make_store()
    await _fill(store)
    with pytest.raises(InvalidInputError, match="3-dimensional"):
        await store.replace("s1.md", [_chunk("e", "epsilon", "s1.md")], [[1.0, 0.0, 0.0, 0.0]])
    hits = await store.search([1.0, 0.0, 0.0], k=5)
    assert sorted(h["chunk_id"] for h in hits) == ["a", "b", "c"]


async def test_sqlite_is_durable_across_reopen_and_namespaces_are_isolated(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    first = SQLiteVectorStore(path, namespace="one")
    await _fill(first)
    first.close()
    reopened = SQLiteVectorStore(path, namespace="one")
    hits = await reopened.search([0.0, 1.0, 0.0], k=1)
    assert hits[0]["chunk_id"] == "b" and hits[0]["metadata"]["year"] == 2025
    other = SQLiteVectorStore(path, namespace="two")
    assert await other.list_sources() == []
    await other.upsert([_chunk("a", "other alpha", "x.md")], [[1.0, 0.0]])  # its own dimensions
    assert (await reopened.search([1.0, 0.0, 0.0], k=1))[0]["text"] == "alpha"
    assert await other.delete(ids=["a"]) == 1
    assert await reopened.list_sources() == ["s1.md", "s2.md"]


_CRASH = """
import asyncio, os, sys
from kag.datamodels.documents import Chunk
from kag.rag.vectorstores import SQLiteVectorStore
store = SQLiteVectorStore(sys.argv[1], namespace="n")
chunk = Chunk(id="x", document_id="d", index=0, text="survives", source="s.md")
asyncio.run(store.upsert([chunk], [[1.0, 2.0]]))
os._exit(9)  # die without closing the connection
"""


async def test_sqlite_upsert_survives_a_killed_process(tmp_path: Path) -> None:
    path = tmp_path / "crash.db"
    done = subprocess.run([sys.executable, "-c", _CRASH, str(path)], capture_output=True, timeout=120)
    assert done.returncode == 9, done.stderr.decode()
    hits = await SQLiteVectorStore(path, namespace="n").search([1.0, 2.0], k=1)
    assert [h["text"] for h in hits] == ["survives"]


async def test_sqlite_writes_of_another_store_object_are_seen_after_reload(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    reader, writer = SQLiteVectorStore(path), SQLiteVectorStore(path)
    await _fill(writer)
    assert len(await reader.search([1.0, 0.0, 0.0], k=5)) == 3
    await writer.delete(ids=["a"])
    reader.reload()
    assert len(await reader.search([1.0, 0.0, 0.0], k=5)) == 2


async def test_knowledge_over_a_vector_store_searches_with_filters_and_citations(
    make_store: Callable[[], Any],
) -> None:
    store, embedder = make_store(), HashEmbedder(256)
    texts = {
        "k1": ("Rotate the API key every ninety days.", "security.md", "ops"),
        "k2": ("The cafeteria opens at eight in the morning.", "office.md", "facilities"),
        "k3": ("API keys are stored in the vault, never in code.", "vault.md", "ops"),
    }
    chunks = [_chunk(cid, text, src, team=team) for cid, (text, src, team) in texts.items()]
    await store.upsert(chunks, await embedder.embed_documents([c.text for c in chunks]))
    knowledge = vector_knowledge("vector", name="docs", store=store, embedder=embedder)
    assert isinstance(knowledge, kag.Knowledge)
    hits = await knowledge.search("how often do I rotate the API key", k=2)
    assert hits[0].chunk_id == "k1" and hits[0].source == "security.md"
    assert hits[0].score > hits[1].score
    scoped = await knowledge.search("API key", k=3, where={"team": "facilities"})
    assert [h.chunk_id for h in scoped] == ["k2"]
    context = await knowledge.context("rotate the API key", k=1)
    assert "[docs:1]" in context and "security.md" in context and "ninety days" in context
    retriever = VectorStoreRetriever(store, embedder, score_threshold=0.99)
    assert await retriever.retrieve("cafeteria", k=3) == []


def test_vector_backend_options_are_checked() -> None:
    with pytest.raises(VectorBackendConfigError, match="store="):
        vector_knowledge("vector")
    with pytest.raises(VectorBackendConfigError, match="mode"):
        vector_knowledge("vector", store=InMemoryVectorStore(), mode="hybrid")
    with pytest.raises(VectorBackendConfigError, match="does not take"):
        vector_knowledge("vector", store=InMemoryVectorStore(), collection_name="x")
    with pytest.raises(VectorBackendConfigError, match="unknown vector backend"):
        vector_knowledge("faiss")
    with pytest.raises(VectorBackendConfigError, match="VectorStore protocol"):
        vector_knowledge("vector", store=object())
