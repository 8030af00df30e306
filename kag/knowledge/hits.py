"""Result types of knowledge-base searches."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kag.datamodels.base import Entity, Relation
from kag.knowledge.html import esc, scored_table
from kag.query.cypher import CompiledQuery, compile_plan
from kag.query.plan import QueryPlan


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

    def text(self) -> str:
        """The fact as one line: ``Paris -[IsCapitalOf]-> France``."""
        if self.relation is None or self.object is None:
            return f"{_name(self.subject)} ({self.subject.label})"
        parts = [_name(self.path[0])]
        for i, rel in enumerate(self.relations):
            nxt = self.path[i + 1]
            forward = rel.subj.id == self.path[i].id
            parts.append(f" -[{rel.label}]-> " if forward else f" <-[{rel.label}]- ")
            parts.append(_name(nxt))
        return "".join(parts)

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
