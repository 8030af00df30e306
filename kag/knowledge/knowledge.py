"""``Knowledge``: typed facts and document passages of one knowledge base, searched together.

>>> knowledge = kag.create_knowledge(name="docs", description="Product docs", sources=["docs/"])
>>> hits = await knowledge.search("how do I rotate the API key?", k=5)
>>> [h.kind for h in hits]          # facts first (typed graph), then passages (chunks)

A search returns

* **facts**: entities named in the query (whole-word matches of their key text
  or aliases) and their relations, from the knowledge base's triplet search,
  ranked by the similarity of the fact to the query;
* **passages**: chunks ranked by ``mode`` (``"vector"``, ``"keyword"`` or ``"hybrid"``),
  optionally diversified with MMR (see :mod:`kag.knowledge.passage_search`).

A configured ``where`` scope is ANDed with every per-search filter, so a search
can narrow the scope but never widen it; under a filter, facts are limited to
entities that some in-scope chunk mentions.

``Knowledge(retriever)`` (any object with ``retrieve(query, *, k=5, where=None)``)
and :meth:`Knowledge.from_callable` (a search function) build *retrieval-only*
knowledge: search, tools and answers work, lifecycle calls (``add``, ``upsert``,
``delete``, ``refresh``...) raise :class:`~kag.errors.UnsupportedKnowledgeOperationError`.
``Knowledge(store=vector_store)`` is managed knowledge over a caller's
:class:`~kag.rag.vectorstores.VectorStore`: kag loads, splits, embeds and writes into it
(:mod:`kag.knowledge.vector_index`) and searches it by vector. Lifecycle steps of graph
knowledge (what ``delete`` selects, ``refresh``'s desired set) are in :mod:`kag.knowledge.lifecycle`.
An optional ``reranker`` reorders passages (or a retriever's hits) after retrieval.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np

from kag._sync import SyncFacade, blocking
from kag.datamodels.base import Entity, Relation
from kag.datamodels.documents import Document
from kag.errors import ConfigError, InvalidInputError, UnsupportedKnowledgeOperationError
from kag.graph.factory import passage_store_for
from kag.graph.passages import DocumentRecord, PassageStore
from kag.knowledge.answer import AnswerMode, RAGAnswer, ask
from kag.knowledge.base import KnowledgeBase
from kag.knowledge.facts import FactFinder
from kag.knowledge.hits import SearchHit
from kag.knowledge.indexing import (
    IndexReport,
    LoadedDocument,
    PassageIndexer,
    Progress,
    as_sources,
    load_sources,
    origin_of,
    with_metadata,
)
from kag.knowledge.lifecycle import (
    documents_matching,
    refresh_desired,
    refresh_stored,
    sort_refs,
    source_keys,
    stale_versions,
)
from kag.knowledge.mentions import EntityMatcher, build_matcher, names_of
from kag.knowledge.passage_search import PassageRanking, rank_passages
from kag.knowledge.rerank import Reranker, check_reranker, rerank_hits
from kag.knowledge.retrievers import CallableRetriever, Retriever, call_retriever
from kag.knowledge.tool import KnowledgeTool, render_context, tool_name_for
from kag.knowledge.vector_index import VectorIndex
from kag.query.filters import validate_filter
from kag.rag.embedders import Embedder, HashEmbedder, as_embedder, embed_query
from kag.rag.loaders import AutoLoader, Source
from kag.rag.splitter import RecursiveCharacterSplitter
from kag.rag.vectorstores import VectorStoreRetriever
from kag.validation import check_finite, check_k, check_threshold

if TYPE_CHECKING:
    from pydantic import BaseModel

    from kag.lm.base import LanguageModel

__all__ = ["Knowledge", "KnowledgeBaseFactory", "SearchMode"]

KnowledgeBaseFactory = Callable[[Embedder | None], KnowledgeBase]
"""Builds the knowledge base of managed knowledge once its embedder's dimensions are known."""

SearchMode = Literal["hybrid", "vector", "keyword"]
MODES: tuple[str, ...] = ("hybrid", "vector", "keyword")
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,57}$")
_HAS_WORD = re.compile(r"\w", re.UNICODE)


class Knowledge:
    """Facts and passages of a :class:`KnowledgeBase`, or results of any retriever, behind one search.

    (See the module docstring.)

    Args:
        knowledge_base: what to search. A :class:`KnowledgeBase` (managed knowledge: the
            schema, store and embedder to use); ``None`` for a fresh ``memory://`` one
            (with ``embedder``); or a retriever, an object with ``retrieve(query, *, k,
            where)``, or a search function (retrieval-only knowledge).
        name: identifies the knowledge in tool names (``search_<name>``) and labels (``[name:1]``).
        description: what the knowledge holds (shown to language models).
        sources: files, directories, URLs, text, bytes or Documents, indexed lazily
            on the first :meth:`ready` / :meth:`search` (``pending_sources`` is another name).
        default_k: results per kind when a search gives no ``k``.
        reranker: reorders passages after retrieval (``rerank(query, hits, *, k)``).
        embedder: the embedder of the ``memory://`` knowledge base built when
            ``knowledge_base`` is ``None`` (``embed``, or ``embed_documents``/``embed_query``).
        splitter: chunking (default ``RecursiveCharacterSplitter(1000, 150)``).
        loader: source loading (default ``AutoLoader()``).
        where: a metadata filter every search is confined to.
        context_max_chars: bound of the text rendered for tools and answers (12,000 by default).
        mode: passage ranking, ``"hybrid"``, ``"vector"`` or ``"keyword"``.
        alpha: weight of the vector score in hybrid mode.
        mmr_lambda: when set, re-rank the top ``fetch_k`` with MMR (1.0 = relevance only).
        fetch_k: candidates fetched per side before fusion / MMR / reranking.
        score_threshold: drop hits scoring below it (keyword mode: raw keyword scores).
        facts: include facts from the typed graph in search results.
        passage_store: override where passages are kept (default: next to the graph store).
        store: a ``VectorStore`` kag indexes into and searches (managed vector knowledge; with
            ``embedder``, ``HashEmbedder()`` by default, ``splitter`` and ``loader``).
    """

    def __init__(
        self,
        knowledge_base: KnowledgeBase | Retriever | Callable[..., Any] | None = None,
        *,
        name: str = "knowledge",
        description: str = "",
        sources: Source | Iterable[Source] | None = None,
        default_k: int = 5,
        reranker: Reranker | None = None,
        embedder: Any = None,
        splitter: RecursiveCharacterSplitter | None = None,
        loader: AutoLoader | None = None,
        where: Mapping[str, Any] | None = None,
        context_max_chars: int = 12_000,
        mode: SearchMode = "hybrid",
        alpha: float = 0.5,
        mmr_lambda: float | None = None,
        fetch_k: int = 20,
        score_threshold: float = 0.0,
        facts: bool = True,
        passage_store: PassageStore | None = None,
        pending_sources: Source | Iterable[Source] | None = None,
        knowledge_base_factory: KnowledgeBaseFactory | None = None,
        store: Any = None,
    ) -> None:
        retriever: Any = None
        vector: VectorIndex | None = None
        if store is not None:
            if knowledge_base is not None or knowledge_base_factory is not None or passage_store is not None:
                raise ConfigError(
                    "store= (a VectorStore) makes kag index into that store: give no knowledge base, "
                    "retriever or passage_store with it."
                )
            query_embedder = as_embedder(embedder) if embedder is not None else HashEmbedder()
            retriever = VectorStoreRetriever(store, query_embedder)
            vector = VectorIndex(
                store,
                query_embedder,
                splitter if splitter is not None else RecursiveCharacterSplitter(1000, 150),
                loader if loader is not None else AutoLoader(),
            )
            embedder = None
        elif isinstance(knowledge_base, KnowledgeBase):
            if embedder is not None or knowledge_base_factory is not None:
                raise ConfigError(
                    "a KnowledgeBase brings its own embedder: give embedder= to KnowledgeBase(...), "
                    "or use Knowledge(None, embedder=...) for a fresh memory:// one."
                )
        elif knowledge_base is None:
            if knowledge_base_factory is None:
                knowledge_base_factory = _memory_knowledge_base
        elif callable(getattr(knowledge_base, "retrieve", None)):
            retriever = knowledge_base
        elif callable(knowledge_base):
            retriever = CallableRetriever(knowledge_base)
        else:
            raise ConfigError(
                f"Knowledge needs a KnowledgeBase, a retriever (an object with retrieve(query, *, k, where)), "
                f"a search function or None; got {type(knowledge_base).__name__}."
            )
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ConfigError(f"knowledge name {name!r} must match ^[A-Za-z0-9_-]{{1,57}}$ (it becomes a tool name).")
        _check_mode(mode)
        check_threshold(alpha, name="alpha", error=ConfigError)
        if mmr_lambda is not None:
            check_threshold(mmr_lambda, name="mmr_lambda", error=ConfigError)
        check_k(fetch_k, name="fetch_k", error=ConfigError)
        check_k(default_k, name="default_k", error=ConfigError)
        check_k(context_max_chars, name="context_max_chars", minimum=800, maximum=10_000_000, error=ConfigError)
        check_finite(score_threshold, name="score_threshold", error=ConfigError)
        check_reranker(reranker)
        if sources is not None and pending_sources is not None:
            raise ConfigError("give sources= or pending_sources= (another name of it), not both.")
        try:
            validate_filter(where)
        except InvalidInputError as exc:
            raise ConfigError(f"invalid knowledge scope `where`: {exc}") from exc
        if retriever is not None and vector is None:
            given = {
                "sources": sources if sources is not None else pending_sources,
                "embedder": embedder,
                "splitter": splitter,
                "loader": loader,
                "passage_store": passage_store,
            }
            extra = sorted(key for key, value in given.items() if value is not None)
            if extra:
                raise ConfigError(
                    f"retrieval-only knowledge does not index, so {', '.join(extra)} cannot be used with a "
                    "retriever; use create_knowledge('memory') or a KnowledgeBase for managed knowledge."
                )
        self.retriever: Any = retriever
        self.vector_index: VectorIndex | None = vector
        self.name = name
        self.description = description
        self.default_k = default_k
        self.reranker = reranker
        self.where: dict[str, Any] | None = dict(where) if where else None
        self.context_max_chars = context_max_chars
        self.mode: SearchMode = mode
        self.alpha = float(alpha)
        self.mmr_lambda = mmr_lambda
        self.fetch_k = fetch_k
        self.score_threshold = float(score_threshold)
        self.facts = facts
        self.splitter = splitter if splitter is not None else RecursiveCharacterSplitter(1000, 150)
        self.loader = loader if loader is not None else AutoLoader()
        self._passage_store_override = passage_store
        self._kb: KnowledgeBase | None = None
        self._store: PassageStore | None = None
        self._indexer: PassageIndexer | None = None
        self._fact_finder: FactFinder | None = None
        self._embedder: Any = as_embedder(embedder) if embedder is not None else None
        self._kb_factory: KnowledgeBaseFactory | None = knowledge_base_factory
        staged = sources if sources is not None else pending_sources
        self._staged: list[Source] = as_sources(staged)
        self._sources: list[Source] = list(self._staged)
        self._lock = asyncio.Lock()
        self._schema_ready = False
        self._sync: KnowledgeSync | None = None
        self.last_report: IndexReport | None = None
        if isinstance(knowledge_base, KnowledgeBase):
            self._attach(knowledge_base)
        elif self._kb_factory is not None and (self._embedder is None or _dimensions_known(self._embedder)):
            self._attach(self._kb_factory(self._embedder))  # else built once the dimensions are learnt

    def _attach(self, kb: KnowledgeBase) -> None:
        self._kb = kb
        self._store = (
            self._passage_store_override if self._passage_store_override is not None else passage_store_for(kb.store)
        )
        self._indexer = PassageIndexer(kb, self._store, self.splitter)
        self._fact_finder = FactFinder(kb, self._store, fetch_k=self.fetch_k, score_threshold=self.score_threshold)

    @classmethod
    def from_callable(
        cls,
        fn: Callable[..., Any],
        *,
        name: str = "knowledge",
        description: str = "",
        **options: Any,
    ) -> Knowledge:
        """Retrieval-only knowledge over a sync or async search function ``fn(query, *, k=5, where=None)``.

        ``fn`` may return :class:`SearchHit`, ``Document``, ``Chunk``, mappings with ``text``,
        ``content`` or ``page_content``, or strings (see :mod:`kag.knowledge.retrievers`).
        ``options`` are the other :class:`Knowledge` arguments (``default_k``, ``reranker``...).
        """
        if not callable(fn):
            raise ConfigError(f"from_callable() needs a function, got {type(fn).__name__}.")
        return cls(CallableRetriever(fn, name=name), name=name, description=description, **options)

    @property
    def managed(self) -> bool:
        """True when kag owns the index (a knowledge base or a ``VectorStore``), False for retrieval-only knowledge."""
        return self.retriever is None or self.vector_index is not None

    @property
    def tool_name(self) -> str:
        """The name of the search tool: ``search_<name>``, sanitized deterministically (see ``tool_name_for``)."""
        return tool_name_for(self.name)

    def _require_managed(self, operation: str) -> None:
        if not self.managed:
            raise UnsupportedKnowledgeOperationError(
                f"knowledge '{self.name}' is retrieval-only (over {self.retriever!r}), so {operation}() is not "
                "available: manage the documents in that system, or create managed knowledge with "
                "create_knowledge('memory') or create_knowledge('neo4j')."
            )

    def _part(self, value: Any, what: str) -> Any:
        self._require_managed(what)
        if self.vector_index is not None:
            raise UnsupportedKnowledgeOperationError(
                f"knowledge '{self.name}' keeps its passages in {self.vector_index.store!r} (a VectorStore); "
                f"it has no .{what}: use .vector_index.store."
            )
        if value is None:
            raise ConfigError(
                f"knowledge '{self.name}' learns its embedder's dimensions on first use: "
                f"await knowledge.ready() before reading .{what}."
            )
        return value

    @property
    def kb(self) -> KnowledgeBase:
        """The knowledge base (managed knowledge only)."""
        kb: KnowledgeBase = self._part(self._kb, "kb")
        return kb

    @property
    def store(self) -> PassageStore:
        """Where passages are kept (managed knowledge only)."""
        store: PassageStore = self._part(self._store, "store")
        return store

    @property
    def indexer(self) -> PassageIndexer:
        """Splits, embeds and writes documents (managed knowledge only)."""
        indexer: PassageIndexer = self._part(self._indexer, "indexer")
        return indexer

    @property
    def fact_finder(self) -> FactFinder:
        """Finds facts of the typed graph for a query (managed knowledge only)."""
        finder: FactFinder = self._part(self._fact_finder, "fact_finder")
        return finder

    def __repr__(self) -> str:
        if self.retriever is not None:
            return f"Knowledge(name={self.name!r}, retriever={self.retriever!r})"
        uri = self._kb.uri if self._kb is not None else "memory:// (pending)"
        return f"Knowledge(name={self.name!r}, uri={uri!r}, mode={self.mode!r})"

    # -- lifecycle ------------------------------------------------------------
    @property
    def sync(self) -> KnowledgeSync:
        """Blocking facade: ``knowledge.sync.search(...)`` (refuses inside an event loop)."""
        if self._sync is None:
            self._sync = KnowledgeSync(self)
        return self._sync

    @property
    def sources(self) -> list[Source]:
        """Every source given to this object (staged or indexed)."""
        return list(self._sources)

    async def _ensure_schema(self) -> None:
        if self.retriever is not None:  # retrieval-only, or a VectorStore (it needs no schema)
            return
        if self._kb is None:  # the embedder's dimensions were unknown: learn them, then build the base
            ensure = getattr(self._embedder, "ensure_dimensions", None)
            if callable(ensure):
                await ensure()
            assert self._kb_factory is not None
            self._attach(self._kb_factory(self._embedder))
        if not self._schema_ready:
            await self.kb.ensure_ready()
            await self.store.ensure_schema(self.kb.embedder.dimensions)
            self._schema_ready = True

    async def ready(self) -> IndexReport:
        """Create indexes and index the staged sources (idempotent; every operation calls it).

        Returns what this call indexed (an empty report once nothing is staged).
        """
        async with self._lock:
            await self._ensure_schema()
            if not self._staged or not self.managed:
                return IndexReport()
            staged, self._staged = self._staged, []
            try:
                report = await self._index_sources(staged)
            except BaseException:
                self._staged = staged + self._staged
                raise
            self.last_report = report
            return report

    async def aclose(self) -> None:
        """Close the knowledge base's connections (or the retriever's ``aclose``, when it has one)."""
        if self.retriever is not None:
            aclose = getattr(self.retriever, "aclose", None)
            if callable(aclose):
                await aclose()
            return
        if self._kb is not None:
            await self._kb.aclose()

    async def __aenter__(self) -> Knowledge:
        await self.ready()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def save(self, path: str | None = None) -> str:
        """Persist a ``memory://`` knowledge base and its passages (``<path>.passages.json``)."""
        target = Path(self._save_kb(path))
        save = getattr(self.store, "save", None)
        if save is not None:
            save(target.with_name(target.name + ".passages.json"))
        return str(target)

    def _save_kb(self, path: str | None) -> str:
        self._require_managed("save")
        save = getattr(self.kb.store, "save", None)
        if save is None:
            raise ConfigError(f"{self.kb.uri} persists on its own; save() is for memory:// stores.")
        return str(save(path))

    # -- writes ---------------------------------------------------------------
    async def _index_sources(
        self,
        sources: Sequence[Source],
        progress: Progress | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> IndexReport:
        if self.vector_index is not None:
            items, report = await self.vector_index.load(sources, metadata)
            report += await self.vector_index.index(items)
            return report
        docs, errors = await load_sources(self.loader, sources)
        docs = with_metadata(docs, metadata)  # added to each document's own metadata (ids hash source and text)
        matcher = await build_matcher(self.store, self.kb.schema)
        report = await self.indexer.index(docs, matcher, progress)
        if report.deleted:
            self.invalidate_entities()
        report.errors[:0] = errors
        return report

    async def add(
        self,
        sources: Source | Iterable[Source],
        *,
        metadata: Mapping[str, Any] | None = None,
        progress: Progress | None = None,
    ) -> IndexReport:
        """Load and index ``sources`` now; return what was indexed (load failures in ``errors``).

        A file or URL whose content changed replaces its older version; text and
        ``Document`` sources are kept per content (same text twice is skipped).
        ``metadata`` is added to every loaded document's metadata (filterable).
        ``progress(done, total)`` reports written documents as indexing goes.
        """
        self._require_managed("add")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidInputError(f"add() metadata must be a dict, got {type(metadata).__name__}.")
        items = as_sources(sources)
        for item in items:
            origin_of(item)  # type check before anything is written
        await self.ready()
        async with self._lock:
            self._sources.extend(items)
            return await self._index_sources(items, progress, metadata)

    async def add_text(
        self, text: str, *, source: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> IndexReport:
        """Index one text now (``metadata`` is filterable; ``source`` labels it in results, ``"text"`` when None)."""
        self._require_managed("add_text")
        if not isinstance(text, str) or not text.strip():
            raise InvalidInputError("add_text() needs a non-empty str.")
        label = "text" if source is None else source
        doc = Document.from_text(text, source=label, metadata=dict(metadata or {}))
        await self.ready()
        async with self._lock:
            item = LoadedDocument(doc, label, "text" if source is None else "document")
            if self.vector_index is not None:
                return await self.vector_index.index([item])
            matcher = await build_matcher(self.store, self.kb.schema)
            return await self.indexer.index([item], matcher)

    @overload
    async def upsert(  # type: ignore[overload-overlap]  # documents only: a report
        self, items: Document | Sequence[Document], *, link: bool = True
    ) -> IndexReport: ...

    @overload
    async def upsert(
        self, items: Iterable[Entity | Relation | Document] | Entity | Relation, *, link: bool = True
    ) -> dict[str, int]: ...

    async def upsert(
        self, items: Iterable[Entity | Relation | Document] | Entity | Relation | Document, *, link: bool = True
    ) -> IndexReport | dict[str, int]:
        """Index ``Document``s (an :class:`IndexReport`), or upsert entities and relations (a dict of counts).

        A ``Document`` replaces the stored documents with the same non-empty ``source``
        (``report.deleted`` counts them); the same document twice is skipped. Entities and
        relations go to the knowledge base; with ``link=True`` the stored chunks are scanned
        for the upserted entities' names and linked with ``MENTIONS`` (``result["mentions"]``).
        A batch mixing both returns the dict, with ``documents``, ``chunks``, ``skipped`` and
        ``replaced`` for its documents.
        """
        self._require_managed("upsert")
        batch = [items] if isinstance(items, Entity | Relation | Document) else list(items)
        documents = [item for item in batch if isinstance(item, Document)]
        models = [item for item in batch if not isinstance(item, Document)]
        if models and self.vector_index is not None:
            raise UnsupportedKnowledgeOperationError(
                f"knowledge '{self.name}' indexes passages into a VectorStore; entities and relations need a "
                "graph backend (create_knowledge('memory'), 'sqlite' or 'neo4j')."
            )
        await self.ready()
        async with self._lock:
            result: dict[str, int] = {}
            if models:
                result.update(await self.kb.upsert(models))
                self.fact_finder.invalidate()
                if link:
                    entities, _ = self.kb.records(models)
                    matcher = EntityMatcher((e.id, e.label, names_of(e)) for e in entities)
                    result["mentions"] = await self.indexer.relink(matcher)
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
        matcher = await build_matcher(self.store, self.kb.schema)
        report = await self.indexer.index(items, matcher)
        stale = await stale_versions(self.store, items)
        if stale:
            report.deleted += await self.store.delete_documents([d.id for d in stale])
        if report.deleted:
            self._retracted()
        return report

    async def delete(
        self,
        refs: str | Entity | Relation | Iterable[str | Entity | Relation] | None = None,
        *,
        ids: Iterable[str] | None = None,
        document_ids: Iterable[str] | None = None,
        where: Mapping[str, Any] | None = None,
        sources: Iterable[str] | None = None,
    ) -> int:
        """Delete what any selector names: chunk/document ids, sources, a metadata filter, entities, relations.

        ``refs`` and ``ids`` are sorted by their form (``chk_``: chunk, ``doc_``: document,
        ``e_``/``r_``: graph ids, else a source); ``document_ids``, ``sources`` and ``where``
        (a metadata filter, as in search) say what they are. On a graph backend documents
        are the unit, so a chunk id or a ``where`` match deletes the whole documents they
        belong to; the count is of documents, entities and relations. Knowledge over a
        ``VectorStore`` deletes chunks and counts them.

        A deleted document takes its chunks and their MENTIONS with it, and its chunks leave the
        provenance of every entity and relation: those left without provenance that were never
        upserted directly (extracted only from it) are deleted too; the others are kept.
        """
        self._require_managed("delete")
        if where is not None:
            validate_filter(where)
        items: list[str | Entity | Relation] = (
            [] if refs is None else [refs] if isinstance(refs, str | Entity | Relation) else list(refs)
        )
        items.extend([ids] if isinstance(ids, str) else list(ids or ()))
        doc_ids = [document_ids] if isinstance(document_ids, str) else list(document_ids or ())
        named_sources = [sources] if isinstance(sources, str) else [str(s) for s in sources or ()]
        graph_ids, chunk_ids = sort_refs(items, doc_ids, named_sources, chunks_only=self.vector_index is not None)
        await self.ready()
        async with self._lock:
            if self.vector_index is not None:
                if graph_ids:
                    raise InvalidInputError("knowledge over a VectorStore holds no entities or relations to delete.")
                return await self.vector_index.delete(
                    ids=chunk_ids, document_ids=doc_ids, where=where, sources=named_sources
                )
            if named_sources:
                keys = source_keys(named_sources)
                self._sources = [s for s in self._sources if not (isinstance(s, str | Path) and str(s) in keys)]
            doc_ids.extend(
                await documents_matching(self.store, chunk_ids=chunk_ids, sources=named_sources, where=where)
            )
            deleted = await self.store.delete_documents(list(dict.fromkeys(doc_ids))) if doc_ids else 0
            if deleted:
                self._retracted()
            if graph_ids:
                deleted += await self.kb.delete(graph_ids)
                self.fact_finder.invalidate()
            return deleted

    async def refresh(
        self,
        sources: Source | Iterable[Source] | None = None,
        *,
        metadata: Mapping[str, Any] | None = None,
        delete_missing: bool = False,
    ) -> IndexReport:
        """Re-index a desired set of sources; with ``delete_missing=True`` remove every source not in it.

        Unchanged documents are skipped (ids hash source and text), a changed file, URL or
        ``Document`` source replaces its earlier version, and ``metadata`` is added to each
        loaded document. Use ``delete_missing=True`` only when ``sources`` is the complete
        corpus of this knowledge: stored sources omitted from the call are deleted (nothing
        is deleted when a source fails to load). Without ``sources`` the file and directory
        sources already stored are re-loaded (files gone: deleted with ``delete_missing``,
        else reported in ``errors``); URLs are not re-fetched then.
        """
        self._require_managed("refresh")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidInputError(f"refresh() metadata must be a dict, got {type(metadata).__name__}.")
        wanted = None if sources is None else as_sources(sources)
        for item in wanted or ():
            origin_of(item)
        await self.ready()
        async with self._lock:
            if wanted is None:
                wanted = [s for s in self._sources if isinstance(s, str | Path)]
                if self.vector_index is None:
                    matcher = await build_matcher(self.store, self.kb.schema)
                    report = await refresh_stored(self.store, self.indexer, self.loader, matcher, delete_missing)
                    if report.deleted:
                        self._retracted()
                    return report
            if self.vector_index is not None:
                report = await self.vector_index.refresh(wanted, metadata, delete_missing)
            else:
                loaded, errors = await load_sources(self.loader, wanted)
                matcher = await build_matcher(self.store, self.kb.schema)
                report = await refresh_desired(
                    self.store,
                    self.indexer,
                    matcher,
                    with_metadata(loaded, metadata),
                    IndexReport(errors=list(errors)),
                    delete_missing,
                )
                if report.deleted:
                    self._retracted()
            self._sources = list(wanted) if delete_missing else [*self._sources, *wanted]
            return report

    async def sync_sources(
        self,
        sources: Source | Iterable[Source] | None = None,
        *,
        metadata: Mapping[str, Any] | None = None,
        delete_missing: bool = False,
    ) -> IndexReport:
        """Another name of :meth:`refresh`."""
        return await self.refresh(sources, metadata=metadata, delete_missing=delete_missing)

    def _retracted(self) -> None:
        # deleted documents retract provenance: extracted entities and relations may be gone
        self.kb.revision += 1
        self.invalidate_entities()

    def invalidate_entities(self) -> None:
        """Forget the cached entity names (call after changing entities through the KnowledgeBase directly)."""
        if self._fact_finder is not None:
            self._fact_finder.invalidate()

    # -- reads ----------------------------------------------------------------
    async def documents(self) -> list[DocumentRecord]:
        """Stored documents (``DocumentRecord``), sorted by id."""
        self._require_managed("documents")
        await self.ready()
        return await self.store.list_documents()

    async def counts(self) -> dict[str, int]:
        """Entity/relation counts of the knowledge base plus ``documents``, ``chunks``, ``mentions``."""
        self._require_managed("counts")
        await self.ready()
        if self.vector_index is not None:
            return {"sources": len(await self.vector_index.store.list_sources())}
        return {**await self.kb.counts(), **await self.store.counts()}

    def scope(self, where: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
        """The filter a search with ``where`` runs under: the configured scope AND ``where``."""
        validate_filter(where)
        if self.where and where:
            return {"$and": [self.where, dict(where)]}
        if self.where:
            return dict(self.where)
        return dict(where) if where else None

    def _retriever_scope(self, where: Mapping[str, Any] | None) -> dict[str, Any] | None:
        # an external retriever gets one flat filter: the configured keys win over the per-search ones
        validate_filter(where)
        merged = {**dict(where or {}), **(self.where or {})}
        return merged or None

    async def search(
        self,
        query: str,
        k: int | None = None,
        where: Mapping[str, Any] | None = None,
        *,
        mode: SearchMode | None = None,
        candidates: int | None = None,
    ) -> list[SearchHit]:
        """Facts (up to ``k``) then passages (up to ``k``) relevant to ``query``; ``k`` defaults to ``default_k``.

        ``where`` filters passages by metadata within the configured scope;
        ``mode`` overrides the configured passage ranking for this call.
        ``candidates=N`` makes passage vector search approximate on Neo4j: the ``N`` best chunks
        of an IVF index over the chunk matrix beside the driver (or of Neo4j's HNSW index with
        ``approximate="hnsw"``), scored exactly; with ``where`` the filtered chunks are searched
        exactly. The memory store is always exact. Every hit
        carries its 1-based ``rank`` in the returned list. Retrieval-only knowledge
        returns the retriever's (reranked) hits, with the scope's keys overriding
        the same keys of ``where``.
        """
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError("search() needs a non-empty query string.")
        k = self.default_k if k is None else k
        check_k(k, minimum=0)
        if self.vector_index is not None:  # kag's filters reach the store: the scope is ANDed, as on a graph
            await self.ready()
            return _ranked(await self._retrieve_external(query, k, self.scope(where)))
        if self.retriever is not None:
            hits = await self._retrieve_external(query, k, self._retriever_scope(where))
            return _ranked(hits)
        mode = self.mode if mode is None else mode
        _check_mode(mode)
        scope = self.scope(where)
        await self.ready()
        if k == 0 or not _HAS_WORD.search(query):
            return []  # a query without any word matches nothing
        need_vector = mode != "keyword" or self.mmr_lambda is not None or self.facts
        qvec = await embed_query(self.kb.embedder, query) if need_vector else None
        if self.reranker is not None:
            pool = await self._passages(query, qvec, max(self.fetch_k, k), scope, mode, candidates)
            passages = await rerank_hits(self.reranker, query, pool, k)
        else:
            passages = await self._passages(query, qvec, k, scope, mode, candidates)
        facts = await self.fact_finder.find(query, qvec, k, scope) if self.facts else []
        return _ranked(facts + passages)

    async def retrieve(
        self, query: str, *, k: int | None = None, where: Mapping[str, Any] | None = None
    ) -> list[SearchHit]:
        """Another name of :meth:`search`, so a ``Knowledge`` is itself a retriever."""
        return await self.search(query, k=k, where=where)

    async def _retrieve_external(self, query: str, k: int, where: dict[str, Any] | None) -> list[SearchHit]:
        if k == 0:
            return []
        want = max(self.fetch_k, k) if self.reranker is not None else k
        hits = await call_retriever(self.retriever.retrieve, query, want, where)
        if self.score_threshold > 0:
            hits = [h for h in hits if h.score >= self.score_threshold]
        if self.reranker is not None:
            hits = await rerank_hits(self.reranker, query, hits, k)
        return hits[:k]

    async def _passages(
        self,
        query: str,
        qvec: np.ndarray | None,
        k: int,
        scope: dict[str, Any] | None,
        mode: str,
        candidates: int | None = None,
    ) -> list[SearchHit]:
        ranking = PassageRanking(
            mode=mode,
            alpha=self.alpha,
            fetch_k=self.fetch_k,
            mmr_lambda=self.mmr_lambda,
            score_threshold=self.score_threshold,
        )
        return await rank_passages(self.store, ranking, query, qvec, k, scope, candidates)

    # -- tools and answers ----------------------------------------------------
    async def context(self, query: str, k: int | None = None, where: Mapping[str, Any] | None = None) -> str:
        """The search results as labelled text (``[name:1]`` ...), bounded by ``context_max_chars``."""
        hits = await self.search(query, k=k, where=where)
        return render_context(self.name, query, hits, self.context_max_chars).text

    def as_tool(
        self, *, name: str | None = None, description: str | None = None, max_k: int = 20, strict: bool = True
    ) -> KnowledgeTool:
        """A function-calling tool ``search_<name>(query, k, where)`` returning labelled, bounded text.

        See :class:`kag.knowledge.tool.KnowledgeTool` (``strict=True``: ``where`` is JSON text).
        """
        return KnowledgeTool(self, name=name, description=description, max_k=max_k, strict=strict)

    async def ask(
        self,
        question: str,
        *,
        language_model: LanguageModel,
        mode: AnswerMode = "auto",
        answer_model: type[BaseModel] | None = None,
        k: int = 5,
        where: Mapping[str, Any] | None = None,
        instructions: str | None = None,
    ) -> RAGAnswer:
        """Answer ``question`` with ``language_model``, grounded on this knowledge.

        See :func:`kag.knowledge.answer.ask` for the modes and the output.
        """
        return await ask(
            self,
            question,
            language_model=language_model,
            mode=mode,
            answer_model=answer_model,
            k=k,
            where=where,
            instructions=instructions,
        )


def _check_mode(mode: Any) -> None:
    if mode not in MODES:
        raise InvalidInputError(f"mode must be one of {', '.join(MODES)}; got {mode!r}.")


def _memory_knowledge_base(embedder: Embedder | None) -> KnowledgeBase:
    return KnowledgeBase("memory://", embedder=embedder)


def _dimensions_known(embedder: Any) -> bool:
    try:
        embedder.dimensions  # noqa: B018  (a property that raises while unknown)
    except AttributeError:
        return False
    return True


def _ranked(hits: Sequence[SearchHit]) -> list[SearchHit]:
    return [dataclasses.replace(hit, rank=i) for i, hit in enumerate(hits, start=1)]


class KnowledgeSync(SyncFacade[Knowledge]):
    """``knowledge.sync``: every coroutine method of :class:`Knowledge`, blocking."""

    ready = blocking(Knowledge.ready)
    aclose = blocking(Knowledge.aclose)
    add = blocking(Knowledge.add)
    add_text = blocking(Knowledge.add_text)
    upsert = blocking(Knowledge.upsert)
    delete = blocking(Knowledge.delete)
    refresh = blocking(Knowledge.refresh)
    sync_sources = blocking(Knowledge.sync_sources)
    documents = blocking(Knowledge.documents)
    counts = blocking(Knowledge.counts)
    search = blocking(Knowledge.search)
    retrieve = blocking(Knowledge.retrieve)
    context = blocking(Knowledge.context)
    ask = blocking(Knowledge.ask)
