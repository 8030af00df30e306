"""The passage pipeline: load -> split -> embed -> write -> link ``MENTIONS``.

Entities are found in chunk text by :class:`kag.knowledge.mentions.EntityMatcher`.

:class:`PassageIndexer` turns sources into graph passages. Document ids are
content hashes (source + text), so indexing the same content twice is a no-op
(``IndexReport.skipped``), and a file whose content changed gets a new id and
replaces the old version.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kag.datamodels.documents import Document
from kag.errors import InvalidInputError, LoaderError
from kag.graph.passages import ChunkRecord, DocumentRecord, Mention, PassageStore
from kag.knowledge.base import KnowledgeBase
from kag.knowledge.mentions import EntityMatcher
from kag.rag.loaders import AutoLoader, LoadFailure, Source, find_title, names_a_url
from kag.rag.reports import IndexReport
from kag.rag.splitter import RecursiveCharacterSplitter

__all__ = [
    "IndexReport",
    "LoadedDocument",
    "PassageIndexer",
    "Progress",
    "as_sources",
    "failure",
    "load_sources",
    "origin_of",
    "with_metadata",
]

_INLINE_MAX_PATH = 4096
_HAS_WORD = re.compile(r"\w", re.UNICODE)
MIN_NAME_CHARS = 2


# --------------------------------------------------------------------------- reports


# --------------------------------------------------------------------------- entity names


# --------------------------------------------------------------------------- loading


@dataclass(frozen=True)
class LoadedDocument:
    """A loaded document and the added source it came from."""

    document: Document
    origin: str
    origin_kind: str


def origin_of(source: Source) -> tuple[str, str]:
    """``(origin, kind)`` of an added source; ``kind`` is path, url, text, document or bytes."""
    if isinstance(source, Document):
        return source.source, "document"
    if isinstance(source, bytes | bytearray):
        return "bytes", "bytes"
    if isinstance(source, Path):
        return str(source.expanduser().resolve()), "path"
    if isinstance(source, str):
        stripped = source.strip()
        if names_a_url(stripped):
            return stripped, "url"  # a malformed one is refused by the loader, never indexed as text
        if "\n" in source or len(source) > _INLINE_MAX_PATH:
            return "inline", "text"
        path = Path(source).expanduser()
        try:
            if path.exists():
                return str(path.resolve()), "path"
        except (OSError, ValueError):
            pass
        if "/" in stripped or "\\" in stripped:
            return str(path.resolve()), "path"  # a missing path: the loader reports it
        return "inline", "text"
    raise InvalidInputError(f"cannot index a {type(source).__name__}; pass paths, URLs, text, bytes or Documents.")


def with_metadata(items: Sequence[LoadedDocument], metadata: Mapping[str, Any] | None) -> list[LoadedDocument]:
    """``items`` with ``metadata`` merged into each document's own (ids unchanged: they hash source and text)."""
    if not metadata:
        return list(items)
    return [
        dataclasses.replace(
            item,
            document=Document(
                id=item.document.id,
                text=item.document.text,
                source=item.document.source,
                metadata={**item.document.metadata, **metadata},
                mime_type=item.document.mime_type,
            ),
        )
        for item in items
    ]


def as_sources(sources: Source | Iterable[Source] | None) -> list[Source]:
    """``sources`` as a list (one source or many)."""
    if sources is None:
        return []
    if isinstance(sources, Document | Path | str | bytes | bytearray):
        return [sources]
    return list(sources)


async def load_sources(loader: AutoLoader, sources: Sequence[Source]) -> tuple[list[LoadedDocument], list[LoadFailure]]:
    """Load every source (concurrently), remembering where each document came from."""

    async def one(source: Source) -> tuple[list[LoadedDocument], list[LoadFailure]]:
        origin, kind = origin_of(source)
        result = await loader.load_with_report(source)
        return [LoadedDocument(d, origin, kind) for d in result.documents], list(result.errors)

    docs: list[LoadedDocument] = []
    errors: list[LoadFailure] = []
    seen: set[str] = set()
    for found, failed in await asyncio.gather(*(one(s) for s in sources)):
        for item in found:
            if item.document.id not in seen:
                seen.add(item.document.id)
                docs.append(item)
        errors.extend(failed)
    return docs, errors


def failure(source: str, message: str) -> LoadFailure:
    """A ``LoadFailure`` for ``source``."""
    return LoadFailure(source=source, error=LoaderError(message))


# --------------------------------------------------------------------------- indexing


Progress = Callable[[int, int], None]
"""``progress(done, total)``: documents written so far, of those to write."""


class PassageIndexer:
    """Splits, embeds and writes documents as passages of ``kb``, linking mentions."""

    def __init__(
        self,
        kb: KnowledgeBase,
        store: PassageStore,
        splitter: RecursiveCharacterSplitter,
        *,
        batch_chunks: int = 512,
    ) -> None:
        if batch_chunks < 1:
            raise InvalidInputError("batch_chunks must be >= 1.")
        self.kb = kb
        self.store = store
        self.splitter = splitter
        self.batch_chunks = batch_chunks

    async def index(
        self, items: Sequence[LoadedDocument], matcher: EntityMatcher, progress: Progress | None = None
    ) -> IndexReport:
        """Write the documents not stored yet; replace older versions of path/URL sources.

        ``progress(done, total)`` is called after each written batch (documents).
        """
        report = IndexReport()
        if not items:
            return report
        existing = {d.id for d in await self.store.list_documents(ids=[i.document.id for i in items])}
        fresh = [i for i in items if i.document.id not in existing]
        report.skipped = len(items) - len(fresh)
        report.sources = sorted({i.document.source for i in items})
        # a file or URL that changed has a new id: its older versions are stale
        replaceable = sorted({i.document.source for i in fresh if i.origin_kind in ("path", "url")})
        batch: list[LoadedDocument] = []
        size = 0
        for item in fresh:
            batch.append(item)
            size += max(1, len(item.document.text) // max(1, self.splitter.chunk_size))
            if size >= self.batch_chunks:
                report += await self._write(batch, matcher)
                batch, size = [], 0
                if progress is not None:
                    progress(report.documents, len(fresh))
        if batch:
            report += await self._write(batch, matcher)
        if progress is not None:
            progress(len(fresh), len(fresh))
        if replaceable:  # deleted after the new versions are written, so a failure loses nothing
            new_ids = {i.document.id for i in fresh}
            stale_docs = [d for d in await self.store.list_documents(sources=replaceable) if d.id not in new_ids]
            report.deleted += await self.store.delete_documents([d.id for d in stale_docs])
            if report.deleted:
                self.kb.revision += 1  # deleting documents retracts provenance: extracted items may be gone
        return report

    async def _write(self, items: Sequence[LoadedDocument], matcher: EntityMatcher) -> IndexReport:
        # a chunk without a single word (a rule line, a table border) has nothing to find
        chunks = [c for c in self.splitter.split_documents([i.document for i in items]) if _HAS_WORD.search(c.text)]
        vectors = await self.kb.embed([c.text for c in chunks])
        per_doc: dict[str, int] = {}
        for c in chunks:
            per_doc[c.document_id] = per_doc.get(c.document_id, 0) + 1
        docs: list[DocumentRecord] = []
        titles: dict[str, str] = {}
        for item in items:
            doc = item.document
            title = str(doc.metadata.get("title") or find_title(doc.text) or Path(doc.source).name or doc.source)
            titles[doc.id] = title
            docs.append(
                DocumentRecord(
                    id=doc.id,
                    source=doc.source,
                    title=title,
                    text_hash=hashlib.sha256(doc.text.encode("utf-8", "surrogatepass")).hexdigest(),
                    mime_type=doc.mime_type,
                    origin=item.origin,
                    origin_kind=item.origin_kind,
                    metadata=dict(doc.metadata),
                    chunk_count=per_doc.get(doc.id, 0),
                )
            )
        sources = {i.document.id: i.document.source for i in items}
        records: list[ChunkRecord] = []
        mentions: list[Mention] = []
        for c, vec in zip(chunks, vectors, strict=True):
            meta = {"source": sources[c.document_id], **c.metadata}
            records.append(
                ChunkRecord(
                    id=c.id,
                    document_id=c.document_id,
                    index=c.index,
                    text=c.text,
                    start=c.start,
                    end=c.end,
                    source=sources[c.document_id],
                    title=titles[c.document_id],
                    metadata=meta,
                    embedding=vec,
                )
            )
            mentions.extend((c.id, entity_id) for entity_id in matcher.entity_ids(c.text))
        await self.store.write(docs, records, mentions)
        return IndexReport(documents=len(docs), chunks=len(records), mentions=len(mentions))

    async def relink(self, matcher: EntityMatcher, *, page: int = 1000) -> int:
        """Link every stored chunk to the entities of ``matcher`` it mentions; return the links added."""
        if not len(matcher):
            return 0
        added = 0
        after: str | None = None
        while True:
            rows = await self.store.chunk_texts(after, page)
            if not rows:
                return added
            links = [(cid, eid) for cid, text in rows for eid in matcher.entity_ids(text)]
            if links:
                added += await self.store.link(links)
            after = rows[-1][0]
