"""Retrieval-only knowledge: search, tools and answers over a retriever that kag does not index.

``Knowledge(retriever)`` and ``Knowledge.from_callable(fn)`` search through someone else's index
(the retriever's filter gets one flat ``where``; hits under ``score_threshold`` are dropped and an
optional reranker reorders them). Indexing options are refused at construction and lifecycle calls
at call time, each with an error that says to create managed knowledge instead. Knowledge over a
caller's ``VectorStore`` searches through the same path (:func:`retrieve`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kag.errors import ConfigError, UnsupportedKnowledgeOperationError
from kag.knowledge.hits import SearchHit
from kag.knowledge.rerank import Reranker, rerank_hits
from kag.query.filters import validate_filter
from kag.rag.retrievers import call_retriever

__all__ = ["not_managed", "refuse_indexing_options", "retrieve", "retriever_scope"]


def refuse_indexing_options(given: Mapping[str, Any]) -> None:
    """``ConfigError`` naming each indexing option given (not ``None``) to retrieval-only knowledge."""
    extra = sorted(key for key, value in given.items() if value is not None)
    if extra:
        raise ConfigError(
            f"retrieval-only knowledge does not index, so {', '.join(extra)} cannot be used with a "
            "retriever; use create_knowledge('memory') or a KnowledgeBase for managed knowledge."
        )


def not_managed(name: str, retriever: Any, operation: str) -> UnsupportedKnowledgeOperationError:
    """The error of a lifecycle call (``add``, ``delete``...) on retrieval-only knowledge."""
    return UnsupportedKnowledgeOperationError(
        f"knowledge '{name}' is retrieval-only (over {retriever!r}), so {operation}() is not "
        "available: manage the documents in that system, or create managed knowledge with "
        "create_knowledge('memory') or create_knowledge('neo4j')."
    )


def retriever_scope(configured: Mapping[str, Any] | None, where: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The one flat filter an external retriever gets: the configured keys win over the per-search ones."""
    validate_filter(where)
    merged = {**dict(where or {}), **dict(configured or {})}
    return merged or None


async def retrieve(
    retriever: Any,
    query: str,
    k: int,
    where: dict[str, Any] | None,
    *,
    fetch_k: int,
    score_threshold: float,
    reranker: Reranker | None,
) -> list[SearchHit]:
    """Up to ``k`` hits of ``retriever`` (``fetch_k`` candidates when reranking), thresholded and reranked."""
    if k == 0:
        return []
    want = max(fetch_k, k) if reranker is not None else k
    hits = await call_retriever(retriever.retrieve, query, want, where)
    if score_threshold > 0:
        hits = [h for h in hits if h.score >= score_threshold]
    if reranker is not None:
        hits = await rerank_hits(reranker, query, hits, k)
    return hits[:k]
