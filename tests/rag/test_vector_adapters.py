"""Chroma, Qdrant and Pinecone adapters against the real client libraries (no network).

Chroma runs as a PersistentClient in tmp_path; Qdrant in its local mode (``:memory:``);
Pinecone, which has no local mode, through its official client against a local HTTP
server on 127.0.0.1 implementing the data-plane route the adapter calls.
Vectors always come from kag's HashEmbedder: Chroma is never allowed its default
(downloaded) embedding function.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import chromadb
import numpy as np
import pytest
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
from pinecone import Pinecone
from qdrant_client import AsyncQdrantClient, QdrantClient, models

import kag
from kag.errors import UnsupportedFilterError, VectorBackendConfigError
from kag.knowledge.vector_backends import vector_knowledge
from kag.query.filters import matches
from kag.rag.embedders import HashEmbedder
from kag.rag.vector_adapters import ChromaRetriever, chroma_where, pinecone_filter, qdrant_filter

DIMS = 128
EMBEDDER = HashEmbedder(DIMS)

ROWS: list[tuple[str, str, dict[str, Any]]] = [
    ("p1", "Rotate the API key every ninety days.", {"source": "security.md", "team": "ops", "year": 2024}),
    ("p2", "API keys live in the vault, never in source code.", {"source": "vault.md", "team": "ops", "year": 2025}),
    ("p3", "The cafeteria opens at eight in the morning.", {"source": "office.md", "team": "facilities", "year": 2026}),
    ("p4", "Badge access is renewed every year at the front desk.", {"source": "office.md", "team": "facilities"}),
]

FILTERS: list[dict[str, Any]] = [
    {"team": "ops"},
    {"team": {"$ne": "ops"}},
    {"year": {"$gte": 2025}},
    {"year": {"$gt": 2024, "$lt": 2026}},
    {"source": {"$in": ["vault.md", "office.md"]}},
    {"source": {"$nin": ["office.md"]}},
    {"$or": [{"team": "ops", "year": {"$lte": 2024}}, {"year": 2026}]},
    {"$and": [{"team": "facilities"}, {"source": "office.md"}]},
    {"year": {"$ne": 2024}},  # p4 has no year: kag's $ne and $nin match a missing field
    {"year": {"$nin": [2025, 2026]}},
]


def _embed(texts: list[str]) -> list[list[float]]:
    return [list(map(float, row)) for row in EMBEDDER.embed_sync(texts)]


def _expected(where: Mapping[str, Any]) -> set[str]:
    """What kag's own filter semantics select from ROWS."""
    return {cid for cid, _, meta in ROWS if matches(where, meta)}


class _KagEmbeddingFunction(EmbeddingFunction[Documents]):
    """A collection-owned embedding function backed by kag's HashEmbedder (no model download)."""

    def __init__(self) -> None:
        pass

    def __call__(self, input: Documents) -> Embeddings:
        return [np.asarray(row, dtype=np.float32) for row in _embed(list(input))]

    @staticmethod
    def name() -> str:
        return "kag-hash-test"

    def get_config(self) -> dict[str, Any]:
        return {}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> _KagEmbeddingFunction:
        return _KagEmbeddingFunction()


def _chroma(tmp_path: Path, name: str = "support", embedding_function: Any = None) -> Any:
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"))
    collection = client.create_collection(
        name, metadata={"hnsw:space": "cosine"}, embedding_function=embedding_function
    )
    collection.add(
        ids=[r[0] for r in ROWS],
        documents=[r[1] for r in ROWS],
        metadatas=[r[2] for r in ROWS],
        embeddings=EMBEDDER.embed_sync([r[1] for r in ROWS]),
    )
    return client, collection


def _qdrant_points() -> list[models.PointStruct]:
    vectors = _embed([r[1] for r in ROWS])
    return [
        models.PointStruct(id=i + 1, vector={"content": vectors[i]}, payload={"text": r[1], "key": r[0], **r[2]})
        for i, r in enumerate(ROWS)
    ]


@pytest.fixture
def qdrant() -> QdrantClient:
    client = QdrantClient(":memory:")
    client.create_collection(
        "support", vectors_config={"content": models.VectorParams(size=DIMS, distance=models.Distance.COSINE)}
    )
    client.upsert("support", points=_qdrant_points())
    return client


# ------------------------------------------------------------------------------------------- Chroma


async def test_chroma_search_through_knowledge_with_citations(tmp_path: Path) -> None:
    _, collection = _chroma(tmp_path)
    knowledge = vector_knowledge("chroma", name="support", collection=collection, embedder=EMBEDDER)
    assert isinstance(knowledge, kag.Knowledge)
    hits = await knowledge.search("how often should I rotate the API key", k=2)
    assert hits[0].chunk_id == "p1"
    assert hits[0].source == "security.md" and hits[0].metadata["team"] == "ops"
    assert 0.0 < hits[1].score < hits[0].score <= 1.0
    context = await knowledge.context("rotate the API key", k=1)
    assert "[support:1]" in context and "security.md" in context


@pytest.mark.parametrize("where", FILTERS)
async def test_chroma_native_filters_agree_with_kag_semantics(tmp_path: Path, where: dict[str, Any]) -> None:
    _, collection = _chroma(tmp_path)
    knowledge = vector_knowledge("chroma", name="support", collection=collection, embedder=EMBEDDER)
    hits = await knowledge.search("API key", k=10, where=where)
    assert {h.chunk_id for h in hits} == _expected(where)


async def test_chroma_client_and_collection_name_and_own_embedding_function(tmp_path: Path) -> None:
    client, _ = _chroma(tmp_path, embedding_function=_KagEmbeddingFunction())
    knowledge = vector_knowledge("chroma", name="support", client=client, collection_name="support")
    hits = await knowledge.search("cafeteria opening hours", k=1)  # query_texts, embedded by the collection
    assert [h.chunk_id for h in hits] == ["p3"]
    with pytest.raises(VectorBackendConfigError, match="collection"):
        vector_knowledge("chroma", client=client)


async def test_chroma_text_key_source_key_and_filter_converter(tmp_path: Path) -> None:
    client = chromadb.PersistentClient(path=str(tmp_path / "c2"))
    collection = client.create_collection("meta-text", embedding_function=None)  # l2 space
    collection.add(
        ids=["a", "b"],
        embeddings=EMBEDDER.embed_sync(["vault keys", "cafeteria"]),
        metadatas=[{"body": "vault keys", "origin": "v.md"}, {"body": "", "origin": "c.md"}],
    )
    seen: list[Any] = []

    def converter(where: Mapping[str, Any]) -> dict[str, Any]:
        seen.append(dict(where))
        return {"origin": {"$in": ["v.md", "c.md"]}}

    retriever = ChromaRetriever(
        collection, embedder=EMBEDDER, text_key="body", source_key="origin", filter_converter=converter
    )
    results = await retriever.retrieve("vault keys", k=5, where={"anything": {"$contains": "x"}})
    assert seen == [{"anything": {"$contains": "x"}}]
    assert [(r["chunk_id"], r["source"], r["text"]) for r in results] == [("a", "v.md", "vault keys")]  # b: no text
    assert results[0]["score"] == pytest.approx(1.0, abs=1e-4)  # l2 distance 0 -> 1 / (1 + 0)


async def test_chroma_rejects_what_it_cannot_filter_or_embed(tmp_path: Path) -> None:
    _, collection = _chroma(tmp_path)
    knowledge = vector_knowledge("chroma", name="support", collection=collection, embedder=EMBEDDER)
    for where in ({"tags": {"$contains": "x"}}, {"team": None}, {"team": {"$exists": True}}, {"team": {"$gt": "a"}}):
        with pytest.raises(UnsupportedFilterError, match="filter_converter"):
            await knowledge.search("API", where=where)
    with pytest.raises(kag.errors.ConfigError, match="embedding function"):
        vector_knowledge("chroma", collection=collection)  # no embedder and no collection function
    with pytest.raises(VectorBackendConfigError, match="fetch_k, mode"):
        vector_knowledge("chroma", collection=collection, embedder=EMBEDDER, mode="hybrid", fetch_k=40)
    with pytest.raises(VectorBackendConfigError, match="sources"):
        vector_knowledge("chroma", collection=collection, embedder=EMBEDDER, sources=["docs/"])
    with pytest.raises(kag.errors.UnsupportedKnowledgeOperationError):
        await knowledge.add_text("new text")


def test_chroma_where_shapes() -> None:
    assert chroma_where({"a": 1}) == {"a": {"$eq": 1}}
    assert chroma_where({"a": 1, "b": {"$in": ("x",)}}) == {"$and": [{"a": {"$eq": 1}}, {"b": {"$in": ["x"]}}]}
    assert chroma_where({"$or": [{"a": 1}]}) == {"a": {"$eq": 1}}


# ------------------------------------------------------------------------------------------- Qdrant


async def test_qdrant_search_through_knowledge_with_citations(qdrant: QdrantClient) -> None:
    knowledge = vector_knowledge(
        "qdrant",
        name="support",
        client=qdrant,
        collection_name="support",
        embedder=EMBEDDER,
        vector_name="content",
        text_key="text",
        source_key="source",
    )
    hits = await knowledge.search("how often should I rotate the API key", k=2)
    assert hits[0].source == "security.md" and hits[0].metadata["key"] == "p1"
    assert "text" not in hits[0].metadata and hits[0].text.startswith("Rotate")
    expected = float(np.dot(*EMBEDDER.embed_sync(["how often should I rotate the API key", ROWS[0][1]])))
    assert hits[0].score == pytest.approx(expected, abs=1e-4)
    context = await knowledge.context("rotate the API key", k=1)
    assert "[support:1]" in context and "security.md" in context


@pytest.mark.parametrize("where", FILTERS)
async def test_qdrant_native_filters_agree_with_kag_semantics(qdrant: QdrantClient, where: dict[str, Any]) -> None:
    knowledge = vector_knowledge(
        "qdrant", name="support", client=qdrant, collection_name="support", embedder=EMBEDDER, vector_name="content"
    )
    hits = await knowledge.search("API key", k=10, where=where)
    assert {h.metadata["key"] for h in hits} == _expected(where)


async def test_qdrant_nested_keys_async_client_and_threshold() -> None:
    client = AsyncQdrantClient(":memory:")
    await client.create_collection(
        "plain", vectors_config=models.VectorParams(size=DIMS, distance=models.Distance.COSINE)
    )
    vectors = _embed(["alpha report", "beta report"])
    await client.upsert(
        "plain",
        points=[
            models.PointStruct(id=1, vector=vectors[0], payload={"body": "alpha report", "rev": {"year": 2024}}),
            models.PointStruct(id=2, vector=vectors[1], payload={"body": "beta report", "rev": {"year": 2026}}),
            models.PointStruct(id=3, vector=vectors[1], payload={"rev": {"year": 2026}}),  # no text: skipped
        ],
    )
    knowledge = vector_knowledge(
        "qdrant", name="reports", client=client, collection_name="plain", embedder=EMBEDDER, text_key="body"
    )
    hits = await knowledge.search("report", k=5, where={"rev.year": {"$gte": 2025}})
    assert [h.text for h in hits] == ["beta report"]
    strict = vector_knowledge(
        "qdrant", client=client, collection_name="plain", embedder=EMBEDDER, text_key="body", score_threshold=0.99
    )
    assert [h.text for h in await strict.search("alpha report", k=5)] == ["alpha report"]


async def test_qdrant_rejects_unsupported_filters_and_options(qdrant: QdrantClient) -> None:
    knowledge = vector_knowledge(
        "qdrant", client=qdrant, collection_name="support", embedder=EMBEDDER, vector_name="content"
    )
    for where in ({"team": {"$contains": "o"}}, {"team": None}, {"year": {"$gt": "2020"}}):
        with pytest.raises(UnsupportedFilterError, match="filter_converter"):
            await knowledge.search("API", where=where)
    custom = vector_knowledge(
        "qdrant",
        client=qdrant,
        collection_name="support",
        embedder=EMBEDDER,
        vector_name="content",
        filter_converter=lambda where: models.Filter(
            must=[models.FieldCondition(key="team", match=models.MatchText(text=where["team"]["$contains"]))]
        ),
    )
    # the caller's converter owns the translation the default refuses: a text match on the payload
    hits = await custom.search("API", k=10, where={"team": {"$contains": "facilities"}})
    assert sorted(h.metadata["key"] for h in hits) == ["p3", "p4"]
    with pytest.raises(VectorBackendConfigError, match="embedder"):
        vector_knowledge("qdrant", client=qdrant, collection_name="support")
    with pytest.raises(VectorBackendConfigError, match="collection_name"):
        vector_knowledge("qdrant", client=qdrant, embedder=EMBEDDER)
    with pytest.raises(VectorBackendConfigError, match="mmr_lambda"):
        vector_knowledge("qdrant", client=qdrant, collection_name="support", embedder=EMBEDDER, mmr_lambda=0.5)
    with pytest.raises(VectorBackendConfigError, match="does not take"):
        vector_knowledge("qdrant", client=qdrant, collection_name="support", embedder=EMBEDDER, index="x")


def test_qdrant_filter_shape() -> None:
    built = qdrant_filter({"team": {"$ne": "ops"}, "year": {"$gte": 2025}})
    assert built.must_not[0].key == "team" and built.must_not[0].match.value == "ops"
    assert built.must[0].key == "year" and built.must[0].range.gte == 2025


# ------------------------------------------------------------------------------------------- Pinecone
# Pinecone has no local mode: the official client talks to a local HTTP server that implements the one
# data-plane route the adapter calls (POST /query), with Pinecone's own filter rules written out below.


def _pinecone_holds(filt: Mapping[str, Any], meta: Mapping[str, Any]) -> bool:
    """Pinecone's documented metadata-filter semantics, written independently of kag's evaluator."""
    for key, cond in filt.items():
        if key == "$and":
            ok = all(_pinecone_holds(sub, meta) for sub in cond)
        elif key == "$or":
            ok = any(_pinecone_holds(sub, meta) for sub in cond)
        else:
            ops = cond if isinstance(cond, dict) else {"$eq": cond}
            ok = True
            for op, arg in ops.items():
                have, present = meta.get(key), key in meta
                if op == "$eq":
                    ok &= present and have == arg
                elif op == "$ne":
                    ok &= not present or have != arg
                elif op == "$in":
                    ok &= present and have in arg
                elif op == "$nin":
                    ok &= not present or have not in arg
                elif op == "$exists":
                    ok &= present == arg
                else:
                    number = isinstance(have, int | float) and not isinstance(have, bool)
                    compare = {"$gt": float.__gt__, "$gte": float.__ge__, "$lt": float.__lt__, "$lte": float.__le__}
                    ok &= number and compare[op](float(have), float(arg))
        if not ok:
            return False
    return True


class _PineconeServer:
    def __init__(self) -> None:
        vectors = EMBEDDER.embed_sync([r[1] for r in ROWS])
        self.rows = {
            "prod": [(cid, vectors[i], {"text": text, **meta}) for i, (cid, text, meta) in enumerate(ROWS)],
            "staging": [("s1", vectors[0], {"text": "staging copy", "source": "staging.md"})],
        }
        self.requests: list[tuple[str, dict[str, Any], str | None]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.requests.append((self.path, body, self.headers.get("Api-Key")))
                if self.path != "/query":
                    self.send_error(404)
                    return
                out = json.dumps(owner.query(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def query(self, body: dict[str, Any]) -> dict[str, Any]:
        q = np.asarray(body["vector"], dtype=np.float64)
        scored = []
        for cid, vec, meta in self.rows.get(body.get("namespace", ""), []):
            if body.get("filter") and not _pinecone_holds(body["filter"], meta):
                continue
            score = float(q @ vec / (np.linalg.norm(q) * np.linalg.norm(vec)))
            scored.append({"id": cid, "score": score, "metadata": meta if body.get("includeMetadata") else None})
        scored.sort(key=lambda m: -m["score"])
        return {"matches": scored[: body["topK"]], "namespace": body.get("namespace", ""), "usage": {"readUnits": 1}}


@pytest.fixture(scope="module")
def pinecone_server() -> Iterator[_PineconeServer]:
    server = _PineconeServer()
    yield server
    server.server.shutdown()
    server.server.server_close()


def _pinecone_index(server: _PineconeServer) -> Any:
    return Pinecone(api_key="local-test-key").Index(host=server.url)


async def test_pinecone_search_through_the_official_client(pinecone_server: _PineconeServer) -> None:
    knowledge = vector_knowledge(
        "pinecone",
        name="company_docs",
        index=_pinecone_index(pinecone_server),
        namespace="prod",
        embedder=EMBEDDER,
        text_key="text",
        source_key="source",
    )
    hits = await knowledge.search("how often should I rotate the API key", k=2)
    assert [h.chunk_id for h in hits][:1] == ["p1"] and hits[0].source == "security.md"
    assert "text" not in hits[0].metadata and hits[0].score > hits[1].score
    path, body, key = pinecone_server.requests[-1]
    assert (path, body["topK"], body["namespace"], body["includeMetadata"], key) == (
        "/query",
        2,
        "prod",
        True,
        "local-test-key",
    )
    context = await knowledge.context("rotate the API key", k=1)
    assert "[company_docs:1]" in context and "security.md" in context
    staging = vector_knowledge(
        "pinecone", index=_pinecone_index(pinecone_server), namespace="staging", embedder=EMBEDDER
    )
    assert [h.text for h in await staging.search("API key", k=5)] == ["staging copy"]


@pytest.mark.parametrize("where", [*FILTERS, {"year": {"$exists": False}}, {"year": {"$exists": True}}])
async def test_pinecone_native_filters_agree_with_kag_semantics(
    pinecone_server: _PineconeServer, where: dict[str, Any]
) -> None:
    knowledge = vector_knowledge(
        "pinecone", index=_pinecone_index(pinecone_server), namespace="prod", embedder=EMBEDDER
    )
    hits = await knowledge.search("API key", k=10, where=where)
    assert {h.chunk_id for h in hits} == _expected(where)
    assert pinecone_server.requests[-1][1]["filter"] == pinecone_filter(where)


async def test_pinecone_rejects_what_it_cannot_express(pinecone_server: _PineconeServer) -> None:
    index = _pinecone_index(pinecone_server)
    knowledge = vector_knowledge("pinecone", index=index, namespace="prod", embedder=EMBEDDER)
    for where in ({"tags": {"$contains": "x"}}, {"team": None}, {"source": {"$lte": "m"}}):
        with pytest.raises(UnsupportedFilterError, match="filter_converter"):
            await knowledge.search("API", where=where)
    with pytest.raises(VectorBackendConfigError, match="embedder"):
        vector_knowledge("pinecone", index=index)
    with pytest.raises(VectorBackendConfigError, match="index="):
        vector_knowledge("pinecone", embedder=EMBEDDER)
    with pytest.raises(VectorBackendConfigError, match="alpha"):
        vector_knowledge("pinecone", index=index, embedder=EMBEDDER, alpha=0.3)
    assert pinecone_filter({"a": 1, "b": {"$gte": 2}}) == {"$and": [{"a": {"$eq": 1}}, {"b": {"$gte": 2}}]}
