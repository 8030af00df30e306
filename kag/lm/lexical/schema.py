"""What the schema allows: labels, relations and their endpoint types, read from the JSON schema."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from kag.datamodels.base import Entity
from kag.datamodels.schema import GraphSchema
from kag.lm.lexical.text import _REL_DESC, _STOPWORDS, ANY, _content_words, verb_bases
from kag.ranking.linking import NameIndex
from kag.text import split_identifier, stem

# -- what the schema allows -----------------------------------------------------------


class NameLookup(Protocol):
    """Where ``LexicalLM`` looks entity names up: a knowledge base satisfies it."""

    schema: GraphSchema

    async def similarity_search(self, label: str, text: str, *, k: int = 10, threshold: float = 0.0) -> Sequence[Any]:
        """Hits with ``.entity`` and ``.score``, best first."""
        ...


@runtime_checkable
class NameListing(Protocol):
    """A :class:`NameLookup` that can also list every entity's names (a knowledge base can): then a
    short or long form of a name ("BWF", "Theodore Vance") is linked too."""

    async def names(self) -> NameIndex:
        """The name keys of every entity."""
        ...


@dataclass
class _Relation:
    label: str
    subj: tuple[str, ...]
    obj: tuple[str, ...]
    vocab: dict[str, float] = field(default_factory=dict)
    symmetric: bool = False


@dataclass
class _Schema:
    entity_labels: tuple[str, ...]
    relations: dict[str, _Relation]
    label_phrases: dict[str, list[tuple[tuple[str, ...], float]]]  # label -> (stems, weight)
    max_hops: int = 1
    # the properties a hop of the requested schema has (older schemas lack the newer ones)
    hop_fields: frozenset[str] = frozenset()
    # label -> numeric field -> the stems that name it (field name, description)
    numeric: dict[str, dict[str, frozenset[str]]] = field(default_factory=dict)
    # stems of every entity field's name and description: a question word among them asks for a property
    field_vocab: frozenset[str] = frozenset()

    @functools.cached_property
    def label_words(self) -> frozenset[str]:
        """Every stem of every label's phrases ("city", a docstring's word for the label)."""
        return frozenset(w for entries in self.label_phrases.values() for phrase, _ in entries for w in phrase)

    @functools.cached_property
    def relation_words(self) -> frozenset[str]:
        """Every stem of every relation's vocabulary (its name, its verb forms, its docstring)."""
        return frozenset(w for rel in self.relations.values() for w in rel.vocab)


def _schema_from_json(json_schema: dict[str, Any], kb: NameLookup | None) -> _Schema:
    """Read labels and relation endpoints from a triplet-search JSON schema."""
    props = json_schema.get("properties") or {}
    max_hops = 1
    if "hops" in props:
        hops = props["hops"]
        max_hops = int(hops.get("maxItems") or 1)
        props = (hops.get("items") or {}).get("properties") or {}
    hop_fields = frozenset(props)
    entity_labels = tuple(
        v for v in (props.get("subject_label") or {}).get("enum", []) if isinstance(v, str) and v != ANY
    )
    rel_prop = props.get("relation_label") or {}
    rel_labels = [v for v in rel_prop.get("enum", []) if isinstance(v, str) and v != ANY]
    declared = {m.group(1): m for m in _REL_DESC.finditer(rel_prop.get("description") or "")}
    graph = kb.schema if kb is not None else None
    relations: dict[str, _Relation] = {}
    for label in rel_labels:
        if graph is not None and label in graph.relations:
            spec = graph.relations[label]
            subj, obj = spec.subj_labels, spec.obj_labels
        elif label in declared:
            subj = tuple(declared[label].group(2).split("|"))
            obj = tuple(declared[label].group(3).split("|"))
        else:
            subj = obj = entity_labels
        rel = _Relation(
            label,
            subj,
            obj,
            symmetric=bool(graph is not None and getattr(graph.relations.get(label), "symmetric", False)),
        )
        for w in split_identifier(label):
            if w not in _STOPWORDS:
                rel.vocab[stem(w)] = 1.0
                for base in verb_bases(stem(w)):  # "DirectedBy" is asked "What did X direct?"
                    rel.vocab.setdefault(base, 1.0)
        if graph is not None and label in graph.relations:
            model = graph.relations[label].model
            doc = model.__doc__ or ""
            base_doc = (model.__mro__[1].__doc__ or "") if len(model.__mro__) > 1 else ""
            texts = [doc] if doc and doc != base_doc and "subj:" not in doc else []
            for name, info in model.model_fields.items():
                if name not in ("label", "subj", "obj"):
                    texts.append(" ".join(split_identifier(name)))
                    if info.description:
                        texts.append(info.description)
            for text in texts:
                for w in _content_words(text):
                    rel.vocab.setdefault(w, 0.25)
        relations[label] = rel
    phrases: dict[str, list[tuple[tuple[str, ...], float]]] = {}
    primary = {label: tuple(stem(w) for w in split_identifier(label)) for label in entity_labels}
    for label in entity_labels:
        entries = [(primary[label], 1.0)]
        if graph is not None and label in graph.entities:
            entity_model = graph.entities[label]
            doc_lines = (entity_model.__doc__ or "").strip().splitlines()
            if doc_lines and entity_model.__doc__ != Entity.__doc__:
                others = {w for other, ws in primary.items() if other != label for w in ws}
                # an example in the docstring ("e.g. Western Europe") names an entity, not the label
                first = re.split(r"\b(?:e\.g\.|i\.e\.|such as|for example|like)\s", doc_lines[0])[0]
                for w in _content_words(first):
                    if w not in others and (w,) != primary[label]:
                        entries.append(((w,), 0.5))
        phrases[label] = entries
    numeric: dict[str, dict[str, frozenset[str]]] = {}
    if graph is not None and {"subject_where", "order_by"} & hop_fields:
        for label in entity_labels:
            if label not in graph.entities:
                continue
            fields = graph.entities[label].model_fields
            for name, kind in graph.field_kinds(label).items():
                if kind not in ("int", "float"):
                    continue
                info = fields[name]
                text = " ".join(split_identifier(name)) + " " + (info.description or "")
                numeric.setdefault(label, {})[name] = frozenset(_content_words(text))
    field_vocab: set[str] = set()
    if graph is not None:
        for label in entity_labels:
            if label not in graph.entities:
                continue
            for name, info in graph.entities[label].model_fields.items():
                if name != "label":
                    text = " ".join(split_identifier(name)) + " " + (info.description or "")
                    field_vocab.update(_content_words(text))
    return _Schema(entity_labels, relations, phrases, max_hops, hop_fields, numeric, frozenset(field_vocab))
