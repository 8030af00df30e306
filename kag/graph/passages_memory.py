"""Passages for the embedded store: a side structure attached to a ``MemoryGraphStore``.

Documents, chunks, ``NEXT`` order and ``MENTIONS`` links are kept in plain
dicts next to the entity graph (the graph store holds entities only, so the
entity store's own persistence and plan evaluation are untouched). Chunk
vectors form one numpy matrix ordered by chunk id, rebuilt lazily after writes,
so a vector search is one matrix-vector product and ties fall out in id order.
Keywords use :class:`kag.ranking.bm25.BM25Index`. Filter masks are cached per
filter until the next write. Searches (filter masks included) run in a worker thread
under the graph store's lock, which every write here takes too (see ``kag.graph.memory``).

A store opened with a path keeps its passages in ``<path>.passages.json``
(written by :meth:`MemoryPassageStore.save`, read back when the store is opened).
"""

from __future__ import annotations

import base64
import bisect
import itertools
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kag.errors import EmbeddingError, InvalidInputError, StoreFormatError
from kag.files import atomic_write_json
from kag.graph.memory import MemoryGraphStore, run_locked
from kag.graph.passages import ChunkRecord, DocumentRecord, Mention, PassageRow
from kag.query.filters import SCOPED_FILTER_DEPTH, compile_matcher, validate_filter
from kag.ranking.bm25 import BM25Index
from kag.ranking.select import kth_largest
from kag.validation import check_k

FORMAT = "kag-memory-passages"
_DOT_BLOCK = 4096  # rows per block of the float64 dot products (bounds the temporary)
# float32 screening margin on the cosine (the float32 dot error of unit vectors is ~1e-6)
_SCREEN_COS = 1e-3
VERSION = 1


def _row_dots(matrix: np.ndarray, rows: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``matrix[rows] @ q`` in float64, the same arithmetic for every row.

    A BLAS product may round rows differently (blocked loops and their tails), so equal
    embeddings could score a hair apart; a per-row float64 reduction keeps their scores
    exactly equal, as Neo4j does, and ties then fall to id order on both backends.
    """
    out = np.empty(rows.shape[0], dtype=np.float64)
    for start in range(0, rows.shape[0], _DOT_BLOCK):
        block = matrix[rows[start : start + _DOT_BLOCK]].astype(np.float64)
        out[start : start + block.shape[0]] = (block * q).sum(axis=1)
    return out


@dataclass
class _StoredChunk:
    record: ChunkRecord
    props: dict[str, Any]


class MemoryPassageStore:
    """Documents and chunks of one ``MemoryGraphStore`` (see the module docstring)."""

    def __init__(self, graph_store: MemoryGraphStore, *, path: str | os.PathLike[str] | None = None) -> None:
        self.graph_store = graph_store
        self.path = Path(path) if path else None
        self._clear_state()
        if self.path is not None and self.path.exists():
            self._load(self.path)

    def _clear_state(self) -> None:
        """Every in-memory structure, empty (what :meth:`reset` and ``__init__`` start from)."""
        self._dims: int | None = None
        self._documents: dict[str, DocumentRecord] = {}
        self._doc_chunks: dict[str, list[str]] = {}
        self._chunks: dict[str, _StoredChunk] = {}
        # chunk id -> {entity id -> the entity's node token when linked}: a link is live
        # while the graph holds that very node, so deleting an entity drops its links for good
        # (as DETACH DELETE does on Neo4j), even if an entity with the same id comes back later
        self._mentions: dict[str, dict[str, Any]] = {}
        self._bm25 = BM25Index()
        # lazily rebuilt arrays
        self._order: list[str] = []
        self._pos: dict[str, int] = {}
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._masks: dict[str, np.ndarray] = {}
        self._dirty = True

    # -- schema ---------------------------------------------------------------
    async def ensure_schema(self, dimensions: int) -> None:
        async with self.graph_store.lock:
            self.apply_schema(dimensions)

    def _set_dims(self, dimensions: int) -> None:
        if self._dims is None:
            self._dims = dimensions
        elif self._dims != dimensions:
            raise EmbeddingError(
                f"these passages hold {self._dims}-dimensional embeddings but the embedder gives "
                f"{dimensions}; use the embedder they were indexed with, or re-index."
            )

    # -- write-through hooks ------------------------------------------------------
    # What a store that also persists each write elsewhere builds on (kag.graph.sqlite): each
    # hook applies one change in memory, synchronously, and the caller holds the graph store's
    # lock. The async writes below are these hooks under that lock.
    @property
    def dimensions(self) -> int | None:
        """The embedding dimensions of the stored chunks (``None`` until the first schema or chunk)."""
        return self._dims

    def apply_schema(self, dimensions: int) -> None:
        """Fix the dimensions (``EmbeddingError`` when they differ from the stored ones)."""
        self._set_dims(int(dimensions))

    def apply_write(
        self, documents: Sequence[DocumentRecord], chunks: Sequence[ChunkRecord], mentions: Sequence[Mention]
    ) -> None:
        """:meth:`write` without the lock."""
        self._write(documents, chunks, mentions)

    def apply_delete_documents(self, ids: Sequence[str]) -> tuple[list[str], list[str]]:
        """:meth:`delete_documents` without the lock: ``(the document ids found, their chunk ids)``."""
        found: list[str] = []
        chunk_ids: list[str] = []
        for doc_id in dict.fromkeys(ids):
            if doc_id in self._documents:
                found.append(doc_id)
                chunk_ids.extend(self._doc_chunks.get(doc_id, []))
                self._drop_chunks(doc_id)
                del self._documents[doc_id]
        if found:
            self._dirty = True
            self.graph_store.retract(chunk_ids)
        return found, chunk_ids

    def apply_link(self, mentions: Sequence[Mention]) -> int:
        """:meth:`link` without the lock: the number of links added."""
        return self._add_mentions(mentions)

    def apply_clear(self) -> None:
        """:meth:`clear` without the lock (the dimensions stay)."""
        dims = self._dims
        self._clear_state()
        self._dims = dims

    def load_records(
        self,
        documents: Sequence[DocumentRecord],
        chunks: Sequence[ChunkRecord],
        mentions: Sequence[Mention],
        dimensions: int | None,
    ) -> None:
        """Load what a file holds: chunks of documents it lacks are dropped, mentions link to the graph
        store's nodes (so load the graph first)."""
        if dimensions is not None:
            self._set_dims(int(dimensions))
        doc_ids = {d.id for d in documents}
        self._write(documents, [c for c in chunks if c.document_id in doc_ids], mentions)

    def live_mentions(self, chunk_ids: Sequence[str]) -> list[Mention]:
        """The live ``(chunk id, entity id)`` links of the stored chunks among ``chunk_ids``."""
        return [(c, e) for c in chunk_ids if c in self._chunks for e in self._links(c)]

    def reset(self) -> None:
        """Forget the in-memory copy (the graph store and path stay): then load it again."""
        self._clear_state()

    # -- writes ---------------------------------------------------------------
    async def write(
        self, documents: Sequence[DocumentRecord], chunks: Sequence[ChunkRecord], mentions: Sequence[Mention]
    ) -> None:
        async with self.graph_store.lock:
            self._write(documents, chunks, mentions)

    def _write(
        self, documents: Sequence[DocumentRecord], chunks: Sequence[ChunkRecord], mentions: Sequence[Mention]
    ) -> None:
        doc_ids = {d.id for d in documents}
        for c in chunks:
            if c.document_id not in doc_ids:
                raise InvalidInputError(f"chunk {c.id} belongs to {c.document_id}, which is not being written.")
            self._set_dims(int(c.embedding.shape[0]))
        for doc in documents:
            self._drop_chunks(doc.id)
            self._documents[doc.id] = doc
            self._doc_chunks[doc.id] = []
        for c in sorted(chunks, key=lambda c: (c.document_id, c.index)):
            self._chunks[c.id] = _StoredChunk(c, c.properties())
            self._doc_chunks[c.document_id].append(c.id)
        self._bm25.add([c.id for c in chunks], [c.text for c in chunks])
        self._add_mentions(mentions)
        self._dirty = True

    def _drop_chunks(self, doc_id: str) -> None:
        old = self._doc_chunks.pop(doc_id, [])
        for chunk_id in old:
            self._chunks.pop(chunk_id, None)
            self._mentions.pop(chunk_id, None)
        self._bm25.remove(old)

    def _add_mentions(self, mentions: Sequence[Mention]) -> int:
        graph = self.graph_store
        added = 0
        for chunk_id, entity_id in mentions:
            token = graph.node_token(entity_id)
            if chunk_id in self._chunks and token is not None:
                self._mentions.setdefault(chunk_id, {})[entity_id] = token
                added += 1
        return added

    def _live(self, entity_id: str, token: Any) -> bool:
        return token is not None and self.graph_store.node_token(entity_id) == token

    def _links(self, chunk_id: str) -> list[str]:
        return [e for e, node in self._mentions.get(chunk_id, {}).items() if self._live(e, node)]

    async def delete_documents(self, ids: Sequence[str]) -> int:
        """Delete documents, their chunks and MENTIONS, and retract the provenance the chunks gave.

        Entities and relations left without provenance (and never upserted directly)
        are deleted too, in the same locked step (see :meth:`MemoryGraphStore.retract`).
        """
        async with self.graph_store.lock:
            found, _ = self.apply_delete_documents(ids)
            return len(found)

    async def link(self, mentions: Sequence[Mention]) -> int:
        async with self.graph_store.lock:
            return self._add_mentions(mentions)

    async def clear(self) -> None:
        async with self.graph_store.lock:
            self.apply_clear()

    # -- index ----------------------------------------------------------------
    def _build(self) -> None:
        if not self._dirty:
            return
        self._order = sorted(self._chunks)  # code points: how Neo4j's ORDER BY sorts stored strings
        self._pos = {cid: i for i, cid in enumerate(self._order)}
        dims = self._dims or 1
        if self._order:
            self._matrix = np.stack([self._chunks[cid].record.embedding for cid in self._order]).astype(np.float32)
        else:
            self._matrix = np.zeros((0, dims), dtype=np.float32)
        self._masks = {}
        self._dirty = False

    def _mask(self, where: Mapping[str, Any] | None) -> np.ndarray:
        validate_filter(where, max_depth=SCOPED_FILTER_DEPTH)
        self._build()
        if not where:
            return np.ones(len(self._order), dtype=bool)
        key = json.dumps(where, sort_keys=True, default=repr)
        mask = self._masks.get(key)
        if mask is None:
            test = compile_matcher(where)
            mask = np.fromiter(
                (test(self._chunks[cid].record.metadata) for cid in self._order), dtype=bool, count=len(self._order)
            )
            if len(self._masks) > 256:
                self._masks.clear()
            self._masks[key] = mask
        return mask

    def _row(self, chunk_id: str, score: float) -> PassageRow:
        stored = self._chunks[chunk_id]
        mentions = self._links(chunk_id)
        return PassageRow.from_properties(stored.props, score, mentions)

    # -- reads ----------------------------------------------------------------
    async def vector_search(
        self,
        vector: np.ndarray,
        k: int,
        where: Mapping[str, Any] | None = None,
        ids: Sequence[str] | None = None,
        *,
        candidates: int | None = None,
    ) -> list[PassageRow]:
        # always exact: a scan of the in-memory matrix is already fast; candidates is accepted and ignored
        if candidates is not None:
            check_k(candidates, name="candidates")
        return await run_locked(self.graph_store.lock, self._vector_search, vector, k, where, ids)

    def _vector_search(
        self, vector: np.ndarray, k: int, where: Mapping[str, Any] | None, ids: Sequence[str] | None
    ) -> list[PassageRow]:
        k = check_k(k, minimum=0)
        mask = self._mask(where).copy()
        if ids is not None:
            keep = np.zeros_like(mask)
            keep[[self._pos[i] for i in ids if i in self._pos]] = True
            mask &= keep
        rows = np.flatnonzero(mask)
        if k == 0 or rows.size == 0:
            return []
        vec = np.asarray(vector, dtype=np.float32).reshape(-1)
        if self._dims is not None and vec.shape[0] != self._dims:
            raise EmbeddingError(f"query vector has {vec.shape[0]} dimensions, the passages {self._dims}.")
        norm = np.linalg.norm(vec)
        if not np.isfinite(vec).all() or norm == 0:
            raise EmbeddingError("the query vector is zero or not finite; it cannot be compared.")
        q = (vec / norm).astype(np.float64)
        if rows.shape[0] > max(8 * k, 1024):
            # screen with one float32 product; only rows near the k-th best are scored exactly
            approx = self._matrix @ q.astype(np.float32)
            approx = approx if rows.shape[0] == approx.shape[0] else approx[rows]
            kth = kth_largest(approx, k)
            rows = rows[approx >= kth - _SCREEN_COS]
        sims = np.clip((1.0 + _row_dots(self._matrix, rows, q)) / 2.0, 0.0, 1.0)
        # positions follow id order, so lexsort on (position, -score) breaks ties by id
        order = np.lexsort((rows, -sims))[:k]
        return [self._row(self._order[rows[j]], float(sims[j])) for j in order]

    async def keyword_search(self, text: str, k: int, where: Mapping[str, Any] | None = None) -> list[PassageRow]:
        return await run_locked(self.graph_store.lock, self._keyword_search, text, k, where)

    def _keyword_search(self, text: str, k: int, where: Mapping[str, Any] | None) -> list[PassageRow]:
        k = check_k(k, minimum=0)
        if not isinstance(text, str):
            raise InvalidInputError(f"keyword_search() takes str, got {type(text).__name__}.")
        mask = self._mask(where)
        scores = self._bm25.scores(text)
        hits = [(cid, s) for cid, s in scores.items() if mask[self._pos[cid]]]
        hits.sort(key=lambda item: (-item[1], item[0]))
        return [self._row(cid, score) for cid, score in hits[:k]]

    async def chunk_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        return {i: self._chunks[i].record.embedding.copy() for i in ids if i in self._chunks}

    async def get_chunks(self, ids: Sequence[str]) -> list[PassageRow]:
        return [self._row(i, 0.0) for i in dict.fromkeys(ids) if i in self._chunks]

    async def mentioned_by(self, entity_ids: Sequence[str], where: Mapping[str, Any] | None) -> set[str]:
        return await run_locked(self.graph_store.lock, self._mentioned_by, entity_ids, where)

    def _mentioned_by(self, entity_ids: Sequence[str], where: Mapping[str, Any] | None) -> set[str]:
        wanted = set(entity_ids)
        if not wanted:
            return set()
        mask = self._mask(where)
        found: set[str] = set()
        for chunk_id in self._mentions:
            hit = wanted.intersection(self._links(chunk_id))
            if hit and mask[self._pos[chunk_id]]:
                found |= hit
        return found

    async def entities(self, ids: Sequence[str] | None = None) -> list[tuple[str, str, dict[str, Any]]]:
        return self.graph_store.node_rows(ids)

    async def chunk_texts(self, after: str | None, limit: int) -> list[tuple[str, str]]:
        async with self.graph_store.lock:  # _build() rewrites the arrays a search may be reading
            self._build()
            start = 0 if after is None else bisect.bisect_right(self._order, after)
            return [(cid, self._chunks[cid].record.text) for cid in self._order[start : start + max(0, limit)]]

    async def list_documents(
        self,
        *,
        ids: Sequence[str] | None = None,
        sources: Sequence[str] | None = None,
        origins: Sequence[str] | None = None,
    ) -> list[DocumentRecord]:
        id_set = None if ids is None else set(ids)
        src_set = None if sources is None else set(sources)
        org_set = None if origins is None else set(origins)
        out = []
        for doc_id in sorted(self._documents):
            doc = self._documents[doc_id]
            if id_set is not None and doc_id not in id_set:
                continue
            if src_set is not None and doc.source not in src_set:
                continue
            if org_set is not None and doc.origin not in org_set:
                continue
            out.append(doc)
        return out

    def chunk_ids(self, document_id: str) -> list[str]:
        """Ids of a document's chunks in ``NEXT`` order."""
        return list(self._doc_chunks.get(document_id, ()))

    def next_links(self) -> list[tuple[str, str]]:
        """Every ``(:Chunk)-[:NEXT]->(:Chunk)`` pair."""
        return [(a, b) for ids in self._doc_chunks.values() for a, b in itertools.pairwise(ids)]

    async def counts(self) -> dict[str, int]:
        live = sum(len(self._links(chunk_id)) for chunk_id in self._mentions)
        return {"documents": len(self._documents), "chunks": len(self._chunks), "mentions": live}

    # -- persistence ----------------------------------------------------------
    def save(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write the passages to ``path`` (default: the path given at construction), atomically."""
        target = Path(path) if path else self.path
        if target is None:
            raise StoreFormatError("these passages have no file; pass a path to save().")
        chunks = []
        for cid in sorted(self._chunks):
            rec = self._chunks[cid].record
            chunks.append(
                {
                    **rec.properties(),
                    "metadata": rec.metadata,
                    "embedding": base64.b64encode(rec.embedding.astype("<f4").tobytes()).decode(),
                    "mentions": sorted(self._links(cid)),
                }
            )
        documents = [{**d.properties(), "metadata": d.metadata} for d in self._documents.values()]
        doc = {"format": FORMAT, "version": VERSION, "dimensions": self._dims, "documents": documents, "chunks": chunks}
        return atomic_write_json(target, doc)

    def _load(self, path: Path) -> None:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise StoreFormatError(f"{path} is not a kag passages file ({exc}).") from exc
        if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
            raise StoreFormatError(f"{path} is not a kag passages file of version {VERSION}.")
        try:
            dims = doc["dimensions"]
            documents = [DocumentRecord.from_properties(d) for d in doc["documents"]]
            chunks: list[ChunkRecord] = []
            mentions: list[tuple[str, str]] = []
            for c in doc["chunks"]:
                vec = np.frombuffer(base64.b64decode(c["embedding"]), dtype="<f4").astype(np.float32)
                if dims is None or vec.shape != (dims,) or not np.isfinite(vec).all():
                    raise StoreFormatError(f"{path}: chunk {c.get('id')!r} has a bad embedding.")
                chunks.append(ChunkRecord.from_properties(c, vec))
                mentions.extend((str(c["id"]), str(e)) for e in c.get("mentions", ()))
        except StoreFormatError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise StoreFormatError(f"{path} is a damaged kag passages file ({exc!r}).") from exc
        self.load_records(documents, chunks, mentions, dims)  # the entity store was loaded first
