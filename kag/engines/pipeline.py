"""The engine-free parts of a distributed ingest: job key, manifest, recorded answers, summary.

A distributed ingest splits kag's extraction in two. Workers only *ask the model*: each
chunk's answer is recorded (:class:`RecordingLM`) and sent back, so a retried or restarted
worker has no effect on the graph. One writer then runs the very extractor a single
process runs, over the same chunks in the same order, with the recorded answers replayed
(:class:`ReplayLM`): validation, entity resolution and the idempotent upserts with
provenance are kag's own, so the graph is the one a single process builds. Documents whose
facts are written are kept in a :class:`Manifest` with the store; a job started again
skips them.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import dataclasses
import hashlib
import json
import os
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pydantic

from kag.datamodels.documents import Chunk
from kag.errors import ConfigError, StoreError
from kag.knowledge.knowledge import Knowledge
from kag.lm.base import LanguageModel, Message, ModelCapabilities, capabilities_of, check_messages
from kag.programs.extractor import ExtractionReport, KnowledgeExtractor, UnresolvedRelation
from kag.validation import check_int

__all__ = [
    "ChunkAnswer",
    "IngestSummary",
    "Manifest",
    "ModelSpec",
    "RecordingLM",
    "ReplayLM",
    "ReplayedFailure",
    "answer_chunk",
    "job_key",
    "manifest_for",
    "passage_key",
]

MANIFEST_LABEL = "KagIngestManifest"
"""The Neo4j label of the manifest's nodes (one per finished document and job; not a kag entity)."""


# --------------------------------------------------------------------------- the model on a worker


@dataclass(frozen=True)
class ModelSpec:
    """A picklable recipe for a worker's language model: a ``--lm`` value and the threads of a local one.

    ``local`` and ``llama:PATH.gguf`` load the GGUF model once per worker with ``threads`` CPU
    threads; HTTP models (``openai:...``, ``ollama:...``) are clients and take no threads.
    """

    spec: str
    threads: int = 1

    def __post_init__(self) -> None:
        check_int(self.threads, name="threads")
        if self.spec.strip() == "lexical":
            raise ConfigError(
                "the lexical model cannot extract facts from text: use --lm local, --lm openai:MODEL[@URL] "
                "or --lm ollama:MODEL[@URL] with --engine ray."
            )

    @property
    def name(self) -> str:
        """The spec as given (names the model in reports and in the job's key)."""
        return self.spec

    def __call__(self) -> LanguageModel:
        """Build the model (on the worker that will use it)."""
        from kag.knowledge.base import KnowledgeBase
        from kag.server.specs import build_language_model, parse_lm_spec

        parsed = parse_lm_spec(self.spec)
        if parsed.kind in ("local", "llama"):
            from kag.lm.llamacpp import LlamaCppLM

            return LlamaCppLM.from_spec(str(parsed), n_threads=self.threads)
        return build_language_model(parsed, KnowledgeBase("memory://"))


def model_name(factory: Callable[[], LanguageModel]) -> str:
    """The name a model factory gives itself (``name``), else its class name."""
    name = getattr(factory, "name", None)
    return str(name) if isinstance(name, str) and name else type(factory).__name__


# --------------------------------------------------------------------------- recorded answers


def passage_key(messages: Sequence[Message]) -> str:
    """The key of one extraction call: a hash of its last message (the passage, with the chunk's id).

    The messages are checked as every model checks them (:func:`kag.lm.base.check_messages`).
    """
    last = check_messages(messages)[-1]
    return hashlib.sha256(last["content"].encode("utf-8", "surrogatepass")).hexdigest()


class ReplayedFailure(ValueError):
    """A chunk whose extraction failed on a worker, raised again where its facts are written.

    A ``ValueError``, so the extractor reports the chunk in ``failed_chunks`` with the worker's reason.
    """


_CALLS: contextvars.ContextVar[dict[str, dict[str, Any]] | None] = contextvars.ContextVar("kag_calls", default=None)


class RecordingLM:
    """Wraps a worker's model and records each call's answer (or error) by :func:`passage_key`.

    The extractor may call the model more than once for a chunk (one sentence at a time under a
    grammar); :func:`answer_chunk` collects the calls of its own chunk, even with several chunks
    in flight at once.
    """

    def __init__(self, inner: LanguageModel) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        """The wrapped model's name."""
        return self.inner.name

    @property
    def capabilities(self) -> ModelCapabilities:
        """The wrapped model's capabilities."""
        return capabilities_of(self.inner)

    def __getattr__(self, name: str) -> Any:  # anything else the extractor reads of its model
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    async def generate(
        self,
        messages: Sequence[Message],
        schema: dict[str, Any] | type[pydantic.BaseModel],
        *,
        validate: Callable[[dict[str, Any]], Any] | None = None,
        schema_name: str = "output",
    ) -> dict[str, Any]:
        """Ask the wrapped model; record its (validated) answer, or the reason it gave none."""
        calls = _CALLS.get()
        key = passage_key(messages)
        try:
            answer = await self.inner.generate(messages, schema, validate=validate, schema_name=schema_name)
        except (ValueError, pydantic.ValidationError, KeyError) as exc:
            if calls is not None:
                calls[key] = {"error": str(exc)[:500]}
            raise
        if calls is not None:
            calls[key] = {"answer": copy.deepcopy(answer)}
        return answer

    def get_config(self) -> dict[str, Any]:
        """The wrapped model's config."""
        return self.inner.get_config()


@dataclass
class ChunkAnswer:
    """What a worker sends back for one chunk: each model call's answer (or error), by passage key.

    ``transient``: the model could not be reached (a transport error, a timeout); the chunk is
    reported as failed and its document is not marked finished, so the next run asks again.
    ``capabilities``: the worker model's (the writer's extractor reads the chunk the same way).
    """

    calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    error: str | None = None
    transient: bool = False
    seconds: float = 0.0
    capabilities: dict[str, Any] = field(default_factory=dict)
    finished_at: float = field(default_factory=time.time)

    def to_json(self) -> str:
        """The answer as one JSON text (what crosses the engine)."""
        data = {"calls": self.calls, "error": self.error, "transient": self.transient, "s": self.seconds}
        return json.dumps({**data, "capabilities": self.capabilities, "at": self.finished_at}, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> ChunkAnswer:
        """Read :meth:`to_json` back."""
        data = json.loads(text)
        return cls(
            data["calls"], data["error"], bool(data["transient"]), float(data["s"]), data["capabilities"], data["at"]
        )


async def answer_chunk(extractor: KnowledgeExtractor, recorder: RecordingLM, chunk: Chunk) -> ChunkAnswer:
    """Run the extractor's model on one chunk (through ``recorder``) and record every call.

    What the extractor refuses (``ValueError``, pydantic's, ``KeyError``) is replayed by the writer
    from the recorded calls; any other error is transient.
    """
    calls: dict[str, dict[str, Any]] = {}
    token = _CALLS.set(calls)
    started = time.perf_counter()
    capabilities = capabilities_of(recorder).as_dict()
    try:
        await extractor.extract(chunk)
    except (ValueError, pydantic.ValidationError, KeyError) as exc:
        return ChunkAnswer(calls, str(exc)[:500], seconds=time.perf_counter() - started, capabilities=capabilities)
    except Exception as exc:  # transport failures, timeouts: asked again on the next run
        reason = f"{type(exc).__name__}: {exc}"[:500]
        return ChunkAnswer(calls, reason, True, time.perf_counter() - started, capabilities)
    finally:
        _CALLS.reset(token)
    return ChunkAnswer(calls, seconds=time.perf_counter() - started, capabilities=capabilities)


class ReplayLM:
    """A model that answers each call with the answer a worker recorded for the same messages.

    ``capabilities`` are set to the worker model's, so the writer's extractor makes the same calls.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self.answers: dict[str, dict[str, Any]] = {}
        self.declared = ModelCapabilities()

    @property
    def name(self) -> str:
        """The name of the model the workers ran."""
        return self._name

    @property
    def capabilities(self) -> ModelCapabilities:
        """The workers' model's capabilities (see :meth:`declare`)."""
        return self.declared

    def declare(self, capabilities: Mapping[str, Any]) -> None:
        """Take the capabilities a worker reported (fields this version does not know are ignored)."""
        known = {f.name for f in dataclasses.fields(ModelCapabilities)}
        self.declared = ModelCapabilities(**{k: v for k, v in capabilities.items() if k in known})

    def add(self, answer: ChunkAnswer) -> None:
        """Keep a chunk's recorded calls for replay."""
        self.answers.update(answer.calls)

    async def generate(
        self,
        messages: Sequence[Message],
        schema: dict[str, Any] | type[pydantic.BaseModel],
        *,
        validate: Callable[[dict[str, Any]], Any] | None = None,
        schema_name: str = "output",
    ) -> dict[str, Any]:
        """The recorded answer of these messages; :class:`ReplayedFailure` with the worker's reason."""
        recorded = self.answers.get(passage_key(messages))
        if recorded is None:
            raise ReplayedFailure("no answer was recorded for this passage")
        if "answer" not in recorded:
            raise ReplayedFailure(str(recorded.get("error") or "the model gave no answer"))
        return copy.deepcopy(recorded["answer"])

    def get_config(self) -> dict[str, Any]:
        """Descriptive only."""
        return {"type": "replay", "name": self._name}


# --------------------------------------------------------------------------- the job's identity


def job_key(
    knowledge: Knowledge,
    model: str,
    examples: Sequence[tuple[str, Mapping[str, Any]]] = (),
    nearest: int | None = None,
) -> str:
    """What makes two runs the same job: store namespace, schema, splitter, model and examples.

    A run with another model, other labelled passages or another chunk size is another job: its
    manifest starts empty, so every document is extracted again (the upserts merge the facts).
    """
    kb, splitter = knowledge.kb, knowledge.splitter
    payload = {
        "namespace": kb.namespace,
        "entities": list(kb.schema.entity_labels),
        "relations": list(kb.schema.relation_labels),
        "chunk_size": splitter.chunk_size,
        "chunk_overlap": splitter.chunk_overlap,
        "separators": list(splitter.separators),
        "embedder": kb.embedder.name,
        "model": model,
        "examples": [[text, dict(output)] for text, output in examples],
        "nearest": nearest,
    }
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


# --------------------------------------------------------------------------- the manifest


class Manifest(Protocol):
    """The documents whose facts a job has written, kept with the store."""

    @property
    def where(self) -> str:
        """Where it is kept (for the summary)."""
        ...

    async def finished(self, job: str, document_ids: Sequence[str]) -> set[str]:
        """Which of ``document_ids`` job ``job`` has finished."""
        ...

    async def record(self, job: str, documents: Sequence[tuple[str, str]]) -> None:
        """Mark ``(document id, source)`` pairs finished for ``job`` (idempotent)."""
        ...


class FileManifest:
    """A JSON-lines file beside a ``memory://path`` store (appended and synced after each save)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def where(self) -> str:
        """The file."""
        return str(self.path)

    def _read(self) -> set[tuple[str, str]]:
        if not self.path.exists():
            return set()
        done: set[tuple[str, str]] = set()
        for line in self.path.read_text("utf-8").splitlines():
            try:
                row = json.loads(line)
                done.add((str(row["job"]), str(row["document_id"])))
            except (json.JSONDecodeError, KeyError, TypeError):
                continue  # a line cut by a crash mid-write: that document is simply done again
        return done

    async def finished(self, job: str, document_ids: Sequence[str]) -> set[str]:
        """Which of ``document_ids`` the file lists for ``job``."""
        done = await asyncio.to_thread(self._read)
        return {d for d in document_ids if (job, d) in done}

    def _append(self, lines: list[str]) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write("".join(lines))
            handle.flush()
            os.fsync(handle.fileno())

    async def record(self, job: str, documents: Sequence[tuple[str, str]]) -> None:
        """Append the documents (one line each)."""
        if documents:
            lines = [
                json.dumps({"job": job, "document_id": d, "source": s}, ensure_ascii=False) + "\n" for d, s in documents
            ]
            await asyncio.to_thread(self._append, lines)


class Neo4jManifest:
    """``(:KagIngestManifest {kag_ns, job, document_id})`` nodes in the store's own database."""

    def __init__(self, store: Any) -> None:
        self.store = store

    @property
    def where(self) -> str:
        """The label and namespace."""
        return f"Neo4j :{MANIFEST_LABEL} nodes of namespace {self.store.namespace!r}"

    async def finished(self, job: str, document_ids: Sequence[str]) -> set[str]:
        """Which of ``document_ids`` have a manifest node for ``job``."""
        if not document_ids:
            return set()
        result = await self.store.run(
            f"MATCH (m:{MANIFEST_LABEL} {{kag_ns: $ns, job: $job}}) WHERE m.document_id IN $ids "
            "RETURN m.document_id AS id",
            {"ns": self.store.namespace, "job": job, "ids": list(document_ids)},
            write=False,
            what="reading the ingest manifest",
        )
        return {str(r["id"]) for r in result.records}

    async def record(self, job: str, documents: Sequence[tuple[str, str]]) -> None:
        """MERGE one node per document (idempotent)."""
        if not documents:
            return
        await self.store.run(
            f"UNWIND $docs AS d MERGE (m:{MANIFEST_LABEL} {{kag_ns: $ns, job: $job, document_id: d.id}}) "
            "SET m.source = d.source",
            {"ns": self.store.namespace, "job": job, "docs": [{"id": d, "source": s} for d, s in documents]},
            write=True,
            what="writing the ingest manifest",
        )


class MemoryManifest:
    """For a ``memory://`` store that is not saved: kept as long as the store object lives."""

    _kept: weakref.WeakKeyDictionary[Any, set[tuple[str, str]]] = weakref.WeakKeyDictionary()

    def __init__(self, store: Any) -> None:
        self.done = self._kept.setdefault(store, set())

    @property
    def where(self) -> str:
        """In memory."""
        return "in memory (the store is not saved)"

    async def finished(self, job: str, document_ids: Sequence[str]) -> set[str]:
        """Which of ``document_ids`` this process recorded for ``job``."""
        return {d for d in document_ids if (job, d) in self.done}

    async def record(self, job: str, documents: Sequence[tuple[str, str]]) -> None:
        """Remember the documents."""
        self.done.update((job, d) for d, _ in documents)


def manifest_for(knowledge: Knowledge) -> Manifest:
    """The manifest kept with ``knowledge``'s store: nodes on Neo4j, a file beside ``memory://path``."""
    from kag.graph.memory import MemoryGraphStore
    from kag.graph.neo4j import Neo4jGraphStore

    store = knowledge.kb.store
    if isinstance(store, Neo4jGraphStore):
        return Neo4jManifest(store)
    if isinstance(store, MemoryGraphStore) and store.path is not None:
        return FileManifest(store.path.with_name(store.path.name + ".ingest-manifest.jsonl"))
    try:
        return MemoryManifest(store)
    except TypeError as exc:  # pragma: no cover - a store that cannot be weakly referenced
        raise StoreError(f"no ingest manifest can be kept for {type(store).__name__}") from exc


# --------------------------------------------------------------------------- the summary


@dataclass
class IngestSummary:
    """What a distributed ingest did: documents, chunks, facts, failures and time per stage."""

    model: str
    workers: int
    manifest: str = ""
    documents: int = 0
    finished_before: int = 0
    written: int = 0
    chunks: int = 0
    extracted: int = 0
    entity_ids: set[str] = field(default_factory=set)
    relation_ids: set[str] = field(default_factory=set)
    merged: int = 0
    unresolved: list[UnresolvedRelation] = field(default_factory=list)
    failed_chunks: dict[str, str] = field(default_factory=dict)
    failed_sources: list[dict[str, str]] = field(default_factory=list)
    passages: dict[str, Any] = field(default_factory=dict)
    stages: dict[str, float] = field(default_factory=dict)
    asked: tuple[float, float] | None = None  # when the workers asked the first chunk and answered the last

    def answered(self, answer: ChunkAnswer) -> None:
        """Count one worker answer's time (the workers' span: the extraction throughput of the pool)."""
        self.time("extract (worker seconds)", answer.seconds)
        start, end = answer.finished_at - answer.seconds, answer.finished_at
        self.asked = (start, end) if self.asked is None else (min(self.asked[0], start), max(self.asked[1], end))
        self.stages["extract (workers' span)"] = self.asked[1] - self.asked[0]

    def add(self, report: ExtractionReport) -> None:
        """Fold one written batch's extraction report in."""
        self.extracted += report.chunks
        self.entity_ids.update(report.entity_ids)
        self.relation_ids.update(report.relation_ids)
        self.merged += report.merged
        self.unresolved.extend(report.unresolved)
        self.failed_chunks.update(report.failed_chunks)

    def time(self, stage: str, seconds: float) -> None:
        """Add ``seconds`` to ``stage``."""
        self.stages[stage] = self.stages.get(stage, 0.0) + seconds

    def extraction(self) -> dict[str, Any]:
        """The ``extraction`` part of the ingest report, in the single process's shape."""
        return {
            "chunks": self.extracted,
            "entities": len(self.entity_ids),
            "relations": len(self.relation_ids),
            "merged": self.merged,
            "unresolved": [u.model_dump(mode="json") for u in self.unresolved],
            "failed_chunks": dict(self.failed_chunks),
            "model": self.model,
        }

    def engine(self) -> dict[str, Any]:
        """The ``engine`` part of the ingest report: documents, where the manifest is, time per stage."""
        return {
            "name": "ray",
            "workers": self.workers,
            "manifest": self.manifest,
            "documents": self.documents,
            "finished_before": self.finished_before,
            "written": self.written,
            "chunks": self.chunks,
            "failed_sources": list(self.failed_sources),
            "stages": {k: round(v, 3) for k, v in self.stages.items()},
        }

    def lines(self) -> list[str]:
        """The summary as text lines (the command line prints them)."""
        out = [
            f"  engine    : ray, {self.workers} worker(s); {self.documents} document(s), "
            f"{self.finished_before} finished before, {self.written} written; {self.chunks} chunk(s) extracted",
            f"  facts     : {len(self.entity_ids)} entities, {len(self.relation_ids)} relations, "
            f"{len(self.failed_chunks)} failed chunk(s)",
            "  stages    : " + ", ".join(f"{k} {v:.2f}s" for k, v in self.stages.items()),
            f"  manifest  : {self.manifest}",
        ]
        for chunk_id, reason in list(self.failed_chunks.items())[:10]:
            out.append(f"    failed chunk {chunk_id}: {reason}")
        for item in self.failed_sources[:10]:
            out.append(f"    failed source {item['source']}: {item['error']}")
        return out
