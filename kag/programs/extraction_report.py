"""What an extraction run reports: per chunk and per run, and the guards that refuse a relation.

A relation the model proposed is written, refused by a guard (:data:`GUARDS`: the passage does not
write an end, one name is on both sides, no sentence names both ends, the sentence's words join other
names), or unresolved (an end resolved to no entity, or the relation's model refused it). Every chunk
gets a :class:`ChunkReport`; a run's :class:`ExtractionReport` gathers them with the ids written.
"""

from __future__ import annotations

from typing import Literal

from kag.datamodels.base import DataModel

__all__ = [
    "GUARDS",
    "INVALID",
    "NO_ENTITY",
    "NO_SHARED_SENTENCE",
    "READING_DISAGREES",
    "SAME_ENTITY",
    "UNSTATED_NAME",
    "ChunkReport",
    "EntityRef",
    "ExtractedRelation",
    "ExtractionReport",
    "ProposedRelation",
    "UnresolvedRelation",
]

# guards: why a proposed relation is refused (ProposedRelation.guard, UnresolvedRelation.kind)
UNSTATED_NAME = "unstated_name"  # an end the passage does not write
SAME_ENTITY = "same_entity"  # one name on both sides
NO_SHARED_SENTENCE = "no_shared_sentence"  # no sentence names both ends
NO_ENTITY = "no_entity"  # an end resolved to no entity (passage or knowledge base)
INVALID = "invalid"  # the relation's model refused it
READING_DISAGREES = "reading_disagrees"  # the sentence writes the relation's words between other names
GUARDS = (UNSTATED_NAME, SAME_ENTITY, NO_SHARED_SENTENCE, READING_DISAGREES)


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
