"""``Knowledge``: typed facts and document passages of one knowledge base, searched together.

>>> knowledge = kag.create_knowledge(name="docs", description="Product docs", sources=["docs/"])
>>> hits = await knowledge.search("how do I rotate the API key?", k=5)
>>> [h.kind for h in hits]          # facts first (typed graph), then passages (chunks)

A search returns

* **facts**: entities named in the query (whole-word matches of their key text
  or aliases) and their relations, from the knowledge base's triplet search,
  ranked by the similarity of the fact to the query;
* **passages**: chunks ranked by ``mode`` — ``"vector"`` (exact cosine, the same
  on every backend), ``"keyword"`` (BM25 on memory, Lucene fulltext on Neo4j:
  scores differ between backends) or ``"hybrid"`` (``alpha * vector + (1 - alpha)
  * keyword / max(keyword)`` over the union of both top-``fetch_k`` lists, with
  the exact vector score of every candidate), optionally diversified with MMR
  (``mmr_lambda``).

A configured ``where`` scope is ANDed with every per-search filter, so a search
can narrow the scope but never widen it; under a filter, facts are limited to
entities that some in-scope chunk mentions.

``Knowledge(retriever)`` (any object with ``retrieve(query, *, k=5, where=None)``)
and :meth:`Knowledge.from_callable` (a search function) build *retrieval-only*
knowledge: search, tools and answers work, lifecycle calls (``add``, ``upsert``,
``delete``, ``refresh``...) raise :class:`~kag.errors.UnsupportedKnowledgeOperationError`.
An optional ``reranker`` reorders passages (or a retriever's hits) after retrieval.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from kag._sync import SyncFacade, blocking
from kag.datamodels.base import Entity, Relation
from kag.datamodels.documents import Document
from kag.errors import ConfigError, InvalidInputError, UnsupportedKnowledgeOperationError
from kag.graph.factory import passage_store_for
from kag.graph.passages import DocumentRecord, PassageRow, PassageStore
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
    failure,
    load_sources,
    origin_of,
)
from kag.knowledge.mentions import EntityMatcher, build_matcher, names_of
from kag.knowledge.rerank import Reranker, check_reranker, rerank_hits
from kag.knowledge.retrievers import CallableRetriever, Retriever, call_retriever
from kag.knowledge.tool import KnowledgeTool, render_context
from kag.query.filters import validate_filter
from kag.rag.embedders import Embedder, as_embedder, embed_query
from kag.rag.loaders import AutoLoader, Source
from kag.rag.splitter import RecursiveCharacterSplitter
from kag.ranking.fusion import hybrid_scores, min_max_normalize, mmr
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
        context_max_chars: bound of the text rendered for tools and answers.
        mode: passage ranking, ``"hybrid"``, ``"vector"`` or ``"keyword"``.
        alpha: weight of the vector score in hybrid mode.
        mmr_lambda: when set, re-rank the top ``fetch_k`` with MMR (1.0 = relevance only).
        fetch_k: candidates fetched per side before fusion / MMR / reranking.
        score_threshold: drop hits scoring below it (keyword mode: raw keyword scores).
        facts: include facts from the typed graph in search results.
        passage_store: override where passages are kept (default: next to the graph store).
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
        context_max_chars: int = 6000,
        mode: SearchMode = "hybrid",
        alpha: float = 0.5,
        mmr_lambda: float | None = None,
        fetch_k: int = 20,
        score_threshold: float = 0.0,
        facts: bool = True,
        passage_store: PassageStore | None = None,
        pending_sources: Source | Iterable[Source] | None = None,
        knowledge_base_factory: KnowledgeBaseFactory | None = None,
    ) -> None:
        retriever: Any = None
        if isinstance(knowledge_base, KnowledgeBase):
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
        if retriever is not None:
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
        """True when kag owns the index (a knowledge base), False for retrieval-only knowledge."""
        return self.retriever is None

    @property
    def tool_name(self) -> str:
        """The name of the search tool: ``search_<name>``."""
        return f"search_{self.name}"

    def _require_managed(self, operation: str) -> None:
        if self.retriever is not None:
            raise UnsupportedKnowledgeOperationError(
                f"knowledge '{self.name}' is retrieval-only (over {self.retriever!r}), so {operation}() is not "
                "available: manage the documents in that system, or create managed knowledge with "
                "create_knowledge('memory') or create_knowledge('neo4j')."
            )

    def _part(self, value: Any, what: str) -> Any:
        self._require_managed(what)
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
        if self.retriever is not None:
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
            if not self._staged or self.retriever is not None:
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
        docs, errors = await load_sources(self.loader, sources)
        if metadata:  # added to each loaded document's own metadata (same ids: ids hash source and text)
            docs = [
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
                for item in docs
            ]
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
        self, text: str, *, source: str = "text", metadata: Mapping[str, Any] | None = None
    ) -> IndexReport:
        """Index one text now (``metadata`` is filterable; ``source`` labels it in results)."""
        self._require_managed("add_text")
        if not isinstance(text, str) or not text.strip():
            raise InvalidInputError("add_text() needs a non-empty str.")
        doc = Document.from_text(text, source=source, metadata=dict(metadata or {}))
        await self.ready()
        async with self._lock:
            matcher = await build_matcher(self.store, self.kb.schema)
            return await self.indexer.index([LoadedDocument(doc, source, "text")], matcher)

    async def upsert(
        self, items: Iterable[Entity | Relation | Document] | Entity | Relation | Document, *, link: bool = True
    ) -> dict[str, int]:
        """Upsert entities and relations into the knowledge base, and index ``Document``s.

        With ``link=True`` the stored chunks are scanned for the upserted entities'
        names and linked with ``MENTIONS`` (``result["mentions"]`` counts the links).
        A ``Document`` replaces the stored documents with the same ``source``
        (``result["documents"]``, ``["chunks"]`` written, ``["replaced"]`` removed);
        the same document twice is skipped.
        """
        self._require_managed("upsert")
        batch = [items] if isinstance(items, Entity | Relation | Document) else list(items)
        documents = [item for item in batch if isinstance(item, Document)]
        models = [item for item in batch if not isinstance(item, Document)]
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
            if documents:
                result.update(await self._upsert_documents(documents))
            return result

    async def _upsert_documents(self, documents: Sequence[Document]) -> dict[str, int]:
        matcher = await build_matcher(self.store, self.kb.schema)
        report = await self.indexer.index([LoadedDocument(d, d.source, "document") for d in documents], matcher)
        keep = {d.id for d in documents}
        same_source = await self.store.list_documents(sources=sorted({d.source for d in documents}))
        stale = [d.id for d in same_source if d.id not in keep]
        replaced = await self.store.delete_documents(stale) if stale else 0
        if replaced or report.deleted:
            self._retracted()
        return {"documents": report.documents, "chunks": report.chunks, "skipped": report.skipped, "replaced": replaced}

    async def delete(
        self,
        refs: str | Entity | Relation | Iterable[str | Entity | Relation] | None = None,
        *,
        ids: Iterable[str] | None = None,
        document_ids: Iterable[str] | None = None,
        sources: Iterable[str] | None = None,
    ) -> int:
        """Delete documents (by id ``doc_...``, source or added path/URL) and entities or relations.

        ``refs`` and ``ids`` are sorted by their form (``doc_``: document, ``e_``/``r_``: graph
        ids, else a source); ``document_ids`` and ``sources`` say what they are. Returns how
        many documents, entities and relations existed.

        A deleted document takes its chunks and their MENTIONS with it, and its chunks leave the
        provenance of every entity and relation: those left without provenance that were never
        upserted directly (extracted only from it) are deleted too; the others are kept.
        """
        self._require_managed("delete")
        items: list[str | Entity | Relation] = (
            [] if refs is None else [refs] if isinstance(refs, str | Entity | Relation) else list(refs)
        )
        for group in (ids, document_ids):
            items.extend([group] if isinstance(group, str) else list(group or ()))
        named_sources = [sources] if isinstance(sources, str) else list(sources or ())
        await self.ready()
        async with self._lock:
            graph_ids: list[str] = []
            doc_ids: list[str] = []
            source_refs: list[str] = [str(s) for s in named_sources]
            for item in items:
                if isinstance(item, Entity | Relation):
                    graph_ids.append(item.id)
                elif not isinstance(item, str):
                    raise InvalidInputError(f"delete() takes ids, sources or models, got {type(item).__name__}.")
                elif item.startswith("doc_"):
                    doc_ids.append(item)
                elif item.startswith(("e_", "r_")):
                    graph_ids.append(item)
                else:
                    source_refs.append(item)
            if source_refs:
                keys = set(source_refs)
                for src in source_refs:
                    with contextlib.suppress(OSError, ValueError, RuntimeError):
                        keys.add(str(Path(src).expanduser().resolve()))
                listed = await self.store.list_documents(sources=sorted(keys))
                listed += await self.store.list_documents(origins=sorted(keys))
                doc_ids.extend(d.id for d in listed)
                self._sources = [s for s in self._sources if not (isinstance(s, str | Path) and str(s) in keys)]
            deleted = await self.store.delete_documents(list(dict.fromkeys(doc_ids))) if doc_ids else 0
            if deleted:
                self._retracted()
            if graph_ids:
                deleted += await self.kb.delete(graph_ids)
                self.fact_finder.invalidate()
            return deleted

    async def refresh(self, *, delete_missing: bool = False) -> IndexReport:
        """Re-load file and directory sources and re-index the documents whose content changed.

        Unchanged documents are skipped (their id is a content hash). Documents
        whose file is gone (or no longer in its directory) are deleted with
        ``delete_missing=True``, else kept and reported in ``errors``. URLs are
        not re-fetched.
        """
        self._require_managed("refresh")
        await self.ready()
        async with self._lock:
            stored = await self.store.list_documents()
            origins = sorted({d.origin for d in stored if d.origin_kind == "path"})
            matcher = await build_matcher(self.store, self.kb.schema)
            report = IndexReport()
            for origin in origins:
                mine = [d for d in stored if d.origin == origin]
                if not Path(origin).exists():
                    if delete_missing:
                        report.deleted += await self.store.delete_documents([d.id for d in mine])
                    else:
                        report.errors.append(
                            failure(origin, f"{origin} is gone; refresh(delete_missing=True) removes its documents.")
                        )
                    continue
                loaded, errors = await load_sources(self.loader, [Path(origin)])
                report.errors.extend(errors)
                report += await self.indexer.index(loaded, matcher)
                present = {item.document.source for item in loaded}
                gone = [d for d in mine if d.source not in present]
                if gone and delete_missing:
                    report.deleted += await self.store.delete_documents([d.id for d in gone])
                elif gone:
                    report.errors.extend(
                        failure(d.source, f"{d.source} is gone; refresh(delete_missing=True) removes it.") for d in gone
                    )
            if report.deleted:
                self._retracted()
            return report

    async def sync_sources(self, *, delete_missing: bool = False) -> IndexReport:
        """Another name of :meth:`refresh`."""
        return await self.refresh(delete_missing=delete_missing)

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
        ``candidates=N`` makes passage vector search approximate on Neo4j (the ``N`` nearest
        chunks from its vector index, rescored exactly; a filter applies after the index, so
        fewer hits may come back); the memory store is always exact. Every hit
        carries its 1-based ``rank`` in the returned list. Retrieval-only knowledge
        returns the retriever's (reranked) hits, with the scope's keys overriding
        the same keys of ``where``.
        """
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError("search() needs a non-empty query string.")
        k = self.default_k if k is None else k
        check_k(k, minimum=0)
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
        fetch = max(self.fetch_k, k)
        want = fetch if self.mmr_lambda is not None else k
        if mode == "vector":
            assert qvec is not None
            rows = await self.store.vector_search(qvec, want, scope, candidates=candidates)
            scored = [(r, r.score) for r in rows]
        elif mode == "keyword":
            rows = await self.store.keyword_search(query, want, scope)
            scored = [(r, r.score) for r in rows]
        else:
            assert qvec is not None
            vrows = await self.store.vector_search(qvec, fetch, scope, candidates=candidates)
            krows = await self.store.keyword_search(query, fetch, scope)
            by_id = {r.chunk_id: r for r in vrows}
            missing = [r.chunk_id for r in krows if r.chunk_id not in by_id]
            if missing:  # exact vector scores for keyword-only candidates
                by_id.update(
                    {r.chunk_id: r for r in await self.store.vector_search(qvec, len(missing), scope, missing)}
                )
            keyword = {r.chunk_id: r.score for r in krows}
            fused = hybrid_scores({cid: row.score for cid, row in by_id.items()}, keyword, alpha=self.alpha)
            scored = [(by_id[cid], s) for cid, s in fused if cid in by_id]
        scored = [(r, s) for r, s in scored if s >= self.score_threshold]
        if self.mmr_lambda is not None and len(scored) > 1:
            scored = await self._mmr(qvec, scored, k, mode)
        return [_passage_hit(r, s) for r, s in scored[:k]]

    async def _mmr(
        self, qvec: np.ndarray | None, scored: list[tuple[PassageRow, float]], k: int, mode: str
    ) -> list[tuple[PassageRow, float]]:
        assert self.mmr_lambda is not None
        vectors = await self.store.chunk_vectors([r.chunk_id for r, _ in scored])
        scored = [(r, s) for r, s in scored if r.chunk_id in vectors]
        if not scored:
            return []
        ids = [r.chunk_id for r, _ in scored]
        matrix = np.stack([vectors[i] for i in ids])
        relevance = [s for _, s in scored]
        if mode == "keyword":  # raw keyword scores: bring them to [0, 1] like the similarities
            norm = min_max_normalize(dict(zip(ids, relevance, strict=True)))
            relevance = [norm[i] for i in ids]
        picked = mmr(qvec, matrix, relevance, k=k, mmr_lambda=self.mmr_lambda, ids=ids)
        return [scored[i] for i in picked]

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


def _passage_hit(row: PassageRow, score: float) -> SearchHit:
    return SearchHit(
        kind="passage",
        text=row.text,
        score=float(score),
        source=row.source,
        ids=(row.chunk_id, row.document_id),
        metadata=dict(row.metadata),
        mentions=row.mentions,
        title=row.title,
    )


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
