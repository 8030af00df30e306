"""``KnowledgeExtractor``: build a knowledge graph from text with a language model.

For each chunk the model fills entities and relations constrained by the
declared models (labels are enums, every entity follows its model's strict
schema) and by the chunk (:mod:`kag.programs.stated`): a name must be one the
chunk writes, a property value one it states (a value it does not state is
dropped, never stored), and no entity or relation is listed twice. A model that
decodes under a grammar gets these as per-chunk enums and cannot write
anything else. Extracted entities are then resolved against the chunk batch and the
knowledge base — normalized key first, then embedding similarity above a
threshold, then an attribute merge — and written with provenance to the chunks
they came from. Relations whose endpoints cannot be resolved are reported in
``ExtractionReport.unresolved``; nothing is dropped silently.

Ordinary prose is read as a person writes it: a chunk longer than the model reads well is split
into units of whole sentences (``max_unit_chars``), a name introduced in full and then used by its
first word is one entity (:func:`kag.programs.stated.name_aliases`), a relation is read from the
sentence that names both ends (or names one and refers to the other by a pronoun), and each
relation's docstring, with its inverse reading ("X manages Y" is ``Y ReportsTo X``), is in the
prompt. Every chunk gets a :class:`ChunkReport`: what the model proposed, what each guard refused,
what resolved and what was written.

The extractor trains like the other modules: its :class:`~kag.training.variables.Variable` holds
the labelled passages it is shown, a run inside ``fit`` or ``evaluate`` (or inside
:func:`dry_run`) writes nothing and returns what it would write (``ExtractionReport.extracted``),
and :class:`LabelledPassages` stands in as the teacher that makes labelled passages into demos.

The parts live beside it, one concept each: the prompt and JSON schema
(:mod:`kag.programs.extraction_prompt`), the units a chunk is read in
(:mod:`kag.programs.extraction_units`), the guards that hold the answer to its passage
(:mod:`kag.programs.extraction_guards`), the relations read from the passage's own words
(:mod:`kag.programs.extraction_reading`), entity resolution (:mod:`kag.programs.extraction_resolution`),
the write and its per-chunk report (:mod:`kag.programs.extraction_write`,
:mod:`kag.programs.extraction_report`), training hooks (:mod:`kag.programs.extraction_training`) and the
progress bar (:mod:`kag.programs.extraction_progress`). Their public names are importable from here too.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import pydantic
from pydantic import BaseModel

from kag.datamodels.base import Entity, Relation
from kag.datamodels.documents import Chunk
from kag.datamodels.schema import GraphSchema
from kag.errors import ConfigError, InvalidInputError
from kag.knowledge.base import KnowledgeBase
from kag.lm.base import LanguageModel, Message, capabilities_of
from kag.programs.extraction_guards import Extracted, validate_extraction
from kag.programs.extraction_progress import Progress
from kag.programs.extraction_prompt import INSTRUCTIONS, describe_schema, extraction_messages, extraction_schema
from kag.programs.extraction_reading import RelationReader, check_against_reading
from kag.programs.extraction_report import (
    ChunkReport,
    EntityRef,
    ExtractedRelation,
    ExtractionReport,
    ProposedRelation,
    UnresolvedRelation,
)
from kag.programs.extraction_resolution import EntityResolver
from kag.programs.extraction_training import (
    LabelledPassages,
    as_demo_output,
    dry_run,
    extraction_variants,
    labelled_pair,
    training_data,
    writes_held,
)
from kag.programs.extraction_units import inline_chunk, passage_pieces, read_units
from kag.programs.extraction_write import write_extracted
from kag.programs.module import Module, as_list
from kag.programs.skeleton import skeleton
from kag.programs.stated import stated_schema
from kag.text import normalize_text
from kag.training import trace
from kag.training.variables import Demo, Variable
from kag.validation import check_int, check_number

__all__ = [
    "ChunkReport",
    "EntityRef",
    "ExtractedRelation",
    "ExtractionReport",
    "KnowledgeExtractor",
    "LabelledPassages",
    "ProposedRelation",
    "UnresolvedRelation",
    "dry_run",
    "extraction_schema",
    "training_data",
]


class KnowledgeExtractor(Module):
    """Module: chunks (or models with a ``text`` field) -> entities and relations in the knowledge base.

    ``examples`` are labelled passages, ``(passage text, extraction)`` pairs, shown to the model as
    worked examples before each chunk; each must be an extraction this extractor accepts from its
    passage. With ``nearest=k`` a chunk is shown only the ``k`` examples written most like it (names
    and numbers masked, compared by the knowledge base's embedder; the most similar last), so many
    labelled passages can be kept while the prompt stays short. Both are saved by :meth:`get_config`.

    The labelled passages are the module's trainable :attr:`variable` (its demos): ``fit`` chooses
    which a chunk is shown (see :class:`LabelledPassages`), and a run made by ``fit`` or ``evaluate``
    writes nothing. ``unit`` is what one model call reads: ``"sentence"`` one sentence (a sentence
    that opens with a pronoun read with the name the sentence before opens with), shown the labelled
    passages cut into sentences the same way; ``"chunk"`` the chunk, or runs of whole sentences of at
    most ``max_unit_chars`` characters (the default); ``"auto"`` sentences for a model that decodes
    under a grammar, chunks for any other. Names and guards are read over the
    whole chunk either way. With ``reading`` (the default), relations a clause states with a verb of
    the relation's label or docstring between two names the model listed are proposed too
    (:func:`kag.programs.stated.read_relations`): a small model labels names far better than it
    pairs them. ``dry_run=True`` (or the
    :func:`dry_run` block) makes every run report what it would write without writing.
    """

    default_instructions: str = INSTRUCTIONS
    """The instructions used while the variable holds none."""

    def __init__(
        self,
        knowledge_base: KnowledgeBase,
        language_model: LanguageModel,
        entity_models: Sequence[type[Entity]] | None = None,
        relation_models: Sequence[type[Relation]] | None = None,
        *,
        resolution_threshold: float = 0.9,
        concurrency: int = 4,
        progress: bool | None = None,
        instructions: str | None = None,
        examples: Sequence[tuple[str, Mapping[str, Any]]] | None = None,
        nearest: int | None = None,
        max_unit_chars: int = 600,
        unit: Literal["auto", "sentence", "chunk"] = "chunk",
        reading: bool = True,
        dry_run: bool = False,
        trainable: bool = True,
        name: str | None = None,
        description: str | None = None,
    ) -> None:
        super().__init__(name=name, description=description)
        check_int(concurrency, name="concurrency")
        # a similarity of 0.5 means 'unrelated': a threshold at or below it merges anything
        check_number(
            resolution_threshold, name="resolution_threshold", minimum=0.5, maximum=1.0, exclusive_minimum=True
        )
        check_int(max_unit_chars, name="max_unit_chars")
        if unit not in ("auto", "sentence", "chunk"):
            raise ConfigError(f"unit must be 'auto', 'sentence' or 'chunk', got {unit!r}.")
        self.knowledge_base = knowledge_base
        self.language_model = language_model
        self.schema = GraphSchema(
            list(entity_models if entity_models is not None else knowledge_base.entity_models),
            list(relation_models if relation_models is not None else knowledge_base.relation_models),
        )
        for label in self.schema.entity_labels:
            knowledge_base.schema.entity_model(label)  # the kb must accept what we extract
        for label in self.schema.relation_labels:
            knowledge_base.schema.relation_spec(label)
        self.resolution_threshold = resolution_threshold
        self.concurrency = concurrency
        self.progress = progress
        self.max_unit_chars = max_unit_chars
        self.unit = unit
        self.reading = bool(reading)
        self._reader = RelationReader.of(self.schema)
        self.dry_run = bool(dry_run)
        self.json_schema = extraction_schema(self.schema)
        self.schema_description = describe_schema(self.schema)
        demos: list[Demo] = []
        for i, example in enumerate(examples or ()):
            if not (isinstance(example, tuple | list) and len(example) == 2 and isinstance(example[0], str)):
                raise ConfigError(f"examples[{i}] must be a (passage text, extraction) pair.")
            passage, output = example[0], dict(example[1])
            try:  # a demo must be an extraction this extractor would accept from that passage
                self._validate(output, passage)
            except (ValueError, pydantic.ValidationError, KeyError) as exc:
                raise ConfigError(f"examples[{i}] is not a valid extraction of its passage: {exc}") from exc
            demos.append(Demo({"text": passage}, output))
        # the labelled passages, and which a chunk is shown: all, or the ``nearest`` written most like it
        self.variable = Variable(instructions=instructions, demos=demos, nearest=nearest, trainable=trainable)

    # -- trainable state ------------------------------------------------------------------------
    @property
    def instructions(self) -> str:
        """The system message's instructions (the variable's, else :attr:`default_instructions`)."""
        assert self.variable is not None
        given = self.variable.instructions
        if isinstance(given, list):
            return "\n".join(given)
        return given or self.default_instructions

    @instructions.setter
    def instructions(self, value: str | None) -> None:
        assert self.variable is not None
        self.variable.instructions = value

    def set_variable(self, variable: Variable) -> None:
        """Take ``variable``'s instructions and demos; every demo must be a ``{"text"}`` passage with an
        extraction this extractor accepts from it."""
        for i, demo in enumerate(variable.demos):
            text = demo.input.get("text")
            if not isinstance(text, str):
                raise ConfigError(f"{self.name}: demo {i} has no passage 'text' in its input.")
            try:
                self._validate(dict(demo.output), text)
            except (ValueError, pydantic.ValidationError, KeyError) as exc:
                raise ConfigError(f"{self.name}: demo {i} is not a valid extraction of its passage: {exc}") from exc
        super().set_variable(variable)

    # -- module API -----------------------------------------------------------
    def compute_output_model(self, input_models: Sequence[type[BaseModel]]) -> type[BaseModel]:
        for model in input_models:
            if "text" not in model.model_fields:
                raise ConfigError(f"KnowledgeExtractor needs inputs with a `text` field; {model.__name__} has none.")
        return ExtractionReport

    async def call(self, inputs: Any) -> ExtractionReport:
        chunks = []
        for i, item in enumerate(as_list(inputs)):
            data = item.model_dump() if isinstance(item, BaseModel) else dict(item)
            if "text" not in data:
                raise InvalidInputError("KnowledgeExtractor inputs need a `text` field.")
            chunks.append(
                item
                if isinstance(item, Chunk)
                else inline_chunk(str(data["text"]), str(data.get("id") or f"input-{i}"))
            )
        return await self.ingest(chunks)

    def get_config(self) -> dict[str, Any]:
        from kag.programs.module import knowledge_base_config, language_model_config, object_path

        assert self.variable is not None
        return {
            **super().get_config(),
            "knowledge_base": knowledge_base_config(self.knowledge_base),
            "language_model": language_model_config(self.language_model),
            "entity_models": [object_path(m) for m in self.schema.entity_models],
            "relation_models": [object_path(m) for m in self.schema.relation_models],
            "resolution_threshold": self.resolution_threshold,
            "concurrency": self.concurrency,
            "examples": [[text, output] for text, output in self.examples],
            "nearest": self.nearest,
            "max_unit_chars": self.max_unit_chars,
            "unit": self.unit,
            "reading": self.reading,
            "dry_run": self.dry_run,
            "variable": self.variable.get_config(),
        }

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **runtime: Any) -> KnowledgeExtractor:
        from kag.programs.module import import_object, rebuild_knowledge_base, rebuild_language_model, runtime_for

        custom = runtime.get("custom_objects")
        name = str(config.get("name"))
        kb = rebuild_knowledge_base(
            config.get("knowledge_base"), runtime_for(runtime.get("knowledge_base"), name), custom
        )
        lm = rebuild_language_model(config.get("language_model"), runtime_for(runtime.get("language_model"), name), kb)
        return cls(
            kb,
            lm,
            [import_object(p, Entity, custom) for p in config.get("entity_models", [])],
            [import_object(p, Relation, custom) for p in config.get("relation_models", [])],
            resolution_threshold=config.get("resolution_threshold", 0.9),
            concurrency=config.get("concurrency", 4),
            examples=[(str(text), output) for text, output in config.get("examples", [])],
            nearest=config.get("nearest"),
            max_unit_chars=config.get("max_unit_chars", 600),
            unit=config.get("unit", "chunk"),
            reading=bool(config.get("reading", True)),
            dry_run=bool(config.get("dry_run", False)),
            name=config.get("name"),
            description=config.get("description"),
        ).restore_variable(config)

    def summary_fields(self) -> str:
        return f"entities={list(self.schema.entity_labels)} relations={list(self.schema.relation_labels)}"

    # -- extraction -----------------------------------------------------------
    @property
    def examples(self) -> list[tuple[str, dict[str, Any]]]:
        """The labelled passages as ``(passage text, extraction)`` pairs (the variable's demos)."""
        assert self.variable is not None
        return [labelled_pair(d) for d in self.variable.demos]

    @property
    def nearest(self) -> int | None:
        """``None``: every example is shown with every chunk; ``k``: the ``k`` examples most like it."""
        assert self.variable is not None
        return self.variable.nearest

    async def examples_for(self, chunk: Chunk) -> list[tuple[str, dict[str, Any]]]:
        """The examples shown with ``chunk``: all of them, or the ``nearest`` whose passages are written
        most like it (compared with their names and numbers masked, by the knowledge base's embedder),
        the most similar last. A labelled passage is never shown with itself."""
        assert self.variable is not None
        pool = [
            d for d in self.variable.demos if normalize_text(str(d.input.get("text", ""))) != normalize_text(chunk.text)
        ]
        if len(pool) == len(self.variable.demos):
            demos = await self.variable.demos_for(
                skeleton(chunk.text), self.knowledge_base.embedder, lambda d: skeleton(labelled_pair(d)[0])
            )
        else:
            others = self.variable.copy()
            others.demos = pool
            demos = await others.demos_for(
                skeleton(chunk.text), self.knowledge_base.embedder, lambda d: skeleton(labelled_pair(d)[0])
            )
        return [labelled_pair(d) for d in demos]

    def messages(self, chunk: Chunk, examples: Sequence[tuple[str, Mapping[str, Any]]] | None = None) -> list[Message]:
        """System instructions with the schema description (relation docstrings included), the examples
        (default: all of them) as user/assistant turns, then the passage as the user turn."""
        system = f"{self.instructions}\n\n{self.schema_description}"
        return extraction_messages(system, chunk, self.examples if examples is None else examples)

    def chunk_schema(self, chunk: Chunk) -> dict[str, Any]:
        """The schema the model fills for ``chunk``: for a model under a grammar, its names and
        values narrowed to what the chunk states (:func:`kag.programs.stated.stated_schema`)."""
        if self._grammar():
            return stated_schema(self.json_schema, chunk.text)
        return self.json_schema

    def _grammar(self) -> bool:
        """Whether the model decodes under a grammar."""
        grammar = False
        if capabilities_of(self.language_model).grammar:
            grammar = True
        return grammar

    def reads_sentences(self) -> bool:
        """Whether one model call reads one sentence (``unit``; ``"auto"``: for a model under a grammar)."""
        return self.unit == "sentence" or (self.unit == "auto" and self._grammar())

    def units(self, chunk: Chunk) -> list[Chunk]:
        """The parts of ``chunk`` one model call reads: its sentences (:meth:`reads_sentences`; a
        sentence that opens with a pronoun is read with the name the sentence before opens with:
        "She reports to Akira." after "Nadia Hussein joined." is read "Nadia Hussein reports to
        Akira."), or runs of whole sentences of at most ``max_unit_chars`` characters (a longer
        sentence alone); the chunk itself when it fits."""
        return read_units(chunk, max_unit_chars=self.max_unit_chars, by_sentence=self.reads_sentences())

    def _validate(self, output: Mapping[str, Any], text: str) -> Extracted:
        """The model's answer for the passage ``text``, checked against it (:func:`validate_extraction`)."""
        return validate_extraction(self.schema, output, text)

    async def extract(self, chunk: Chunk) -> Extracted:
        """Ask the model for one chunk's entities and relations (validated, repaired if needed), one
        call per unit (:meth:`units`); names and guards are read over the whole chunk. Inside a
        training run the call is traced (its passage and the extraction read from it become a demo
        candidate), and an output forced by the trainer's exploration replaces the model's."""
        forced = trace.forced_output(self.name)
        units: list[Chunk] = []
        if forced is not None:
            outputs = [dict(forced)]
        else:
            outputs = []
            units = self.units(chunk)
            shown: list[tuple[str, dict[str, Any]]] | None = None
            if len(units) > 1 and self.reads_sentences():  # the labelled passages, cut the same way
                shown = [
                    piece
                    for text, output in await self.examples_for(chunk)
                    for piece in passage_pieces(text, output, self.units)
                ]
            for unit in units:
                output = await self.language_model.generate(
                    self.messages(unit, shown if shown is not None else await self.examples_for(unit)),
                    self.chunk_schema(unit),
                    validate=lambda out: self._validate(out, chunk.text),
                    schema_name="extraction",
                )
                outputs.append(output)
        merged = {
            "entities": [e for out in outputs for e in out.get("entities", [])],
            "relations": [r for out in outputs for r in out.get("relations", [])],
        }
        read: list[dict[str, Any]] = []
        if self.reading and forced is None:
            read_text = " ".join(u.text for u in units) if len(units) > 1 else chunk.text
            read = self._reader.propose(read_text, chunk.text, merged)
            merged["relations"] += read
        result = self._validate(merged, chunk.text)
        if self.reading and forced is None:
            check_against_reading(result, chunk.text, read)
        result.chunk_id, result.units = chunk.id, len(units)
        trace.record(self.name, {"text": chunk.text}, as_demo_output(result))
        return result

    def output_variants(self, output: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Variants of one traced extraction for the trainer's exploration: each relation dropped,
        read the other way round, or read as another relation between the same labels."""
        return extraction_variants(self.schema, output)

    async def ingest(self, chunks: Iterable[Chunk | str], *, dry_run: bool | None = None) -> ExtractionReport:
        """Extract from every chunk (bounded concurrency), resolve, and write with provenance.

        ``dry_run=True`` resolves as usual but writes nothing: the report says what would be
        written. By default a run is dry when the extractor was built with ``dry_run=True``, inside
        :func:`dry_run`, and inside ``fit`` / ``evaluate``.
        """
        dry = (self.dry_run or writes_held()) if dry_run is None else bool(dry_run)
        items = [c if isinstance(c, Chunk) else inline_chunk(c, f"text-{i}") for i, c in enumerate(chunks)]
        report = ExtractionReport(chunks=len(items), dry_run=dry)
        progress = Progress(len(items), enabled=self.progress)
        resolver = EntityResolver(self.knowledge_base, self.resolution_threshold)
        gate = asyncio.Semaphore(self.concurrency)
        write_lock = asyncio.Lock()  # resolution + upsert are serialized so duplicates merge
        entity_ids: set[str] = set()
        relation_ids: set[str] = set()
        by_chunk: dict[str, ChunkReport] = {}
        extracted: dict[str, ExtractedRelation] = {}

        async def one(chunk: Chunk) -> None:
            async with gate:
                started = time.perf_counter()
                try:
                    result = await self.extract(chunk)
                except (ValueError, pydantic.ValidationError, KeyError) as exc:
                    report.failed_chunks[chunk.id] = str(exc)[:500]
                    by_chunk[chunk.id] = ChunkReport(
                        chunk_id=chunk.id, seconds=time.perf_counter() - started, error=str(exc)[:500]
                    )
                    progress.advance()
                    return
                seconds = time.perf_counter() - started
            async with write_lock:
                chunk_report = await write_extracted(
                    result,
                    knowledge_base=self.knowledge_base,
                    schema=self.schema,
                    resolver=resolver,
                    report=report,
                    entity_ids=entity_ids,
                    relation_ids=relation_ids,
                    dry=dry,
                    written=extracted,
                )
                chunk_report.units, chunk_report.seconds = result.units, seconds
                by_chunk[chunk.id] = chunk_report
            progress.advance()

        await asyncio.gather(*(one(c) for c in items))
        report.entities, report.relations = len(entity_ids), len(relation_ids)
        report.entity_ids, report.relation_ids = sorted(entity_ids), sorted(relation_ids)
        report.merged = resolver.merged
        report.chunk_reports = [by_chunk[c.id] for c in items if c.id in by_chunk]
        report.extracted = list(extracted.values())
        return report
