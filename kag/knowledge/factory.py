"""``create_knowledge``: a knowledge base and a ``Knowledge`` over it in one call.

Backends by name:

* ``"memory"``: the embedded networkx graph store, in process; ``path=`` makes it
  a file (``Knowledge.save()`` writes it);
* ``"sqlite"``: the embedded store made durable: ``path=`` names the SQLite file,
  ``namespace=`` (default: the knowledge ``name``) isolates knowledge bases sharing it; every
  write is one committed transaction, and the file is loaded into memory when opened;
* ``"neo4j"``: a Neo4j server; ``uri``, ``username``, ``password`` and ``database``
  as keywords, else from ``NEO4J_URI``, ``NEO4J_USERNAME``, ``NEO4J_PASSWORD`` and
  ``NEO4J_DATABASE`` (``neo4j://localhost:7687`` when no URI is set anywhere).

``"vector"`` (``store=`` a ``kag.rag.VectorStore``): kag indexes into the caller's
store. Retrieval-only over an index kag does not manage: ``"chroma"``, ``"qdrant"`` and
``"pinecone"`` (the caller's client, collection or index; see
:mod:`kag.knowledge.vector_backends`).

Store URIs (``memory://``, ``memory://kb.json``, ``sqlite:///kb.db?namespace=x``, ``neo4j://host:7687``,
``bolt://...``) are accepted as before. A retriever object or a search function
instead of a name gives retrieval-only knowledge (see :class:`Knowledge`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kag.datamodels.base import Entity, Relation
from kag.errors import ConfigError, UnknownBackendError
from kag.graph.factory import NEO4J_SCHEMES
from kag.graph.sqlite import DEFAULT_NAMESPACE, sqlite_uri
from kag.knowledge.base import KnowledgeBase
from kag.knowledge.knowledge import Knowledge, SearchMode
from kag.knowledge.rerank import Reranker
from kag.knowledge.vector_backends import VECTOR_BACKENDS, vector_knowledge
from kag.rag.loaders import AutoLoader, Source
from kag.rag.splitter import RecursiveCharacterSplitter

__all__ = ["BACKENDS", "create_knowledge"]

BACKENDS: tuple[str, ...] = ("memory", "sqlite", "neo4j")
_NEO4J_SETTINGS = ("uri", "username", "password", "database")


def _backend_uri(backend: str, options: dict[str, Any], name: str = "") -> str:
    """The store URI a backend name (or URI) stands for; consumes ``path`` / ``uri`` from ``options``.

    A sqlite namespace defaults to the knowledge ``name``.
    """
    if backend == "memory" or backend.startswith("memory://"):
        path = options.pop("path", None)
        if path is not None and backend != "memory":
            raise ConfigError("give a memory path either in the URI or as path=..., not both.")
        return backend if backend != "memory" else f"memory://{os.fspath(path) if path is not None else ''}"
    if backend == "sqlite":
        path = options.pop("path", None)
        if path is None:
            raise ConfigError("the 'sqlite' backend needs path=... (the SQLite file, created when missing).")
        namespace = options.pop("namespace", None)
        return sqlite_uri(path, (name or DEFAULT_NAMESPACE) if namespace is None else namespace)
    if backend.startswith("sqlite://"):
        if "path" in options or "namespace" in options:
            raise ConfigError("give the sqlite path and namespace either in the URI or as keywords, not both.")
        return backend
    if backend == "neo4j":
        uri = options.pop("uri", None) or os.environ.get("NEO4J_URI") or "neo4j://localhost:7687"
        if not str(uri).startswith(NEO4J_SCHEMES):
            raise ConfigError(f"neo4j uri {uri!r} must start with one of {', '.join(NEO4J_SCHEMES)}.")
        return str(uri)
    if backend.startswith(NEO4J_SCHEMES):
        return backend
    names = ", ".join(repr(b) for b in (*BACKENDS, *VECTOR_BACKENDS))
    raise UnknownBackendError(
        f"unknown knowledge backend {backend!r}: use one of {names}, a store URI ('memory://', "
        "'memory://kb.json', 'neo4j://host:7687'), or a retriever object."
    )


def create_knowledge(
    backend: str | Any = "memory",
    *,
    name: str = "knowledge",
    description: str = "",
    sources: Source | Iterable[Source] | None = None,
    default_k: int = 5,
    entity_models: Sequence[type[Entity]] = (),
    relation_models: Sequence[type[Relation]] = (),
    embedder: Any = None,
    splitter: RecursiveCharacterSplitter | None = None,
    reranker: Reranker | None = None,
    where: Mapping[str, Any] | None = None,
    context_max_chars: int = 12_000,
    mode: SearchMode | None = None,
    alpha: float = 0.5,
    mmr_lambda: float | None = None,
    fetch_k: int | None = None,
    score_threshold: float | None = None,
    loader: AutoLoader | None = None,
    facts: bool = True,
    **kb_options: Any,
) -> Knowledge:
    """Managed :class:`Knowledge` on a graph backend, or retrieval-only knowledge over a retriever.

    ``backend`` is ``"memory"`` (``path=`` to persist), ``"sqlite"`` (``path=`` and
    ``namespace=``), ``"neo4j"`` (``uri``, ``username``,
    ``password``, ``database`` or the ``NEO4J_*`` variables), a store URI, or a retriever
    (an object with ``retrieve``, or a search function). An unknown name raises
    :class:`~kag.errors.UnknownBackendError` listing the names. ``sources`` are indexed
    lazily (first ``ready()``/``search()``); other ``kb_options`` go to the store
    (``batch_size``, ``driver``... for Neo4j). ``embedder`` may be a kag embedder or any
    object with ``embed_documents``/``embed_query``. ``mode``, ``fetch_k`` and
    ``score_threshold`` default to ``"hybrid"``, 20 and 0.0.
    """
    options: dict[str, Any] = dict(
        name=name,
        description=description,
        default_k=default_k,
        reranker=reranker,
        where=where,
        context_max_chars=context_max_chars,
        mode=mode if mode is not None else "hybrid",
        alpha=alpha,
        mmr_lambda=mmr_lambda,
        fetch_k=fetch_k if fetch_k is not None else 20,
        score_threshold=score_threshold if score_threshold is not None else 0.0,
        facts=facts,
    )
    if not isinstance(backend, str):
        if callable(getattr(backend, "retrieve", None)) or callable(backend):
            if kb_options or entity_models or relation_models:
                extra = sorted({*kb_options, *(["entity_models"] if entity_models else [])})
                raise ConfigError(f"a retriever backend takes no store options; got {extra}.")
            return Knowledge(backend, sources=sources, embedder=embedder, splitter=splitter, loader=loader, **options)
        raise UnknownBackendError(
            f"backend must be a name ({', '.join(BACKENDS)}), a store URI or a retriever; got {type(backend).__name__}."
        )
    if backend in VECTOR_BACKENDS:
        # retrieval over an index kag does not manage: only the options it can honour are passed on,
        # and a local control the caller set (not a default) is refused by name
        given: dict[str, Any] = {
            "mode": mode,
            "fetch_k": fetch_k,
            "mmr_lambda": mmr_lambda,
            "alpha": None if alpha == 0.5 else alpha,
            "facts": None if facts else facts,
            "sources": sources,
            "loader": loader,
            "splitter": splitter,
            "score_threshold": score_threshold,
        }
        if entity_models or relation_models:
            raise ConfigError(f"the {backend!r} backend searches passages only; it takes no entity or relation models.")
        return vector_knowledge(
            backend,
            name=name,
            description=description,
            default_k=default_k,
            reranker=reranker,
            where=where,
            context_max_chars=context_max_chars,
            embedder=embedder,
            **{k: v for k, v in given.items() if v is not None},
            **kb_options,
        )
    store_options = dict(kb_options)
    uri = _backend_uri(backend, store_options, name)
    if not uri.startswith(NEO4J_SCHEMES):
        neo4j_only = sorted(k for k in store_options if k in _NEO4J_SETTINGS)
        if neo4j_only:
            raise ConfigError(f"{neo4j_only} are Neo4j settings; the {backend!r} backend takes none.")

    def build(emb: Any) -> KnowledgeBase:
        return KnowledgeBase(
            uri, entity_models=entity_models, relation_models=relation_models, embedder=emb, **store_options
        )

    factory: Callable[[Any], KnowledgeBase] = build
    return Knowledge(
        None,
        sources=sources,
        embedder=embedder,
        splitter=splitter,
        loader=loader,
        knowledge_base_factory=factory,
        **options,
    )
