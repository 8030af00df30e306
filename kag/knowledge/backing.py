"""What a ``Knowledge`` object is over, and the checks of its options.

:func:`resolve_backing` sorts the first argument of ``Knowledge(...)`` (and ``store=``) into one
of three kinds: graph knowledge over a :class:`KnowledgeBase` (given, or built by a factory once
the embedder's dimensions are known), managed knowledge over a caller's ``VectorStore``, or
retrieval-only knowledge over a retriever or a search function. :func:`check_options` refuses
bad settings at construction, each with a :class:`~kag.errors.ConfigError` that says what to give.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kag.errors import ConfigError, InvalidInputError
from kag.knowledge.base import KnowledgeBase
from kag.knowledge.indexing import Source
from kag.knowledge.rerank import Reranker, check_reranker
from kag.knowledge.vector_index import VectorIndex
from kag.query.filters import validate_filter
from kag.rag.embedders import Embedder, HashEmbedder, as_embedder
from kag.rag.loaders import AutoLoader
from kag.rag.retrievers import CallableRetriever
from kag.rag.splitter import RecursiveCharacterSplitter
from kag.rag.vectorstores import VectorStoreRetriever
from kag.validation import check_finite, check_k, check_threshold

__all__ = [
    "MODES",
    "Backing",
    "KnowledgeBaseFactory",
    "SearchMode",
    "check_mode",
    "check_options",
    "default_loader",
    "default_splitter",
    "dimensions_known",
    "resolve_backing",
]

KnowledgeBaseFactory = Callable[[Embedder | None], KnowledgeBase]
"""Builds the knowledge base of managed knowledge once its embedder's dimensions are known."""

SearchMode = Literal["hybrid", "vector", "keyword"]
MODES: tuple[str, ...] = ("hybrid", "vector", "keyword")
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,57}$")


def default_splitter(splitter: RecursiveCharacterSplitter | None) -> RecursiveCharacterSplitter:
    """``splitter``, or the default chunking (1,000 characters, 150 of overlap)."""
    return splitter if splitter is not None else RecursiveCharacterSplitter(1000, 150)


def default_loader(loader: AutoLoader | None) -> AutoLoader:
    """``loader``, or a fresh :class:`AutoLoader`."""
    return loader if loader is not None else AutoLoader()


@dataclass
class Backing:
    """The resolved first argument: exactly one kind is set (a factory may wait for its dimensions)."""

    retriever: Any = None  # retrieval-only knowledge, or the search side of a VectorStore
    vector_index: VectorIndex | None = None  # kag indexes into a caller's VectorStore
    knowledge_base: KnowledgeBase | None = None
    factory: KnowledgeBaseFactory | None = None  # builds the knowledge base when none was given
    embedder: Any = None  # as given: what the factory builds with (wrapped once every option is checked)


def _memory_knowledge_base(embedder: Embedder | None) -> KnowledgeBase:
    return KnowledgeBase("memory://", embedder=embedder)


def resolve_backing(
    knowledge_base: Any,
    *,
    store: Any,
    embedder: Any,
    splitter: RecursiveCharacterSplitter | None,
    loader: AutoLoader | None,
    passage_store: Any,
    knowledge_base_factory: KnowledgeBaseFactory | None,
) -> Backing:
    """Sort ``Knowledge(knowledge_base, store=..., ...)`` into a :class:`Backing` (``ConfigError`` on a mix)."""
    if store is not None:
        if knowledge_base is not None or knowledge_base_factory is not None or passage_store is not None:
            raise ConfigError(
                "store= (a VectorStore) makes kag index into that store: give no knowledge base, "
                "retriever or passage_store with it."
            )
        query_embedder = as_embedder(embedder) if embedder is not None else HashEmbedder()
        index = VectorIndex(store, query_embedder, default_splitter(splitter), default_loader(loader))
        return Backing(retriever=VectorStoreRetriever(store, query_embedder), vector_index=index)
    if isinstance(knowledge_base, KnowledgeBase):
        if embedder is not None or knowledge_base_factory is not None:
            raise ConfigError(
                "a KnowledgeBase brings its own embedder: give embedder= to KnowledgeBase(...), "
                "or use Knowledge(None, embedder=...) for a fresh memory:// one."
            )
        return Backing(knowledge_base=knowledge_base)
    if knowledge_base is None:
        return Backing(factory=knowledge_base_factory or _memory_knowledge_base, embedder=embedder)
    if callable(getattr(knowledge_base, "retrieve", None)):
        return Backing(retriever=knowledge_base, embedder=embedder)
    if callable(knowledge_base):
        return Backing(retriever=CallableRetriever(knowledge_base), embedder=embedder)
    raise ConfigError(
        f"Knowledge needs a KnowledgeBase, a retriever (an object with retrieve(query, *, k, where)), "
        f"a search function or None; got {type(knowledge_base).__name__}."
    )


def check_mode(mode: Any) -> None:
    """``InvalidInputError`` unless ``mode`` is a passage ranking mode."""
    if mode not in MODES:
        raise InvalidInputError(f"mode must be one of {', '.join(MODES)}; got {mode!r}.")


def check_options(
    *,
    name: Any,
    mode: Any,
    alpha: float,
    mmr_lambda: float | None,
    fetch_k: int,
    default_k: int,
    context_max_chars: int,
    score_threshold: float,
    reranker: Reranker | None,
    where: Mapping[str, Any] | None,
    sources: Source | Iterable[Source] | None,
    pending_sources: Source | Iterable[Source] | None,
) -> None:
    """Refuse bad ``Knowledge`` settings with a ``ConfigError`` (mode: ``InvalidInputError``)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(f"knowledge name {name!r} must match ^[A-Za-z0-9_-]{{1,57}}$ (it becomes a tool name).")
    check_mode(mode)
    check_threshold(alpha, name="alpha", error=ConfigError)
    if mmr_lambda is not None:
        check_threshold(mmr_lambda, name="mmr_lambda", error=ConfigError)
    check_k(fetch_k, name="fetch_k", error=ConfigError)
    check_k(default_k, name="default_k", error=ConfigError)
    check_k(context_max_chars, name="context_max_chars", minimum=800, maximum=10_000_000, error=ConfigError)
    check_finite(score_threshold, name="score_threshold", error=ConfigError)
    check_reranker(reranker)
    if sources is not None and pending_sources is not None:
        raise ConfigError("give sources= or pending_sources= (another name of it), not both.")
    try:
        validate_filter(where)
    except InvalidInputError as exc:
        raise ConfigError(f"invalid knowledge scope `where`: {exc}") from exc


def dimensions_known(embedder: Any) -> bool:
    """Whether ``embedder`` knows its dimensions yet (a property that raises while unknown)."""
    try:
        embedder.dimensions  # noqa: B018
    except AttributeError:
        return False
    return True
