"""``vector_knowledge(backend, **options)``: ``Knowledge`` over a caller's vector store or existing index.

Backends:

* ``"vector"``: managed: kag loads, splits and embeds ``sources`` (and later
  ``add``/``upsert``/``delete``/``refresh`` calls) into ``store=`` (any
  :class:`~kag.rag.vectorstores.VectorStore`, e.g. ``InMemoryVectorStore`` or
  ``SQLiteVectorStore``) through the protocol's methods, with ``embedder=``
  (``HashEmbedder()`` when omitted), ``splitter=`` and ``loader=``; searches are
  exact vector searches of the store (``mode`` may only be ``"vector"``);
* ``"chroma"``: ``collection=`` (or ``client=`` plus ``collection_name=``),
  ``embedder=`` optional when the collection has its own embedding function;
  ``text_key``, ``source_key``, ``filter_converter``;
* ``"pinecone"``: ``index=``, ``embedder=``, ``namespace``, ``text_key``,
  ``source_key``, ``filter_converter``;
* ``"qdrant"``: ``client=``, ``collection_name=``, ``embedder=``, ``vector_name``,
  ``text_key``, ``source_key``, ``filter_converter``.

Common options go to :class:`~kag.knowledge.knowledge.Knowledge`: ``name``,
``description``, ``default_k``, ``reranker``, ``where`` (a scope ANDed with every
search filter), ``context_max_chars``; ``score_threshold`` is applied by the
retriever. Local ranking controls (``mode``, ``alpha``, ``fetch_k``,
``mmr_lambda``) are refused by every one of these backends, and ingestion options
(``sources``, ``loader``, ``splitter``) by the retrieval-only ones: they search
exactly what the index returns, and kag does not write into an index it does not own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kag.errors import VectorBackendConfigError
from kag.knowledge.knowledge import Knowledge
from kag.rag.vector_adapters import ChromaRetriever, PineconeRetriever, QdrantRetriever

__all__ = ["VECTOR_BACKENDS", "vector_knowledge"]

_COMMON = ("name", "description", "default_k", "reranker", "where", "context_max_chars")
_LOCAL_CONTROLS = (
    "mode",
    "alpha",
    "fetch_k",
    "mmr_lambda",
    "facts",
    "sources",
    "pending_sources",
    "loader",
    "splitter",
)
_INGESTION = ("sources", "pending_sources", "loader", "splitter")
_OPTIONS: dict[str, tuple[str, ...]] = {
    "vector": ("store", "embedder", "score_threshold", *_INGESTION),
    "chroma": (
        "collection",
        "client",
        "collection_name",
        "embedder",
        "text_key",
        "source_key",
        "filter_converter",
        "score_threshold",
    ),
    "pinecone": ("index", "embedder", "namespace", "text_key", "source_key", "filter_converter", "score_threshold"),
    "qdrant": (
        "client",
        "collection_name",
        "embedder",
        "vector_name",
        "text_key",
        "source_key",
        "filter_converter",
        "score_threshold",
    ),
}
VECTOR_BACKENDS = tuple(_OPTIONS)


def _retriever(backend: str, options: Mapping[str, Any]) -> Any:
    keys = {k: options[k] for k in ("text_key", "source_key", "filter_converter", "score_threshold") if k in options}
    if backend == "chroma":
        collection = options.get("collection")
        if collection is None:
            client, name = options.get("client"), options.get("collection_name")
            if client is None or not name:
                raise VectorBackendConfigError(
                    "backend 'chroma' needs collection= (an existing Chroma collection), or client= and "
                    "collection_name=."
                )
            collection = client.get_collection(name)  # never created: kag does not own the index
        elif options.get("client") is not None or options.get("collection_name") is not None:
            raise VectorBackendConfigError(
                "backend 'chroma': give collection=, or client= with collection_name=, not both."
            )
        return ChromaRetriever(collection, embedder=options.get("embedder"), **keys)
    if backend == "pinecone":
        if options.get("index") is None:
            raise VectorBackendConfigError(
                "backend 'pinecone' needs index= (e.g. Pinecone(api_key=...).Index(host=...))."
            )
        if options.get("embedder") is None:
            raise VectorBackendConfigError("backend 'pinecone' needs embedder= (the model that built the index).")
        return PineconeRetriever(
            options["index"], embedder=options["embedder"], namespace=options.get("namespace"), **keys
        )
    if options.get("client") is None or not options.get("collection_name"):
        raise VectorBackendConfigError("backend 'qdrant' needs client= (a QdrantClient) and collection_name=.")
    if options.get("embedder") is None:
        raise VectorBackendConfigError("backend 'qdrant' needs embedder= (the model that built the collection).")
    return QdrantRetriever(
        options["client"],
        options["collection_name"],
        embedder=options["embedder"],
        vector_name=options.get("vector_name"),
        **keys,
    )


def vector_knowledge(backend: str, **options: Any) -> Knowledge:
    """Retrieval-only :class:`Knowledge` over a vector store (``"vector"``) or an existing Chroma/Pinecone/Qdrant index.

    Raises :class:`~kag.errors.VectorBackendConfigError` for a missing, unknown or
    unsupported option (the message lists the accepted ones).
    """
    if backend not in _OPTIONS:
        raise VectorBackendConfigError(f"unknown vector backend {backend!r}; use one of {', '.join(VECTOR_BACKENDS)}.")
    if backend == "vector" and options.get("mode") == "vector":
        options = {k: v for k, v in options.items() if k != "mode"}  # the only ranking a VectorStore offers
    allowed = set(_OPTIONS[backend]) | set(_COMMON)
    refused = sorted(k for k in options if k in _LOCAL_CONTROLS and k not in allowed and options[k] is not None)
    if refused:
        raise VectorBackendConfigError(
            f"backend {backend!r} searches an index kag does not manage, so {', '.join(refused)} cannot be used; "
            "index documents through the store or database itself, and drop the local ranking controls."
        )
    unknown = sorted(k for k in options if k not in allowed and k not in _LOCAL_CONTROLS)
    if unknown:
        raise VectorBackendConfigError(
            f"backend {backend!r} does not take {', '.join(unknown)}; it accepts {', '.join(sorted(allowed))}."
        )
    common = {k: options[k] for k in _COMMON if options.get(k) is not None}
    if backend == "vector":
        if options.get("store") is None:
            raise VectorBackendConfigError(
                "backend 'vector' needs store= (a VectorStore such as InMemoryVectorStore() or "
                "SQLiteVectorStore(path))."
            )
        managed = {k: options[k] for k in ("embedder", "loader", "splitter", "pending_sources") if k in options}
        threshold = options.get("score_threshold")
        return Knowledge(
            None,
            store=options["store"],
            sources=options.get("sources"),
            score_threshold=0.0 if threshold is None else threshold,
            **managed,
            **common,
        )
    retriever = _retriever(backend, options)
    return Knowledge(retriever, **common)
