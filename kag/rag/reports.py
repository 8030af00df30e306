"""``IndexReport``: what one indexing call (``ready``, ``add``, ``upsert``, ``refresh``...) did."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kag.rag.loaders import LoadFailure

__all__ = ["IndexReport"]


@dataclass
class IndexReport:
    """What an indexing run did.

    ``documents``/``chunks``/``mentions``: written; ``skipped``: documents
    already indexed with the same content; ``deleted``: stale or omitted
    documents removed (chunks, for knowledge over a ``VectorStore``);
    ``errors``: sources that could not be loaded. ``sources`` are the normalized
    source identifiers this run loaded (a file's resolved path, a URL, a
    ``Document``'s source), ``deleted_sources`` those it removed. The reference
    names ``additions``, ``deletions`` and ``skips`` read ``documents``, ``deleted``
    and ``skipped``.
    """

    documents: int = 0
    chunks: int = 0
    mentions: int = 0
    skipped: int = 0
    deleted: int = 0
    errors: list[LoadFailure] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    deleted_sources: list[str] = field(default_factory=list)

    def __iadd__(self, other: IndexReport) -> IndexReport:
        self.documents += other.documents
        self.chunks += other.chunks
        self.mentions += other.mentions
        self.skipped += other.skipped
        self.deleted += other.deleted
        self.errors.extend(other.errors)
        self.sources = sorted({*self.sources, *other.sources})
        self.deleted_sources = sorted({*self.deleted_sources, *other.deleted_sources})
        return self

    @property
    def ok(self) -> bool:
        """True when every source loaded."""
        return not self.errors

    @property
    def additions(self) -> int:
        """Documents written (new, or a new version of a changed source)."""
        return self.documents

    @property
    def deletions(self) -> int:
        """Documents (or vector-store chunks) removed."""
        return self.deleted

    @property
    def skips(self) -> int:
        """Documents left as they were (same content already indexed)."""
        return self.skipped

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible dict (failures as ``{"source", "error"}``)."""
        return {
            "documents": self.documents,
            "chunks": self.chunks,
            "mentions": self.mentions,
            "skipped": self.skipped,
            "deleted": self.deleted,
            "sources": list(self.sources),
            "deleted_sources": list(self.deleted_sources),
            "errors": [{"source": f.source, "error": str(f.error)} for f in self.errors],
        }
