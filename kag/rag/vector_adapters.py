"""Retrieval-only adapters over a caller's existing Chroma collection, Qdrant collection or Pinecone index.

kag does not create, own or write these indexes: the application builds the
client, the collection and the query embedder; an adapter only searches. Each is
a retriever (``retrieve(query, *, k=5, where=None)``) that ``kag.Knowledge(...)``
accepts, and returns mappings (``text``, ``score``, ``source``, ``chunk_id``,
``metadata``) that kag turns into ``SearchHit``s with citations.

Filters: kag's ``where`` dict (:mod:`kag.query.filters`) is translated into the
database's native filter and evaluated there. Supported: equality,
``$eq $ne $in $nin $gt $gte $lt $lte``, ``$and``/``$or`` and several keys in one
dict (AND); ordered comparisons take numbers only. ``$contains``, ``$exists`` and ``None`` values are refused with
:class:`~kag.errors.UnsupportedFilterError` (their semantics differ between the
databases); pass ``filter_converter=`` (a function from kag's ``where`` dict to
the native filter object) to own the translation. Keys are passed verbatim:
Qdrant reads ``a.b`` as a nested payload path, Chroma and Pinecone as a flat
metadata key. Pinecone also takes ``$exists`` natively (its metadata has no nulls).

Scores: Qdrant's and Pinecone's score as they report it (cosine similarity for cosine
collections); Chroma's distance turned into a similarity by the collection's
space: ``1 - d`` for ``cosine`` and ``ip``, ``1 / (1 + d)`` for ``l2``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from kag.errors import ConfigError, MissingDependencyError, UnsupportedFilterError
from kag.query.filters import validate_filter
from kag.rag.embedders import as_embedder, embed_query
from kag.version import pip_install

__all__ = [
    "ChromaRetriever",
    "PineconeRetriever",
    "QdrantRetriever",
    "chroma_where",
    "pinecone_filter",
    "qdrant_filter",
]

FilterConverter = Callable[[Mapping[str, Any]], Any]
_ORDERED = ("$gt", "$gte", "$lt", "$lte")
_COMPARE = ("$eq", "$ne", *_ORDERED, "$in", "$nin")
_HINT = "rewrite the filter with $eq/$ne/$in/$nin/$gt/$gte/$lt/$lte/$and/$or, or pass filter_converter="


def _conditions(where: Mapping[str, Any], backend: str, extra: tuple[str, ...] = ()) -> list[tuple[str, str, Any]]:
    """A validated kag filter as ``(key, operator, operand)`` triples; ``$and``/``$or`` keep their list."""
    out: list[tuple[str, str, Any]] = []
    for key, value in where.items():
        if key in ("$and", "$or"):
            out.append((key, key, value))
            continue
        if key.startswith("$"):
            raise UnsupportedFilterError(f"{backend} adapter: unknown combinator {key!r}; {_HINT}.")
        if value is None:
            raise UnsupportedFilterError(
                f"{backend} adapter: {{{key!r}: None}} (field missing) has no portable native form; {_HINT}."
            )
        if isinstance(value, Mapping):
            for op, operand in value.items():
                if op not in _COMPARE and op not in extra:
                    raise UnsupportedFilterError(
                        f"{backend} adapter: operator {op} on {key!r} is not supported; {_HINT}."
                    )
                if op in _ORDERED and (isinstance(operand, bool) or not isinstance(operand, int | float)):
                    raise UnsupportedFilterError(
                        f"{backend} adapter: {op} on {key!r} compares numbers only "
                        f"(got {type(operand).__name__}); {_HINT}."
                    )
                out.append((key, op, operand))
        else:
            out.append((key, "$eq", value))
    return out


def chroma_where(where: Mapping[str, Any]) -> dict[str, Any]:
    """kag's ``where`` as a Chroma ``where`` dict (raises :class:`UnsupportedFilterError`)."""
    validate_filter(where)
    parts: list[dict[str, Any]] = []
    for key, op, operand in _conditions(where, "Chroma"):
        if op in ("$and", "$or"):
            subs = [chroma_where(sub) for sub in operand]
            parts.append(subs[0] if len(subs) == 1 else {op: subs})
        else:
            parts.append({key: {op: list(operand) if op in ("$in", "$nin") else operand}})
    if not parts:
        raise UnsupportedFilterError(
            f"Chroma adapter: an empty filter selects everything; omit where instead ({_HINT})."
        )
    return parts[0] if len(parts) == 1 else {"$and": parts}


def _qdrant_models() -> Any:
    try:
        from qdrant_client import models
    except ImportError as exc:  # the extra is optional
        raise MissingDependencyError(
            f"the Qdrant adapter needs qdrant-client: {pip_install('vectorstores')} (or qdrant-client)."
        ) from exc
    return models


def _qdrant_match(models: Any, key: str, value: Any) -> Any:
    if isinstance(value, bool | str | int):
        return models.FieldCondition(key=key, match=models.MatchValue(value=value))
    if isinstance(value, float):  # Qdrant matches floats by range only
        return models.FieldCondition(key=key, range=models.Range(gte=value, lte=value))
    raise UnsupportedFilterError(f"Qdrant adapter: cannot compare {key!r} with a {type(value).__name__}; {_HINT}.")


def qdrant_filter(where: Mapping[str, Any]) -> Any:
    """kag's ``where`` as a ``qdrant_client.models.Filter`` (raises :class:`UnsupportedFilterError`)."""
    validate_filter(where)
    models = _qdrant_models()
    must: list[Any] = []
    must_not: list[Any] = []
    for key, op, operand in _conditions(where, "Qdrant"):
        if op == "$and":
            must.extend(qdrant_filter(sub) for sub in operand)
        elif op == "$or":
            must.append(models.Filter(should=[qdrant_filter(sub) for sub in operand]))
        elif op == "$eq":
            must.append(_qdrant_match(models, key, operand))
        elif op == "$ne":  # must_not also keeps points without the field, as kag's $ne does
            must_not.append(_qdrant_match(models, key, operand))
        elif op in ("$in", "$nin"):
            values = list(operand)
            if not all(isinstance(v, str | int) and not isinstance(v, bool) for v in values):
                raise UnsupportedFilterError(f"Qdrant adapter: {op} on {key!r} needs strings or integers; {_HINT}.")
            condition = models.FieldCondition(key=key, match=models.MatchAny(any=values))
            (must if op == "$in" else must_not).append(condition)
        else:  # an ordered comparison: _conditions checked the operand is a number
            must.append(models.FieldCondition(key=key, range=models.Range(**{op[1:]: operand})))
    return models.Filter(must=must or None, must_not=must_not or None)


def _native(where: Mapping[str, Any] | None, converter: FilterConverter | None, default: FilterConverter) -> Any:
    if not where:
        return None
    return converter(dict(where)) if converter is not None else default(where)


def _check_converter(filter_converter: Any) -> None:
    if filter_converter is not None and not callable(filter_converter):
        raise ConfigError("filter_converter must be a function from kag's where dict to the native filter.")


async def _call(fn: Callable[..., Any], **kwargs: Any) -> Any:
    """Call a client method: awaited when it is async, in a worker thread when it blocks."""
    if inspect.iscoroutinefunction(fn):
        return await fn(**kwargs)
    out = await asyncio.to_thread(fn, **kwargs)
    return await out if inspect.isawaitable(out) else out


def _passage(
    text: Any, score: float, chunk_id: Any, metadata: Mapping[str, Any], text_key: str | None, source_key: str
) -> dict[str, Any] | None:
    if not isinstance(text, str) or not text.strip():
        return None  # an index row without passage text cannot ground an answer
    meta = {k: v for k, v in metadata.items() if k != text_key}
    return {
        "text": text,
        "score": float(score),
        "source": str(meta.get(source_key) or ""),
        "chunk_id": str(chunk_id),
        "metadata": meta,
    }


class ChromaRetriever:
    """Search an existing Chroma collection (``chromadb`` ``Collection``).

    With ``embedder=`` the query is embedded by kag and sent as
    ``query_embeddings`` (the embedder must match the one that built the
    collection). Without it the collection's own embedding function embeds
    ``query_texts``; a collection without one is refused. Passage text is the
    stored document, or ``metadata[text_key]`` when ``text_key`` is set; the
    source is ``metadata[source_key]``.
    """

    def __init__(
        self,
        collection: Any,
        *,
        embedder: Any = None,
        text_key: str | None = None,
        source_key: str = "source",
        filter_converter: FilterConverter | None = None,
        score_threshold: float | None = None,
    ) -> None:
        if not callable(getattr(collection, "query", None)):
            raise ConfigError("ChromaRetriever needs a Chroma collection (an object with query(...)).")
        _check_converter(filter_converter)
        self.collection = collection
        self.embedder = as_embedder(embedder) if embedder is not None else None
        if self.embedder is None and getattr(collection, "_embedding_function", None) is None:
            raise ConfigError(
                "this Chroma collection has no embedding function: pass embedder= (the model that built it)."
            )
        self.text_key, self.source_key = text_key, source_key
        self.filter_converter = filter_converter
        self.score_threshold = score_threshold

    def _space(self) -> str:
        for holder in (getattr(self.collection, "metadata", None), getattr(self.collection, "configuration", None)):
            if isinstance(holder, Mapping):
                space = holder.get("hnsw:space") or (holder.get("hnsw") or {}).get("space")
                if isinstance(space, str):
                    return space
        return "l2"  # Chroma's default

    async def retrieve(self, query: str, *, k: int = 5, where: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Up to ``k`` passages from the collection, best first."""
        kwargs: dict[str, Any] = {"n_results": k, "include": ["documents", "metadatas", "distances"]}
        native = _native(where, self.filter_converter, chroma_where)
        if native is not None:
            kwargs["where"] = native
        if self.embedder is not None:
            kwargs["query_embeddings"] = [(await embed_query(self.embedder, query)).tolist()]
        else:
            kwargs["query_texts"] = [query]
        result = await _call(self.collection.query, **kwargs)
        space = self._space()
        docs = (result.get("documents") or [[]])[0] or []
        metas = (result.get("metadatas") or [[]])[0] or []
        dists = (result.get("distances") or [[]])[0] or []
        out = []
        for i, chunk_id in enumerate(result["ids"][0]):
            meta = dict(metas[i] or {}) if i < len(metas) else {}
            text = meta.get(self.text_key) if self.text_key else (docs[i] if i < len(docs) else None)
            distance = float(dists[i])
            score = 1.0 / (1.0 + distance) if space == "l2" else 1.0 - distance
            hit = _passage(text, score, chunk_id, meta, self.text_key, self.source_key)
            if hit is not None and (self.score_threshold is None or hit["score"] >= self.score_threshold):
                out.append(hit)
        return out[:k]


class QdrantRetriever:
    """Search an existing Qdrant collection through a caller's ``QdrantClient`` or ``AsyncQdrantClient``.

    The query is embedded with ``embedder`` (the model that built the
    collection) and sent to ``query_points`` (or the legacy ``search`` on old
    clients), with ``vector_name`` selecting a named vector. Passage text is
    ``payload[text_key]`` (points without it are skipped); the source is
    ``payload[source_key]``; ``score_threshold`` is applied by Qdrant.
    """

    def __init__(
        self,
        client: Any,
        collection_name: str,
        *,
        embedder: Any,
        vector_name: str | None = None,
        text_key: str = "text",
        source_key: str = "source",
        filter_converter: FilterConverter | None = None,
        score_threshold: float | None = None,
    ) -> None:
        if not callable(getattr(client, "query_points", None)) and not callable(getattr(client, "search", None)):
            raise ConfigError("QdrantRetriever needs a Qdrant client (with query_points() or search()).")
        if not isinstance(collection_name, str) or not collection_name:
            raise ConfigError("QdrantRetriever needs collection_name= (the existing collection to search).")
        if embedder is None:
            raise ConfigError("QdrantRetriever needs embedder= (the model that built the collection's vectors).")
        _check_converter(filter_converter)
        self.client, self.collection_name = client, collection_name
        self.embedder = as_embedder(embedder)
        self.vector_name, self.text_key, self.source_key = vector_name, text_key, source_key
        self.filter_converter = filter_converter
        self.score_threshold = score_threshold

    async def retrieve(self, query: str, *, k: int = 5, where: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Up to ``k`` passages from the collection, best first."""
        vector = (await embed_query(self.embedder, query)).tolist()
        native = _native(where, self.filter_converter, qdrant_filter)
        common: dict[str, Any] = {
            "collection_name": self.collection_name,
            "query_filter": native,
            "limit": k,
            "with_payload": True,
            "score_threshold": self.score_threshold,
        }
        if callable(getattr(self.client, "query_points", None)):
            response = await _call(self.client.query_points, query=vector, using=self.vector_name, **common)
            points = response.points
        else:  # qdrant-client before 1.10
            named = (self.vector_name, vector) if self.vector_name else vector
            points = await _call(self.client.search, query_vector=named, **common)
        out = []
        for point in points:
            payload = dict(point.payload or {})
            hit = _passage(payload.get(self.text_key), point.score, point.id, payload, self.text_key, self.source_key)
            if hit is not None:
                out.append(hit)
        return out[:k]


def pinecone_filter(where: Mapping[str, Any]) -> dict[str, Any]:
    """kag's ``where`` as a Pinecone metadata filter (raises :class:`UnsupportedFilterError`)."""
    validate_filter(where)
    parts: list[dict[str, Any]] = []
    for key, op, operand in _conditions(where, "Pinecone", extra=("$exists",)):
        if op in ("$and", "$or"):
            subs = [pinecone_filter(sub) for sub in operand]
            parts.append(subs[0] if len(subs) == 1 else {op: subs})
        else:
            parts.append({key: {op: list(operand) if op in ("$in", "$nin") else operand}})
    if not parts:
        raise UnsupportedFilterError(f"Pinecone adapter: an empty filter selects everything; omit where ({_HINT}).")
    return parts[0] if len(parts) == 1 else {"$and": parts}


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


class PineconeRetriever:
    """Search an existing Pinecone index (the official client's ``Index`` or ``IndexAsyncio``).

    The query is embedded with ``embedder`` (the model that built the index) and
    sent to ``index.query(vector=..., top_k=k, namespace=..., filter=...,
    include_metadata=True)``. Passage text is ``metadata[text_key]`` (matches
    without it are skipped); the source is ``metadata[source_key]``.
    """

    def __init__(
        self,
        index: Any,
        *,
        embedder: Any,
        namespace: str | None = None,
        text_key: str = "text",
        source_key: str = "source",
        filter_converter: FilterConverter | None = None,
        score_threshold: float | None = None,
    ) -> None:
        if not callable(getattr(index, "query", None)):
            raise ConfigError("PineconeRetriever needs a Pinecone index (pc.Index(host=...)), with query(...).")
        if embedder is None:
            raise ConfigError("PineconeRetriever needs embedder= (the model that built the index's vectors).")
        if namespace is not None and not isinstance(namespace, str):
            raise ConfigError("Pinecone namespace must be a string.")
        _check_converter(filter_converter)
        self.index, self.namespace = index, namespace
        self.embedder = as_embedder(embedder)
        self.text_key, self.source_key = text_key, source_key
        self.filter_converter = filter_converter
        self.score_threshold = score_threshold

    async def retrieve(self, query: str, *, k: int = 5, where: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Up to ``k`` passages from the index, best first."""
        kwargs: dict[str, Any] = {
            "vector": (await embed_query(self.embedder, query)).tolist(),
            "top_k": k,
            "include_metadata": True,
        }
        if self.namespace:
            kwargs["namespace"] = self.namespace
        native = _native(where, self.filter_converter, pinecone_filter)
        if native is not None:
            kwargs["filter"] = native
        response = await _call(self.index.query, **kwargs)
        out = []
        for match in _field(response, "matches") or []:
            metadata = dict(_field(match, "metadata") or {})
            score = float(_field(match, "score") or 0.0)
            hit = _passage(
                metadata.get(self.text_key), score, _field(match, "id"), metadata, self.text_key, self.source_key
            )
            if hit is not None and (self.score_threshold is None or hit["score"] >= self.score_threshold):
                out.append(hit)
        return out[:k]
