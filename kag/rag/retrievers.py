"""Retrievers: the read-only half of a knowledge source, and how their results become ``SearchHit``s.

Importable as ``kag.rag.CallableRetriever`` (the retrieval layer; ``kag.knowledge.retrievers`` re-exports it).

A :class:`Retriever` is any object with ``retrieve(query, *, k=5, where=None)``,
sync or async, returning a list of results. ``Knowledge(retriever)`` wraps one
as retrieval-only knowledge (search, tool, answers; no indexing).
:class:`CallableRetriever` adapts a plain search function.

Results are normalized by :func:`as_hit`: a :class:`SearchHit` is kept; a
``Document`` or ``Chunk`` keeps its text, ids, source and metadata; a mapping
needs ``text``, ``content`` or ``page_content`` (``score``, ``source``, ``title``,
``id``/``chunk_id``, ``document_id`` are read, every other key goes into
``metadata``); a string becomes a hit with that text.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kag.datamodels.documents import Chunk, Document
from kag.errors import ConfigError, InvalidInputError
from kag.rag.hits import SearchHit
from kag.rag.protocols import Retriever

__all__ = ["CallableRetriever", "Retriever", "as_hit", "as_hits", "call_retriever"]

_TEXT_KEYS = ("text", "content", "page_content")
_READ_KEYS = {"score", "source", "title", "id", "chunk_id", "document_id", "kind", "metadata", "rank", *_TEXT_KEYS}


def _number(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInputError(f"a retrieved {what} must be a number, got {type(value).__name__}.")
    return float(value)


def as_hit(item: Any) -> SearchHit:
    """One retrieved result as a :class:`SearchHit` (see the module docstring for the accepted shapes)."""
    if isinstance(item, SearchHit):
        return item
    if isinstance(item, Document):
        return SearchHit(
            text=item.text,
            source=item.source,
            metadata=dict(item.metadata),
            document_id=item.id,
            ids=(item.id,),
        )
    if isinstance(item, Chunk):
        return SearchHit(
            text=item.text,
            source=item.source,
            metadata=dict(item.metadata),
            chunk_id=item.id,
            document_id=item.document_id,
        )
    if isinstance(item, str):
        return SearchHit(text=item)
    if isinstance(item, Mapping):
        text_key = next((key for key in _TEXT_KEYS if isinstance(item.get(key), str)), None)
        if text_key is None:
            raise InvalidInputError(
                f"a retrieved mapping needs a 'text', 'content' or 'page_content' string; it has keys {sorted(item)}."
            )
        metadata = dict(item.get("metadata") or {})
        metadata.update({k: v for k, v in item.items() if k not in _READ_KEYS})
        chunk = item.get("chunk_id", item.get("id"))
        kind = item.get("kind", "passage")
        return SearchHit(
            text=item[text_key],
            score=_number(item.get("score"), "score") or 0.0,
            source=str(item.get("source") or ""),
            title=str(item.get("title") or ""),
            kind=kind,
            metadata=metadata,
            chunk_id=None if chunk is None else str(chunk),
            document_id=None if item.get("document_id") is None else str(item["document_id"]),
        )
    raise InvalidInputError(
        f"a retriever returned a {type(item).__name__}; return SearchHit, Document, Chunk, mappings or strings."
    )


def as_hits(results: Any) -> list[SearchHit]:
    """A retriever's whole answer (a sequence, or ``None`` for nothing) as hits, in order."""
    if results is None:
        return []
    if isinstance(results, str | Mapping | SearchHit | Document | Chunk):
        results = [results]  # one result on its own
    if not isinstance(results, Sequence) and not inspect.isgenerator(results):
        raise InvalidInputError(f"a retriever must return a list of results, got {type(results).__name__}.")
    return [as_hit(item) for item in results]


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature: assume the documented shape
        return True
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


async def call_retriever(
    fn: Callable[..., Any], query: str, k: int, where: Mapping[str, Any] | None
) -> list[SearchHit]:
    """Call ``fn(query, k=k, where=where)`` (only the keywords it takes), await if needed, normalize."""
    kwargs: dict[str, Any] = {}
    if _accepts(fn, "k"):
        kwargs["k"] = k
    if _accepts(fn, "where"):
        kwargs["where"] = dict(where) if where else None
    elif where:
        raise InvalidInputError(f"{getattr(fn, '__name__', 'the retriever')} takes no `where` filter.")
    out = fn(query, **kwargs)
    if inspect.isawaitable(out):
        out = await out
    return as_hits(out)[:k]


class CallableRetriever:
    """A search function (sync or async) as a :class:`Retriever`.

    ``fn(query, *, k=5, where=None)`` may return any result shape :func:`as_hit`
    accepts; ``k`` and ``where`` are passed only when ``fn`` declares them (a
    ``where`` given to a function without one is refused, never dropped). A sync
    function runs on the event loop's thread: make blocking I/O async.
    """

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None) -> None:
        if not callable(fn):
            raise ConfigError(f"CallableRetriever needs a callable, got {type(fn).__name__}.")
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "retriever")

    def __repr__(self) -> str:
        return f"CallableRetriever({self.name!r})"

    async def retrieve(self, query: str, *, k: int = 5, where: Mapping[str, Any] | None = None) -> list[SearchHit]:
        """Up to ``k`` normalized hits from the function."""
        return await call_retriever(self.fn, query, k, where)
