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

This module is the facade: it checks arguments and says which kind of knowledge may do what.
The work is done in :mod:`kag.knowledge.backing` (what the knowledge is over, option checks),
:mod:`kag.knowledge.managed` (parts, readiness, writes, the graph search),
:mod:`kag.knowledge.retrieval_only` (search through a retriever) and
:mod:`kag.knowledge.passage_search` (passage ranking).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, overload

from kag._sync import SyncFacade, blocking
from kag.datamodels.base import Entity, Relation
from kag.datamodels.documents import Document
from kag.errors import ConfigError, InvalidInputError, UnsupportedKnowledgeOperationError
from kag.graph.passages import DocumentRecord, PassageStore
from kag.knowledge.answer import AnswerMode, RAGAnswer, ask
from kag.knowledge.backing import (
    KnowledgeBaseFactory,
    SearchMode,
    check_mode,
    check_options,
    default_loader,
    default_splitter,
    resolve_backing,
)
from kag.knowledge.base import KnowledgeBase
from kag.knowledge.facts import FactFinder
from kag.knowledge.hits import SearchHit
from kag.knowledge.indexing import IndexReport, LoadedDocument, PassageIndexer, Progress, as_sources, origin_of
from kag.knowledge.lifecycle import sort_refs
from kag.knowledge.managed import ManagedIndex
from kag.knowledge.passage_search import PassageRanking
from kag.knowledge.rerank import Reranker
from kag.knowledge.retrieval_only import not_managed, refuse_indexing_options, retrieve, retriever_scope
from kag.knowledge.retrievers import CallableRetriever, Retriever
from kag.knowledge.tool import KnowledgeTool, render_context, tool_name_for
from kag.knowledge.vector_index import VectorIndex
from kag.query.filters import validate_filter
from kag.rag.loaders import AutoLoader, Source
from kag.rag.splitter import RecursiveCharacterSplitter
from kag.validation import check_k

if TYPE_CHECKING:
    from pydantic import BaseModel

    from kag.lm.base import LanguageModel

__all__ = ["Knowledge", "KnowledgeBaseFactory", "SearchMode"]

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
        backing = resolve_backing(
            knowledge_base,
            store=store,
            embedder=embedder,
            splitter=splitter,
            loader=loader,
            passage_store=passage_store,
            knowledge_base_factory=knowledge_base_factory,
        )
        check_options(
            name=name,
            mode=mode,
            alpha=alpha,
            mmr_lambda=mmr_lambda,
            fetch_k=fetch_k,
            default_k=default_k,
            context_max_chars=context_max_chars,
            score_threshold=score_threshold,
            reranker=reranker,
            where=where,
            sources=sources,
            pending_sources=pending_sources,
        )
        staged = sources if sources is not None else pending_sources
        if backing.retriever is not None and backing.vector_index is None:
            given = {"sources": staged, "embedder": embedder, "splitter": splitter, "loader": loader}
            refuse_indexing_options({**given, "passage_store": passage_store})
        self.retriever: Any = backing.retriever
        self.vector_index: VectorIndex | None = backing.vector_index
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
        self._sync: KnowledgeSync | None = None
        self._index = ManagedIndex(
            backing,
            splitter=default_splitter(splitter),
            loader=default_loader(loader),
            passage_store=passage_store,
            fetch_k=fetch_k,
            score_threshold=self.score_threshold,
            sources=as_sources(staged),
        )

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
            raise not_managed(self.name, self.retriever, operation)

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
        kb: KnowledgeBase = self._part(self._index.kb, "kb")
        return kb

    @property
    def store(self) -> PassageStore:
        """Where passages are kept (managed knowledge only)."""
        store: PassageStore = self._part(self._index.store, "store")
        return store

    @property
    def indexer(self) -> PassageIndexer:
        """Splits, embeds and writes documents (managed knowledge only)."""
        indexer: PassageIndexer = self._part(self._index.indexer, "indexer")
        return indexer

    @property
    def fact_finder(self) -> FactFinder:
        """Finds facts of the typed graph for a query (managed knowledge only)."""
        finder: FactFinder = self._part(self._index.fact_finder, "fact_finder")
        return finder

    def __repr__(self) -> str:
        if self.retriever is not None:
            return f"Knowledge(name={self.name!r}, retriever={self.retriever!r})"
        uri = self._index.kb.uri if self._index.kb is not None else "memory:// (pending)"
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
        return list(self._index.sources)

    @property
    def splitter(self) -> RecursiveCharacterSplitter:
        """How documents are chunked."""
        return self._index.splitter

    @property
    def loader(self) -> AutoLoader:
        """How sources are loaded (settable: used by the next load)."""
        return self._index.loader

    @loader.setter
    def loader(self, loader: AutoLoader) -> None:
        self._index.loader = loader

    @property
    def last_report(self) -> IndexReport | None:
        """What the last :meth:`ready` indexed (``None`` before)."""
        return self._index.last_report

    async def _ensure_schema(self) -> None:
        await self._index.ensure_schema()

    async def ready(self) -> IndexReport:
        """Create indexes and index the staged sources (idempotent; every operation calls it).

        Returns what this call indexed (an empty report once nothing is staged).
        """
        return await self._index.ready(self.managed)

    async def aclose(self) -> None:
        """Close the knowledge base's connections (or the retriever's ``aclose``, when it has one)."""
        if self.retriever is not None:
            aclose = getattr(self.retriever, "aclose", None)
            if callable(aclose):
                await aclose()
            return
        if self._index.kb is not None:
            await self._index.kb.aclose()

    async def __aenter__(self) -> Knowledge:
        await self.ready()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def save(self, path: str | None = None) -> str:
        """Persist a ``memory://`` knowledge base and its passages (``<path>.passages.json``)."""
        self._require_managed("save")
        self._part(self._index.kb, "kb")  # a VectorStore, or parts not built yet: say what to do
        return self._index.save(path)

    # -- writes ---------------------------------------------------------------
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
        return await self._index.add(items, metadata, progress)

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
        return await self._index.add_text(LoadedDocument(doc, label, "text" if source is None else "document"))

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
        return await self._index.upsert(documents, models, link)

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
        return await self._index.delete(graph_ids, chunk_ids, doc_ids, named_sources, where)

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
        return await self._index.refresh(wanted, metadata, delete_missing)

    async def sync_sources(
        self,
        sources: Source | Iterable[Source] | None = None,
        *,
        metadata: Mapping[str, Any] | None = None,
        delete_missing: bool = False,
    ) -> IndexReport:
        """Another name of :meth:`refresh`."""
        return await self.refresh(sources, metadata=metadata, delete_missing=delete_missing)

    def invalidate_entities(self) -> None:
        """Forget the cached entity names (call after changing entities through the KnowledgeBase directly)."""
        self._index.invalidate_entities()

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
        if self.vector_index is not None:  # a VectorStore counts its sources
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
            return _ranked(await self._retrieve(query, k, self.scope(where)))
        if self.retriever is not None:
            return _ranked(await self._retrieve(query, k, retriever_scope(self.where, where)))
        mode = self.mode if mode is None else mode
        check_mode(mode)
        scope = self.scope(where)
        await self.ready()
        if k == 0 or not _HAS_WORD.search(query):
            return []  # a query without any word matches nothing
        ranking = PassageRanking(
            mode=mode,
            alpha=self.alpha,
            fetch_k=self.fetch_k,
            mmr_lambda=self.mmr_lambda,
            score_threshold=self.score_threshold,
        )
        hits = await self._index.search(
            query, k, scope, ranking, reranker=self.reranker, facts=self.facts, candidates=candidates
        )
        return _ranked(hits)

    async def retrieve(
        self, query: str, *, k: int | None = None, where: Mapping[str, Any] | None = None
    ) -> list[SearchHit]:
        """Another name of :meth:`search`, so a ``Knowledge`` is itself a retriever."""
        return await self.search(query, k=k, where=where)

    async def _retrieve(self, query: str, k: int, where: dict[str, Any] | None) -> list[SearchHit]:
        return await retrieve(
            self.retriever,
            query,
            k,
            where,
            fetch_k=self.fetch_k,
            score_threshold=self.score_threshold,
            reranker=self.reranker,
        )

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
