"""The operations behind the CLI, the HTTP routes and the MCP tools, as one :class:`Service`.

:class:`Service` holds the knowledge base, its :class:`~kag.knowledge.knowledge.Knowledge`
facade and the language model, and implements search, triplet search, ask, ingest and
counts, returning JSON-compatible dicts. Every entry point calls the same methods, so a
bound or a check holds the same way everywhere.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pydantic

from kag._sync import LoopLock
from kag.datamodels.base import Entity, Relation
from kag.datamodels.documents import Document
from kag.datamodels.schema import ANY, GraphSchema
from kag.errors import BackendUnavailableError, ConfigError, InvalidInputError, SchemaError, UsageError
from kag.graph.factory import open_namespace
from kag.graph.memory import MemoryGraphStore
from kag.graph.neo4j import Neo4jGraphStore, write_timeout_setting
from kag.knowledge.base import KnowledgeBase
from kag.knowledge.indexing import Progress
from kag.knowledge.knowledge import Knowledge, SearchMode
from kag.lm.base import LanguageModel
from kag.programs import Generator, Input, KnowledgeExtractor, KnowledgeRetriever, Program
from kag.rag.loaders import AutoLoader, Source
from kag.rag.splitter import RecursiveCharacterSplitter
from kag.server.specs import (
    DEFAULT_SCHEMA,
    LMSpec,
    SchemaSpec,
    backend_name,
    build_language_model,
    check_kb_uri,
    check_lm_credentials,
    default_kb_uri,
    load_schema,
    parse_lm_spec,
    public_uri,
)
from kag.validation import check_int, check_k, check_threshold

__all__ = ["HEALTH_SECONDS", "MAX_REQUEST_K", "AnswerOut", "QuestionIn", "Service", "redact_params"]

MAX_REQUEST_K = 100
"""The largest ``k`` one request may ask for (the library allows up to ``kag.validation.MAX_K``)."""
HEALTH_SECONDS = 1.0
"""How long :meth:`Service.health` may take: a backend that has not answered by then is reported down."""


class QuestionIn(pydantic.BaseModel):
    """A user question (the input of the ``ask`` program)."""

    query: str = pydantic.Field(description="The user's question")


class AnswerOut(pydantic.BaseModel):
    """An answer grounded in the retrieved facts."""

    answer: str = pydantic.Field(description="The answer, using only the retrieved facts")


def _jsonable(value: Any) -> Any:
    """Params of a compiled query as JSON (numpy scalars/arrays to lists)."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    return value


def _is_vector(value: Any) -> bool:
    if hasattr(value, "shape") and hasattr(value, "tolist"):
        return True
    return isinstance(value, list | tuple) and len(value) > 8 and all(isinstance(x, float) for x in value[:8])


def redact_params(params: Mapping[str, Any], include_vectors: bool = False) -> dict[str, Any]:
    """Query params as JSON; vectors become ``"<vector: N floats>"`` unless ``include_vectors``."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        if not include_vectors and _is_vector(value):
            out[key] = f"<vector: {len(value)} floats>"
        else:
            out[key] = _jsonable(value)
    return out


@dataclass
class Service:
    """A knowledge base, its :class:`Knowledge` facade and a language model, with JSON-shaped operations.

    Build one with :meth:`open`; every method returns plain dicts/lists ready for
    JSON. A persistent ``memory://path.json`` knowledge base is saved after each
    write (see :meth:`persist`).
    """

    kb: KnowledgeBase
    knowledge: Knowledge
    lm_spec: LMSpec = field(default_factory=lambda: LMSpec("lexical"))
    schema_source: str = DEFAULT_SCHEMA
    source_roots: tuple[Path, ...] = ()
    # the service of the default namespace, for one served in another: models that do not read
    # the knowledge base (all but lexical) are built once and shared
    parent: Service | None = field(default=None, repr=False)
    _lm: LanguageModel | None = field(default=None, init=False, repr=False)
    _programs: dict[tuple[int, float, int], Program] = field(default_factory=dict, init=False, repr=False)
    _write_lock: LoopLock = field(default_factory=LoopLock, init=False, repr=False)

    @classmethod
    def open(
        cls,
        uri: str | None = None,
        schema: SchemaSpec | str | None = None,
        *,
        lm: LMSpec | str | None = None,
        name: str = "knowledge",
        description: str = "",
        chunk_size: int = 1000,
        chunk_overlap: int | None = None,
        source_roots: Sequence[str | os.PathLike[str]] = (),
        namespace: str | None = None,
        write_timeout: float | None = None,
    ) -> Service:
        """Open the knowledge base ``uri`` (default ``$KAG_KB`` or ``memory://``) with ``schema``'s models.

        ``namespace`` is the tenant served (default ``"default"``; see :meth:`in_namespace` for others).

        ``source_roots`` are the directories whose files ``ingest(sources=...)`` may
        read (none by default: only http(s) URLs are accepted from remote callers).

        ``write_timeout``: the deadline of each write transaction on Neo4j, in seconds (default
        ``$KAG_NEO4J_WRITE_TIMEOUT``, else 30; see :class:`~kag.graph.neo4j.Neo4jGraphStore`).

        Raises:
            UsageError: bad URI, schema, model spec or chunk size.
        """
        spec = schema if isinstance(schema, SchemaSpec) else load_schema(schema)
        target = check_kb_uri(uri if uri is not None else default_kb_uri())
        lm_spec = lm if isinstance(lm, LMSpec) else parse_lm_spec(lm)
        check_lm_credentials(lm_spec)  # a missing key is said now, not after the first connection attempts
        check_int(chunk_size, name="--chunk-size", minimum=50, error=UsageError)
        overlap = chunk_overlap if chunk_overlap is not None else min(150, chunk_size // 5)
        try:
            splitter = RecursiveCharacterSplitter(chunk_size, overlap)
            kb = KnowledgeBase(
                target, entity_models=spec.entity_models, relation_models=spec.relation_models, namespace=namespace
            )
            if write_timeout is not None and isinstance(kb.store, Neo4jGraphStore):
                kb.store.write_timeout = write_timeout_setting(write_timeout)
            knowledge = Knowledge(kb, name=name, description=description, splitter=splitter)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
        except InvalidInputError as exc:
            raise UsageError(str(exc)) from None
        roots = tuple(Path(r).expanduser().resolve() for r in source_roots)
        return cls(kb, knowledge, lm_spec, spec.source, roots)

    def in_namespace(self, namespace: str) -> Service:
        """The same service over namespace ``namespace`` of the same backend (a tenant's own data).

        Close it before this one (it shares this service's Neo4j driver).
        """
        store = open_namespace(self.kb.store, namespace)
        kb = KnowledgeBase(
            store=store,
            entity_models=self.kb.entity_models,
            relation_models=self.kb.relation_models,
            embedder=self.kb.embedder,
        )
        knowledge = Knowledge(
            kb, name=self.knowledge.name, description=self.knowledge.description, splitter=self.knowledge.splitter
        )
        return Service(kb, knowledge, self.lm_spec, self.schema_source, self.source_roots, parent=self)

    @property
    def namespace(self) -> str:
        """The namespace (tenant) this service reads and writes."""
        return self.kb.namespace

    # -- lifecycle ------------------------------------------------------------
    @property
    def schema(self) -> GraphSchema:
        """The knowledge base's schema."""
        return self.kb.schema

    @property
    def language_model(self) -> LanguageModel:
        """The language model (built on first use)."""
        if self._lm is None:
            if self.parent is not None and self.lm_spec.kind != "lexical":
                return self.parent.language_model  # the lexical model reads names from this tenant's graph only
            self._lm = build_language_model(self.lm_spec, self.kb)
        return self._lm

    @property
    def persistent(self) -> bool:
        """True for a ``memory://path`` store (saved after writes)."""
        return isinstance(self.kb.store, MemoryGraphStore) and self.kb.store.path is not None

    def persist(self) -> str | None:
        """Save a ``memory://path`` knowledge base and its passages; return the path (else ``None``)."""
        if not self.persistent:
            return None
        return self.knowledge.save()

    async def aclose(self) -> None:
        """Close the language model (if it holds connections) and the knowledge base."""
        lm = self._lm
        close = getattr(lm, "aclose", None)
        if close is not None:
            await close()
        await self.knowledge.aclose()

    # -- reads ----------------------------------------------------------------
    def check_label(self, label: str) -> str:
        """``label`` if it is a declared entity label or ``"*"``, else ``SchemaError`` naming the allowed ones."""
        if label != ANY and label not in self.schema.entity_labels:
            raise SchemaError(
                f"unknown entity label {label!r}; allowed labels: {', '.join(self.schema.entity_labels)} (or '*')."
            )
        return label

    async def check_schema_fits(self) -> None:
        """Refuse a store none of whose entities has a label of the schema (the wrong ``--schema``).

        Searching such a store with this schema could only find nothing; this says why instead.

        Raises:
            SchemaError: naming the labels stored (where the backend can tell) and the labels declared.
        """
        counts = await self.kb.counts()
        declared = self.schema.entity_labels
        if counts.get("nodes", 0) == 0 or any(counts.get(label, 0) for label in declared):
            return
        known = {"nodes", "relations", *declared, *self.schema.relation_labels}
        stored = [label for label in counts if label not in known]
        theirs = f"; its labels are {', '.join(stored)}" if stored else ""
        raise SchemaError(
            f"the knowledge base holds {counts['nodes']} entities and none has a label of the schema "
            f"{self.schema_source} (allowed labels: {', '.join(declared)}){theirs}: give --schema with the "
            "models it was written with (package.module or package.module:ATTR)."
        )

    async def counts(self) -> dict[str, int]:
        """Node and relation counts (per label and in total) plus documents, chunks and mentions."""
        return dict(await self.knowledge.counts())

    async def health(self) -> dict[str, Any]:
        """``{"status": "ok", "backend", "uri", "counts"}`` within :data:`HEALTH_SECONDS`.

        Neo4j must answer ``RETURN 1`` (at once during a known outage: no wait); the counts come
        in the time left, else ``counts`` is ``None`` (a large graph takes longer to count).

        Raises:
            BackendUnavailableError: the backend is down or did not answer within ``HEALTH_SECONDS``
                (the message says why).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + HEALTH_SECONDS
        store = self.kb.store
        try:
            async with asyncio.timeout_at(deadline):
                if isinstance(store, Neo4jGraphStore):
                    await store.ping()
        except TimeoutError:
            if isinstance(store, Neo4jGraphStore):
                store.outage.mark_down(f"no answer within {HEALTH_SECONDS:g} s")
            raise BackendUnavailableError(
                f"{public_uri(self.kb.uri)} did not answer within {HEALTH_SECONDS:g} s; "
                "is the server overloaded or restarting?"
            ) from None
        counts: dict[str, int] | None
        try:
            async with asyncio.timeout_at(deadline):
                counts = await self.counts()
        except TimeoutError:
            counts = None  # it answers; counting a large graph takes longer than a health check may
        return {"status": "ok", "backend": backend_name(self.kb), "uri": public_uri(self.kb.uri), "counts": counts}

    async def search(
        self,
        query: str,
        k: int = 5,
        label: str | None = None,
        where: Mapping[str, Any] | None = None,
        mode: SearchMode | None = None,
    ) -> list[dict[str, Any]]:
        """Facts then passages for ``query`` (``Knowledge.search``, ranked by ``mode``), or entities of ``label``."""
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError("query must be a non-empty string.")
        k = check_k(k, maximum=MAX_REQUEST_K)
        if label is None:
            return [hit.to_dict() for hit in await self.knowledge.search(query, k=k, where=where, mode=mode)]
        self.check_label(label)
        if where:
            raise InvalidInputError("`where` filters passages; it cannot be combined with `label` (an entity search).")
        hits = await self.kb.similarity_search(label, query, k=k)
        return [
            {
                "kind": "entity",
                "text": hit.entity.search_text(),
                "score": hit.score,
                "label": hit.entity.label,
                "id": hit.entity.id,
                "entity": hit.entity.to_dict(),
            }
            for hit in hits
        ]

    async def triplet_search(
        self,
        search: Mapping[str, Any],
        *,
        k: int = 10,
        threshold: float = 0.7,
        include_vectors: bool = False,
    ) -> dict[str, Any]:
        """Run a TripletSearch (or ``{"hops": [...]}`` chain) given as a dict.

        Returns ``{"facts", "count", "cypher", "params"}``; query vectors in
        ``params`` are summarized unless ``include_vectors``.
        """
        results = await self.kb.triplet_search(
            dict(search), k=check_k(k, maximum=MAX_REQUEST_K), threshold=check_threshold(threshold)
        )
        query = results.query
        return {
            "facts": [hit.to_dict() for hit in results],
            "count": results.count,
            "cypher": query.text if query is not None else None,
            "params": redact_params(query.params, include_vectors) if query is not None else {},
        }

    def program(self, *, k: int = 10, threshold: float | None = None, max_hops: int = 2) -> Program:
        """``Input(query) -> KnowledgeRetriever -> Generator(answer)`` over the knowledge base (cached).

        ``threshold`` defaults to 0.9 for the lexical model (it writes names exactly
        as stored) and 0.7 for real models.
        """
        if threshold is None:
            threshold = 0.9 if self.lm_spec.kind == "lexical" else 0.7
        key = (check_k(k, maximum=MAX_REQUEST_K), check_threshold(threshold), max_hops)
        if key not in self._programs:
            lm = self.language_model
            inputs = Input(data_model=QuestionIn, name="question")
            facts = KnowledgeRetriever(
                knowledge_base=self.kb,
                language_model=lm,
                k=key[0],
                threshold=key[1],
                max_hops=max_hops,
                name="retriever",
            )(inputs)
            answer = Generator(data_model=AnswerOut, language_model=lm, return_inputs=True, name="answerer")(facts)
            self._programs[key] = Program(
                inputs=inputs,
                outputs=answer,
                name="kag_ask",
                description="Questions answered from the knowledge graph.",
            )
        return self._programs[key]

    async def ask(
        self,
        question: str,
        *,
        k: int = 10,
        threshold: float | None = None,
        max_hops: int = 2,
        mode: str = "graph",
    ) -> dict[str, Any]:
        """Answer ``question``.

        ``mode="graph"`` (default) runs :meth:`program` and returns the answer, the
        filled search, the Cypher, the facts and the count; ``mode="rag"`` runs
        ``Knowledge.ask`` (facts + passages, cited by label) and returns the answer,
        its citations and the hits shown to the model.
        """
        if not isinstance(question, str) or not question.strip():
            raise InvalidInputError("question must be a non-empty string.")
        if mode == "rag":
            rag = await self.knowledge.ask(
                question, language_model=self.language_model, k=min(check_k(k, maximum=MAX_REQUEST_K), 20)
            )
            return {
                "question": question,
                "mode": "rag",
                "answer": rag.text,
                "citations": [
                    {"label": c.label, "source": c.source, "id": c.id, "kind": c.kind} for c in rag.citations
                ],
                "hits": [hit.to_dict() for hit in rag.hits],
                "model": self.language_model.name,
            }
        if mode != "graph":
            raise InvalidInputError(f"mode must be 'graph' or 'rag', got {mode!r}.")
        program = self.program(k=k, threshold=threshold, max_hops=max_hops)
        result = await program(QuestionIn(query=question))
        data = result.model_dump(mode="json")
        return {
            "question": question,
            "mode": "graph",
            "answer": data.get("answer"),
            "search": data.get("search"),
            "cypher": data.get("cypher"),
            "facts": data.get("facts", []),
            "count": data.get("count"),
            "model": self.language_model.name,
        }

    # -- writes ---------------------------------------------------------------
    def build_items(
        self, entities: Sequence[Mapping[str, Any]] = (), relations: Sequence[Mapping[str, Any]] = ()
    ) -> list[Entity | Relation]:
        """Models from ``{"label": ..., **fields}`` dicts (relations: ``subj``/``obj`` entity dicts).

        Raises ``SchemaError`` for unknown labels and ``pydantic.ValidationError`` for bad fields.
        """
        items: list[Entity | Relation] = []
        for i, data in enumerate(entities):
            label = data.get("label") if isinstance(data, Mapping) else None
            if not isinstance(label, str):
                raise InvalidInputError(f"entities[{i}] needs a string 'label'.")
            items.append(self.schema.entity_model(label).model_validate(dict(data)))
        for i, data in enumerate(relations):
            label = data.get("label") if isinstance(data, Mapping) else None
            if not isinstance(label, str):
                raise InvalidInputError(f"relations[{i}] needs a string 'label'.")
            spec = self.schema.relation_spec(label)
            body = dict(data)
            for side, allowed in (("subj", spec.subj_labels), ("obj", spec.obj_labels)):
                end = body.get(side)
                if not isinstance(end, Mapping):
                    raise InvalidInputError(f"relations[{i}].{side} must be an object with the entity's fields.")
                end_label = end.get("label", allowed[0] if len(allowed) == 1 else None)
                if end_label not in allowed:
                    raise SchemaError(
                        f"relations[{i}]: {label}.{side} must be one of {list(allowed)}, got {end_label!r}."
                    )
                body[side] = self.schema.entity_model(end_label).model_validate({**end, "label": end_label})
            items.append(spec.model.model_validate(body))
        return items

    def check_source(self, source: str) -> Source:
        """A source a remote caller may name: an http(s) URL, or a file under one of ``source_roots``."""
        if not isinstance(source, str) or not source.strip():
            raise InvalidInputError("sources must be non-empty strings (URLs or paths).")
        scheme = urlsplit(source).scheme.lower()
        if scheme in ("http", "https"):
            return source.strip()
        if "://" in source:
            raise InvalidInputError(f"source {source!r}: only http(s) URLs are accepted.")
        if not self.source_roots:
            raise InvalidInputError(
                f"source {source!r}: file paths are not accepted by this server "
                "(start it with --source-root DIR to allow files under DIR)."
            )
        path = Path(source).expanduser().resolve()
        if not any(path == root or path.is_relative_to(root) for root in self.source_roots):
            raise InvalidInputError(f"source {source!r} is outside the allowed source roots.")
        return path

    async def ingest(
        self,
        *,
        entities: Sequence[Mapping[str, Any]] = (),
        relations: Sequence[Mapping[str, Any]] = (),
        texts: Sequence[str] = (),
        sources: Sequence[Source] = (),
        extract: bool = False,
        extraction_examples: Sequence[tuple[str, Mapping[str, Any]]] = (),
        nearest: int | None = None,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """Upsert entities/relations, index texts and sources as passages; optionally extract facts.

        ``progress(done, total)`` is called as documents are written.

        ``sources`` are used as given (the CLI passes paths; the server checks them
        with :meth:`check_source` first). With ``extract``, the language model
        extracts entities and relations from the chunks of the texts and sources,
        shown ``extraction_examples`` (labelled passages; with ``nearest``, the ones
        written most like each chunk), which are checked before anything is written.
        """
        extractor = (  # built first: a bad labelled passage is refused before anything is written
            KnowledgeExtractor(
                self.kb, self.language_model, progress=None, examples=extraction_examples, nearest=nearest
            )
            if extract
            else None
        )
        items = self.build_items(entities, relations)
        documents: list[Source] = [
            Document.from_text(t, source="text", metadata={"title": t.strip().splitlines()[0][:200]})
            for t in texts
            if isinstance(t, str) and t.strip()
        ]
        if len(documents) != len(texts):
            raise InvalidInputError("texts must be non-empty strings.")
        passages = [*documents, *sources]
        report: dict[str, Any] = {}
        async with self._write_lock:
            if items:
                report["upserted"] = await self.knowledge.upsert(items)
            if passages:
                index = await self.knowledge.add(passages, progress=progress)
                report["passages"] = {
                    "documents": index.documents,
                    "chunks": index.chunks,
                    "mentions": index.mentions,
                    "skipped": index.skipped,
                    "deleted": index.deleted,
                    "errors": [{"source": f.source, "error": str(f.error)} for f in index.errors],
                }
            if extractor is not None and passages:
                report["extraction"] = await self._extract(passages, extractor)
            saved = self.persist()
        if saved:
            report["saved"] = saved
        report["counts"] = await self.counts()
        return report

    async def delete(
        self,
        *,
        ids: Sequence[str] = (),
        document_ids: Sequence[str] = (),
        sources: Sequence[str] = (),
        where: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Delete entities/relations/chunks by id, documents by id or source, or documents matching ``where``.

        A deleted document takes what only it supported with it (see ``Knowledge.delete``).
        Returns ``{"deleted": n, "counts": ...}``.
        """
        if not (ids or document_ids or sources or where):
            raise InvalidInputError("name what to delete: ids, document_ids, sources or where.")
        async with self._write_lock:
            deleted = await self.knowledge.delete(
                ids=list(ids), document_ids=list(document_ids), sources=list(sources), where=where
            )
            saved = self.persist()
        report: dict[str, Any] = {"deleted": deleted}
        if saved:
            report["saved"] = saved
        report["counts"] = await self.counts()
        return report

    async def _extract(self, sources: Sequence[Source], extractor: KnowledgeExtractor) -> dict[str, Any]:
        loaded = await AutoLoader().load_with_report(list(sources))
        chunks = self.knowledge.splitter.split_documents(loaded.documents)
        result = await extractor.ingest(chunks)
        data = result.model_dump(mode="json", exclude={"entity_ids", "relation_ids"})
        data["model"] = self.language_model.name
        return data

    async def load_example(self, name: str) -> dict[str, int]:
        """Upsert a bundled example dataset (``world``, ``seed`` or ``countries``) into the knowledge base."""
        if name == "world":
            from kag.examples.world import world_items

            items: list[Any] = world_items()
        elif name == "seed":
            from kag.examples.seed import seed_facts

            items = list(seed_facts())
        elif name == "countries":
            from kag.examples.countries import countries_items

            items = list(countries_items())
        else:
            raise UsageError(f"unknown example {name!r}; use 'world', 'seed' or 'countries'.")
        async with self._write_lock:
            result = await self.knowledge.upsert(items)
            self.persist()
        return result
