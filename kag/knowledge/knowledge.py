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
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from kag._sync import SyncFacade, blocking
from kag.datamodels.base import Entity, Relation
from kag.datamodels.documents import Document
from kag.errors import ConfigError, InvalidInputError
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
from kag.knowledge.tool import KnowledgeTool, render_context
from kag.query.filters import validate_filter
from kag.rag.loaders import AutoLoader, Source
from kag.rag.splitter import RecursiveCharacterSplitter
from kag.ranking.fusion import hybrid_scores, min_max_normalize, mmr
from kag.validation import check_finite, check_k, check_threshold

if TYPE_CHECKING:
    from pydantic import BaseModel

    from kag.lm.base import LanguageModel

__all__ = ["Knowledge", "SearchMode"]

SearchMode = Literal["hybrid", "vector", "keyword"]
MODES: tuple[str, ...] = ("hybrid", "vector", "keyword")
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,57}$")
_HAS_WORD = re.compile(r"\w", re.UNICODE)


class Knowledge:
    """Facts and passages of a :class:`KnowledgeBase`, behind one search (see the module docstring).

    Args:
        knowledge_base: the schema, store and embedder to use.
        name: identifies the knowledge in tool names (``search_<name>``) and labels (``[name:1]``).
        description: what the knowledge holds (shown to language models).
        sources: files, directories, URLs, text, bytes or Documents, indexed lazily
            on the first :meth:`ready` / :meth:`search`.
        splitter: chunking (default ``RecursiveCharacterSplitter(1000, 150)``).
        loader: source loading (default ``AutoLoader()``).
        where: a metadata filter every search is confined to.
        context_max_chars: bound of the text rendered for tools and answers.
        mode: passage ranking, ``"hybrid"``, ``"vector"`` or ``"keyword"``.
        alpha: weight of the vector score in hybrid mode.
        mmr_lambda: when set, re-rank the top ``fetch_k`` with MMR (1.0 = relevance only).
        fetch_k: candidates fetched per side before fusion / MMR.
        score_threshold: drop hits scoring below it (keyword mode: raw keyword scores).
        facts: include facts from the typed graph in search results.
        passage_store: override where passages are kept (default: next to the graph store).
    """

    def __init__(
        self,
        knowledge_base: KnowledgeBase,
        *,
        name: str = "knowledge",
        description: str = "",
        sources: Source | Iterable[Source] | None = None,
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
    ) -> None:
        if not isinstance(knowledge_base, KnowledgeBase):
            raise ConfigError(f"Knowledge needs a KnowledgeBase, got {type(knowledge_base).__name__}.")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ConfigError(f"knowledge name {name!r} must match ^[A-Za-z0-9_-]{{1,57}}$ (it becomes a tool name).")
        _check_mode(mode)
        check_threshold(alpha, name="alpha", error=ConfigError)
        if mmr_lambda is not None:
            check_threshold(mmr_lambda, name="mmr_lambda", error=ConfigError)
        check_k(fetch_k, name="fetch_k", error=ConfigError)
        check_k(context_max_chars, name="context_max_chars", minimum=800, maximum=10_000_000, error=ConfigError)
        check_finite(score_threshold, name="score_threshold", error=ConfigError)
        try:
            validate_filter(where)
        except InvalidInputError as exc:
            raise ConfigError(f"invalid knowledge scope `where`: {exc}") from exc
        self.kb = knowledge_base
        self.name = name
        self.description = description
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
        self.store: PassageStore = passage_store if passage_store is not None else passage_store_for(self.kb.store)
        self.indexer = PassageIndexer(self.kb, self.store, self.splitter)
        self._staged: list[Source] = as_sources(sources)
        self._sources: list[Source] = list(self._staged)
        self._lock = asyncio.Lock()
        self._schema_ready = False
        self.fact_finder = FactFinder(self.kb, self.store, fetch_k=fetch_k, score_threshold=self.score_threshold)
        self._sync: KnowledgeSync | None = None
        self.last_report: IndexReport | None = None

    def __repr__(self) -> str:
        return f"Knowledge(name={self.name!r}, uri={self.kb.uri!r}, mode={self.mode!r})"

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
            if not self._staged:
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
        """Close the knowledge base's connections."""
        await self.kb.aclose()

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
        save = getattr(self.kb.store, "save", None)
        if save is None:
            raise ConfigError(f"{self.kb.uri} persists on its own; save() is for memory:// stores.")
        return str(save(path))

    # -- writes ---------------------------------------------------------------
    async def _index_sources(self, sources: Sequence[Source], progress: Progress | None = None) -> IndexReport:
        docs, errors = await load_sources(self.loader, sources)
        matcher = await build_matcher(self.store, self.kb.schema)
        report = await self.indexer.index(docs, matcher, progress)
        report.errors[:0] = errors
        return report

    async def add(self, sources: Source | Iterable[Source], *, progress: Progress | None = None) -> IndexReport:
        """Load and index ``sources`` now; return what was indexed (load failures in ``errors``).

        A file or URL whose content changed replaces its older version; text and
        ``Document`` sources are kept per content (same text twice is skipped).
        ``progress(done, total)`` reports written documents as indexing goes.
        """
        items = as_sources(sources)
        for item in items:
            origin_of(item)  # type check before anything is written
        await self.ready()
        async with self._lock:
            self._sources.extend(items)
            return await self._index_sources(items, progress)

    async def add_text(
        self, text: str, *, source: str = "text", metadata: Mapping[str, Any] | None = None
    ) -> IndexReport:
        """Index one text now (``metadata`` is filterable; ``source`` labels it in results)."""
        if not isinstance(text, str) or not text.strip():
            raise InvalidInputError("add_text() needs a non-empty str.")
        doc = Document.from_text(text, source=source, metadata=dict(metadata or {}))
        await self.ready()
        async with self._lock:
            matcher = await build_matcher(self.store, self.kb.schema)
            return await self.indexer.index([LoadedDocument(doc, source, "text")], matcher)

    async def upsert(
        self, items: Iterable[Entity | Relation] | Entity | Relation, *, link: bool = True
    ) -> dict[str, int]:
        """Upsert entities and relations into the knowledge base.

        With ``link=True`` the stored chunks are scanned for the upserted entities'
        names and linked with ``MENTIONS`` (``result["mentions"]`` counts the links).
        """
        batch = [items] if isinstance(items, Entity | Relation) else list(items)
        await self.ready()
        async with self._lock:
            result = dict(await self.kb.upsert(batch))
            self.fact_finder.invalidate()
            if link:
                entities, _ = self.kb.records(batch)
                matcher = EntityMatcher((e.id, e.label, names_of(e)) for e in entities)
                result["mentions"] = await self.indexer.relink(matcher)
            return result

    async def delete(self, refs: str | Entity | Relation | Iterable[str | Entity | Relation]) -> int:
        """Delete documents (by id ``doc_...``, source or added path/URL) and entities or relations.

        Returns how many documents, entities and relations existed.
        """
        items: list[str | Entity | Relation] = [refs] if isinstance(refs, str | Entity | Relation) else list(refs)
        await self.ready()
        async with self._lock:
            graph_ids: list[str] = []
            doc_ids: list[str] = []
            sources: list[str] = []
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
                    sources.append(item)
            if sources:
                keys = set(sources)
                for s in sources:
                    with contextlib.suppress(OSError, ValueError, RuntimeError):
                        keys.add(str(Path(s).expanduser().resolve()))
                listed = await self.store.list_documents(sources=sorted(keys))
                listed += await self.store.list_documents(origins=sorted(keys))
                doc_ids.extend(d.id for d in listed)
                self._sources = [s for s in self._sources if not (isinstance(s, str | Path) and str(s) in keys)]
            deleted = await self.store.delete_documents(list(dict.fromkeys(doc_ids))) if doc_ids else 0
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
            return report

    def invalidate_entities(self) -> None:
        """Forget the cached entity names (call after changing entities through the KnowledgeBase directly)."""
        self.fact_finder.invalidate()

    # -- reads ----------------------------------------------------------------
    async def documents(self) -> list[DocumentRecord]:
        """Stored documents (``DocumentRecord``), sorted by id."""
        await self.ready()
        return await self.store.list_documents()

    async def counts(self) -> dict[str, int]:
        """Entity/relation counts of the knowledge base plus ``documents``, ``chunks``, ``mentions``."""
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

    async def search(
        self,
        query: str,
        k: int = 5,
        where: Mapping[str, Any] | None = None,
        *,
        mode: SearchMode | None = None,
    ) -> list[SearchHit]:
        """Facts (up to ``k``) then passages (up to ``k``) relevant to ``query``.

        ``where`` filters passages by metadata within the configured scope;
        ``mode`` overrides the configured passage ranking for this call.
        """
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError("search() needs a non-empty query string.")
        check_k(k, minimum=0)
        mode = self.mode if mode is None else mode
        _check_mode(mode)
        scope = self.scope(where)
        await self.ready()
        if k == 0 or not _HAS_WORD.search(query):
            return []  # a query without any word matches nothing
        need_vector = mode != "keyword" or self.mmr_lambda is not None or self.facts
        qvec = (await self.kb.embed([query]))[0] if need_vector else None
        passages = await self._passages(query, qvec, k, scope, mode)
        facts = await self.fact_finder.find(query, qvec, k, scope) if self.facts else []
        return facts + passages

    async def _passages(
        self, query: str, qvec: np.ndarray | None, k: int, scope: dict[str, Any] | None, mode: str
    ) -> list[SearchHit]:
        fetch = max(self.fetch_k, k)
        want = fetch if self.mmr_lambda is not None else k
        if mode == "vector":
            assert qvec is not None
            rows = await self.store.vector_search(qvec, want, scope)
            scored = [(r, r.score) for r in rows]
        elif mode == "keyword":
            rows = await self.store.keyword_search(query, want, scope)
            scored = [(r, r.score) for r in rows]
        else:
            assert qvec is not None
            vrows = await self.store.vector_search(qvec, fetch, scope)
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
    async def context(self, query: str, k: int = 5, where: Mapping[str, Any] | None = None) -> str:
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
    documents = blocking(Knowledge.documents)
    counts = blocking(Knowledge.counts)
    search = blocking(Knowledge.search)
    context = blocking(Knowledge.context)
    ask = blocking(Knowledge.ask)
