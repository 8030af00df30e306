"""kag's ingest pipeline as a Ray Data job: ``kag ingest PATH --extract --engine ray``.

The job (``pip install 'graph-kag[ray]'``):

1. **read** — the driver loads the sources (files, folders, URLs) with kag's loaders and
   indexes their passages as a single process does (so no shared filesystem is needed, and
   chunks link to the entities known before the job, as they do without Ray);
2. **split** — Ray tasks split each document into chunks;
3. **extract** — a pool of ``workers`` Ray actors, each with one model loaded once (the
   packaged GGUF model with ``threads`` CPU threads, an HTTP model with ``concurrency``
   requests in flight), asks the model for each chunk and sends the answer back;
4. **link, resolve and write** — the driver, the job's one writer, replays the answers
   through kag's own extractor in document order, in batches of ``write_batch`` chunks:
   validation, entity resolution and the idempotent upserts with provenance are exactly
   those of a single process, so the graph is the same;
5. **manifest** — after each batch its documents are recorded as finished, with the store
   (:mod:`kag.engines.pipeline`); a job killed and started again does only what is left.

A worker killed mid-job is restarted by Ray and its batch asked again; asking has no effect
on the graph, so nothing is written twice or lost.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from kag.datamodels.base import Entity, Relation
from kag.datamodels.documents import Chunk, Document
from kag.engines.pipeline import (
    ChunkAnswer,
    IngestSummary,
    ModelSpec,
    RecordingLM,
    ReplayLM,
    answer_chunk,
    job_key,
    manifest_for,
    model_name,
)
from kag.errors import ConfigError, MissingDependencyError
from kag.knowledge.base import KnowledgeBase
from kag.knowledge.knowledge import Knowledge
from kag.lm.base import LanguageModel
from kag.programs.extractor import KnowledgeExtractor
from kag.rag.embedders import Embedder
from kag.rag.loaders import AutoLoader, Source
from kag.rag.splitter import RecursiveCharacterSplitter
from kag.validation import check_int
from kag.version import pip_install

__all__ = ["RayIngest", "require_ray"]

INSTALL_HINT = f"{pip_install('ray')} (Ray Data 2.60 or later)"


def require_ray() -> Any:
    """The ``ray`` module with Ray Data, or :class:`MissingDependencyError` saying what to install."""
    try:
        import ray
        import ray.data
    except ImportError as exc:
        raise MissingDependencyError(
            f"--engine ray needs Ray Data, which is not installed: {INSTALL_HINT}; "
            "or leave --engine out to ingest in this process."
        ) from exc
    return ray


# --------------------------------------------------------------------------- on the workers


def split_document(row: Mapping[str, Any], splitter: RecursiveCharacterSplitter) -> list[dict[str, Any]]:
    """A document row as its chunk rows (one empty row for a document without chunks)."""
    document = Document.model_validate_json(row["document"])
    chunks = splitter.split_documents([document])
    order = int(row["order"])
    if not chunks:
        return [{"order": order, "index": -1, "chunks": 0, "chunk": ""}]
    return [
        {"order": order, "index": i, "chunks": len(chunks), "chunk": c.model_dump_json()} for i, c in enumerate(chunks)
    ]


class ExtractWorker:
    """A Ray actor: one model, loaded once, asking it for each chunk of a batch (``concurrency`` at a time)."""

    def __init__(
        self,
        *,
        model: Callable[[], LanguageModel],
        entity_models: Sequence[type[Entity]],
        relation_models: Sequence[type[Relation]],
        embedder: Embedder,
        examples: Sequence[tuple[str, Mapping[str, Any]]],
        nearest: int | None,
        concurrency: int,
    ) -> None:
        kb = KnowledgeBase(
            "memory://", entity_models=list(entity_models), relation_models=list(relation_models), embedder=embedder
        )
        self.recorder = RecordingLM(model())
        self.extractor = KnowledgeExtractor(
            kb, self.recorder, examples=list(examples), nearest=nearest, concurrency=concurrency, progress=False
        )
        self.gate = asyncio.Semaphore(concurrency)
        self.loop = asyncio.new_event_loop()

    async def _answer(self, chunks: list[Chunk | None]) -> list[str]:
        async def one(chunk: Chunk | None) -> str:
            if chunk is None:
                return ""
            async with self.gate:
                return (await answer_chunk(self.extractor, self.recorder, chunk)).to_json()

        return list(await asyncio.gather(*(one(c) for c in chunks)))

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        """Answer a batch of chunk rows (``answer``: a :class:`ChunkAnswer` as JSON, empty for no chunk)."""
        chunks = [Chunk.model_validate_json(str(text)) if str(text) else None for text in batch["chunk"]]
        answers = self.loop.run_until_complete(self._answer(chunks))
        return {
            "order": [int(x) for x in batch["order"]],
            "index": [int(x) for x in batch["index"]],
            "chunks": [int(x) for x in batch["chunks"]],
            "chunk": [str(x) for x in batch["chunk"]],
            "answer": answers,
        }


# --------------------------------------------------------------------------- on the driver


@dataclass
class _Pending:
    """A document whose answers are coming in."""

    document: Document
    expected: int | None = None
    rows: dict[int, tuple[Chunk, ChunkAnswer]] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return self.expected is not None and len(self.rows) >= self.expected


class RayIngest:
    """Extract a corpus into ``knowledge`` on Ray, with the graph a single process builds.

    Args:
        knowledge: the managed knowledge to write to (its knowledge base, splitter and store).
        language_model: a ``--lm`` value (``local``, ``llama:PATH.gguf``, ``openai:MODEL[@URL]``,
            ``ollama:MODEL[@URL]``) or a picklable callable that builds the model on a worker.
        workers: extraction actors (one model each).
        address: the Ray cluster (``auto``, ``ray://HOST:PORT``); ``None``: the one this process
            is connected to, else a local Ray started for the job and stopped after it.
        threads: CPUs per actor, and the threads of a local GGUF model.
        concurrency: requests one actor has in flight (HTTP models).
        batch_size: chunks per actor call (default ``2 * concurrency``).
        write_batch: chunks the writer resolves and upserts together (then the manifest is updated).
        examples: labelled passages shown to the model (see :class:`KnowledgeExtractor`).
        nearest: show each chunk only the ``nearest`` labelled passages most like it.
        checkpoint_seconds: for a saved ``memory://path`` store: how often it is saved (and the
            manifest updated) while the job runs; Neo4j is written through, its manifest each batch.
        progress: a progress bar (tqdm) on ``stream``: ``None`` when ``stream`` is a terminal.
        stream: where the progress bar goes (default stderr).
    """

    def __init__(
        self,
        knowledge: Knowledge,
        language_model: str | Callable[[], LanguageModel],
        *,
        workers: int = 2,
        address: str | None = None,
        threads: int = 1,
        concurrency: int = 4,
        batch_size: int | None = None,
        write_batch: int = 64,
        examples: Sequence[tuple[str, Mapping[str, Any]]] = (),
        nearest: int | None = None,
        checkpoint_seconds: float = 30.0,
        progress: bool | None = None,
        stream: TextIO | None = None,
    ) -> None:
        for name, value in (
            ("workers", workers),
            ("threads", threads),
            ("concurrency", concurrency),
            ("write_batch", write_batch),
        ):
            check_int(value, name=name)
        if batch_size is not None:
            check_int(batch_size, name="batch_size")
        if checkpoint_seconds < 0:
            raise ConfigError(f"checkpoint_seconds must be >= 0, got {checkpoint_seconds!r}.")
        self.knowledge = knowledge
        self.model: Callable[[], LanguageModel] = (
            ModelSpec(language_model, threads) if isinstance(language_model, str) else language_model
        )
        if not callable(self.model):
            raise ConfigError("language_model must be a --lm value or a callable that builds the model.")
        self.workers, self.address, self.threads, self.concurrency = workers, address, threads, concurrency
        self.batch_size = batch_size or 2 * concurrency
        self.write_batch = write_batch
        self.examples = [(str(text), dict(output)) for text, output in examples]
        self.nearest = nearest
        self.checkpoint_seconds = checkpoint_seconds
        self.stream = stream or sys.stderr
        self.progress = self.stream.isatty() if progress is None else progress
        self.name = model_name(self.model)

    # -- the job ------------------------------------------------------------------------------
    async def run(self, sources: Sequence[Source]) -> IngestSummary:
        """Ingest ``sources``: passages indexed here, extraction on Ray, facts written here.

        Raises:
            MissingDependencyError: Ray (Data) is not installed.
            ConfigError: a labelled passage is not a valid extraction of its passage.
        """
        ray = require_ray()
        kb = self.knowledge.kb
        summary = IngestSummary(model=self.name, workers=self.workers)
        # built first: a bad labelled passage is refused before anything is written
        replay = ReplayLM(self.name)
        writer = KnowledgeExtractor(
            kb, replay, examples=self.examples, nearest=self.nearest, concurrency=1, progress=False
        )
        started = time.perf_counter()

        clock = time.perf_counter()
        index = await self.knowledge.add(list(sources))
        summary.time("index", time.perf_counter() - clock)
        summary.passages = {
            "documents": index.documents,
            "chunks": index.chunks,
            "mentions": index.mentions,
            "skipped": index.skipped,
            "deleted": index.deleted,
            "errors": [{"source": f.source, "error": str(f.error)} for f in index.errors],
        }
        summary.failed_sources = list(summary.passages["errors"])

        clock = time.perf_counter()
        loaded = await AutoLoader().load_with_report(list(sources))
        documents = list(loaded.documents)
        summary.time("read", time.perf_counter() - clock)
        summary.documents = len(documents)

        manifest = manifest_for(self.knowledge)
        summary.manifest = manifest.where
        job = job_key(self.knowledge, self.name, self.examples, self.nearest)
        done = await manifest.finished(job, [d.id for d in documents])
        todo = [d for d in documents if d.id not in done]
        summary.finished_before = len(documents) - len(todo)
        if todo:
            await self._extract(ray, todo, writer, replay, manifest, job, summary)
        if self._persistent():
            clock = time.perf_counter()
            self.knowledge.save()
            summary.time("save", time.perf_counter() - clock)
        summary.time("total", time.perf_counter() - started)
        return summary

    def _persistent(self) -> bool:
        from kag.graph.memory import MemoryGraphStore

        store = self.knowledge.kb.store
        return isinstance(store, MemoryGraphStore) and store.path is not None

    def _connect(self, ray: Any) -> bool:
        """Connect to (or start) Ray; True when this job started it (and stops it)."""
        if ray.is_initialized():
            return False
        options: dict[str, Any] = {"ignore_reinit_error": True, "log_to_driver": False}
        if self.address is not None:
            options["address"] = self.address
        else:
            options["include_dashboard"] = False
        ray.init(**options)
        return self.address is None

    def _dataset(self, ray: Any, documents: Sequence[Document]) -> Any:
        kb = self.knowledge.kb
        context = ray.data.DataContext.get_current()
        for flag in ("enable_progress_bars", "enable_operator_progress_bars"):
            if hasattr(context, flag):
                setattr(context, flag, False)
        rows = [{"order": i, "document": d.model_dump_json()} for i, d in enumerate(documents)]
        data = ray.data.from_items(rows, override_num_blocks=max(1, min(len(rows), 4 * self.workers)))
        data = data.flat_map(split_document, fn_kwargs={"splitter": self.knowledge.splitter}, num_cpus=0)
        return data.map_batches(
            ExtractWorker,
            fn_constructor_kwargs={
                "model": self.model,
                "entity_models": list(kb.entity_models),
                "relation_models": list(kb.relation_models),
                "embedder": kb.embedder,
                "examples": self.examples,
                "nearest": self.nearest,
                "concurrency": self.concurrency,
            },
            batch_size=self.batch_size,
            batch_format="numpy",
            # Ray Data restarts a killed actor and asks it for its batch again (asking writes nothing)
            compute=ray.data.ActorPoolStrategy(size=self.workers),
            num_cpus=self.threads,
        )

    async def _extract(
        self,
        ray: Any,
        documents: list[Document],
        writer: KnowledgeExtractor,
        replay: ReplayLM,
        manifest: Any,
        job: str,
        summary: IngestSummary,
    ) -> None:
        owned = self._connect(ray)
        bar = self._bar(len(documents))
        pending = {i: _Pending(d) for i, d in enumerate(documents)}
        next_doc = 0
        batch: list[_Pending] = []
        unrecorded: list[tuple[str, str]] = []
        last_checkpoint = time.perf_counter()
        first_answer: float | None = None
        rows: Iterator[dict[str, Any]] | None = None
        try:
            rows = iter(self._dataset(ray, documents).iter_batches(batch_size=None, batch_format="numpy"))
            while True:
                clock = time.perf_counter()
                block = await asyncio.to_thread(next, rows, None)
                summary.time("wait", time.perf_counter() - clock)
                if block is None:
                    break
                first_answer = first_answer or time.perf_counter()
                for order, count, text, answer in zip(
                    block["order"], block["chunks"], block["chunk"], block["answer"], strict=True
                ):
                    item = pending[int(order)]
                    item.expected = int(count)
                    if str(text):
                        recorded = ChunkAnswer.from_json(str(answer))
                        chunk = Chunk.model_validate_json(str(text))
                        item.rows[chunk.index] = (chunk, recorded)
                        summary.answered(recorded)
                # the writer takes documents in their order: the graph does not depend on who finished first
                while next_doc < len(documents) and pending[next_doc].complete:
                    batch.append(pending.pop(next_doc))
                    next_doc += 1
                    if sum(len(p.rows) for p in batch) >= self.write_batch:
                        unrecorded += await self._write(batch, writer, replay, summary, bar)
                        batch = []
                        due = time.perf_counter() - last_checkpoint >= self.checkpoint_seconds
                        if unrecorded and (due or not self._persistent()):
                            await self._checkpoint(manifest, job, unrecorded, summary)
                            unrecorded, last_checkpoint = [], time.perf_counter()
            if batch:
                unrecorded += await self._write(batch, writer, replay, summary, bar)
            if pending:  # pragma: no cover - Ray returned fewer rows than it was given
                raise ConfigError(f"the Ray job returned no answers for {len(pending)} document(s); run it again.")
            if unrecorded:
                await self._checkpoint(manifest, job, unrecorded, summary)
        finally:
            close = getattr(rows, "close", None)
            if close is not None:  # a job stopped early stops its Ray Data execution too
                await asyncio.to_thread(close)
            if bar is not None:
                bar.close()
            if owned:
                ray.shutdown()
        if first_answer is not None:
            summary.time("extract (wall)", time.perf_counter() - first_answer)

    async def _write(
        self, batch: list[_Pending], writer: KnowledgeExtractor, replay: ReplayLM, summary: IngestSummary, bar: Any
    ) -> list[tuple[str, str]]:
        """Resolve and upsert one batch of documents' answers; the documents now finished."""
        clock = time.perf_counter()
        chunks: list[Chunk] = []
        replay.answers = {}
        finished: list[tuple[str, str]] = []
        for item in batch:
            ordered = [item.rows[i] for i in sorted(item.rows)]
            chunks.extend(chunk for chunk, _ in ordered)
            for _, answer in ordered:
                replay.add(answer)
                if answer.capabilities:  # the workers' model: the writer reads each chunk as they did
                    replay.declare(answer.capabilities)
            if not any(answer.transient for _, answer in ordered):
                finished.append((item.document.id, item.document.source))
        report = await writer.ingest(chunks)
        summary.add(report)
        summary.chunks += len(chunks)
        summary.written += len(batch)
        summary.time("write", time.perf_counter() - clock)
        if bar is not None:
            bar.update(len(batch))
            elapsed = max(1e-9, time.perf_counter() - bar.start_t)
            bar.set_postfix(
                chunks=summary.chunks,
                relations=len(summary.relation_ids),
                rel_s=f"{len(summary.relation_ids) / elapsed:.1f}",
            )
        return finished

    async def _checkpoint(
        self, manifest: Any, job: str, finished: list[tuple[str, str]], summary: IngestSummary
    ) -> None:
        """Save a ``memory://path`` store, then record its finished documents (never the other way round)."""
        clock = time.perf_counter()
        if self._persistent():
            await asyncio.to_thread(self.knowledge.save)
        await manifest.record(job, finished)
        summary.time("manifest", time.perf_counter() - clock)

    def _bar(self, total: int) -> Any:
        if not self.progress:
            return None
        try:
            from tqdm import tqdm
        except ImportError as exc:
            raise MissingDependencyError(f"the progress bar needs tqdm: {INSTALL_HINT}") from exc
        return tqdm(total=total, unit="doc", file=self.stream, desc="ingest (ray)")
