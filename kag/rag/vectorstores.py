"""Vector stores: chunks with their embeddings, searched by exact cosine similarity.

A :class:`VectorStore` is a structural protocol (no base class to inherit):

* ``await store.upsert(chunks, embeddings) -> int``: insert or replace chunks by id;
* ``await store.delete(*, ids=None, document_ids=None, where=None, sources=None) -> int``:
  remove the chunks that match *any* of the given selectors, return how many went;
* ``await store.search(embedding, *, k=5, where=None) -> list[dict]``: up to ``k``
  results, best first, as mappings with ``text``, ``score``, ``source``,
  ``chunk_id``, ``document_id`` and ``metadata``;
* ``await store.list_sources() -> list[str]``: the distinct sources, sorted.

:class:`AtomicVectorStore` adds ``await store.replace(source, chunks, embeddings) -> int``
(drop every chunk of ``source`` and write the new ones in one step; returns how
many were dropped). Without it, callers delete then upsert.

Filters are kag's metadata filters (:mod:`kag.query.filters`), evaluated on the
chunk metadata plus ``source`` and ``document_id``.

:class:`InMemoryVectorStore` keeps everything in process; :class:`SQLiteVectorStore`
persists to one sqlite3 file (namespaces isolate indexes in it, every upsert and
delete is one transaction, vectors are float32 blobs). Both search exactly with
numpy. :class:`VectorStoreRetriever` embeds a query and searches a store; it is a
retriever that ``kag.Knowledge(...)`` accepts.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from kag.datamodels.documents import Chunk
from kag.errors import ConfigError, InvalidInputError, StoreError, VectorBackendConfigError
from kag.query.filters import compile_matcher, validate_filter
from kag.rag.embedders import as_embedder, embed_query
from kag.validation import check_k

__all__ = [
    "AtomicVectorStore",
    "InMemoryVectorStore",
    "SQLiteVectorStore",
    "VectorStore",
    "VectorStoreRetriever",
    "document_filter_view",
]


@runtime_checkable
class VectorStore(Protocol):
    """Chunks with embeddings: ``upsert``, ``delete``, ``search`` and ``list_sources`` (all async)."""

    async def upsert(self, chunks: Sequence[Chunk], embeddings: Any) -> int:
        """Insert or replace ``chunks`` (by id) with one embedding row each; returns how many were written."""
        ...

    async def delete(
        self,
        *,
        ids: Sequence[str] | None = None,
        document_ids: Sequence[str] | None = None,
        where: Mapping[str, Any] | None = None,
        sources: Sequence[str] | None = None,
    ) -> int:
        """Remove the chunks matching any selector; returns how many were removed."""
        ...

    async def search(
        self, embedding: Any, *, k: int = 5, where: Mapping[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """Up to ``k`` chunks most similar to ``embedding``, best first."""
        ...

    async def list_sources(self) -> list[str]:
        """The distinct sources of the stored chunks, sorted."""
        ...


@runtime_checkable
class AtomicVectorStore(VectorStore, Protocol):
    """A :class:`VectorStore` that can swap a source's chunks in one step."""

    async def replace(self, source: str, chunks: Sequence[Chunk], embeddings: Any) -> int:
        """Drop every chunk of ``source``, write ``chunks``; returns how many were dropped."""
        ...


def _unit_rows(embeddings: Any, rows: int) -> np.ndarray:
    """``embeddings`` as a float32 matrix of ``rows`` unit rows (zero rows stay zero)."""
    try:
        matrix = np.asarray(embeddings, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"embeddings must be a numeric matrix: {exc}") from exc
    if matrix.ndim == 1 and rows == 1:
        matrix = matrix.reshape(1, -1)
    if matrix.ndim != 2 or matrix.shape[0] != rows or matrix.shape[1] == 0:
        raise InvalidInputError(f"expected {rows} embedding rows, got an array of shape {matrix.shape}.")
    if not np.isfinite(matrix).all():
        raise InvalidInputError("embeddings contain NaN or infinity; check the embedder.")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0.0, 1.0, norms)


def _check_chunks(chunks: Sequence[Chunk]) -> list[Chunk]:
    out = list(chunks)
    for chunk in out:
        if not isinstance(chunk, Chunk):
            raise InvalidInputError(f"a vector store stores kag Chunk values, got {type(chunk).__name__}.")
    if len({c.id for c in out}) != len(out):
        raise InvalidInputError("duplicate chunk ids in one upsert; give each chunk once.")
    return out


def document_filter_view(source: str, document_id: str, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """What a metadata filter sees of a chunk or document: its metadata plus ``source`` and ``document_id``."""
    # as passages do elsewhere in kag
    return {**metadata, "source": source, "document_id": document_id}


def _check_where(where: Mapping[str, Any] | None) -> None:
    if where:
        validate_filter(where)


def _check_dimensions(have: int | None, got: int) -> None:
    if have is not None and have != got:
        raise InvalidInputError(
            f"this store holds {have}-dimensional vectors, got {got}; use the embedder that built the store "
            "or re-index into a new one."
        )


class _Row:
    __slots__ = ("chunk", "vector")

    def __init__(self, chunk: Chunk, vector: np.ndarray) -> None:
        self.chunk, self.vector = chunk, vector


def _result(chunk: Chunk, score: float) -> dict[str, Any]:
    return {
        "text": chunk.text,
        "score": score,
        "source": chunk.source,
        "chunk_id": chunk.id,
        "document_id": chunk.document_id,
        "metadata": {**chunk.metadata, "chunk_index": chunk.index},
    }


def _top(matrix: np.ndarray, query: np.ndarray, k: int) -> list[tuple[int, float]]:
    """Indices and cosine scores of the ``k`` best rows (ties broken by row order, so results are stable)."""
    if matrix.shape[0] == 0:
        return []
    scores = matrix @ query
    order = np.lexsort((np.arange(scores.shape[0]), -scores))[:k]
    return [(int(i), float(scores[i])) for i in order]


class InMemoryVectorStore:
    """A process-local :class:`AtomicVectorStore` with exact cosine search (numpy)."""

    def __init__(self) -> None:
        self._rows: dict[str, _Row] = {}
        self._dimensions: int | None = None
        self._matrix: tuple[list[_Row], np.ndarray] | None = None  # stacked on the first search after a write

    def __len__(self) -> int:
        return len(self._rows)

    async def upsert(self, chunks: Sequence[Chunk], embeddings: Any) -> int:
        """Insert or replace ``chunks`` by id."""
        items = _check_chunks(chunks)
        if not items:
            return 0
        matrix = _unit_rows(embeddings, len(items))
        _check_dimensions(self._dimensions if self._rows else None, matrix.shape[1])
        self._dimensions = matrix.shape[1]
        for chunk, vector in zip(items, matrix, strict=True):
            self._rows[chunk.id] = _Row(chunk, vector)
        self._matrix = None
        return len(items)

    def _selected(
        self,
        ids: Sequence[str] | None,
        document_ids: Sequence[str] | None,
        where: Mapping[str, Any] | None,
        sources: Sequence[str] | None,
    ) -> list[str]:
        _check_where(where)
        id_set, doc_set, src_set = set(ids or ()), set(document_ids or ()), set(sources or ())
        matcher = compile_matcher(where) if where else None
        out = []
        for key, row in self._rows.items():
            c = row.chunk
            if (
                key in id_set
                or c.document_id in doc_set
                or c.source in src_set
                or (matcher is not None and matcher(document_filter_view(c.source, c.document_id, c.metadata)))
            ):
                out.append(key)
        return out

    async def delete(
        self,
        *,
        ids: Sequence[str] | None = None,
        document_ids: Sequence[str] | None = None,
        where: Mapping[str, Any] | None = None,
        sources: Sequence[str] | None = None,
    ) -> int:
        """Remove the chunks matching any selector."""
        doomed = self._selected(ids, document_ids, where, sources)
        for key in doomed:
            del self._rows[key]
        self._matrix = None
        return len(doomed)

    async def replace(self, source: str, chunks: Sequence[Chunk], embeddings: Any) -> int:
        """Swap the chunks of ``source`` for ``chunks``; nothing changes if the new rows are invalid."""
        items = _check_chunks(chunks)
        matrix = _unit_rows(embeddings, len(items)) if items else None
        doomed = self._selected(None, None, None, [source])
        if matrix is not None:
            survivors = len(self._rows) - len(doomed)
            _check_dimensions(self._dimensions if survivors else None, matrix.shape[1])
        for key in doomed:
            del self._rows[key]
        if matrix is not None:
            self._dimensions = matrix.shape[1]
            for chunk, vector in zip(items, matrix, strict=True):
                self._rows[chunk.id] = _Row(chunk, vector)
        self._matrix = None
        return len(doomed)

    async def search(
        self, embedding: Any, *, k: int = 5, where: Mapping[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """Up to ``k`` results by exact cosine similarity, best first."""
        check_k(k)
        _check_where(where)
        if not self._rows:
            return []
        query = _unit_rows(embedding, 1)[0]
        _check_dimensions(self._dimensions, query.shape[0])
        if self._matrix is None:
            everything = list(self._rows.values())
            self._matrix = (everything, np.stack([r.vector for r in everything]))
        rows, matrix = self._matrix
        if where:
            matcher = compile_matcher(where)
            c = [r.chunk for r in rows]
            keep = [
                i for i, ch in enumerate(c) if matcher(document_filter_view(ch.source, ch.document_id, ch.metadata))
            ]
            rows, matrix = [rows[i] for i in keep], matrix[keep]
        return [_result(rows[i].chunk, score) for i, score in _top(matrix, query, k)]

    async def list_sources(self) -> list[str]:
        """The distinct sources, sorted."""
        return sorted({r.chunk.source for r in self._rows.values()})


_SCHEMA = """
CREATE TABLE IF NOT EXISTS kag_vectors (
    namespace TEXT NOT NULL,
    id TEXT NOT NULL,
    document_id TEXT NOT NULL,
    chunk_index INTEGER NOT NULL,
    source TEXT NOT NULL,
    text TEXT NOT NULL,
    start_offset INTEGER NOT NULL,
    end_offset INTEGER NOT NULL,
    metadata TEXT NOT NULL,
    dimensions INTEGER NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (namespace, id)
);
CREATE INDEX IF NOT EXISTS kag_vectors_source ON kag_vectors (namespace, source);
CREATE INDEX IF NOT EXISTS kag_vectors_document ON kag_vectors (namespace, document_id);
"""
_COLUMNS = "id, document_id, chunk_index, source, text, start_offset, end_offset, metadata, dimensions, vector"


class SQLiteVectorStore:
    """A durable :class:`AtomicVectorStore` in one sqlite3 file, exact cosine search with numpy.

    ``namespace`` isolates one logical index from others in the same file. Each
    ``upsert``, ``delete`` and ``replace`` is one transaction (all or nothing,
    durable on commit). Search reads the namespace's vectors into a cached
    matrix, rebuilt after a write through this object; another process writing
    the same namespace is seen after :meth:`reload`. Good for local and moderate
    corpora; use a dedicated vector database for approximate search at scale.
    """

    def __init__(self, path: str | Path, *, namespace: str = "default") -> None:
        if not isinstance(namespace, str) or not namespace:
            raise ConfigError("SQLiteVectorStore needs a non-empty namespace string.")
        self.path = Path(path)
        self.namespace = namespace
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            raise StoreError(
                f"cannot open the vector store {self.path}: {exc}; check the path and its permissions."
            ) from exc
        self._cache: tuple[list[Chunk], np.ndarray] | None = None

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._db.close()

    def reload(self) -> None:
        """Forget the cached search matrix (after another process wrote this namespace)."""
        self._cache = None

    def _dimensions(self) -> int | None:
        row = self._db.execute(
            "SELECT dimensions FROM kag_vectors WHERE namespace = ? LIMIT 1", (self.namespace,)
        ).fetchone()
        return None if row is None else int(row[0])

    def _write(self, items: list[Chunk], matrix: np.ndarray) -> None:
        self._db.executemany(
            f"INSERT OR REPLACE INTO kag_vectors (namespace, {_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            [
                (
                    self.namespace,
                    c.id,
                    c.document_id,
                    c.index,
                    c.source,
                    c.text,
                    c.start,
                    c.end,
                    json.dumps(c.metadata, sort_keys=True, default=str),
                    int(matrix.shape[1]),
                    matrix[i].astype("<f4").tobytes(),
                )
                for i, c in enumerate(items)
            ],
        )

    def _transaction(self, work: Any) -> Any:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                out = work()
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
            self._cache = None
            return out

    async def upsert(self, chunks: Sequence[Chunk], embeddings: Any) -> int:
        """Insert or replace ``chunks`` by id, in one transaction."""
        items = _check_chunks(chunks)
        if not items:
            return 0
        matrix = _unit_rows(embeddings, len(items))

        def work() -> int:
            _check_dimensions(self._dimensions(), matrix.shape[1])
            self._write(items, matrix)
            return len(items)

        result: int = await asyncio.to_thread(self._transaction, work)
        return result

    def _matching_ids(
        self,
        ids: Sequence[str] | None,
        document_ids: Sequence[str] | None,
        where: Mapping[str, Any] | None,
        sources: Sequence[str] | None,
    ) -> set[str]:
        found: set[str] = set()
        for column, values in (("id", ids), ("document_id", document_ids), ("source", sources)):
            for value in values or ():
                found.update(
                    r[0]
                    for r in self._db.execute(
                        f"SELECT id FROM kag_vectors WHERE namespace = ? AND {column} = ?",  # column: fixed names
                        (self.namespace, str(value)),
                    )
                )
        if where:
            matcher = compile_matcher(where)
            for cid, source, document_id, metadata in self._db.execute(
                "SELECT id, source, document_id, metadata FROM kag_vectors WHERE namespace = ?", (self.namespace,)
            ):
                if matcher(document_filter_view(source, document_id, json.loads(metadata))):
                    found.add(cid)
        return found

    def _remove(self, doomed: set[str]) -> None:
        self._db.executemany(
            "DELETE FROM kag_vectors WHERE namespace = ? AND id = ?", [(self.namespace, cid) for cid in doomed]
        )

    async def delete(
        self,
        *,
        ids: Sequence[str] | None = None,
        document_ids: Sequence[str] | None = None,
        where: Mapping[str, Any] | None = None,
        sources: Sequence[str] | None = None,
    ) -> int:
        """Remove the chunks matching any selector, in one transaction."""
        _check_where(where)

        def work() -> int:
            doomed = self._matching_ids(ids, document_ids, where, sources)
            self._remove(doomed)
            return len(doomed)

        result: int = await asyncio.to_thread(self._transaction, work)
        return result

    async def replace(self, source: str, chunks: Sequence[Chunk], embeddings: Any) -> int:
        """Swap the chunks of ``source`` for ``chunks`` in one transaction."""
        items = _check_chunks(chunks)
        matrix = _unit_rows(embeddings, len(items)) if items else None

        def work() -> int:
            doomed = self._matching_ids(None, None, None, [source])
            self._remove(doomed)
            if matrix is not None:
                _check_dimensions(self._dimensions(), matrix.shape[1])
                self._write(items, matrix)
            return len(doomed)

        result: int = await asyncio.to_thread(self._transaction, work)
        return result

    def _load(self) -> tuple[list[Chunk], np.ndarray]:
        with self._lock:
            if self._cache is not None:
                return self._cache
            chunks: list[Chunk] = []
            vectors: list[np.ndarray] = []
            for cid, doc, idx, source, text, start, end, metadata, dims, blob in self._db.execute(
                f"SELECT {_COLUMNS} FROM kag_vectors WHERE namespace = ? ORDER BY rowid", (self.namespace,)
            ):
                chunks.append(
                    Chunk(
                        id=cid,
                        document_id=doc,
                        index=idx,
                        source=source,
                        text=text,
                        start=start,
                        end=end,
                        metadata=json.loads(metadata),
                    )
                )
                vectors.append(np.frombuffer(blob, dtype="<f4", count=dims))
            matrix = np.stack(vectors).astype(np.float32) if vectors else np.zeros((0, 0), np.float32)
            self._cache = (chunks, matrix)
            return self._cache

    async def search(
        self, embedding: Any, *, k: int = 5, where: Mapping[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """Up to ``k`` results by exact cosine similarity, best first."""
        check_k(k)
        _check_where(where)
        chunks, matrix = await asyncio.to_thread(self._load)
        if not chunks:
            return []
        query = _unit_rows(embedding, 1)[0]
        _check_dimensions(matrix.shape[1], query.shape[0])
        if where:
            matcher = compile_matcher(where)
            keep = [
                i for i, c in enumerate(chunks) if matcher(document_filter_view(c.source, c.document_id, c.metadata))
            ]
            chunks, matrix = [chunks[i] for i in keep], matrix[keep]
        return [_result(chunks[i], score) for i, score in _top(matrix, query, k)]

    async def list_sources(self) -> list[str]:
        """The distinct sources of this namespace, sorted."""

        def work() -> list[str]:
            with self._lock:
                rows = self._db.execute(
                    "SELECT DISTINCT source FROM kag_vectors WHERE namespace = ? ORDER BY source", (self.namespace,)
                ).fetchall()
            return [r[0] for r in rows]

        return await asyncio.to_thread(work)


class VectorStoreRetriever:
    """Embed the query with a kag embedder and search a :class:`VectorStore`: a retriever for ``kag.Knowledge``.

    ``score_threshold`` drops results scoring below it (cosine, in [-1, 1]).
    """

    def __init__(self, store: Any, embedder: Any, *, score_threshold: float | None = None) -> None:
        missing = [m for m in ("upsert", "delete", "search", "list_sources") if not callable(getattr(store, m, None))]
        if missing:
            raise VectorBackendConfigError(
                f"a vector store needs async {', '.join(missing)}; implement the VectorStore protocol "
                "(upsert, delete, search, list_sources) or use InMemoryVectorStore / SQLiteVectorStore."
            )
        if embedder is None:
            raise VectorBackendConfigError(
                "VectorStoreRetriever needs the embedder that built the store (embedder=...)."
            )
        self.store = store
        self.embedder = as_embedder(embedder)
        self.score_threshold = score_threshold

    async def retrieve(self, query: str, *, k: int = 5, where: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Up to ``k`` passages for ``query``, best first."""
        vector = await embed_query(self.embedder, query)
        results = list(await self.store.search(vector, k=k, where=dict(where) if where else None))
        if self.score_threshold is not None:
            results = [r for r in results if float(r.get("score") or 0.0) >= self.score_threshold]
        return results[:k]
