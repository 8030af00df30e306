"""The structural protocols of the retrieval side, importable from :mod:`kag.rag` without the knowledge layer.

* :class:`Retriever`: ``retrieve(query, *, k=5, where=None)`` (sync or async), results best first;
* :class:`Reranker`: ``rerank(query, hits, *, k)`` (sync or async), the hits to keep.

Results and hits are :class:`kag.SearchHit` values (or, from a retriever, anything
:func:`kag.rag.retrievers.as_hit` normalizes); the protocols only fix the call shapes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["Reranker", "Retriever"]


@runtime_checkable
class Retriever(Protocol):
    """The smallest knowledge source: ``retrieve(query, *, k=5, where=None)`` (sync or async)."""

    def retrieve(
        self, query: str, *, k: int = 5, where: Mapping[str, Any] | None = None
    ) -> Sequence[Any] | Awaitable[Sequence[Any]]:
        """Up to ``k`` results for ``query``, best first, optionally filtered by ``where``."""
        ...


@runtime_checkable
class Reranker(Protocol):
    """Reorders hits for a query: ``rerank(query, hits, *, k) -> hits`` (sync or async)."""

    def rerank(self, query: str, hits: Sequence[Any], *, k: int) -> Sequence[Any] | Awaitable[Sequence[Any]]:
        """The hits to keep (at most ``k``), best first."""
        ...
