"""The reference "Knowledge" API, called as its documentation calls it, with the package name changed.

Examples that store data run on the embedded store and on the real Neo4j server
(``backend`` parametrized); retrieval-only examples need no store. The language
model of ``ask`` is a ``ScriptedLM``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pytest

import kag
from kag import (
    CallableEmbedder,
    CallableRetriever,
    Chunk,
    Citation,
    Document,
    HashEmbedder,
    Knowledge,
    LexicalReranker,
    RAGAnswer,
    SearchHit,
    create_knowledge,
)
from kag.errors import (
    ConfigError,
    InvalidInputError,
    UnknownBackendError,
    UnsupportedKnowledgeOperationError,
    VectorBackendConfigError,
)
from kag.knowledge.indexing import IndexReport
from kag.knowledge.rerank import EmbeddingReranker
from kag.lm import ScriptedLM

HANDBOOK: list[Any] = [
    Document(
        text="Expense receipts must be submitted within 30 days.",
        source="expense-policy.md",
        metadata={"department": "finance", "revision": {"year": 2026}},
    ),
    "Security incidents must be reported immediately.",
    Document(
        text="Legal holds suspend the retention policy for the affected records.",
        source="legal.md",
        metadata={"department": "legal", "revision": {"year": 2025}},
    ),
    Document(
        text="Records are kept for seven years under the retention policy.",
        source="retention.md",
        metadata={"department": "finance", "revision": {"year": 2026}},
    ),
]


# -- managed knowledge ----------------------------------------------------------------


async def test_memory_example_stages_sources_then_searches_with_filters(make: Callable[..., Any]) -> None:
    knowledge = make(name="handbook", description="the employee handbook", sources=HANDBOOK)
    assert knowledge.managed and knowledge.tool_name == "search_handbook"
    assert (await knowledge.store.counts())["documents"] == 0  # staged, not indexed during construction
    report = await knowledge.ready()
    assert isinstance(report, IndexReport) and (report.documents, report.chunks) == (4, 4)

    hits = await knowledge.search("expense submission deadline", k=5, where={"department": "finance"})
    assert hits and all(h.metadata["department"] == "finance" for h in hits)
    top = hits[0]
    assert (top.source, top.rank, top.kind) == ("expense-policy.md", 1, "passage")
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    assert top.chunk_id is not None and top.chunk_id.startswith("chk_") and top.chunk_id == top.id
    assert top.document_id == HANDBOOK[0].id  # the Document's stable id
    assert all(0.0 <= h.score <= 1.0 for h in hits)

    where = {"department": {"$in": ["finance", "legal"]}, "revision.year": {"$gte": 2026}}
    scoped = await knowledge.search("retention policy", where=where)
    assert scoped[0].source == "retention.md"
    assert {h.source for h in scoped} <= {"retention.md", "expense-policy.md"}  # legal.md is a 2025 revision

    assert [h.text for h in await knowledge.retrieve("expense submission deadline", k=1)] == [top.text]


async def test_lifecycle_add_text_upsert_replace_and_delete(make: Callable[..., Any]) -> None:
    knowledge = make(name="support")
    report = await knowledge.add_text(
        "Premium support is available around the clock.", source="support-tiers.md", metadata={"tier": "premium"}
    )
    assert report.documents == 1
    hits = await knowledge.search("premium support", where={"tier": "premium"})
    assert [h.source for h in hits] == ["support-tiers.md"]

    first = await knowledge.upsert(Document(text="Updated policy text", source="policy.md", metadata={"revision": 3}))
    assert isinstance(first, IndexReport) and (first.additions, first.deletions) == (1, 0)
    again = await knowledge.upsert(Document(text="Updated policy text", source="policy.md", metadata={"revision": 3}))
    assert (again.additions, again.skips, again.deletions) == (0, 1, 0)
    newer = await knowledge.upsert(
        Document(text="Policy text, fourth revision", source="policy.md", metadata={"revision": 4})
    )
    assert (newer.additions, newer.deletions, newer.sources) == (1, 1, ["policy.md"])
    policy = [h for h in await knowledge.search("policy text", k=5) if h.source == "policy.md"]
    assert [h.metadata["revision"] for h in policy] == [4]

    assert await knowledge.delete(sources=["policy.md"]) == 1
    assert [h.source for h in await knowledge.search("policy text", k=5)] == ["support-tiers.md"]

    faq_doc = Document(text="Faq: passwords expire yearly.", source="faq.md")
    added = await knowledge.add([faq_doc], metadata={"kind": "faq"})
    assert added.documents == 1
    faq = await knowledge.search("passwords expire", where={"kind": "faq"})
    assert [(h.source, h.metadata["kind"]) for h in faq] == [("faq.md", "faq")]
    assert await knowledge.delete(sources=["faq.md"]) == 1
    assert await knowledge.delete(document_ids=[hits[0].document_id or ""]) == 1
    assert (await knowledge.counts())["documents"] == 0


async def test_reranker_on_create_knowledge(make: Callable[..., Any]) -> None:
    seen: list[tuple[str, int, int]] = []

    class MyReranker:  # the reference's shape: async rerank(query, hits, *, k)
        async def rerank(self, query: str, hits: list[SearchHit], *, k: int) -> list[SearchHit]:
            seen.append((query, len(hits), k))
            return sorted(hits, key=lambda h: h.source)[:k]

    knowledge = make(name="ranked", sources=HANDBOOK, reranker=MyReranker(), fetch_k=10)
    hits = await knowledge.search("retention policy records", k=2)
    assert seen == [("retention policy records", 4, 2)]  # the whole pool (fetch_k) goes to the reranker
    all_sources = sorted(h.source for h in await make(name="plain", sources=HANDBOOK).search("records", k=4))
    assert [h.source for h in hits] == all_sources[:2]
    assert [h.rank for h in hits] == [1, 2]


async def test_neo4j_settings_from_environment(
    backend: str, neo4j_settings: dict[str, str] | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if neo4j_settings is None:
        knowledge = create_knowledge("memory", sources=["Tokyo is the capital of Japan."])
        assert knowledge.kb.uri == "memory://"
        assert (await knowledge.search("capital of Japan"))[0].text == "Tokyo is the capital of Japan."
        return
    monkeypatch.setenv("NEO4J_URI", neo4j_settings["uri"])
    monkeypatch.setenv("NEO4J_USERNAME", neo4j_settings["username"])
    monkeypatch.setenv("NEO4J_PASSWORD", neo4j_settings["password"])
    if neo4j_settings["database"]:
        monkeypatch.setenv("NEO4J_DATABASE", neo4j_settings["database"])
    knowledge = create_knowledge("neo4j", name="env")
    try:
        assert knowledge.kb.uri == neo4j_settings["uri"]
        counts = await knowledge.counts()  # connects with the environment's credentials
        assert counts["documents"] >= 0
    finally:
        await knowledge.aclose()


def test_sync_facade_and_memory_path(tmp_path: Any) -> None:
    path = tmp_path / "handbook.json"
    knowledge = create_knowledge("memory", path=str(path), name="handbook", sources=HANDBOOK)
    assert knowledge.sync.ready().documents == 4
    where = {"department": {"$in": ["finance", "legal"]}, "revision.year": {"$gte": 2026}}
    hits = knowledge.sync.search("retention policy", where=where)
    assert hits[0].source == "retention.md"
    assert knowledge.sync.retrieve("retention policy", k=1, where=where)[0].text == hits[0].text
    knowledge.save()
    assert path.exists()
    reopened = create_knowledge(f"memory://{path}", name="handbook")  # a URI is still accepted
    assert reopened.sync.search("retention policy", k=1)[0].source in {"retention.md", "legal.md"}
    knowledge.sync.close()
    reopened.sync.close()


def test_search_settings_and_unknown_backends() -> None:
    knowledge = create_knowledge("memory", mode="hybrid", score_threshold=0.15, fetch_k=24, mmr_lambda=0.7)
    assert (knowledge.mode, knowledge.score_threshold, knowledge.fetch_k, knowledge.mmr_lambda) == (
        "hybrid",
        0.15,
        24,
        0.7,
    )
    assert knowledge.default_k == 5
    for name in ("weaviate", "nosuchstore"):
        with pytest.raises(UnknownBackendError) as info:
            create_knowledge(name)
        assert "'memory'" in str(info.value) and "'neo4j'" in str(info.value) and "'qdrant'" in str(info.value)
    assert isinstance(info.value, ConfigError)
    # the vector backends exist: without their client, collection or index they say which option is missing
    for name, needed in (("pinecone", "index="), ("chroma", "collection="), ("qdrant", "client="), ("vector", "store")):
        with pytest.raises(VectorBackendConfigError, match=needed):
            create_knowledge(name)
    with pytest.raises(VectorBackendConfigError, match="mode"):
        create_knowledge("vector", store=object(), mode="hybrid")  # a local ranking control on a foreign index
    with pytest.raises(ConfigError, match="Neo4j settings"):
        create_knowledge("memory", password="x")


# -- retrieval-only knowledge ---------------------------------------------------------

ROWS = [
    {"id": "kb-1", "text": "Receipts are due within 30 days of the purchase.", "url": "https://intra/expenses"},
    {"id": "kb-2", "text": "Laptops are replaced every three years.", "url": "https://intra/it"},
    {"id": "kb-3", "text": "Travel must be booked through the portal.", "url": "https://intra/travel"},
]
for _row, _team in zip(ROWS, ("finance", "it", "finance"), strict=True):
    _row["team"] = _team


def overlap_search(query: str, limit: int, filters: Mapping[str, Any]) -> list[tuple[dict[str, Any], float]]:
    """The application's own search service: word overlap, filtered by exact metadata."""
    terms = set(query.lower().split())
    scored = []
    for row in ROWS:
        if any(row.get(key) != value for key, value in filters.items()):
            continue
        words = set(row["text"].lower().rstrip(".").split())
        scored.append((row, len(terms & words) / len(terms)))
    scored.sort(key=lambda pair: -pair[1])
    return scored[:limit]


class CompanySearch:
    async def retrieve(self, query: str, *, k: int = 5, where: Mapping[str, Any] | None = None) -> list[SearchHit]:
        rows = overlap_search(query, k, dict(where or {}))
        return [
            SearchHit(
                text=row["text"], score=score, source=row["url"], metadata={"team": row["team"]}, chunk_id=row["id"]
            )
            for row, score in rows
        ]


async def test_knowledge_over_a_retriever_is_retrieval_only() -> None:
    knowledge = Knowledge(CompanySearch(), name="company_docs", description="private product and company documentation")
    assert not knowledge.managed and knowledge.tool_name == "search_company_docs"
    hits = await knowledge.search("receipts due", k=2)
    assert [h.chunk_id for h in hits] == ["kb-1", "kb-2"] and [h.rank for h in hits] == [1, 2]
    assert hits[0].source == "https://intra/expenses" and [h.score for h in hits] == [1.0, 0.0]
    assert [h.chunk_id for h in await knowledge.retrieve("laptops replaced", where={"team": "it"})] == ["kb-2"]
    scoped = Knowledge(CompanySearch(), name="finance", where={"team": "finance"})
    # the configured scope wins over the same key of a per-search filter
    assert {h.chunk_id for h in await scoped.search("laptops replaced", where={"team": "it"})} <= {"kb-1", "kb-3"}

    for call in (
        lambda: knowledge.add(["docs/"]),
        lambda: knowledge.add_text("x"),
        lambda: knowledge.upsert(Document(text="x")),
        lambda: knowledge.delete(sources=["x"]),
        lambda: knowledge.refresh(),
        lambda: knowledge.sync_sources(),
        lambda: knowledge.counts(),
    ):
        with pytest.raises(UnsupportedKnowledgeOperationError, match="retrieval-only"):
            await call()
    with pytest.raises(UnsupportedKnowledgeOperationError):
        _ = knowledge.kb
    with pytest.raises(ConfigError, match="sources"):
        Knowledge(CompanySearch(), sources=["x"])

    tool = knowledge.as_tool()
    assert tool.name == knowledge.tool_name
    text = await tool("receipts due", k=1)
    assert "[company_docs:1]" in text and "Receipts are due" in text

    lm = ScriptedLM([{"answer": "Within 30 days [company_docs:1].", "citations": ["[company_docs:1]"]}])
    answer = await knowledge.ask("are receipts due", language_model=lm, k=2)
    assert str(answer) == "Within 30 days [company_docs:1]." == answer.text
    (citation,) = answer.citations
    assert citation.excerpt == ROWS[0]["text"] and citation.score == 1.0
    assert citation.ids == ("kb-1",) and citation.metadata == {"team": "finance"}
    restored = RAGAnswer.from_dict(answer.to_dict())
    assert restored.text == answer.text and restored.citations == answer.citations
    assert [h.to_dict() for h in restored.hits] == [h.to_dict() for h in answer.hits]


async def test_from_callable_normalizes_every_result_shape() -> None:
    async def search_company_docs(query: str, *, k: int = 5, where: Mapping[str, Any] | None = None) -> list[Any]:
        return [
            {"page_content": row["text"], "score": score, "source": row["url"], "team": row["team"], "id": row["id"]}
            for row, score in overlap_search(query, k, dict(where or {}))
        ]

    knowledge = Knowledge.from_callable(search_company_docs, name="company_docs", description="company docs")
    hits = await knowledge.search("travel portal", k=1, where={"team": "finance"})
    assert [(h.text, h.source, h.chunk_id, h.metadata) for h in hits] == [
        (ROWS[2]["text"], "https://intra/travel", "kb-3", {"team": "finance"})
    ]

    doc = Document(text="Doc result", source="a.md", media_type="text/markdown")
    chunk = Chunk(text="Chunk result", document_id=doc.id, index=0, metadata={"source": "a.md"})

    def sync_search(query: str) -> list[Any]:  # no k, no where: neither is passed
        return ["plain string", doc, chunk, {"content": "mapping", "lang": "en"}, {"text": "ignored by k"}]

    mixed = await Knowledge.from_callable(sync_search, name="mixed").search("anything", k=4)
    assert [h.text for h in mixed] == ["plain string", "Doc result", "Chunk result", "mapping"]
    assert mixed[1].document_id == doc.id and mixed[1].source == "a.md"
    assert (mixed[2].chunk_id, mixed[2].document_id, mixed[2].source) == (chunk.id, doc.id, "a.md")
    assert mixed[3].metadata == {"lang": "en"} and mixed[0].score == 0.0
    with pytest.raises(InvalidInputError, match="takes no `where`"):
        await Knowledge.from_callable(sync_search, name="mixed").search("anything", where={"lang": "en"})
    with pytest.raises(InvalidInputError, match="page_content"):
        await Knowledge.from_callable(lambda q: [{"body": "x"}], name="bad").search("anything")
    assert isinstance(CallableRetriever(sync_search), kag.Retriever)

    class SyncSearch:  # a blocking retrieve works too
        def retrieve(self, query: str, *, k: int = 5, where: Mapping[str, Any] | None = None) -> list[str]:
            return [row["text"] for row, _ in overlap_search(query, k, dict(where or {}))]

    synced = Knowledge(SyncSearch(), name="synced")
    assert [h.text for h in await synced.search("laptops", k=1)] == [ROWS[1]["text"]]


# -- rerankers ------------------------------------------------------------------------


async def test_lexical_and_embedding_rerankers_reorder_by_the_query() -> None:
    hits = [
        SearchHit(text="Office plants are watered on Fridays.", score=0.9, chunk_id="a"),
        SearchHit(text="Refund requests need the original receipt.", score=0.5, chunk_id="b"),
        SearchHit(text="Receipts for a refund request are checked by finance.", score=0.4, chunk_id="c"),
    ]
    lexical = LexicalReranker(weight=1.0).rerank("refund receipt", hits, k=2)
    assert [h.chunk_id for h in lexical] == ["b", "c"] and lexical[0].score == 1.0
    assert [h.chunk_id for h in LexicalReranker(weight=0.0).rerank("refund receipt", hits, k=3)] == ["a", "b", "c"]
    semantic = await EmbeddingReranker().rerank("refund receipt", hits, k=3)
    assert semantic[-1].chunk_id == "a" and semantic[0].score > semantic[-1].score

    knowledge = Knowledge(CompanySearch(), name="docs", reranker=LexicalReranker(weight=1.0), fetch_k=3)
    reranked = await knowledge.search("portal booked travel", k=1)
    assert [h.chunk_id for h in reranked] == ["kb-3"]
    with pytest.raises(ConfigError, match="rerank"):
        Knowledge(CompanySearch(), reranker=object())  # type: ignore[arg-type]


# -- values and embedders -------------------------------------------------------------


def test_values_round_trip() -> None:
    doc = Document(text="Expense receipts", source="e.md", metadata={"a": 1}, media_type="text/markdown")
    assert doc.media_type == "text/markdown" and doc.id == Document(text="Expense receipts", source="e.md").id
    assert Document.from_dict(doc.to_dict()) == doc and doc.to_dict()["media_type"] == "text/markdown"
    chunk = Chunk(text="receipts", document_id=doc.id, index=0, start=8, metadata={"source": "e.md"})
    assert (chunk.end, chunk.source) == (16, "e.md") and Chunk.from_dict(chunk.to_dict()) == chunk
    hit = SearchHit(text="t", score=0.25, source="s", metadata={"k": [1]}, chunk_id="c1", document_id="d1", rank=2)
    assert hit.ids == ("c1", "d1") and SearchHit.from_dict(hit.to_dict()) == hit
    with pytest.raises(InvalidInputError, match="unknown keys"):
        SearchHit.from_dict({**hit.to_dict(), "extra": 1})
    citation = Citation(label="docs:1", source="s", id="c1", kind="passage", excerpt="t", score=0.25, ids=("c1",))
    again = Citation.from_dict(citation.to_dict())
    assert again == citation and (again.excerpt, again.score, again.ids) == ("t", 0.25, ("c1",))
    answer = RAGAnswer(text="Answer", citations=[citation], hits=[hit], query="q")
    assert str(answer) == "Answer" and RAGAnswer.from_dict(answer.to_dict()).hits == [hit]


async def test_callable_embedder_with_document_and_query_functions() -> None:
    model = HashEmbedder(64)
    queries: list[str] = []

    def my_embedding_batch(texts: list[str]) -> list[list[float]]:
        return model.embed_sync(texts).tolist()

    async def my_query_embedding(text: str) -> list[float]:
        queries.append(text)
        return list(model.embed_sync([text])[0])

    embedder = CallableEmbedder(embed_documents=my_embedding_batch, embed_query=my_query_embedding)
    knowledge = create_knowledge("memory", name="embedded", embedder=embedder, sources=HANDBOOK)
    assert "pending" in repr(knowledge)  # the vector size is learnt on first use, not at construction
    hits = await knowledge.search("retention policy records", k=1)
    assert hits[0].source in {"retention.md", "legal.md"} and embedder.dimensions == 64
    assert "retention policy records" in queries

    class ReferenceEmbedder:  # only embed_documents / embed_query, both async
        async def embed_documents(self, texts: list[str]) -> np.ndarray:
            return model.embed_sync(texts)

        async def embed_query(self, text: str) -> np.ndarray:
            return model.embed_sync([text])[0]

    other = create_knowledge("memory", name="ref", embedder=ReferenceEmbedder(), sources=HANDBOOK)
    assert [h.text for h in await other.search("retention policy records", k=1)] == [hits[0].text]
    with pytest.raises(InvalidInputError, match="not an embedder"):
        create_knowledge("memory", embedder=object())
