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
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, TextIO

import numpy as np
import pydantic
from pydantic import BaseModel

from kag.datamodels.base import DataModel, Entity, Relation
from kag.datamodels.documents import Chunk
from kag.datamodels.schema import GraphSchema, inline_refs, strict_schema
from kag.errors import ConfigError, InvalidInputError, LanguageModelError, SchemaError
from kag.knowledge.base import KnowledgeBase
from kag.lm.base import LanguageModel, Message, capabilities_of
from kag.lm.guards import text_words
from kag.programs.module import Module, as_list
from kag.programs.skeleton import skeleton
from kag.programs.stated import (
    full_names,
    is_stated,
    name_aliases,
    name_spans,
    named_by_noun,
    names_relation,
    read_relations,
    relation_cues,
    sentences,
    stated_schema,
    states_name,
    supporting_sentence,
)
from kag.text import normalize_text, split_identifier
from kag.training import trace
from kag.training.variables import Demo, Variable

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

INSTRUCTIONS = (
    "You extract a knowledge graph from a text passage. List the entities the passage states, "
    "each with its label and the fields its schema asks for, and the relations between them. "
    "A relation names its subject and object by label and name; both must also appear in "
    "`entities`. A person named in full and later by first name is one entity: use the full name. "
    "Read every sentence; a verb may state a relation the other way round, as each relation's "
    "description says. Only state what the passage says. Return JSON only."
)

# guards: why a proposed relation is refused (ProposedRelation.guard, UnresolvedRelation.kind)
UNSTATED_NAME = "unstated_name"  # an end the passage does not write
SAME_ENTITY = "same_entity"  # one name on both sides
NO_SHARED_SENTENCE = "no_shared_sentence"  # no sentence names both ends
NO_ENTITY = "no_entity"  # an end resolved to no entity (passage or knowledge base)
INVALID = "invalid"  # the relation's model refused it
READING_DISAGREES = "reading_disagrees"  # the sentence writes the relation's words between other names
GUARDS = (UNSTATED_NAME, SAME_ENTITY, NO_SHARED_SENTENCE, READING_DISAGREES)

_DRY_RUN: ContextVar[bool] = ContextVar("kag_extraction_dry_run", default=False)


@contextlib.contextmanager
def dry_run() -> Iterator[None]:
    """Inside the block, every :class:`KnowledgeExtractor` run writes nothing and reports what it
    would write (as it does inside ``fit`` and ``evaluate``, where a run is traced)."""
    token = _DRY_RUN.set(True)
    try:
        yield
    finally:
        _DRY_RUN.reset(token)


def _writes_held() -> bool:
    """Whether the current run must not write: inside :func:`dry_run`, or a traced training run."""
    # a run that ``fit``/``evaluate`` makes is traced (kag.training.trace.tracing): it only scores
    return _DRY_RUN.get() or trace.tracing_active()


class EntityRef(DataModel):
    """How an extracted relation names one of its endpoints."""

    label: str
    name: str


class UnresolvedRelation(DataModel):
    """A relation the model stated that was not written: a guard refused it or an end did not resolve.

    ``kind`` says which (``unstated_name``, ``same_entity``, ``no_shared_sentence``, ``no_entity``,
    ``invalid``); ``reason`` says it in words.
    """

    chunk_id: str
    label: str
    subject: EntityRef
    object: EntityRef
    reason: str
    kind: str = ""


class ExtractedRelation(DataModel):
    """A relation as a run wrote it (in a dry run: would write it), its ends by their resolved names."""

    label: str
    subject: EntityRef
    object: EntityRef


class ProposedRelation(DataModel):
    """One relation the model proposed for a chunk, and what became of it.

    ``status``: ``written`` (in a dry run: would be), ``refused`` by ``guard`` (see
    :class:`UnresolvedRelation`), ``unresolved`` (an end resolved to no entity, or the relation's
    model refused it). ``read_as`` is the relation as it was read from the passage: its ends by
    their full names (the resolved entities' names when written), its label the one the sentence
    names. ``by`` is who proposed it: ``model``, or ``reading`` (a verb of the relation between two
    names the model listed).
    """

    label: str
    subject: EntityRef
    object: EntityRef
    status: Literal["written", "refused", "unresolved"]
    by: str = "model"
    guard: str | None = None
    reason: str | None = None
    read_as: ExtractedRelation | None = None


class ChunkReport(DataModel):
    """One chunk's extraction: model calls, relations proposed, refused (by guard), resolved and written."""

    chunk_id: str
    units: int = 0
    proposed: int = 0
    refused: dict[str, int] = {}
    resolved: int = 0
    unresolved: int = 0
    written: int = 0
    relations: list[ProposedRelation] = []
    seconds: float = 0.0
    error: str | None = None


class ExtractionReport(DataModel):
    """What an extraction run found and wrote (in a dry run, ``dry_run`` is set and nothing was written).

    ``extracted`` lists the relations written, by label and endpoint names: the field a labelled
    passage's relations are compared with when the extractor trains (reward ``relation_f1``).
    """

    chunks: int = 0
    entities: int = 0
    relations: int = 0
    merged: int = 0
    unresolved: list[UnresolvedRelation] = []
    failed_chunks: dict[str, str] = {}
    entity_ids: list[str] = []
    relation_ids: list[str] = []
    extracted: list[ExtractedRelation] = []
    chunk_reports: list[ChunkReport] = []
    dry_run: bool = False

    def unresolved_counts(self) -> dict[str, int]:
        """How many stated relations were not written, by ``kind`` (most first)."""
        counts: dict[str, int] = {}
        for item in self.unresolved:
            counts[item.kind or "other"] = counts.get(item.kind or "other", 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def extraction_schema(schema: GraphSchema) -> dict[str, Any]:
    """The strict JSON schema the model fills for one chunk."""
    if not schema.entity_labels:
        raise SchemaError("KnowledgeExtractor needs at least one entity model.")
    entity_items = [strict_schema(model.model_json_schema()) for model in schema.entity_models]
    relation_items = []
    for spec in schema.relations.values():
        props = inline_refs(spec.model.model_json_schema()).get("properties", {})
        own = {k: v for k, v in props.items() if k not in ("subj", "obj", "label")}
        relation_items.append(
            {
                "type": "object",
                "description": (spec.model.__doc__ or spec.label).strip().splitlines()[0],
                "properties": {
                    "label": {"type": "string", "enum": [spec.label]},
                    "subject": _ref_schema(spec.subj_labels),
                    "object": _ref_schema(spec.obj_labels),
                    **own,
                },
            }
        )
    relations: dict[str, Any] = {"type": "array", "items": {"anyOf": relation_items}}
    if not relation_items:
        relations = {"type": "array", "maxItems": 0, "items": {"type": "object", "properties": {}}}
    return strict_schema(
        {
            "type": "object",
            # relations first: a small model that lists every entity first often closes the answer there
            "properties": {
                "relations": relations,
                "entities": {"type": "array", "items": {"anyOf": entity_items}},
            },
        }
    )


def _ref_schema(labels: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "label": {"type": "string", "enum": list(labels)},
            "name": {"type": "string", "description": "The entity's name, as listed in `entities`."},
        },
    }


@dataclass
class _Extracted:
    """One chunk's validated model output."""

    chunk_id: str
    entities: list[Entity]
    relations: list[dict[str, Any]]
    units: int = 0  # model calls made for it (0: an output forced by training)


@dataclass
class _Resolver:
    """Canonical entities of one run: by normalized key, then by embedding similarity."""

    kb: KnowledgeBase
    threshold: float
    by_key: dict[tuple[str, str], Entity] = field(default_factory=dict)
    vectors: dict[str, list[tuple[np.ndarray, tuple[str, str]]]] = field(default_factory=dict)
    merged: int = 0

    async def resolve(self, entity: Entity) -> Entity:
        key = (entity.label, normalize_text(entity.search_text()))
        if key in self.by_key:
            self.merged += 1
            self.by_key[key] = _merge(self.by_key[key], entity)
            return self.by_key[key]
        vec = (await self.kb.embed([entity.search_text()]))[0]
        for other_vec, other_key in self.vectors.get(entity.label, []):
            if (1.0 + float(other_vec @ vec)) / 2.0 >= self.threshold:
                self.merged += 1
                self.by_key[key] = self.by_key[other_key] = _merge(self.by_key[other_key], entity)
                return self.by_key[key]
        canonical = entity
        hits = await self.kb.similarity_search(
            entity.label, entity.search_text(), k=1, threshold=self.threshold, linked=False
        )
        if hits:  # already in the knowledge base under this (or a near-identical) name
            self.merged += 1
            canonical = _merge(hits[0].entity, entity)
        self.by_key[key] = canonical
        self.vectors.setdefault(entity.label, []).append((vec, key))
        return canonical

    async def lookup(self, ref: EntityRef) -> Entity | None:
        key = (ref.label, normalize_text(ref.name))
        if key in self.by_key:
            return self.by_key[key]
        if not ref.name.strip():
            return None
        vec = (await self.kb.embed([ref.name]))[0]
        best, best_score = None, self.threshold
        for other_vec, other_key in self.vectors.get(ref.label, []):
            score = (1.0 + float(other_vec @ vec)) / 2.0
            if score >= best_score:
                best, best_score = self.by_key[other_key], score
        if best is not None:
            return best
        short = self._by_short_name(ref)
        if short is not None:
            return short
        hits = await self.kb.similarity_search(ref.label, ref.name, k=1, threshold=self.threshold, linked=False)
        return hits[0].entity if hits else None

    def _by_short_name(self, ref: EntityRef) -> Entity | None:
        """The one entity of this run, of ``ref``'s label, whose full name starts or ends with
        ``ref``'s one-word name ("Tomasz" in a later chunk for "Tomasz Wiśniewski"), or None."""
        word = normalize_text(ref.name)
        if not word or " " in word:
            return None
        found = {
            id(entity): entity
            for (label, name), entity in self.by_key.items()
            if label == ref.label and " " in name and word in (name.split()[0], name.split()[-1])
        }
        return next(iter(found.values())) if len(found) == 1 else None


def _merge(kept: Entity, new: Entity) -> Entity:
    """Attribute merge: the kept entity's values win; gaps are filled from the new one."""
    data = kept.model_dump()
    for name in new.model_fields_set:
        value = getattr(new, name)
        if data.get(name) in (None, "", [], {}) and value not in (None, "", [], {}):
            data[name] = value
        elif isinstance(data.get(name), list) and isinstance(value, list):
            data[name] = list(dict.fromkeys([*data[name], *value]))
    merged = type(kept).model_validate(data)
    # keep "explicitly set" as the union, so an upsert writes every known field
    merged.__pydantic_fields_set__ = set(kept.model_fields_set) | set(new.model_fields_set)
    return merged


class Progress:
    """A dependency-free progress bar on a text stream (off when the stream is not a TTY)."""

    def __init__(
        self, total: int, *, enabled: bool | None = None, stream: TextIO | None = None, label: str = "chunks"
    ) -> None:
        self.total, self.done, self.label = total, 0, label
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self.enabled and self.total:
            filled = round(30 * self.done / self.total)
            self.stream.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total} {self.label}")
            if self.done >= self.total:
                self.stream.write("\n")
            self.stream.flush()


def _labelled(demo: Demo) -> tuple[str, dict[str, Any]]:
    """A labelled passage demo as its ``(passage text, extraction)`` pair."""
    return str(demo.input["text"]), demo.output


def _relation_doc(model: type[Relation]) -> str:
    """A relation model's own docstring, on one line ('' for none)."""
    doc = model.__doc__ or ""
    if doc == Relation.__doc__:
        return ""
    return " ".join(doc.split())


def describe_schema(schema: GraphSchema) -> str:
    """The schema as the extraction prompt gives it: each label with its docstring, each relation's
    direction and docstring (where a relation's inverse reading is written)."""
    lines = ["Entity labels:"]
    for label, model in schema.entities.items():
        doc = (model.__doc__ or "").strip().splitlines()
        lines.append(f"- {label}" + (f": {doc[0]}" if doc and model.__doc__ != Entity.__doc__ else ""))
    lines.append("Relation labels (subject -> object):")
    for label, spec in schema.relations.items():
        said = _relation_doc(spec.model)
        lines.append(f"- {label}: {spec.arrow()}" + (f". {said}" if said else ""))
    return "\n".join(lines)


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
        if concurrency < 1:
            raise ConfigError("concurrency must be >= 1.")
        if not 0.5 < resolution_threshold <= 1.0:
            raise ConfigError("resolution_threshold must be in (0.5, 1]: 0.5 means 'unrelated'.")
        if isinstance(max_unit_chars, bool) or not isinstance(max_unit_chars, int) or max_unit_chars < 1:
            raise ConfigError(f"max_unit_chars must be a positive integer, got {max_unit_chars!r}.")
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
        label_words = [w for label in self.schema.entity_labels for w in split_identifier(label)]
        self._cues = {
            label: relation_cues(label, _relation_doc(spec.model), label_words)
            for label, spec in self.schema.relations.items()
        }
        self._ends = {label: (spec.subj_labels, spec.obj_labels) for label, spec in self.schema.relations.items()}
        # a label's noun ("team" for Team), for each label of one word
        self._nouns = {
            label.casefold(): label for label in self.schema.entity_labels if len(split_identifier(label)) == 1
        }
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
                item if isinstance(item, Chunk) else _chunk(str(data["text"]), str(data.get("id") or f"input-{i}"))
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
        return [_labelled(d) for d in self.variable.demos]

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
                skeleton(chunk.text), self.knowledge_base.embedder, lambda d: skeleton(_labelled(d)[0])
            )
        else:
            others = self.variable.copy()
            others.demos = pool
            demos = await others.demos_for(
                skeleton(chunk.text), self.knowledge_base.embedder, lambda d: skeleton(_labelled(d)[0])
            )
        return [_labelled(d) for d in demos]

    def messages(self, chunk: Chunk, examples: Sequence[tuple[str, Mapping[str, Any]]] | None = None) -> list[Message]:
        """System instructions with the schema description (relation docstrings included), the examples
        (default: all of them) as user/assistant turns, then the passage as the user turn."""
        messages: list[Message] = [{"role": "system", "content": f"{self.instructions}\n\n{self.schema_description}"}]
        for i, (text, output) in enumerate(self.examples if examples is None else examples):
            messages.append({"role": "user", "content": f"Passage (id example-{i}):\n{text}"})
            shown = {"relations": output.get("relations", []), "entities": output.get("entities", []), **output}
            messages.append({"role": "assistant", "content": json.dumps(shown, ensure_ascii=False)})
        messages.append({"role": "user", "content": f"Passage (id {chunk.id}):\n{chunk.text}"})
        return messages

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
        if self.reads_sentences():
            parts = sentences(chunk.text)
            if len(parts) > 1:
                return _sentence_units(chunk, parts)
        if len(chunk.text) <= self.max_unit_chars:
            return [chunk]
        groups: list[list[str]] = [[]]
        for sentence in sentences(chunk.text):
            if groups[-1] and len(" ".join([*groups[-1], sentence])) > self.max_unit_chars:
                groups.append([])
            groups[-1].append(sentence)
        units, cursor = [], 0
        for i, group in enumerate(g for g in groups if g):
            text = " ".join(group)
            found = chunk.text.find(group[0], cursor)
            offset = max(found, 0)
            cursor = offset + len(group[0])
            units.append(
                Chunk(
                    id=f"{chunk.id}#{i}",
                    document_id=chunk.document_id,
                    index=chunk.index,
                    text=text,
                    start=chunk.start + offset,
                    end=chunk.start + offset + len(text),
                )
            )
        return units

    def _validate(self, output: dict[str, Any], text: str) -> _Extracted:
        """The model's answer for the passage ``text`` as entities and relations; a name the
        passage does not write is refused (repaired), a value it does not state is dropped, and
        an entity or relation listed again is listed once. A short name the passage uses for a
        full name it writes ("Tomasz" for "Tomasz Wiśniewski") is read as the full name."""
        aliases = name_aliases(text)
        entities: list[Entity] = []
        seen: set[tuple[str, str]] = set()
        for item in output.get("entities", []):
            model = self.schema.entity_model(item.get("label", ""))  # SchemaError is a ValueError: repaired
            name = str(item.get("name", ""))
            if not states_name(text, name):
                raise InvalidInputError(f"{item.get('label')} {name!r} is not a name the passage writes.")
            name = aliases.get(normalize_text(name), name)
            key = (model.model_fields["label"].default, normalize_text(name))
            if key in seen:
                continue
            seen.add(key)
            stated = {k: v for k, v in item.items() if v is not None and (k in ("label", "name") or is_stated(text, v))}
            entities.append(model.model_validate({**stated, "name": name}))
        relations = []
        listed: set[tuple[str, str, str, str, str]] = set()
        for item in output.get("relations", []):
            spec = self.schema.relation_spec(item.get("label", ""))
            proposed_subj = EntityRef.model_validate(item["subject"])
            proposed_obj = EntityRef.model_validate(item["object"])
            if proposed_subj.label not in spec.subj_labels or proposed_obj.label not in spec.obj_labels:
                raise SchemaError(
                    f"{spec.label} links {'|'.join(spec.subj_labels)} -> {'|'.join(spec.obj_labels)}, "
                    f"not {proposed_subj.label} -> {proposed_obj.label}."
                )
            # an endpoint the passage does not name is reported as unresolved, not stored
            unstated = [ref for ref in (proposed_subj, proposed_obj) if not states_name(text, ref.name)]
            subj, obj = (
                EntityRef(label=ref.label, name=aliases.get(normalize_text(ref.name), ref.name))
                for ref in (proposed_subj, proposed_obj)
            )
            label, unsupported, guard = spec.label, None, UNSTATED_NAME if unstated else None
            if not unstated:
                label, unsupported, guard = self._supported(text, spec.label, subj, obj, aliases)
            triple = (label, subj.label, normalize_text(subj.name), obj.label, normalize_text(obj.name))
            if triple in listed:
                continue
            listed.add(triple)
            props = {k: v for k, v in item.items() if k in ("label", "subject", "object") or is_stated(text, v)}
            relations.append(
                {
                    **props,
                    "label": label,
                    "subject": subj,
                    "object": obj,
                    _UNSTATED: unstated,
                    _UNSUPPORTED: unsupported,
                    _GUARD: guard,
                    _PROPOSED: (spec.label, proposed_subj, proposed_obj),
                    _BY: item.get(_BY, "model"),
                }
            )
        return _Extracted("", entities, relations)

    def _supported(
        self, text: str, label: str, subj: EntityRef, obj: EntityRef, aliases: Mapping[str, str] | None = None
    ) -> tuple[str, str | None, str | None]:
        """The relation label one sentence of ``text`` supports, why none does (or None), and the
        guard that refused it (or None).

        A relation is read from a sentence that names both its ends (two different names; a
        short name the passage uses for a full one counts), or that names one and refers to the
        other by a pronoun, named in the sentence before. Ends that never share a sentence, or
        one name on both sides, are reported, not stored. Where that sentence writes a word of
        another relation between the same kinds of entity and none of this one's ("Munich is a
        city in Germany" written as ``IsCapitalOf``), it is read as the relation the sentence
        names: a small model confuses relations that link the same labels far more often than it
        misreads the sentence's names.
        """
        if normalize_text(subj.name) == normalize_text(obj.name):
            return label, f"{subj.name!r} is on both sides of {label}", SAME_ENTITY
        shorts = aliases if aliases is not None else name_aliases(text)

        def forms(name: str) -> list[str]:
            return [name, *(short for short, full in shorts.items() if full == name)]

        sentence = supporting_sentence(text, forms(subj.name), forms(obj.name))
        if sentence is None:
            return (
                label,
                f"no sentence of the passage names both {subj.name!r} and {obj.name!r}",
                NO_SHARED_SENTENCE,
            )
        if names_relation(sentence, label):
            return label, None, None
        named = [
            other
            for other, spec in self.schema.relations.items()
            if other != label
            and subj.label in spec.subj_labels
            and obj.label in spec.obj_labels
            and names_relation(sentence, other)
        ]
        return (named[0] if len(named) == 1 else label), None, None

    async def extract(self, chunk: Chunk) -> _Extracted:
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
                    piece for text, output in await self.examples_for(chunk) for piece in self._pieces(text, output)
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
            read = self._read(read_text, chunk.text, merged)
            merged["relations"] += read
        result = self._validate(merged, chunk.text)
        if self.reading and forced is None:
            self._check_against_reading(result, chunk.text, read)
        result.chunk_id, result.units = chunk.id, len(units)
        trace.record(self.name, {"text": chunk.text}, _as_demo_output(result))
        return result

    def _check_against_reading(self, extracted: _Extracted, text: str, reading: Sequence[Mapping[str, Any]]) -> None:
        """Refuse a model's relation where the reading found that relation between other names in the
        sentence it is read from (``reading_disagrees``): there the sentence's own words say which pairs
        they join."""
        aliases = name_aliases(text)

        def full(name: str) -> str:
            return normalize_text(aliases.get(normalize_text(name), name))

        def forms(name: str) -> list[str]:
            return [name, *(short for short, full in aliases.items() if full == name)]

        read = {(r["label"], full(r["subject"]["name"]), full(r["object"]["name"])) for r in reading}
        # the sentences each relation was read from: there the reading knows which pairs the words join
        read_in = {
            (
                r["label"],
                supporting_sentence(
                    text,
                    forms(aliases.get(normalize_text(r["subject"]["name"]), r["subject"]["name"])),
                    forms(aliases.get(normalize_text(r["object"]["name"]), r["object"]["name"])),
                ),
            )
            for r in reading
        }

        for item in extracted.relations:
            if item.get(_BY) == "reading" or item[_UNSTATED] or item[_UNSUPPORTED]:
                continue
            key = (item["label"], full(item["subject"].name), full(item["object"].name))
            if key in read:
                continue
            sentence = supporting_sentence(text, forms(item["subject"].name), forms(item["object"].name))
            if sentence is not None and (item["label"], sentence) in read_in:
                item[_GUARD] = READING_DISAGREES
                item[_UNSUPPORTED] = (
                    f"the sentence writes {item['label']}'s words but not between "
                    f"{item['subject'].name!r} and {item['object'].name!r}"
                )

    def _read(self, text: str, chunk_text: str, output: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Relations ``text`` states by a relation's own words between names ``output`` labelled
        (:func:`kag.programs.stated.read_relations`), as proposals marked ``by: reading``."""
        names: dict[str, tuple[str, str]] = {}
        labelled = [*output.get("entities", [])]
        for item in output.get("relations", []):
            labelled += [item.get("subject", {}), item.get("object", {})]
        aliases = name_aliases(chunk_text)
        for item in labelled:
            label, name = str(item.get("label", "")), str(item.get("name", ""))
            if label not in self.schema.entity_labels or not states_name(chunk_text, name):
                continue
            full = aliases.get(normalize_text(name), name)
            names.setdefault(normalize_text(full), (full, label))
        # a name written right before a label's noun ("the Safety team") has that label
        for name, label in named_by_noun(chunk_text, self._nouns).items():
            full = aliases.get(normalize_text(name), name)
            names[normalize_text(full)] = (full, label)
        for short, full in aliases.items():
            if normalize_text(full) in names:
                names.setdefault(short, names[normalize_text(full)])
        found = read_relations(text, names, self._cues, self._ends)
        return [
            {
                "label": label,
                "subject": {"label": s_label, "name": s_name},
                "object": {"label": o_label, "name": o_name},
                _BY: "reading",
            }
            for label, s_name, s_label, o_name, o_label in found
        ]

    def _pieces(self, text: str, output: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """A labelled passage cut into the units a chunk is read in, each with the relations read from
        it and the entities it names, every name as that unit writes it (a short name stays short)."""
        chunk = _chunk(text, "example")
        units = self.units(chunk)
        if len(units) <= 1:
            return [(text, dict(output))]
        aliases = name_aliases(text)

        def written(unit: str, name: str) -> str | None:
            forms = [name, *(short for short, full in aliases.items() if full == name)]
            for form in forms:
                if states_name(unit, form):
                    return name if form == name else next(w for w in text_words(unit) if normalize_text(w) == form)
            return None

        # each relation goes to the unit it is read from: the first naming both ends and a word of the
        # relation, else the first naming both ends
        home: dict[int, int] = {}
        for i, item in enumerate(output.get("relations", [])):
            naming = [
                u
                for u, unit in enumerate(units)
                if written(unit.text, str(item["subject"]["name"])) is not None
                and written(unit.text, str(item["object"]["name"])) is not None
            ]
            worded = [u for u in naming if names_relation(units[u].text, str(item.get("label", "")))]
            if naming:
                home[i] = (worded or naming)[0]
        pieces: list[tuple[str, dict[str, Any]]] = []
        for u, unit in enumerate(units):
            relations = []
            for i, item in enumerate(output.get("relations", [])):
                if home.get(i) != u:
                    continue
                subj = written(unit.text, str(item["subject"]["name"])) or ""
                obj = written(unit.text, str(item["object"]["name"])) or ""
                relations.append(
                    {**item, "subject": {**item["subject"], "name": subj}, "object": {**item["object"], "name": obj}}
                )
            entities = []
            for entity in output.get("entities", []):
                name = written(unit.text, str(entity.get("name", "")))
                if name is not None:
                    entities.append({**entity, "name": name})
            pieces.append((unit.text, {"entities": entities, "relations": relations}))
        return pieces

    def output_variants(self, output: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Variants of one traced extraction for the trainer's exploration: each relation dropped,
        read the other way round, or read as another relation between the same labels."""
        relations = list(output.get("relations", []))
        variants: list[dict[str, Any]] = []
        for i, item in enumerate(relations):
            others = relations[:i] + relations[i + 1 :]
            variants.append({**output, "relations": others})
            subj, obj = item.get("subject", {}), item.get("object", {})
            spec = self.schema.relations.get(item.get("label", ""))
            if spec is not None and obj.get("label") in spec.subj_labels and subj.get("label") in spec.obj_labels:
                variants.append({**output, "relations": [*others, {**item, "subject": obj, "object": subj}]})
            for other, other_spec in self.schema.relations.items():
                fits = subj.get("label") in other_spec.subj_labels and obj.get("label") in other_spec.obj_labels
                if other != item.get("label") and fits:
                    variants.append({**output, "relations": [*others, {**item, "label": other}]})
        return variants[:48]

    async def ingest(self, chunks: Iterable[Chunk | str], *, dry_run: bool | None = None) -> ExtractionReport:
        """Extract from every chunk (bounded concurrency), resolve, and write with provenance.

        ``dry_run=True`` resolves as usual but writes nothing: the report says what would be
        written. By default a run is dry when the extractor was built with ``dry_run=True``, inside
        :func:`dry_run`, and inside ``fit`` / ``evaluate``.
        """
        dry = (self.dry_run or _writes_held()) if dry_run is None else bool(dry_run)
        items = [c if isinstance(c, Chunk) else _chunk(c, f"text-{i}") for i, c in enumerate(chunks)]
        report = ExtractionReport(chunks=len(items), dry_run=dry)
        progress = Progress(len(items), enabled=self.progress)
        resolver = _Resolver(self.knowledge_base, self.resolution_threshold)
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
                chunk_report = await self._write(result, resolver, report, entity_ids, relation_ids, dry, extracted)
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

    async def _stated_endpoint(
        self, ref: EntityRef, listed: Mapping[str, str], resolver: _Resolver, resolved: list[Entity]
    ) -> Entity | None:
        """The entity a relation's endpoint names when the passage writes the name but the model
        did not list it (a small model often lists relations only); ``None`` when the name is
        listed under another label (the two disagree: reported, not guessed)."""
        if listed.get(normalize_text(ref.name), ref.label) != ref.label:
            return None
        entity = await resolver.resolve(self.schema.entity_model(ref.label).model_validate({"name": ref.name}))
        resolved.append(entity)
        return entity

    async def _write(
        self,
        extracted: _Extracted,
        resolver: _Resolver,
        report: ExtractionReport,
        entity_ids: set[str],
        relation_ids: set[str],
        dry: bool = False,
        written: dict[str, ExtractedRelation] | None = None,
    ) -> ChunkReport:
        chunk_report = ChunkReport(chunk_id=extracted.chunk_id, proposed=len(extracted.relations))
        resolved = [await resolver.resolve(e) for e in extracted.entities]
        listed = {normalize_text(e.search_text()): e.label for e in extracted.entities}
        relations: list[Relation] = []
        for item in extracted.relations:
            subj_ref, obj_ref = item["subject"], item["object"]
            proposed_label, proposed_subj, proposed_obj = item.get(_PROPOSED) or (item["label"], subj_ref, obj_ref)
            entry = ProposedRelation(
                label=proposed_label,
                subject=proposed_subj,
                object=proposed_obj,
                status="written",
                by=str(item.get(_BY, "model")),
                read_as=ExtractedRelation(label=item["label"], subject=subj_ref, object=obj_ref),
            )
            chunk_report.relations.append(entry)

            def unresolved(
                reason: str, kind: str, item: dict[str, Any] = item, entry: ProposedRelation = entry
            ) -> None:
                entry.status = "refused" if kind in GUARDS else "unresolved"
                entry.guard, entry.reason = kind, reason[:500]
                if kind in GUARDS:
                    chunk_report.refused[kind] = chunk_report.refused.get(kind, 0) + 1
                else:
                    chunk_report.unresolved += 1
                report.unresolved.append(
                    UnresolvedRelation(
                        chunk_id=extracted.chunk_id,
                        label=item["label"],
                        subject=item["subject"],
                        object=item["object"],
                        reason=reason[:500],
                        kind=kind,
                    )
                )

            if item[_UNSTATED]:
                missing = item[_UNSTATED][0]
                unresolved(f"{missing.label} {missing.name!r} is not a name the passage writes", UNSTATED_NAME)
                continue
            if item[_UNSUPPORTED]:
                unresolved(item[_UNSUPPORTED], item.get(_GUARD) or NO_SHARED_SENTENCE)
                continue
            subj = await resolver.lookup(subj_ref) or await self._stated_endpoint(subj_ref, listed, resolver, resolved)
            obj = await resolver.lookup(obj_ref) or await self._stated_endpoint(obj_ref, listed, resolver, resolved)
            if subj is None or obj is None:
                missing = subj_ref if subj is None else obj_ref
                unresolved(f"no {missing.label} named {missing.name!r} in the passage or the knowledge base", NO_ENTITY)
                continue
            chunk_report.resolved += 1
            spec = self.schema.relation_spec(item["label"])
            props = {k: v for k, v in item.items() if k not in ("subject", "object", *_INTERNAL) and v is not None}
            try:
                relation = spec.model.model_validate({**props, "subj": subj, "obj": obj})
            except pydantic.ValidationError as exc:
                unresolved(f"invalid relation: {exc}", INVALID)
                continue
            relations.append(relation)
            entry.read_as = read = ExtractedRelation(
                label=relation.label,
                subject=EntityRef(label=relation.subj.label, name=relation.subj.search_text()),
                object=EntityRef(label=relation.obj.label, name=relation.obj.search_text()),
            )
            if written is not None:
                written.setdefault(relation.id, read)
        chunk_report.written = len({r.id for r in relations})
        items: list[Entity | Relation] = [*resolved, *relations]
        sources: dict[str, list[str]] = {x.id: [extracted.chunk_id] for x in items}
        for rel in relations:  # endpoints found by lookup were mentioned here too
            sources.setdefault(rel.subj.id, [extracted.chunk_id])
            sources.setdefault(rel.obj.id, [extracted.chunk_id])
        if not dry:
            await self.knowledge_base.upsert(items, sources=sources)
        entity_ids.update(e.id for e in resolved)
        entity_ids.update(x for r in relations for x in (r.subj.id, r.obj.id))
        relation_ids.update(r.id for r in relations)
        return chunk_report


_UNSTATED = "_unstated"  # a validated relation's endpoints that its passage does not name
_UNSUPPORTED = "_unsupported"  # why no sentence of the passage supports a validated relation (or None)
_GUARD = "_guard"  # the guard that refused a validated relation (or None)
_PROPOSED = "_proposed"  # (label, subject, object) as the model proposed them
_BY = "_by"  # who proposed a relation: "model", or "reading" (a verb of the relation between two names)
_INTERNAL = (_UNSTATED, _UNSUPPORTED, _GUARD, _PROPOSED, _BY)


def _as_demo_output(extracted: _Extracted) -> dict[str, Any]:
    """A chunk's extraction as a labelled passage's output: its entities (ends of relations included)
    and the relations its guards accept, by full names."""
    entities: dict[tuple[str, str], dict[str, Any]] = {}
    for entity in extracted.entities:
        data = entity.model_dump(mode="json")
        shown = {k: v for k, v in data.items() if not k.startswith("_") and k in type(entity).model_fields}
        entities.setdefault((entity.label, normalize_text(entity.search_text())), shown)
    relations = []
    for item in extracted.relations:
        if item[_UNSTATED] or item[_UNSUPPORTED]:
            continue
        subj, obj = item["subject"], item["object"]
        for ref in (subj, obj):
            entities.setdefault((ref.label, normalize_text(ref.name)), {"label": ref.label, "name": ref.name})
        props = {k: v for k, v in item.items() if k not in ("label", "subject", "object", *_INTERNAL)}
        relations.append(
            {
                "label": item["label"],
                "subject": subj.model_dump(mode="json"),
                "object": obj.model_dump(mode="json"),
                **props,
            }
        )
    return {"entities": list(entities.values()), "relations": relations}


def _chunk(text: str, chunk_id: str) -> Chunk:
    return Chunk(id=chunk_id, document_id="inline", index=0, text=text, start=0, end=len(text))


_SUBJECT_PRONOUNS = frozenset({"he", "she", "it", "they"})
_POSSESSIVE_PRONOUNS = frozenset({"his", "her", "its", "their"})


def _with_antecedent(sentence: str, before: str | None) -> str:
    """``sentence`` with an opening pronoun replaced by the name ``before`` opens with ("She reports
    to Akira." after "Nadia Hussein joined." -> "Nadia Hussein reports to Akira."); else unchanged."""
    if before is None:
        return sentence
    first = sentence.split(" ", 1)
    word = first[0].casefold()
    if len(first) < 2 or word not in _SUBJECT_PRONOUNS | _POSSESSIVE_PRONOUNS:
        return sentence
    names = name_spans(before)
    opening = next((n for n in names if before.startswith(n) or before.find(n) <= 3), None)
    full = full_names(before)
    antecedent = full[0] if full and (opening is None or full[0].startswith(opening)) else opening
    if antecedent is None:
        return sentence
    return f"{antecedent}'s {first[1]}" if word in _POSSESSIVE_PRONOUNS else f"{antecedent} {first[1]}"


def _sentence_units(chunk: Chunk, parts: Sequence[str]) -> list[Chunk]:
    """One unit per sentence of ``chunk`` (``parts``), read with its antecedent (:func:`_with_antecedent`)."""
    units, cursor = [], 0
    for i, sentence in enumerate(parts):
        text = _with_antecedent(sentence, parts[i - 1] if i else None)
        offset = max(chunk.text.find(sentence, cursor), 0)
        cursor = offset + len(sentence)
        units.append(
            Chunk(
                id=f"{chunk.id}#{i}",
                document_id=chunk.document_id,
                index=chunk.index,
                text=text,
                start=chunk.start + offset,
                end=chunk.start + offset + len(text),
            )
        )
    return units


def training_data(
    passages: Sequence[tuple[str, Mapping[str, Any]]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(x, y)`` for ``fit`` / ``evaluate`` of a program around a :class:`KnowledgeExtractor` from
    labelled passages (``(passage text, extraction)`` pairs): each ``x`` the passage's ``text``,
    each ``y`` the relations it states as :attr:`ExtractionReport.extracted`."""
    x: list[dict[str, Any]] = []
    y: list[dict[str, Any]] = []
    for i, pair in enumerate(passages):
        if not (isinstance(pair, tuple | list) and len(pair) == 2 and isinstance(pair[0], str)):
            raise ConfigError(f"passages[{i}] must be a (passage text, extraction) pair.")
        relations = dict(pair[1]).get("relations", [])
        if not isinstance(relations, list):
            raise ConfigError(f"passages[{i}]: 'relations' must be a list.")
        x.append({"text": pair[0]})
        y.append(
            {
                "extracted": [
                    {"label": r["label"], "subject": dict(r["subject"]), "object": dict(r["object"])} for r in relations
                ]
            }
        )
    return x, y


class LabelledPassages:
    """A teacher for ``fit``: answers an extraction call with the labelled extraction of its passage.

    Given to an optimizer (``BootstrapFewShot(teacher=LabelledPassages(pairs))``, or
    ``KNNFewShot``), it makes each training run of a labelled passage a right run, so the labelled
    passages become the demos the optimizer chooses among; the candidates are still scored with
    the extractor's own model, so a set of demos is kept only where it helps that model. A passage
    it was not given is a :class:`~kag.errors.LanguageModelError` (that run scores 0).
    """

    name = "labelled-passages"

    def __init__(self, passages: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        self._by_text: dict[str, dict[str, Any]] = {}
        for i, pair in enumerate(passages):
            if not (isinstance(pair, tuple | list) and len(pair) == 2 and isinstance(pair[0], str)):
                raise ConfigError(f"passages[{i}] must be a (passage text, extraction) pair.")
            self._by_text[normalize_text(pair[0])] = copy.deepcopy(dict(pair[1]))

    def __len__(self) -> int:
        return len(self._by_text)

    async def generate(
        self,
        messages: Sequence[Message],
        json_schema: Mapping[str, Any],
        *,
        validate: Any = None,
        schema_name: str = "output",
    ) -> dict[str, Any]:
        """The labelled extraction of the passage in the last user message."""
        content = str(messages[-1]["content"]) if messages else ""
        passage = content.split("\n", 1)[1] if "\n" in content else content
        labelled = self._by_text.get(normalize_text(passage))
        if labelled is None:
            raise LanguageModelError(
                "LabelledPassages has no labelled extraction of this passage; give it every passage of x."
            )
        answer = copy.deepcopy(labelled)
        if validate is not None:
            validate(answer)
        return answer

    def get_config(self) -> dict[str, Any]:
        """Descriptive only (the passages are not saved)."""
        return {"type": "labelled-passages", "passages": len(self._by_text)}
