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
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np
import pydantic
from pydantic import BaseModel

from kag.datamodels.base import DataModel, Entity, Relation
from kag.datamodels.documents import Chunk
from kag.datamodels.schema import GraphSchema, inline_refs, strict_schema
from kag.errors import ConfigError, InvalidInputError, SchemaError
from kag.knowledge.base import KnowledgeBase
from kag.lm.base import LanguageModel, Message
from kag.programs.module import Module, as_list
from kag.programs.skeleton import skeleton
from kag.programs.stated import is_stated, names_relation, sentence_of, stated_schema, states_name
from kag.text import normalize_text
from kag.training.variables import Demo, Variable

INSTRUCTIONS = (
    "You extract a knowledge graph from a text passage. List the entities the passage states, "
    "each with its label and the fields its schema asks for, and the relations between them. "
    "A relation names its subject and object by label and name; both must also appear in "
    "`entities`. Only state what the passage says. Return JSON only."
)


class EntityRef(DataModel):
    """How an extracted relation names one of its endpoints."""

    label: str
    name: str


class UnresolvedRelation(DataModel):
    """A relation the model stated whose endpoint could not be resolved to an entity."""

    chunk_id: str
    label: str
    subject: EntityRef
    object: EntityRef
    reason: str


class ExtractionReport(DataModel):
    """What an extraction run found and wrote."""

    chunks: int = 0
    entities: int = 0
    relations: int = 0
    merged: int = 0
    unresolved: list[UnresolvedRelation] = []
    failed_chunks: dict[str, str] = {}
    entity_ids: list[str] = []
    relation_ids: list[str] = []


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
            "properties": {
                "entities": {"type": "array", "items": {"anyOf": entity_items}},
                "relations": relations,
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
        hits = await self.kb.similarity_search(ref.label, ref.name, k=1, threshold=self.threshold, linked=False)
        return hits[0].entity if hits else None


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


class KnowledgeExtractor(Module):
    """Module: chunks (or models with a ``text`` field) -> entities and relations in the knowledge base.

    ``examples`` are labelled passages, ``(passage text, extraction)`` pairs, shown to the model as
    worked examples before each chunk; each must be an extraction this extractor accepts from its
    passage. With ``nearest=k`` a chunk is shown only the ``k`` examples written most like it (names
    and numbers masked, compared by the knowledge base's embedder; the most similar last), so many
    labelled passages can be kept while the prompt stays short. Both are saved by :meth:`get_config`.
    """

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
        name: str | None = None,
        description: str | None = None,
    ) -> None:
        super().__init__(name=name, description=description)
        if concurrency < 1:
            raise ConfigError("concurrency must be >= 1.")
        if not 0.5 < resolution_threshold <= 1.0:
            raise ConfigError("resolution_threshold must be in (0.5, 1]: 0.5 means 'unrelated'.")
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
        self.instructions = instructions or INSTRUCTIONS
        self.json_schema = extraction_schema(self.schema)
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
        self._shown = Variable(demos=demos, nearest=nearest, trainable=False)

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
        }

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **runtime: Any) -> KnowledgeExtractor:
        from kag.programs.module import import_object, rebuild_knowledge_base, rebuild_language_model

        custom = runtime.get("custom_objects")
        kb = rebuild_knowledge_base(config.get("knowledge_base"), runtime.get("knowledge_base"), custom)
        lm = rebuild_language_model(config.get("language_model"), runtime.get("language_model"), kb)
        return cls(
            kb,
            lm,
            [import_object(p, Entity, custom) for p in config.get("entity_models", [])],
            [import_object(p, Relation, custom) for p in config.get("relation_models", [])],
            resolution_threshold=config.get("resolution_threshold", 0.9),
            concurrency=config.get("concurrency", 4),
            examples=[(str(text), output) for text, output in config.get("examples", [])],
            nearest=config.get("nearest"),
            name=config.get("name"),
            description=config.get("description"),
        )

    def summary_fields(self) -> str:
        return f"entities={list(self.schema.entity_labels)} relations={list(self.schema.relation_labels)}"

    # -- extraction -----------------------------------------------------------
    @property
    def examples(self) -> list[tuple[str, dict[str, Any]]]:
        """The labelled passages as ``(passage text, extraction)`` pairs."""
        return [_labelled(d) for d in self._shown.demos]

    @property
    def nearest(self) -> int | None:
        """``None``: every example is shown with every chunk; ``k``: the ``k`` examples most like it."""
        return self._shown.nearest

    async def examples_for(self, chunk: Chunk) -> list[tuple[str, dict[str, Any]]]:
        """The examples shown with ``chunk``: all of them, or the ``nearest`` whose passages are written
        most like it (compared with their names and numbers masked, by the knowledge base's embedder),
        the most similar last."""
        demos = await self._shown.demos_for(
            skeleton(chunk.text), self.knowledge_base.embedder, lambda d: skeleton(_labelled(d)[0])
        )
        return [_labelled(d) for d in demos]

    def messages(self, chunk: Chunk, examples: Sequence[tuple[str, Mapping[str, Any]]] | None = None) -> list[Message]:
        """System instructions with the schema description, the examples (default: all of them) as
        user/assistant turns, then the passage as the user turn."""
        messages: list[Message] = [{"role": "system", "content": f"{self.instructions}\n\n{self.schema.describe()}"}]
        for i, (text, output) in enumerate(self.examples if examples is None else examples):
            messages.append({"role": "user", "content": f"Passage (id example-{i}):\n{text}"})
            messages.append({"role": "assistant", "content": json.dumps(output, ensure_ascii=False)})
        messages.append({"role": "user", "content": f"Passage (id {chunk.id}):\n{chunk.text}"})
        return messages

    def chunk_schema(self, chunk: Chunk) -> dict[str, Any]:
        """The schema the model fills for ``chunk``: for a model under a grammar, its names and
        values narrowed to what the chunk states (:func:`kag.programs.stated.stated_schema`)."""
        if getattr(self.language_model, "constrained_decoding", False):
            return stated_schema(self.json_schema, chunk.text)
        return self.json_schema

    def _validate(self, output: dict[str, Any], text: str) -> _Extracted:
        """The model's answer for the passage ``text`` as entities and relations; a name the
        passage does not write is refused (repaired), a value it does not state is dropped, and
        an entity or relation listed again is listed once."""
        entities: list[Entity] = []
        seen: set[tuple[str, str]] = set()
        for item in output.get("entities", []):
            model = self.schema.entity_model(item.get("label", ""))  # SchemaError is a ValueError: repaired
            name = str(item.get("name", ""))
            if not states_name(text, name):
                raise InvalidInputError(f"{item.get('label')} {name!r} is not a name the passage writes.")
            key = (model.model_fields["label"].default, normalize_text(name))
            if key in seen:
                continue
            seen.add(key)
            stated = {k: v for k, v in item.items() if v is not None and (k in ("label", "name") or is_stated(text, v))}
            entities.append(model.model_validate(stated))
        relations = []
        listed: set[tuple[str, str, str, str, str]] = set()
        for item in output.get("relations", []):
            spec = self.schema.relation_spec(item.get("label", ""))
            subj, obj = EntityRef.model_validate(item["subject"]), EntityRef.model_validate(item["object"])
            if subj.label not in spec.subj_labels or obj.label not in spec.obj_labels:
                raise SchemaError(
                    f"{spec.label} links {'|'.join(spec.subj_labels)} -> {'|'.join(spec.obj_labels)}, "
                    f"not {subj.label} -> {obj.label}."
                )
            # an endpoint the passage does not name is reported as unresolved, not stored
            unstated = [ref for ref in (subj, obj) if not states_name(text, ref.name)]
            label, unsupported = spec.label, None
            if not unstated:
                label, unsupported = self._supported(text, spec.label, subj, obj)
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
                }
            )
        return _Extracted("", entities, relations)

    def _supported(self, text: str, label: str, subj: EntityRef, obj: EntityRef) -> tuple[str, str | None]:
        """The relation label one sentence of ``text`` supports, and why none does (or None).

        A relation is read from a sentence that names both its ends (two different names): ends
        that never share a sentence, or one name on both sides, are reported, not stored. Where
        that sentence writes a word of another relation between the same kinds of entity and
        none of this one's ("Munich is a city in Germany" written as ``IsCapitalOf``), it is read
        as the relation the sentence names: a small model confuses relations that link the
        same labels far more often than it misreads the sentence's names.
        """
        if normalize_text(subj.name) == normalize_text(obj.name):
            return label, f"{subj.name!r} is on both sides of {label}"
        sentence = sentence_of(text, subj.name, obj.name)
        if sentence is None:
            return label, f"no sentence of the passage names both {subj.name!r} and {obj.name!r}"
        if names_relation(sentence, label):
            return label, None
        named = [
            other
            for other, spec in self.schema.relations.items()
            if other != label
            and subj.label in spec.subj_labels
            and obj.label in spec.obj_labels
            and names_relation(sentence, other)
        ]
        return (named[0] if len(named) == 1 else label), None

    async def extract(self, chunk: Chunk) -> _Extracted:
        """Ask the model for one chunk's entities and relations (validated, repaired if needed)."""
        output = await self.language_model.generate(
            self.messages(chunk, await self.examples_for(chunk)),
            self.chunk_schema(chunk),
            validate=lambda out: self._validate(out, chunk.text),
            schema_name="extraction",
        )
        result = self._validate(output, chunk.text)
        result.chunk_id = chunk.id
        return result

    async def ingest(self, chunks: Iterable[Chunk | str]) -> ExtractionReport:
        """Extract from every chunk (bounded concurrency), resolve, and write with provenance."""
        items = [c if isinstance(c, Chunk) else _chunk(c, f"text-{i}") for i, c in enumerate(chunks)]
        report = ExtractionReport(chunks=len(items))
        progress = Progress(len(items), enabled=self.progress)
        resolver = _Resolver(self.knowledge_base, self.resolution_threshold)
        gate = asyncio.Semaphore(self.concurrency)
        write_lock = asyncio.Lock()  # resolution + upsert are serialized so duplicates merge
        entity_ids: set[str] = set()
        relation_ids: set[str] = set()

        async def one(chunk: Chunk) -> None:
            async with gate:
                try:
                    extracted = await self.extract(chunk)
                except (ValueError, pydantic.ValidationError, KeyError) as exc:
                    report.failed_chunks[chunk.id] = str(exc)[:500]
                    progress.advance()
                    return
            async with write_lock:
                await self._write(extracted, resolver, report, entity_ids, relation_ids)
            progress.advance()

        await asyncio.gather(*(one(c) for c in items))
        report.entities, report.relations = len(entity_ids), len(relation_ids)
        report.entity_ids, report.relation_ids = sorted(entity_ids), sorted(relation_ids)
        report.merged = resolver.merged
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
    ) -> None:
        resolved = [await resolver.resolve(e) for e in extracted.entities]
        listed = {normalize_text(e.search_text()): e.label for e in extracted.entities}
        relations: list[Relation] = []
        for item in extracted.relations:
            subj_ref, obj_ref = item["subject"], item["object"]

            def unresolved(reason: str, item: dict[str, Any] = item) -> None:
                report.unresolved.append(
                    UnresolvedRelation(
                        chunk_id=extracted.chunk_id,
                        label=item["label"],
                        subject=item["subject"],
                        object=item["object"],
                        reason=reason[:500],
                    )
                )

            if item[_UNSTATED]:
                missing = item[_UNSTATED][0]
                unresolved(f"{missing.label} {missing.name!r} is not a name the passage writes")
                continue
            if item[_UNSUPPORTED]:
                unresolved(item[_UNSUPPORTED])
                continue
            subj = await resolver.lookup(subj_ref) or await self._stated_endpoint(subj_ref, listed, resolver, resolved)
            obj = await resolver.lookup(obj_ref) or await self._stated_endpoint(obj_ref, listed, resolver, resolved)
            if subj is None or obj is None:
                missing = subj_ref if subj is None else obj_ref
                unresolved(f"no {missing.label} named {missing.name!r} in the passage or the knowledge base")
                continue
            spec = self.schema.relation_spec(item["label"])
            props = {
                k: v
                for k, v in item.items()
                if k not in ("subject", "object", _UNSTATED, _UNSUPPORTED) and v is not None
            }
            try:
                relations.append(spec.model.model_validate({**props, "subj": subj, "obj": obj}))
            except pydantic.ValidationError as exc:
                unresolved(f"invalid relation: {exc}")
        items: list[Entity | Relation] = [*resolved, *relations]
        sources: dict[str, list[str]] = {x.id: [extracted.chunk_id] for x in items}
        for rel in relations:  # endpoints found by lookup were mentioned here too
            sources.setdefault(rel.subj.id, [extracted.chunk_id])
            sources.setdefault(rel.obj.id, [extracted.chunk_id])
        await self.knowledge_base.upsert(items, sources=sources)
        entity_ids.update(e.id for e in resolved)
        entity_ids.update(x for r in relations for x in (r.subj.id, r.obj.id))
        relation_ids.update(r.id for r in relations)


_UNSTATED = "_unstated"  # a validated relation's endpoints that its passage does not name
_UNSUPPORTED = "_unsupported"  # why no sentence of the passage supports a validated relation (or None)


def _chunk(text: str, chunk_id: str) -> Chunk:
    return Chunk(id=chunk_id, document_id="inline", index=0, text=text, start=0, end=len(text))
