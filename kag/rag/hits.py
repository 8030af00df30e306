"""``SearchHit``: one search result, a fact or a passage, as every knowledge source returns it.

It lives in the retrieval layer so retrievers (:mod:`kag.rag.retrievers`) can build hits without the
knowledge layer; :mod:`kag.knowledge.hits` re-exports it beside the graph's own hit types.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from kag.errors import InvalidInputError
from kag.rag.html import scored_table

__all__ = ["SearchHit"]


@dataclass(frozen=True, kw_only=True)
class SearchHit:
    """One search result (every field but ``text`` has a default; construct by keyword).

    ``kind`` is ``"fact"`` (from the typed graph) or ``"passage"`` (a chunk, or a
    result of an external retriever). ``ids`` are graph ids: ``(subject, relation,
    object)`` or ``(entity,)`` for a fact, ``(chunk_id, document_id)`` for a
    passage. ``source`` is ``"graph"`` for facts and the document source for
    passages. ``metadata`` holds the fact as a dict, or the chunk metadata
    (document metadata + ``source``, ``document_id``, ``chunk_index``, ``start``,
    ``end``). ``mentions`` lists the ids of the entities a passage mentions.
    ``chunk_id`` / ``document_id`` default from ``ids`` (and fill ``ids`` when it
    is empty); ``rank`` is the 1-based position in the list a search returned.
    """

    text: str
    score: float = 0.0
    source: str = ""
    kind: Literal["fact", "passage"] = "passage"
    ids: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    mentions: tuple[str, ...] = ()
    title: str = ""
    chunk_id: str | None = None
    document_id: str | None = None
    rank: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise InvalidInputError(f"SearchHit text must be a str, got {type(self.text).__name__}.")
        if self.kind not in ("fact", "passage"):
            raise InvalidInputError(f"SearchHit kind must be 'fact' or 'passage', got {self.kind!r}.")
        # frozen: normalize through object.__setattr__ (floats, tuples, ids both ways)
        score = 0.0 if self.score is None else self.score
        if isinstance(score, bool) or not isinstance(score, int | float) or score != score:
            raise InvalidInputError(f"SearchHit score must be a finite number, got {self.score!r}.")
        object.__setattr__(self, "score", float(score))
        object.__setattr__(self, "source", "" if self.source is None else str(self.source))
        object.__setattr__(self, "ids", tuple(str(i) for i in self.ids))
        object.__setattr__(self, "mentions", tuple(self.mentions))
        object.__setattr__(self, "metadata", dict(self.metadata or {}))
        if self.kind == "passage":
            if not self.ids and self.chunk_id:
                ids = (self.chunk_id, self.document_id) if self.document_id else (self.chunk_id,)
                object.__setattr__(self, "ids", ids)
            elif not self.ids and self.document_id:
                object.__setattr__(self, "ids", (self.document_id,))
            if self.chunk_id is None and self.ids and not self.ids[0].startswith("doc_"):
                object.__setattr__(self, "chunk_id", self.ids[0])
            if self.document_id is None and len(self.ids) > 1:
                object.__setattr__(self, "document_id", self.ids[1])

    def _repr_html_(self) -> str:
        return scored_table(["kind", "source", "text"], [((self.kind, self.source, self.text[:300]), self.score)])

    @property
    def id(self) -> str:
        """The primary id: the chunk id of a passage, the relation (or entity) id of a fact."""
        if self.kind == "fact" and len(self.ids) == 3:
            return self.ids[1]
        return self.ids[0] if self.ids else ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible dict (:meth:`from_dict` reads it back)."""
        return {
            "kind": self.kind,
            "text": self.text,
            "score": self.score,
            "source": self.source,
            "title": self.title,
            "ids": list(self.ids),
            "metadata": self.metadata,
            "mentions": list(self.mentions),
            "chunk_id": self.chunk_id,
            "document_id": self.document_id,
            "rank": self.rank,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SearchHit:
        """Rebuild a hit from :meth:`to_dict` output (unknown keys are refused)."""
        if not isinstance(data, Mapping):
            raise InvalidInputError(f"SearchHit.from_dict() needs a dict, got {type(data).__name__}.")
        known = {f.name for f in fields(cls)}
        extra = sorted(set(data) - known)
        if extra:
            raise InvalidInputError(f"SearchHit.from_dict(): unknown keys {extra}; known: {sorted(known)}.")
        values = dict(data)
        for key in ("ids", "mentions"):
            if key in values:
                values[key] = tuple(values[key] or ())
        if "text" not in values:
            raise InvalidInputError("SearchHit.from_dict() needs a 'text'.")
        return cls(**values)
