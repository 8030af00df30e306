"""The index behind managed knowledge: its parts, readiness, writes and the graph search it runs.

:class:`ManagedIndex` owns what ``Knowledge`` manages: the knowledge base (given, or built once
the embedder's dimensions are known), the passage store, the indexer and the fact finder, the
sources staged for the first :meth:`ManagedIndex.ready`, and the lock every write takes. Writes
go to the graph (documents, chunks, entities, relations) or, for knowledge over a caller's
``VectorStore``, to :class:`~kag.knowledge.vector_index.VectorIndex`. Which documents a
``delete`` selects and ``refresh``'s desired set are in :mod:`kag.knowledge.lifecycle`; passage
ranking is in :mod:`kag.knowledge.passage_search`. ``Knowledge`` checks its arguments and
whether it is managed before it calls in here.

Reads never take the write lock: once the schema exists and nothing is staged, :meth:`ManagedIndex.ready`
returns without waiting, so a slow write (a backend outage, a large ingest) never stalls a
search or a health check. The locks are :class:`~kag._sync.LoopLock` objects, so knowledge
outlives an event loop (one ``asyncio.run`` after another, an interrupted notebook cell).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kag._sync import LoopLock
from kag.datamodels.base import Entity, Relation
from kag.datamodels.documents import Document
from kag.errors import ConfigError, InvalidInputError
from kag.graph.factory import passage_store_for
from kag.graph.passages import PassageStore
from kag.knowledge.backing import Backing, dimensions_known
from kag.knowledge.base import KnowledgeBase
from kag.knowledge.facts import FactFinder
from kag.knowledge.hits import SearchHit
from kag.knowledge.indexing import (
    IndexReport,
    LoadedDocument,
    PassageIndexer,
    Progress,
    Source,
    load_sources,
    with_metadata,
)
from kag.knowledge.lifecycle import (
    documents_matching,
    refresh_desired,
    refresh_stored,
    source_keys,
    stale_versions,
)
from kag.knowledge.mentions import EntityMatcher, build_matcher, names_of
from kag.knowledge.passage_search import PassageRanking, rank_passages
from kag.knowledge.rerank import Reranker, rerank_hits
from kag.knowledge.vector_index import VectorIndex
from kag.rag.embedders import as_embedder, embed_query
from kag.rag.loaders import AutoLoader
from kag.rag.splitter import RecursiveCharacterSplitter

__all__ = ["ManagedIndex"]


class ManagedIndex:
    """Parts, staged sources and writes of one ``Knowledge`` (see the module docstring).

    The parts (``kb``, ``store``, ``indexer``, ``fact_finder``) are ``None`` until a knowledge base
    is attached: at construction, or by :meth:`ensure_schema` once a factory's embedder knows its
    dimensions. Retrieval-only knowledge has an index too, with nothing staged and no schema.
    """

    def __init__(
        self,
        backing: Backing,
        *,
        splitter: RecursiveCharacterSplitter,
        loader: AutoLoader,
        passage_store: PassageStore | None,
        fetch_k: int,
        score_threshold: float,
        sources: list[Source],
    ) -> None:
        self.vector_index: VectorIndex | None = backing.vector_index
        self.has_schema = backing.retriever is None  # a retriever or a VectorStore needs none
        self.splitter = splitter
        self.loader = loader
        self.passage_store_override = passage_store
        self.fetch_k = fetch_k
        self.score_threshold = score_threshold
        self.kb: KnowledgeBase | None = None
        self.store: PassageStore | None = None
        self.indexer: PassageIndexer | None = None
        self.fact_finder: FactFinder | None = None
        self.factory = backing.factory if backing.retriever is None else None
        self.embedder: Any = as_embedder(backing.embedder) if backing.embedder is not None else None
        self.staged: list[Source] = list(sources)
        self.sources: list[Source] = list(sources)
        self.lock = LoopLock()  # taken by writes (and by indexing the staged sources), never by reads
        self.schema_lock = LoopLock()  # the one-time schema setup
        self.schema_ready = False
        self.last_report: IndexReport | None = None
        if backing.knowledge_base is not None:
            self.attach(backing.knowledge_base)
        elif self.factory is not None and (self.embedder is None or dimensions_known(self.embedder)):
            self.attach(self.factory(self.embedder))  # else built once the dimensions are learnt

    def attach(self, kb: KnowledgeBase) -> None:
        """Use ``kb``: its passage store (unless one was given), an indexer and a fact finder over it."""
        self.kb = kb
        self.store = (
            self.passage_store_override if self.passage_store_override is not None else passage_store_for(kb.store)
        )
        self.indexer = PassageIndexer(kb, self.store, self.splitter)
        self.fact_finder = FactFinder(kb, self.store, fetch_k=self.fetch_k, score_threshold=self.score_threshold)

    def _parts(self) -> tuple[KnowledgeBase, PassageStore, PassageIndexer, FactFinder]:
        # every caller runs after ensure_schema(), which attached them
        assert self.kb is not None and self.store is not None
        assert self.indexer is not None and self.fact_finder is not None
        return self.kb, self.store, self.indexer, self.fact_finder

    # -- readiness ------------------------------------------------------------
    async def ensure_schema(self) -> None:
        """Build the knowledge base if it waited for its dimensions; create its indexes once."""
        if not self.has_schema or self.schema_ready:
            return
        async with self.schema_lock:
            if self.schema_ready:
                return
            if self.kb is None:  # the embedder's dimensions were unknown: learn them, then build the base
                ensure = getattr(self.embedder, "ensure_dimensions", None)
                if callable(ensure):
                    await ensure()
                assert self.factory is not None
                self.attach(self.factory(self.embedder))
            kb, store, _, _ = self._parts()
            await kb.ensure_ready()
            await store.ensure_schema(kb.embedder.dimensions)
            self.schema_ready = True

    async def ready(self, managed: bool) -> IndexReport:
        """Ensure the schema and index the staged sources (none for unmanaged knowledge).

        Once both are done it returns at once, taking no lock: a read never waits for a write.
        """
        if (self.schema_ready or not self.has_schema) and (not self.staged or not managed):
            return IndexReport()
        await self.ensure_schema()
        if not self.staged or not managed:
            return IndexReport()
        async with self.lock:
            if not self.staged:  # indexed by a call that held the lock before this one
                return IndexReport()
            # staged stays non-empty until indexed, so a read meanwhile waits here instead of seeing half of it
            staged = list(self.staged)
            report = await self.index_sources(staged)
            self.staged = self.staged[len(staged) :]
            self.last_report = report
            return report

    # -- writes (each called after ready(), holding no lock) ------------------------
    async def index_sources(
        self, sources: Sequence[Source], progress: Progress | None = None, metadata: Mapping[str, Any] | None = None
    ) -> IndexReport:
        """Load and index ``sources`` (call holding :attr:`lock`)."""
        if self.vector_index is not None:
            items, report = await self.vector_index.load(sources, metadata)
            report += await self.vector_index.index(items)
            return report
        kb, store, indexer, _ = self._parts()
        docs, errors = await load_sources(self.loader, sources)
        docs = with_metadata(docs, metadata)  # added to each document's own metadata (ids hash source and text)
        report = await indexer.index(docs, await build_matcher(store, kb.schema), progress)
        if report.deleted:
            self.invalidate_entities()
        report.errors[:0] = errors
        return report

    async def add(
        self, items: list[Source], metadata: Mapping[str, Any] | None, progress: Progress | None
    ) -> IndexReport:
        """Index ``items`` now and remember them as sources."""
        async with self.lock:
            self.sources.extend(items)
            return await self.index_sources(items, progress, metadata)

    async def add_text(self, item: LoadedDocument) -> IndexReport:
        """Index one loaded text now."""
        async with self.lock:
            if self.vector_index is not None:
                return await self.vector_index.index([item])
            kb, store, indexer, _ = self._parts()
            return await indexer.index([item], await build_matcher(store, kb.schema))

    async def upsert(
        self, documents: list[Document], models: list[Entity | Relation], link: bool
    ) -> IndexReport | dict[str, int]:
        """Upsert entities and relations (relinking mentions) and index documents; see ``Knowledge.upsert``."""
        async with self.lock:
            result: dict[str, int] = {}
            if models:
                kb, _, indexer, finder = self._parts()
                result.update(await kb.upsert(models))
                finder.invalidate()
                if link:
                    entities, _ = kb.records(models)
                    matcher = EntityMatcher((e.id, e.label, names_of(e)) for e in entities)
                    result["mentions"] = await indexer.relink(matcher)
            if not documents:
                return result
            report = await self._upsert_documents(documents)
            if not models:
                return report
            result.update(
                documents=report.documents, chunks=report.chunks, skipped=report.skipped, replaced=report.deleted
            )
            return result

    async def _upsert_documents(self, documents: Sequence[Document]) -> IndexReport:
        items = [LoadedDocument(d, d.source, "document") for d in documents]
        if self.vector_index is not None:
            return await self.vector_index.index(items)
        kb, store, indexer, _ = self._parts()
        report = await indexer.index(items, await build_matcher(store, kb.schema))
        stale = await stale_versions(store, items)
        if stale:
            report.deleted += await store.delete_documents([d.id for d in stale])
        if report.deleted:
            self.retracted()
        return report

    async def delete(
        self,
        graph_ids: list[str],
        chunk_ids: list[str],
        doc_ids: list[str],
        named_sources: list[str],
        where: Mapping[str, Any] | None,
    ) -> int:
        """Delete the sorted selectors of ``Knowledge.delete``; the count of what went."""
        async with self.lock:
            if self.vector_index is not None:
                if graph_ids:
                    raise InvalidInputError("knowledge over a VectorStore holds no entities or relations to delete.")
                return await self.vector_index.delete(
                    ids=chunk_ids, document_ids=doc_ids, where=where, sources=named_sources
                )
            kb, store, _, finder = self._parts()
            if named_sources:
                keys = source_keys(named_sources)
                self.sources = [s for s in self.sources if not (isinstance(s, str | Path) and str(s) in keys)]
            doc_ids = [
                *doc_ids,
                *await documents_matching(store, chunk_ids=chunk_ids, sources=named_sources, where=where),
            ]
            deleted = await store.delete_documents(list(dict.fromkeys(doc_ids))) if doc_ids else 0
            if deleted:
                self.retracted()
            if graph_ids:
                deleted += await kb.delete(graph_ids)
                finder.invalidate()
            return deleted

    async def refresh(
        self, wanted: list[Source] | None, metadata: Mapping[str, Any] | None, delete_missing: bool
    ) -> IndexReport:
        """Re-index ``wanted`` (``None``: the stored files); see ``Knowledge.refresh``."""
        async with self.lock:
            if wanted is None:
                wanted = [s for s in self.sources if isinstance(s, str | Path)]
                if self.vector_index is None:
                    kb, store, indexer, _ = self._parts()
                    matcher = await build_matcher(store, kb.schema)
                    report = await refresh_stored(store, indexer, self.loader, matcher, delete_missing)
                    if report.deleted:
                        self.retracted()
                    return report
            if self.vector_index is not None:
                report = await self.vector_index.refresh(wanted, metadata, delete_missing)
            else:
                kb, store, indexer, _ = self._parts()
                loaded, errors = await load_sources(self.loader, wanted)
                report = await refresh_desired(
                    store,
                    indexer,
                    await build_matcher(store, kb.schema),
                    with_metadata(loaded, metadata),
                    IndexReport(errors=list(errors)),
                    delete_missing,
                )
                if report.deleted:
                    self.retracted()
            self.sources = list(wanted) if delete_missing else [*self.sources, *wanted]
            return report

    def retracted(self) -> None:
        """Deleted documents retract provenance: extracted entities and relations may be gone."""
        kb, _, _, _ = self._parts()
        kb.revision += 1
        self.invalidate_entities()

    def invalidate_entities(self) -> None:
        """Forget the fact finder's cached entity names."""
        if self.fact_finder is not None:
            self.fact_finder.invalidate()

    # -- search ---------------------------------------------------------------
    async def search(
        self,
        query: str,
        k: int,
        scope: dict[str, Any] | None,
        ranking: PassageRanking,
        *,
        reranker: Reranker | None,
        facts: bool,
        candidates: int | None,
    ) -> list[SearchHit]:
        """Facts (when ``facts``), then passages ranked by ``ranking`` (a reranker reorders a larger pool)."""
        kb, store, _, finder = self._parts()
        need_vector = ranking.mode != "keyword" or ranking.mmr_lambda is not None or facts
        qvec: np.ndarray | None = await embed_query(kb.embedder, query) if need_vector else None

        async def ranked_passages() -> list[SearchHit]:
            if reranker is None:
                return await rank_passages(store, ranking, query, qvec, k, scope, candidates)
            pool = await rank_passages(store, ranking, query, qvec, max(ranking.fetch_k, k), scope, candidates)
            return await rerank_hits(reranker, query, pool, k)

        async def found_facts() -> list[SearchHit]:
            return await finder.find(query, qvec, k, scope) if facts else []

        # facts and passages are independent reads: side by side, not one after the other
        found, passages = await asyncio.gather(found_facts(), ranked_passages())
        return found + passages

    # -- persistence ----------------------------------------------------------
    def save(self, path: str | None) -> str:
        """Persist a ``memory://`` knowledge base and its passages (``<path>.passages.json``)."""
        kb, store, _, _ = self._parts()
        save_kb = getattr(kb.store, "save", None)
        if save_kb is None:
            raise ConfigError(f"{kb.uri} persists on its own; save() is for memory:// stores.")
        target = Path(str(save_kb(path)))
        save_passages = getattr(store, "save", None)
        if save_passages is not None:
            save_passages(target.with_name(target.name + ".passages.json"))
        return str(target)
