"""What the command line and the server share: schema, knowledge base, language model and operations.

* :func:`load_schema` reads ``--schema``: ``package.module:ATTR`` (a list of
  ``Entity``/``Relation`` classes, one class, or a ``GraphSchema``) or
  ``package.module`` exposing ``ENTITY_MODELS`` / ``RELATION_MODELS``. The
  default is the world-geography models of :mod:`kag.examples.world`.
* :func:`check_kb_uri` and :func:`build_language_model` read ``--kb`` and ``--lm``
  (``lexical``, ``openai:MODEL[@BASE_URL]``, ``ollama:MODEL[@BASE_URL]``).
* :class:`Service` holds the knowledge base, its :class:`~kag.knowledge.knowledge.Knowledge`
  facade and the language model, and implements the operations behind both the
  CLI commands and the HTTP/MCP endpoints (search, triplet search, ask, ingest,
  counts), returning JSON-compatible dicts.

Neo4j credentials come from ``NEO4J_USER`` / ``NEO4J_PASSWORD`` / ``NEO4J_DATABASE``
(read by the Neo4j store); ``$KAG_KB`` is the default ``--kb``.
"""

from __future__ import annotations

import asyncio
import importlib
import math
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pydantic

from kag.datamodels.base import Entity, Relation
from kag.datamodels.documents import Document
from kag.datamodels.schema import ANY, GraphSchema
from kag.errors import ConfigError, InvalidInputError, SchemaError
from kag.graph import NEO4J_SCHEMES
from kag.graph.memory import MemoryGraphStore
from kag.knowledge.base import KnowledgeBase
from kag.knowledge.knowledge import Knowledge
from kag.lm.base import LanguageModel
from kag.programs import Generator, Input, KnowledgeRetriever, Program
from kag.rag.loaders import AutoLoader, Source
from kag.rag.splitter import RecursiveCharacterSplitter

__all__ = [
    "DEFAULT_SCHEMA",
    "LMSpec",
    "SchemaSpec",
    "Service",
    "UsageError",
    "build_language_model",
    "check_kb_uri",
    "default_kb_uri",
    "load_schema",
    "parse_lm_spec",
]

DEFAULT_SCHEMA = "kag.examples.world"
MAX_K = 100


class UsageError(ConfigError):
    """A command-line value is unusable (bad ``--schema``, ``--kb``, ``--lm``, label...): exit code 2."""


# --------------------------------------------------------------------------- schema


@dataclass(frozen=True)
class SchemaSpec:
    """The models a ``--schema`` value names."""

    entity_models: tuple[type[Entity], ...]
    relation_models: tuple[type[Relation], ...]
    source: str

    @property
    def graph_schema(self) -> GraphSchema:
        """The validated :class:`GraphSchema` of these models."""
        return GraphSchema(list(self.entity_models), list(self.relation_models))


def _import_module(name: str) -> Any:
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:  # `kag --schema myschema:MODELS` finds modules of the current directory, like `python -m`
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise UsageError(f"--schema: cannot import module {name!r} ({exc}).") from None
    except Exception as exc:  # the module itself failed while importing
        raise UsageError(f"--schema: importing {name!r} failed: {type(exc).__name__}: {exc}") from None
    finally:
        if added and cwd in sys.path:
            sys.path.remove(cwd)


def _split_models(items: Iterable[Any], where: str) -> tuple[list[type[Entity]], list[type[Relation]]]:
    entities: list[type[Entity]] = []
    relations: list[type[Relation]] = []
    for item in items:
        if isinstance(item, type) and issubclass(item, Relation):
            relations.append(item)
        elif isinstance(item, type) and issubclass(item, Entity):
            entities.append(item)
        else:
            raise UsageError(f"--schema: {where} holds {item!r}, which is not an Entity or Relation class.")
    return entities, relations


def load_schema(spec: str | None = None) -> SchemaSpec:
    """Resolve a ``--schema`` value (``None``: :data:`DEFAULT_SCHEMA`).

    ``package.module:ATTR``: ``ATTR`` is a list/tuple of Entity and Relation
    classes, a single class, or a :class:`GraphSchema`. ``package.module``: the
    module's ``ENTITY_MODELS`` and ``RELATION_MODELS``.

    Raises:
        UsageError: the module cannot be imported, the attribute is missing, or it
            does not hold models; or the models do not form a valid schema.
    """
    text = DEFAULT_SCHEMA if spec is None else spec.strip()
    if not text or text.count(":") > 1:
        raise UsageError(f"--schema must be 'package.module:ATTR' or 'package.module', got {spec!r}.")
    module_name, _, attr = text.partition(":")
    if not module_name or (":" in text and not attr):
        raise UsageError(f"--schema must be 'package.module:ATTR' or 'package.module', got {spec!r}.")
    module = _import_module(module_name)
    entities: list[type[Entity]] = []
    relations: list[type[Relation]] = []
    if attr:
        obj: Any = module
        try:
            for part in attr.split("."):
                obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f"--schema: module {module_name!r} has no attribute {attr!r}.") from None
        if isinstance(obj, GraphSchema):
            entities, relations = list(obj.entity_models), list(obj.relation_models)
        elif isinstance(obj, type):
            entities, relations = _split_models([obj], text)
        elif isinstance(obj, list | tuple | set | frozenset):
            entities, relations = _split_models(obj, text)
        else:
            raise UsageError(f"--schema: {text} is a {type(obj).__name__}; expected a list of Entity/Relation classes.")
    else:
        found_e = getattr(module, "ENTITY_MODELS", None)
        found_r = getattr(module, "RELATION_MODELS", None)
        if found_e is None and found_r is None:
            raise UsageError(
                f"--schema: module {module_name!r} defines neither ENTITY_MODELS nor RELATION_MODELS; "
                f"name the models with '{module_name}:ATTR'."
            )
        entities, _ = _split_models(found_e or (), f"{module_name}.ENTITY_MODELS")
        _, relations = _split_models(found_r or (), f"{module_name}.RELATION_MODELS")
    try:
        schema = GraphSchema(entities, relations)
    except SchemaError as exc:
        raise UsageError(f"--schema {text}: {exc}") from None
    if not schema.entity_labels:
        raise UsageError(f"--schema {text} declares no entity model.")
    return SchemaSpec(tuple(schema.entity_models), tuple(schema.relation_models), text)


# --------------------------------------------------------------------------- knowledge base URI


def default_kb_uri() -> str:
    """``$KAG_KB`` or ``memory://``."""
    return os.environ.get("KAG_KB") or "memory://"


def check_kb_uri(uri: str) -> str:
    """Check a ``--kb`` value: ``memory://``, ``memory://path.json`` or ``neo4j://`` / ``bolt://`` URIs."""
    if not isinstance(uri, str) or not uri.strip():
        raise UsageError("--kb must be a URI such as memory://kb.json or neo4j://127.0.0.1:7687.")
    uri = uri.strip()
    if uri.startswith("memory://"):
        path = uri[len("memory://") :]
        if path and Path(path).expanduser().is_dir():
            raise UsageError(f"--kb {uri}: {path} is a directory; name a file such as {path.rstrip('/')}/kb.json.")
        return uri
    if uri.startswith(NEO4J_SCHEMES):
        if not urlsplit(uri).hostname:
            raise UsageError(f"--kb {uri}: no host; use e.g. neo4j://127.0.0.1:7687.")
        return uri
    raise UsageError(f"unsupported --kb URI {uri!r}: use memory://, memory://path/to/kb.json or neo4j://host:7687.")


def public_uri(uri: str) -> str:
    """``uri`` without credentials (``neo4j://user:pw@host`` -> ``neo4j://host``)."""
    if uri.startswith("memory://"):
        return uri
    parts = urlsplit(uri)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def backend_name(kb: KnowledgeBase) -> str:
    """``"memory"`` or ``"neo4j"`` (else the store's class name)."""
    if isinstance(kb.store, MemoryGraphStore):
        return "memory"
    if kb.uri.startswith(NEO4J_SCHEMES):
        return "neo4j"
    return type(kb.store).__name__


# --------------------------------------------------------------------------- language model


@dataclass(frozen=True)
class LMSpec:
    """A parsed ``--lm`` value."""

    kind: str  # "lexical", "openai" or "ollama"
    model: str = ""
    base_url: str | None = None

    def __str__(self) -> str:
        if self.kind == "lexical":
            return "lexical"
        return f"{self.kind}:{self.model}" + (f"@{self.base_url}" if self.base_url else "")


def parse_lm_spec(spec: str | None) -> LMSpec:
    """Parse ``lexical`` (default), ``openai:MODEL[@BASE_URL]`` or ``ollama:MODEL[@BASE_URL]``."""
    text = (spec or "lexical").strip()
    if text == "lexical":
        return LMSpec("lexical")
    kind, sep, rest = text.partition(":")
    if not sep or kind not in ("openai", "ollama"):
        raise UsageError(
            f"--lm must be 'lexical', 'openai:MODEL[@BASE_URL]' or 'ollama:MODEL[@BASE_URL]'; got {spec!r}."
        )
    model, at, base_url = rest.partition("@")
    if not model.strip():
        raise UsageError(f"--lm {spec!r}: the model name is empty (e.g. openai:gpt-4o-mini, ollama:llama3.1:8b).")
    if at and not base_url.strip():
        raise UsageError(f"--lm {spec!r}: the base URL after '@' is empty.")
    return LMSpec(kind, model.strip(), base_url.strip() or None)


def build_language_model(spec: LMSpec | str | None, kb: KnowledgeBase) -> LanguageModel:
    """The language model of a ``--lm`` value (``lexical`` looks names up in ``kb``).

    The OpenAI client reads ``$OPENAI_API_KEY``; keys are never taken from the command line.
    """
    parsed = spec if isinstance(spec, LMSpec) else parse_lm_spec(spec)
    try:
        if parsed.kind == "lexical":
            from kag.lm.lexical import LexicalLM

            return LexicalLM(knowledge_base=kb)
        if parsed.kind == "openai":
            from kag.lm.openai import OpenAICompatibleLM

            if parsed.base_url:
                return OpenAICompatibleLM(parsed.model, base_url=parsed.base_url)
            return OpenAICompatibleLM(parsed.model)
        from kag.lm.ollama import OllamaLM

        if parsed.base_url:
            return OllamaLM(parsed.model, base_url=parsed.base_url)
        return OllamaLM(parsed.model)
    except ConfigError as exc:
        raise UsageError(f"--lm {parsed}: {exc}") from None


# --------------------------------------------------------------------------- the service


class QuestionIn(pydantic.BaseModel):
    """A user question (the input of the ``ask`` program)."""

    query: str = pydantic.Field(description="The user's question")


class AnswerOut(pydantic.BaseModel):
    """An answer grounded in the retrieved facts."""

    answer: str = pydantic.Field(description="The answer, using only the retrieved facts")


def _check_k(k: Any, name: str = "k") -> int:
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise InvalidInputError(f"{name} must be an integer in 1..{MAX_K}, got {k!r}.")
    return k


def _check_threshold(threshold: Any) -> float:
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, int | float)
        or not math.isfinite(threshold)
        or not 0.0 <= threshold <= 1.0
    ):
        raise InvalidInputError(f"threshold must be a number in [0, 1], got {threshold!r}.")
    return float(threshold)


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
    _lm: LanguageModel | None = field(default=None, init=False, repr=False)
    _programs: dict[tuple[int, float, int], Program] = field(default_factory=dict, init=False, repr=False)
    _write_lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False, repr=False)

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
    ) -> Service:
        """Open the knowledge base ``uri`` (default ``$KAG_KB`` or ``memory://``) with ``schema``'s models.

        ``source_roots`` are the directories whose files ``ingest(sources=...)`` may
        read (none by default: only http(s) URLs are accepted from remote callers).

        Raises:
            UsageError: bad URI, schema, model spec or chunk size.
        """
        spec = schema if isinstance(schema, SchemaSpec) else load_schema(schema)
        target = check_kb_uri(uri if uri is not None else default_kb_uri())
        lm_spec = lm if isinstance(lm, LMSpec) else parse_lm_spec(lm)
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 50:
            raise UsageError(f"--chunk-size must be an integer >= 50, got {chunk_size!r}.")
        overlap = chunk_overlap if chunk_overlap is not None else min(150, chunk_size // 5)
        try:
            splitter = RecursiveCharacterSplitter(chunk_size, overlap)
            kb = KnowledgeBase(target, entity_models=spec.entity_models, relation_models=spec.relation_models)
            knowledge = Knowledge(kb, name=name, description=description, splitter=splitter)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
        except InvalidInputError as exc:
            raise UsageError(str(exc)) from None
        roots = tuple(Path(r).expanduser().resolve() for r in source_roots)
        return cls(kb, knowledge, lm_spec, spec.source, roots)

    # -- lifecycle ------------------------------------------------------------
    @property
    def schema(self) -> GraphSchema:
        """The knowledge base's schema."""
        return self.kb.schema

    @property
    def language_model(self) -> LanguageModel:
        """The language model (built on first use)."""
        if self._lm is None:
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

    async def counts(self) -> dict[str, int]:
        """Node and relation counts, per label and in total."""
        return dict(await self.kb.counts())

    async def health(self) -> dict[str, Any]:
        """``{"status": "ok", "backend", "uri", "counts"}`` (raises when the backend is down)."""
        return {
            "status": "ok",
            "backend": backend_name(self.kb),
            "uri": public_uri(self.kb.uri),
            "counts": await self.counts(),
        }

    async def search(
        self, query: str, k: int = 5, label: str | None = None, where: Mapping[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """Facts then passages for ``query`` (``Knowledge.search``), or entities of ``label`` by similarity."""
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError("query must be a non-empty string.")
        k = _check_k(k)
        if label is None:
            return [hit.to_dict() for hit in await self.knowledge.search(query, k=k, where=where)]
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
        results = await self.kb.triplet_search(dict(search), k=_check_k(k), threshold=_check_threshold(threshold))
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
        key = (_check_k(k), _check_threshold(threshold), max_hops)
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
            rag = await self.knowledge.ask(question, language_model=self.language_model, k=min(_check_k(k), 20))
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
    ) -> dict[str, Any]:
        """Upsert entities/relations, index texts and sources as passages; optionally extract facts.

        ``sources`` are used as given (the CLI passes paths; the server checks them
        with :meth:`check_source` first). With ``extract``, the language model
        extracts entities and relations from the chunks of the texts and sources.
        """
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
                index = await self.knowledge.add(passages)
                report["passages"] = {
                    "documents": index.documents,
                    "chunks": index.chunks,
                    "mentions": index.mentions,
                    "skipped": index.skipped,
                    "deleted": index.deleted,
                    "errors": [{"source": f.source, "error": str(f.error)} for f in index.errors],
                }
            if extract and passages:
                report["extraction"] = await self._extract(passages)
            saved = self.persist()
        if saved:
            report["saved"] = saved
        report["counts"] = await self.counts()
        return report

    async def _extract(self, sources: Sequence[Source]) -> dict[str, Any]:
        from kag.programs.extractor import KnowledgeExtractor

        loaded = await AutoLoader().load_with_report(list(sources))
        chunks = self.knowledge.splitter.split_documents(loaded.documents)
        extractor = KnowledgeExtractor(self.kb, self.language_model, progress=None)
        result = await extractor.ingest(chunks)
        data = result.model_dump(mode="json", exclude={"entity_ids", "relation_ids"})
        data["model"] = self.language_model.name
        return data

    async def load_example(self, name: str) -> dict[str, int]:
        """Upsert a bundled example dataset (``world`` or ``seed``) into the knowledge base."""
        if name == "world":
            from kag.examples.world import world_items

            items: list[Any] = world_items()
        elif name == "seed":
            from kag.examples.seed import seed_facts

            items = list(seed_facts())
        else:
            raise UsageError(f"unknown example {name!r}; use 'world' or 'seed'.")
        async with self._write_lock:
            result = await self.knowledge.upsert(items)
            self.persist()
        return result


EXAMPLE_SCHEMAS = {"world": "kag.examples.world", "seed": "kag.examples.seed"}
