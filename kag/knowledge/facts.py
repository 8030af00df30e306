"""Graph facts for a question: find the entities it names, read their facts, rank them.

The question's entity names are matched exactly (whole words, normalized) against the
graph; a query that names none whole but whose every word is a word of one name (``firmware``
for ``Firmware team``) names that entity. Each named entity's relations are read with an exact
triplet search anchored on that entity; the facts are ranked by the similarity of their sentence
(``Paris is capital of France``) to the question.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kag.datamodels.base import Entity
from kag.errors import SchemaError
from kag.graph.passages import PassageStore
from kag.knowledge.base import KnowledgeBase, refresh_limit
from kag.knowledge.hits import SearchHit, TripletHit
from kag.knowledge.mentions import EntityMatcher, EntityMention, build_matcher, refresh_matcher
from kag.query.triplet import TripletSearch

ANCHOR_THRESHOLD = 0.999  # the anchor entity itself: its key text against its own embedding


class FactFinder:
    """Facts about the entities a question names, as :class:`SearchHit` of kind ``"fact"``."""

    def __init__(self, kb: KnowledgeBase, store: PassageStore, *, fetch_k: int, score_threshold: float) -> None:
        self.kb = kb
        self.store = store
        self.fetch_k = fetch_k
        self.score_threshold = score_threshold
        self._matcher: EntityMatcher | None = None
        self._matcher_revision = -1

    def invalidate(self) -> None:
        """Forget the cached entity names (they are rebuilt on the next question)."""
        self._matcher = None

    async def matcher(self) -> EntityMatcher:
        """The name matcher over every entity, rebuilt when the knowledge base changed."""
        matcher = self._matcher
        if matcher is not None and self._matcher_revision != self.kb.revision:
            revision = self.kb.revision
            changed = self.kb.written_since(self._matcher_revision, refresh_limit(matcher.entities))
            if changed is not None:  # only the entities written since: one query, not every entity
                await refresh_matcher(matcher, self.store, self.kb.schema, changed)
                self._matcher_revision = revision
        if self._matcher is None or self._matcher_revision != self.kb.revision:
            revision = self.kb.revision
            self._matcher = await build_matcher(self.store, self.kb.schema)
            self._matcher_revision = revision
        return self._matcher

    async def find(self, query: str, qvec: np.ndarray | None, k: int, scope: dict[str, Any] | None) -> list[SearchHit]:
        """Up to ``k`` facts, best first; with a ``scope``, only entities mentioned by passages in it."""
        if not self.kb.schema.entity_labels:
            return []
        matcher = await self.matcher()
        # a question names entities whole; a search of a word or two may name part of one ("firmware")
        refs = matcher.find(query) or matcher.find_in_names(query)
        if scope and refs:
            allowed = await self.store.mentioned_by([r.id for r in refs], scope)
            refs = [r for r in refs if r.id in allowed]
        if not refs:
            return []
        fetch = max(self.fetch_k, k)
        found: dict[tuple[str, ...], tuple[TripletHit, str]] = {}
        for ref in refs[:k]:
            for hit in await self.facts_of(ref, fetch):
                found.setdefault(hit.ids, (hit, hit.sentence()))
        if not found:
            return []
        keys = list(found)
        assert qvec is not None
        vectors = await self.kb.embed([found[key][1] for key in keys])
        q = qvec / np.linalg.norm(qvec)
        sims = np.clip((1.0 + (vectors @ q).astype(np.float64)) / 2.0, 0.0, 1.0)
        ranked = sorted(zip(keys, sims.tolist(), strict=True), key=lambda item: (-item[1], item[0]))
        out = []
        for key, score in ranked:
            if score < self.score_threshold:
                continue
            hit = found[key][0]
            out.append(
                SearchHit(
                    kind="fact",
                    text=hit.describe(),
                    score=float(score),
                    source="graph",
                    ids=key,
                    metadata=hit.to_dict() | {"score": float(score)},
                    title=hit.subject.label if hit.relation is None else hit.relation.label,
                )
            )
            if len(out) >= k:
                break
        return out

    async def facts_of(self, ref: EntityMention, k: int) -> list[TripletHit]:
        """The entity's relations in either direction, or the entity alone when it has none."""
        hits: list[TripletHit] = []
        if self.kb.schema.relation_labels:
            search = TripletSearch(
                subject_label=ref.label,
                subject_similarity_search=ref.text,
                relation_label="*",
                object_label="*",
                object_similarity_search="*",
                bidirectional=True,
            )
            try:
                results = await self.kb.triplet_search(search, k=k, threshold=ANCHOR_THRESHOLD)
            except SchemaError:  # the label takes part in no declared relation
                results = None
            hits = [h for h in results or [] if h.path and h.path[0].id == ref.id]
        if not hits:
            entity = await self.kb.get(ref.id)
            if isinstance(entity, Entity):
                hits = [TripletHit(entity, None, None, 1.0, (entity,), ())]
        return hits
