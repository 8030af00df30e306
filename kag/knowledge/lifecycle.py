"""Lifecycle steps of managed graph knowledge: what ``delete`` selects and what ``refresh`` re-indexes.

Documents are the unit of a graph store (their chunks form one ``NEXT`` chain), so a
selector that names a chunk (``chk_...``) or matches chunk metadata (``where``)
deletes the documents those chunks belong to.

``refresh(sources, ...)`` treats ``sources`` as the desired set: every source is
re-loaded, unchanged documents are skipped (ids hash source and text), a changed
file, URL or ``Document`` source replaces its earlier version, and with
``delete_missing=True`` every stored document whose source is not in the set is
deleted. Nothing is deleted when a source failed to load (it would look omitted).
``refresh()`` without sources re-loads the file and directory sources already stored.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kag.datamodels.base import Entity, Relation
from kag.errors import InvalidInputError
from kag.graph.passages import DocumentRecord, PassageStore
from kag.knowledge.indexing import IndexReport, LoadedDocument, PassageIndexer, failure, load_sources
from kag.knowledge.mentions import EntityMatcher
from kag.query.filters import compile_matcher
from kag.rag.loaders import AutoLoader
from kag.rag.vectorstores import document_filter_view

__all__ = ["documents_matching", "refresh_desired", "refresh_stored", "sort_refs", "source_keys", "stale_versions"]

_REPLACEABLE = ("path", "url", "document")


def sort_refs(
    items: Iterable[Any], doc_ids: list[str], sources: list[str], *, chunks_only: bool
) -> tuple[list[str], list[str]]:
    """Sort ``delete()`` references by their form: ``(graph ids, chunk ids)``; documents and sources are appended.

    ``doc_...``: a document; ``e_...``/``r_...`` or a model: an entity or relation; ``chk_...``
    (or any other string when ``chunks_only``): a chunk; anything else: a source.
    """
    graph_ids: list[str] = []
    chunk_ids: list[str] = []
    for item in items:
        if isinstance(item, Entity | Relation):
            graph_ids.append(item.id)
        elif not isinstance(item, str):
            raise InvalidInputError(f"delete() takes ids, sources or models, got {type(item).__name__}.")
        elif item.startswith("doc_"):
            doc_ids.append(item)
        elif item.startswith(("e_", "r_")):
            graph_ids.append(item)
        elif item.startswith("chk_") or chunks_only:
            chunk_ids.append(item)
        else:
            sources.append(item)
    return graph_ids, chunk_ids


def source_keys(sources: Iterable[str]) -> set[str]:
    """The names a source may be stored under: as given, and as a resolved path."""
    keys = set(sources)
    for src in list(keys):
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            keys.add(str(Path(src).expanduser().resolve()))
    return keys


async def documents_matching(
    store: PassageStore,
    *,
    chunk_ids: Sequence[str] = (),
    sources: Sequence[str] = (),
    where: Mapping[str, Any] | None = None,
) -> list[str]:
    """Ids of the stored documents named by chunk ids, sources (or added paths/URLs) or a metadata filter."""
    found: list[str] = []
    if chunk_ids:
        found.extend(row.document_id for row in await store.get_chunks(list(chunk_ids)))
    if sources:
        keys = sorted(source_keys(sources))
        found.extend(d.id for d in await store.list_documents(sources=keys))
        found.extend(d.id for d in await store.list_documents(origins=keys))
    if where:
        matcher = compile_matcher(where)
        found.extend(
            d.id for d in await store.list_documents() if matcher(document_filter_view(d.source, d.id, d.metadata))
        )
    return list(dict.fromkeys(found))


async def stale_versions(store: PassageStore, items: Sequence[LoadedDocument]) -> list[DocumentRecord]:
    """Stored documents with the source of a replaceable loaded document but not its content."""
    keep = {i.document.id for i in items}
    sources = sorted({i.document.source for i in items if i.origin_kind in _REPLACEABLE and i.document.source})
    if not sources:
        return []
    return [d for d in await store.list_documents(sources=sources) if d.id not in keep]


async def refresh_desired(
    store: PassageStore,
    indexer: PassageIndexer,
    matcher: EntityMatcher,
    items: Sequence[LoadedDocument],
    report: IndexReport,
    delete_missing: bool,
) -> IndexReport:
    """Index the loaded desired set ``items``; replace changed sources; delete omitted ones when asked."""
    report += await indexer.index(items, matcher)
    stale = await stale_versions(store, items)
    if stale:
        report.deleted += await store.delete_documents([d.id for d in stale])
    if delete_missing:
        if report.errors:
            report.errors.append(
                failure("refresh", "nothing was deleted because some sources failed to load; fix them and retry.")
            )
            return report
        wanted = {i.document.source for i in items}
        omitted = [d for d in await store.list_documents() if d.source not in wanted]
        if omitted:
            report.deleted += await store.delete_documents([d.id for d in omitted])
            report.deleted_sources = sorted({d.source for d in omitted})
    return report


async def refresh_stored(
    store: PassageStore, indexer: PassageIndexer, loader: AutoLoader, matcher: EntityMatcher, delete_missing: bool
) -> IndexReport:
    """Re-load the file and directory sources already stored; re-index what changed."""
    stored = await store.list_documents()
    origins = sorted({d.origin for d in stored if d.origin_kind == "path"})
    report = IndexReport()
    for origin in origins:
        mine = [d for d in stored if d.origin == origin]
        if not Path(origin).exists():
            if delete_missing:
                report.deleted += await store.delete_documents([d.id for d in mine])
                report.deleted_sources = sorted({*report.deleted_sources, *(d.source for d in mine)})
            else:
                report.errors.append(
                    failure(origin, f"{origin} is gone; refresh(delete_missing=True) removes its documents.")
                )
            continue
        loaded, errors = await load_sources(loader, [Path(origin)])
        report.errors.extend(errors)
        report += await indexer.index(loaded, matcher)
        present = {item.document.source for item in loaded}
        gone = [d for d in mine if d.source not in present]
        if gone and delete_missing:
            report.deleted += await store.delete_documents([d.id for d in gone])
            report.deleted_sources = sorted({*report.deleted_sources, *(d.source for d in gone)})
        elif gone:
            report.errors.extend(
                failure(d.source, f"{d.source} is gone; refresh(delete_missing=True) removes it.") for d in gone
            )
    return report
