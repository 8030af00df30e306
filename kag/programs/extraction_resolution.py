"""Entity resolution for one extraction run: which extracted entities are one, here or in the graph.

An entity is the one already seen in the run under the same normalized key, else the one whose
embedding is at least ``threshold`` similar, else the knowledge base's nearest above it; the two
are merged attribute by attribute (:func:`merge_entities`). A relation's end named only by a first
or last word ("Tomasz" for "Tomasz Wiśniewski") is the one entity of the run whose name it opens or
closes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kag.datamodels.base import Entity
from kag.knowledge.base import KnowledgeBase
from kag.programs.extraction_report import EntityRef
from kag.text import normalize_text

__all__ = ["EntityResolver", "merge_entities"]


@dataclass
class EntityResolver:
    """Canonical entities of one run: by normalized key, then by embedding similarity."""

    kb: KnowledgeBase
    threshold: float
    by_key: dict[tuple[str, str], Entity] = field(default_factory=dict)
    vectors: dict[str, list[tuple[np.ndarray, tuple[str, str]]]] = field(default_factory=dict)
    merged: int = 0

    async def resolve(self, entity: Entity) -> Entity:
        """The canonical entity ``entity`` is (itself, when it is new), merged with what it adds."""
        key = (entity.label, normalize_text(entity.search_text()))
        if key in self.by_key:
            self.merged += 1
            self.by_key[key] = merge_entities(self.by_key[key], entity)
            return self.by_key[key]
        vec = (await self.kb.embed([entity.search_text()]))[0]
        for other_vec, other_key in self.vectors.get(entity.label, []):
            if (1.0 + float(other_vec @ vec)) / 2.0 >= self.threshold:
                self.merged += 1
                self.by_key[key] = self.by_key[other_key] = merge_entities(self.by_key[other_key], entity)
                return self.by_key[key]
        canonical = entity
        hits = await self.kb.similarity_search(
            entity.label, entity.search_text(), k=1, threshold=self.threshold, linked=False
        )
        if hits:  # already in the knowledge base under this (or a near-identical) name
            self.merged += 1
            canonical = merge_entities(hits[0].entity, entity)
        self.by_key[key] = canonical
        self.vectors.setdefault(entity.label, []).append((vec, key))
        return canonical

    async def lookup(self, ref: EntityRef) -> Entity | None:
        """The entity a relation's end names: one of this run, else the knowledge base's; None if none."""
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


def merge_entities(kept: Entity, new: Entity) -> Entity:
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
