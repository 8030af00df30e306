"""Passages in the graph: the ``PassageStore`` protocol and the records it exchanges.

Documents and chunks live next to the entities of a knowledge base::

    (:Document {id, source, title, ...})-[:HAS_CHUNK]->(:Chunk {id, text, index, ...})
    (:Chunk)-[:NEXT]->(:Chunk)          consecutive chunks of one document
    (:Chunk)-[:MENTIONS]->(entity)      entities whose names occur in the chunk

Two implementations share these semantics: :mod:`kag.graph.passages_memory`
(a side structure attached to a ``MemoryGraphStore``) and
:mod:`kag.graph.passages_neo4j` (nodes, relationships and indexes on the Neo4j
server of a ``Neo4jGraphStore``). :func:`passage_store_for` picks the right one.

Scores and ordering (identical on both backends):

* ``vector_search`` is exact: the cosine of every chunk that passes the filter,
  mapped to ``[0, 1]`` by ``(1 + cos) / 2``, best first, ties broken by chunk id;
* ``keyword_search`` uses BM25 on memory and Neo4j's Lucene fulltext index on
  Neo4j. Both are BM25 variants but their parameters and tokenizers differ, so
  keyword *scores* differ between backends (the top hits usually agree).

Metadata filters (:mod:`kag.query.filters`) apply to chunk metadata, which is the
document metadata plus ``source``, ``document_id``, ``chunk_index``, ``start``
and ``end``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from kag.errors import StoreFormatError

DOCUMENT = "Document"
CHUNK = "Chunk"
HAS_CHUNK = "HAS_CHUNK"
NEXT = "NEXT"
MENTIONS = "MENTIONS"

Mention = tuple[str, str]
"""``(chunk_id, entity_id)``: one ``(:Chunk)-[:MENTIONS]->(entity)`` link."""


@dataclass(frozen=True)
class DocumentRecord:
    """A stored document (its text lives in its chunks).

    ``origin`` is the source that was *added* (a file, a directory, a URL, or
    ``"inline"``) and ``origin_kind`` says which (``"path"``, ``"url"``,
    ``"text"``, ``"document"`` or ``"bytes"``); ``refresh`` re-loads ``"path"``
    origins. ``text_hash`` is the sha256 of the document text.
    """

    id: str
    source: str
    title: str
    text_hash: str
    mime_type: str = "text/plain"
    origin: str = ""
    origin_kind: str = "document"
    metadata: dict[str, Any] = field(default_factory=dict)
    chunk_count: int = 0

    def properties(self) -> dict[str, Any]:
        """Node properties (without flattened metadata)."""
        return {
            "id": self.id,
            "source": self.source,
            "title": self.title,
            "text_hash": self.text_hash,
            "mime_type": self.mime_type,
            "origin": self.origin,
            "origin_kind": self.origin_kind,
            "chunk_count": self.chunk_count,
            "metadata": json.dumps(self.metadata, sort_keys=True, ensure_ascii=False),
        }

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> DocumentRecord:
        """Inverse of :meth:`properties` (extra properties are ignored)."""
        try:
            return cls(
                id=str(props["id"]),
                source=str(props.get("source", "")),
                title=str(props.get("title", "")),
                text_hash=str(props.get("text_hash", "")),
                mime_type=str(props.get("mime_type", "text/plain")),
                origin=str(props.get("origin", "")),
                origin_kind=str(props.get("origin_kind", "document")),
                metadata=_metadata(props.get("metadata")),
                chunk_count=int(props.get("chunk_count", 0) or 0),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise StoreFormatError(f"a stored Document is malformed ({exc!r}).") from exc


@dataclass(frozen=True)
class ChunkRecord:
    """A chunk ready to be written: span, text, metadata and embedding."""

    id: str
    document_id: str
    index: int
    text: str
    start: int
    end: int
    source: str
    title: str
    metadata: dict[str, Any]
    embedding: np.ndarray = field(repr=False)

    def properties(self) -> dict[str, Any]:
        """Node properties (without embedding and flattened metadata)."""
        return {
            "id": self.id,
            "document_id": self.document_id,
            "index": self.index,
            "text": self.text,
            "start": self.start,
            "end": self.end,
            "source": self.source,
            "title": self.title,
            "metadata": json.dumps(self.metadata, sort_keys=True, ensure_ascii=False),
        }

    @classmethod
    def from_properties(cls, props: Mapping[str, Any], embedding: np.ndarray) -> ChunkRecord:
        """The record back from :meth:`properties` (metadata as JSON text or a dict) and its embedding."""
        return cls(
            id=str(props["id"]),
            document_id=str(props["document_id"]),
            index=int(props["index"]),
            text=str(props["text"]),
            start=int(props["start"]),
            end=int(props["end"]),
            source=str(props.get("source", "")),
            title=str(props.get("title", "")),
            metadata=_metadata(props.get("metadata")),
            embedding=embedding,
        )


@dataclass(frozen=True)
class PassageRow:
    """A chunk returned by a search, with its score and the entities it mentions."""

    chunk_id: str
    document_id: str
    index: int
    text: str
    start: int
    end: int
    source: str
    title: str
    metadata: dict[str, Any]
    score: float
    mentions: tuple[str, ...] = ()

    @classmethod
    def from_properties(cls, props: Mapping[str, Any], score: float, mentions: Sequence[str]) -> PassageRow:
        """Build a row from stored chunk properties."""
        try:
            return cls(
                chunk_id=str(props["id"]),
                document_id=str(props["document_id"]),
                index=int(props["index"]),
                text=str(props["text"]),
                start=int(props["start"]),
                end=int(props["end"]),
                source=str(props.get("source", "")),
                title=str(props.get("title", "")),
                metadata=_metadata(props.get("metadata")),
                score=float(score),
                mentions=tuple(sorted(set(mentions))),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise StoreFormatError(f"a stored Chunk is malformed ({exc!r}).") from exc


def _metadata(value: Any) -> dict[str, Any]:
    if value is None or value == "":
        return {}
    if isinstance(value, dict):
        return dict(value)
    try:
        out = json.loads(value)
    except (TypeError, json.JSONDecodeError) as exc:
        raise StoreFormatError(f"stored metadata is not valid JSON ({exc}).") from exc
    if not isinstance(out, dict):
        raise StoreFormatError("stored metadata is not a JSON object.")
    return out


def sort_rows(rows: Sequence[PassageRow]) -> list[PassageRow]:
    """Rows by score descending, chunk id ascending (the order every backend returns)."""
    return sorted(rows, key=lambda r: (-r.score, r.chunk_id))


@runtime_checkable
class PassageStore(Protocol):
    """What ``Knowledge`` needs to keep documents and chunks in a graph."""

    async def ensure_schema(self, dimensions: int) -> None:
        """Create constraints and indexes (idempotent); check the embedding size."""
        ...

    async def write(
        self, documents: Sequence[DocumentRecord], chunks: Sequence[ChunkRecord], mentions: Sequence[Mention]
    ) -> None:
        """Upsert documents and replace their chunks (``HAS_CHUNK``, ``NEXT``, ``MENTIONS`` included).

        Every chunk's ``document_id`` must name one of ``documents``; mentions of
        entities that do not exist are dropped.
        """
        ...

    async def delete_documents(self, ids: Sequence[str]) -> int:
        """Delete documents and their chunks; return how many documents existed."""
        ...

    async def list_documents(
        self,
        *,
        ids: Sequence[str] | None = None,
        sources: Sequence[str] | None = None,
        origins: Sequence[str] | None = None,
    ) -> list[DocumentRecord]:
        """Stored documents matching every given selector (all when none), sorted by id."""
        ...

    async def vector_search(
        self,
        vector: np.ndarray,
        k: int,
        where: Mapping[str, Any] | None = None,
        ids: Sequence[str] | None = None,
        *,
        candidates: int | None = None,
    ) -> list[PassageRow]:
        """Top-``k`` chunks by cosine (mapped to [0, 1]), optionally only among ``ids``.

        Exact by default. ``candidates=N`` lets a store with an approximate index take the
        ``max(N, k)`` nearest chunks from it and score only those exactly (faster on large
        corpora, may miss chunks; a filter applies after the index). A store without one
        stays exact.
        """
        ...

    async def keyword_search(self, text: str, k: int, where: Mapping[str, Any] | None = None) -> list[PassageRow]:
        """Top-``k`` chunks by keyword relevance (BM25 on memory, Lucene fulltext on Neo4j)."""
        ...

    async def chunk_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored embeddings of the chunks that exist among ``ids``."""
        ...

    async def get_chunks(self, ids: Sequence[str]) -> list[PassageRow]:
        """The chunks that exist among ``ids`` (score 0.0), in the order given."""
        ...

    async def mentioned_by(self, entity_ids: Sequence[str], where: Mapping[str, Any] | None) -> set[str]:
        """Those of ``entity_ids`` mentioned by at least one chunk matching ``where``."""
        ...

    async def entities(self, ids: Sequence[str] | None = None) -> list[tuple[str, str, dict[str, Any]]]:
        """``(id, label, properties)`` of every entity in the graph (to build name matchers), or of
        the stored ones of ``ids`` (to refresh them after a write)."""
        ...

    async def chunk_texts(self, after: str | None, limit: int) -> list[tuple[str, str]]:
        """A page of ``(chunk_id, text)`` with ids greater than ``after``, sorted by id."""
        ...

    async def link(self, mentions: Sequence[Mention]) -> int:
        """Add ``MENTIONS`` links (idempotent); return how many refer to existing nodes."""
        ...

    async def counts(self) -> dict[str, int]:
        """``documents``, ``chunks`` and ``mentions`` counts."""
        ...

    async def clear(self) -> None:
        """Delete every document and chunk."""
        ...
