"""Result types of knowledge-base searches (``SearchHit`` itself lives in :mod:`kag.rag.hits`; re-exported here)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from kag.datamodels.base import Entity, Relation
from kag.datamodels.text import arrow, fact_line, properties_text
from kag.knowledge.html import esc, scored_table
from kag.query.cypher import CompiledQuery, compile_plan
from kag.query.plan import QueryPlan
from kag.rag.hits import SearchHit

__all__ = ["EntityHit", "SearchHit", "Searcher", "TripletHit", "TripletResults", "humanize"]

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|_")


@dataclass(frozen=True)
class EntityHit:
    """An entity and its similarity score in [0, 1]."""

    entity: Entity
    score: float

    def _repr_html_(self) -> str:
        return scored_table(["label", "entity"], [((self.entity.label, self.entity.search_text()), self.score)])


@dataclass(frozen=True)
class TripletHit:
    """A matched fact. For chains, ``path``/``relations`` hold every hop."""

    subject: Entity
    relation: Relation | None
    object: Entity | None
    score: float
    path: tuple[Entity, ...] = ()
    relations: tuple[Relation, ...] = ()
    # for each relation, the indices into ``path`` of the nodes it joins; empty for a plain path
    # (relation i joins path[i] and path[i + 1]); ``((0, 1), (0, 2))`` for two facts about path[0]
    ends: tuple[tuple[int, int], ...] = ()

    def text(self) -> str:
        """The fact as one line: ``Paris -[IsCapitalOf]-> France``; facts about one entity joined by semicolons."""
        if self.relation is None or self.object is None:
            return f"{_name(self.subject)} ({self.subject.label})"
        if self.ends and any(a != i or b != i + 1 for i, (a, b) in enumerate(self.ends)):
            lines = []
            for rel, (a, b) in zip(self.relations, self.ends, strict=True):
                forward = rel.subj.id == self.path[a].id
                lines.append(
                    f"{_name(self.path[a])} {arrow(rel.label, 'forward' if forward else 'backward')} "
                    f"{_name(self.path[b])}"
                )
            return "; ".join(lines)
        parts = [_name(self.path[0])]
        for i, rel in enumerate(self.relations):
            nxt = self.path[i + 1]
            forward = rel.subj.id == self.path[i].id
            parts.append(f" {arrow(rel.label, 'forward' if forward else 'backward')} ")
            parts.append(_name(nxt))
        return "".join(parts)

    @property
    def ids(self) -> tuple[str, ...]:
        """``(subject, relation, object)`` ids in the relation's direction, or ``(entity,)``."""
        if self.relation is None or self.object is None:
            return (self.subject.id,)
        return (self.relation.subj.id, self.relation.id, self.relation.obj.id)

    def describe(self) -> str:
        """The fact with its properties, in the relation's direction.

        ``Paris -[IsCapitalOf]-> France (since=1944)``, or ``City Paris: population=2103000``
        for an entity on its own. This is the line tools and answers show a model.
        """
        if self.relation is None or self.object is None:
            entity = self.subject
            keys = {*type(entity).key_fields(), "label"}
            props = properties_text({k: v for k, v in entity.to_dict().items() if k not in keys})
            return f"{entity.label} {entity.search_text()}" + (f": {props}" if props else "")
        rel = self.relation
        props = properties_text(rel.properties())
        return fact_line(rel.subj.search_text(), rel.label, rel.obj.search_text()) + (f" ({props})" if props else "")

    def sentence(self) -> str:
        """The fact in words, for ranking it against a question: ``Paris is capital of France``."""
        if self.relation is None or self.object is None:
            return self.describe()
        rel = self.relation
        props = properties_text(rel.properties())
        return f"{rel.subj.search_text()} {humanize(rel.label)} {rel.obj.search_text()} {props}".strip()

    def to_dict(self) -> dict[str, Any]:
        """The fact as JSON: ``subject``/``object`` follow the relation's own direction.

        (The attributes follow the search pattern instead: for a bidirectional match
        ``hit.subject`` is the entity that matched the subject side; ``path`` keeps that order.)
        """
        rel = self.relation
        return {
            "subject": (rel.subj if rel else self.subject).to_dict(),
            "relation": rel.properties() | {"label": rel.label} if rel else None,
            "object": rel.obj.to_dict() if rel else None,
            "score": self.score,
            "text": self.text(),
            "path": [e.to_dict() for e in self.path],
            "relations": [
                r.properties() | {"label": r.label, "subj": r.subj.id, "obj": r.obj.id} for r in self.relations
            ],
        }

    def _repr_html_(self) -> str:
        return scored_table(["fact"], [((self.text(),), self.score)])


def humanize(label: str) -> str:
    """``IsCapitalOf`` -> ``is capital of``."""
    return " ".join(p for p in _CAMEL.split(label) if p).lower()


def _name(entity: Entity) -> str:
    return entity.search_text()


class TripletResults(list[TripletHit]):
    """Hits of a triplet search; ``count`` is set for count searches, ``query`` holds the Cypher."""

    def __init__(
        self,
        hits: list[TripletHit] | None = None,
        *,
        count: int | None = None,
        query: CompiledQuery | None = None,
        plan: QueryPlan | None = None,
    ) -> None:
        super().__init__(hits or [])
        self.count: int | None = count  # type: ignore[assignment]
        self._query = query
        self.plan = plan

    @property
    def query(self) -> CompiledQuery | None:
        """The Cypher the search compiles to (compiled on first access; the same on every backend)."""
        if self._query is None and self.plan is not None:
            self._query = compile_plan(self.plan)
        return self._query

    def _repr_html_(self) -> str:
        if self.count is not None:
            return f"<b>count</b>: {self.count}" + _query_html(self.query)
        rows = [((i + 1, h.text()), h.score) for i, h in enumerate(self)]
        return scored_table(["#", "fact"], rows, caption=f"{len(self)} facts") + _query_html(self.query)


def _query_html(query: CompiledQuery | None) -> str:
    if query is None:
        return ""
    return f"<details><summary>Cypher</summary><pre>{esc(query.text)}</pre></details>"


@runtime_checkable
class Searcher(Protocol):
    """What a tool and an answer need from a knowledge source: a name and a search.

    ``Knowledge`` implements it; so can any object that returns :class:`SearchHit` lists.
    """

    name: str
    description: str
    context_max_chars: int
    score_threshold: float

    async def search(self, query: str, k: int = 5, where: Mapping[str, Any] | None = None) -> Sequence[SearchHit]:
        """Up to ``k`` hits for ``query`` (facts, then passages), optionally filtered by metadata."""
        ...
