"""``VectorIndex``: kag-managed ingestion into a caller's :class:`~kag.rag.vectorstores.VectorStore`.

``create_knowledge("vector", store=..., embedder=...)`` (or ``Knowledge(store=...)``)
loads, splits and embeds documents here and writes them through the store's protocol
methods only: ``upsert``, ``delete``, ``list_sources`` and, when the store has it,
``AtomicVectorStore.replace``. Searching goes through
:class:`~kag.rag.vectorstores.VectorStoreRetriever` over the same store.

Re-indexing a document whose source is a path, URL or ``Document`` source first
removes the earlier chunks of that source: one ``replace(source, ...)`` on an
atomic store, else ``delete(sources=[source])`` then ``upsert`` (the portable
fallback). Inline text and bytes have no identity beyond their content, so they are
only upserted (stable chunk ids make that idempotent).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kag.datamodels.documents import Chunk, Document
from kag.knowledge.indexing import IndexReport, LoadedDocument, failure, load_sources, with_metadata
from kag.rag.embedders import Embedder
from kag.rag.loaders import AutoLoader, Source
from kag.rag.splitter import RecursiveCharacterSplitter
from kag.rag.vectorstores import AtomicVectorStore

__all__ = ["VectorIndex"]

_REPLACEABLE = ("path", "url", "document")
_EMBED_BATCH = 512


class VectorIndex:
    """Writes documents into ``store`` as embedded chunks; every write goes through the ``VectorStore`` protocol."""

    def __init__(
        self, store: Any, embedder: Embedder, splitter: RecursiveCharacterSplitter, loader: AutoLoader
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.splitter = splitter
        self.loader = loader
        self._written: dict[str, set[str]] = {}  # source -> document ids this object wrote (skip detection)

    def __repr__(self) -> str:
        return f"VectorIndex({self.store!r})"

    async def load(
        self, sources: Sequence[Source], metadata: Mapping[str, Any] | None = None
    ) -> tuple[list[LoadedDocument], IndexReport]:
        """Load ``sources``; the report carries the load failures."""
        docs, errors = await load_sources(self.loader, sources)
        return with_metadata(docs, metadata), IndexReport(errors=list(errors))

    async def index(self, items: Sequence[LoadedDocument]) -> IndexReport:
        """Split, embed and write ``items``; a replaceable source's earlier chunks are removed first.

        Chunks are embedded in batches across documents. Sources the store does not hold yet
        are written with one ``upsert``; a source it holds is swapped on its own (``replace``,
        or ``delete`` then ``upsert``), so its old chunks never outlive the new ones.
        """
        report = IndexReport(sources=sorted({i.document.source for i in items}))
        groups: dict[tuple[str, bool], list[Document]] = {}
        for item in items:
            replace = item.origin_kind in _REPLACEABLE and bool(item.document.source)
            groups.setdefault((item.document.source, replace), []).append(item.document)
        plans: list[tuple[str, bool, list[Chunk]]] = []
        written: dict[str, set[str]] = {}  # remembered once the writes succeeded
        for (source, replace), documents in groups.items():
            known = self._written.get(source, set())
            if replace and {d.id for d in documents} == known:
                report.skipped += len(documents)
                continue
            fresh = documents if replace else [d for d in documents if d.id not in known]
            report.skipped += len(documents) - len(fresh)
            plans.append((source, replace, [c for c in self.splitter.split_documents(fresh) if c.text.strip()]))
            written[source] = {d.id for d in fresh} if replace else known | {d.id for d in fresh}
            report.documents += len(fresh)
        stored = set(await self.store.list_sources()) if any(replace for _, replace, _ in plans) else set()
        texts = [c.text for _, _, chunks in plans for c in chunks]
        matrix = await self._embed(texts)
        batch: list[Chunk] = []
        rows: list[int] = []
        at = 0
        for source, replace, chunks in plans:
            span = list(range(at, at + len(chunks)))
            at += len(chunks)
            report.chunks += len(chunks)
            if not (replace and source in stored):
                batch.extend(chunks)
                rows.extend(span)
            elif isinstance(self.store, AtomicVectorStore):
                report.deleted += await self.store.replace(source, chunks, matrix[span])
            else:
                report.deleted += await self.store.delete(sources=[source])
                if chunks:
                    await self.store.upsert(chunks, matrix[span])
        if batch:
            await self.store.upsert(batch, matrix[rows])
        self._written.update(written)
        return report

    async def _embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        parts = [
            np.asarray(await self.embedder.embed(texts[start : start + _EMBED_BATCH]), dtype=np.float32)
            for start in range(0, len(texts), _EMBED_BATCH)
        ]
        return np.concatenate(parts)

    async def delete(
        self,
        *,
        ids: Sequence[str] | None = None,
        document_ids: Sequence[str] | None = None,
        where: Mapping[str, Any] | None = None,
        sources: Sequence[str] | None = None,
    ) -> int:
        """Delete the matching chunks (any selector); returns how many the store removed."""
        if not (ids or document_ids or where or sources):
            return 0
        deleted = int(
            await self.store.delete(
                ids=list(ids) if ids else None,
                document_ids=list(document_ids) if document_ids else None,
                where=dict(where) if where else None,
                sources=list(sources) if sources else None,
            )
        )
        for source in sources or ():
            self._written.pop(source, None)
        if ids or document_ids or where:
            self._written.clear()  # which documents remain whole is unknown now: re-adding rewrites them
        return deleted

    async def refresh(
        self, sources: Sequence[Source], metadata: Mapping[str, Any] | None, delete_missing: bool
    ) -> IndexReport:
        """Index the desired ``sources``; with ``delete_missing`` remove every stored source not among them."""
        items, report = await self.load(sources, metadata)
        report += await self.index(items)
        if delete_missing:
            if report.errors:  # a source that failed to load must not look "omitted"
                report.errors.append(
                    failure("refresh", "nothing was deleted because some sources failed to load; fix them and retry.")
                )
                return report
            keep = {i.document.source for i in items}
            missing = [s for s in await self.store.list_sources() if s not in keep]
            if missing:
                report.deleted += await self.delete(sources=missing)
                report.deleted_sources = sorted(missing)
        return report
