"""One chunk's validated extraction resolved and written, with what became of each relation reported.

Its entities are resolved (:class:`~kag.programs.extraction_resolution.EntityResolver`); each relation
is written, refused by the guard that held it, or unresolved (an end names no entity of the passage
or the knowledge base, or the relation's model refuses it); everything written is upserted with
provenance to the chunk. In a dry run the same is resolved and reported, and nothing is upserted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pydantic

from kag.datamodels.base import Entity, Relation
from kag.datamodels.schema import GraphSchema
from kag.knowledge.base import KnowledgeBase
from kag.programs.extraction_guards import BY, GUARD, INTERNAL, PROPOSED, UNSTATED, UNSUPPORTED, Extracted
from kag.programs.extraction_report import (
    GUARDS,
    INVALID,
    NO_ENTITY,
    NO_SHARED_SENTENCE,
    UNSTATED_NAME,
    ChunkReport,
    EntityRef,
    ExtractedRelation,
    ExtractionReport,
    ProposedRelation,
    UnresolvedRelation,
)
from kag.programs.extraction_resolution import EntityResolver
from kag.text import normalize_text

__all__ = ["write_extracted"]


async def write_extracted(
    extracted: Extracted,
    *,
    knowledge_base: KnowledgeBase,
    schema: GraphSchema,
    resolver: EntityResolver,
    report: ExtractionReport,
    entity_ids: set[str],
    relation_ids: set[str],
    dry: bool = False,
    written: dict[str, ExtractedRelation] | None = None,
) -> ChunkReport:
    """Resolve and write one chunk's extraction (``dry``: resolve only); its :class:`ChunkReport`.

    Relations not written are appended to ``report.unresolved``; the ids written (would be, when
    ``dry``) are added to ``entity_ids`` and ``relation_ids``, each relation written to ``written``.
    """
    chunk_report = ChunkReport(chunk_id=extracted.chunk_id, proposed=len(extracted.relations))
    resolved = [await resolver.resolve(e) for e in extracted.entities]
    listed = {normalize_text(e.search_text()): e.label for e in extracted.entities}
    relations: list[Relation] = []
    for item in extracted.relations:
        subj_ref, obj_ref = item["subject"], item["object"]
        proposed_label, proposed_subj, proposed_obj = item.get(PROPOSED) or (item["label"], subj_ref, obj_ref)
        entry = ProposedRelation(
            label=proposed_label,
            subject=proposed_subj,
            object=proposed_obj,
            status="written",
            by=str(item.get(BY, "model")),
            read_as=ExtractedRelation(label=item["label"], subject=subj_ref, object=obj_ref),
        )
        chunk_report.relations.append(entry)

        def unresolved(reason: str, kind: str, item: dict[str, Any] = item, entry: ProposedRelation = entry) -> None:
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

        if item[UNSTATED]:
            missing = item[UNSTATED][0]
            unresolved(f"{missing.label} {missing.name!r} is not a name the passage writes", UNSTATED_NAME)
            continue
        if item[UNSUPPORTED]:
            unresolved(item[UNSUPPORTED], item.get(GUARD) or NO_SHARED_SENTENCE)
            continue
        subj = await resolver.lookup(subj_ref) or await _stated_endpoint(schema, subj_ref, listed, resolver, resolved)
        obj = await resolver.lookup(obj_ref) or await _stated_endpoint(schema, obj_ref, listed, resolver, resolved)
        if subj is None or obj is None:
            missing = subj_ref if subj is None else obj_ref
            unresolved(f"no {missing.label} named {missing.name!r} in the passage or the knowledge base", NO_ENTITY)
            continue
        chunk_report.resolved += 1
        spec = schema.relation_spec(item["label"])
        props = {k: v for k, v in item.items() if k not in ("subject", "object", *INTERNAL) and v is not None}
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
        await knowledge_base.upsert(items, sources=sources)
    entity_ids.update(e.id for e in resolved)
    entity_ids.update(x for r in relations for x in (r.subj.id, r.obj.id))
    relation_ids.update(r.id for r in relations)
    return chunk_report


async def _stated_endpoint(
    schema: GraphSchema,
    ref: EntityRef,
    listed: Mapping[str, str],
    resolver: EntityResolver,
    resolved: list[Entity],
) -> Entity | None:
    """The entity a relation's endpoint names when the passage writes the name but the model
    did not list it (a small model often lists relations only); ``None`` when the name is
    listed under another label (the two disagree: reported, not guessed)."""
    if listed.get(normalize_text(ref.name), ref.label) != ref.label:
        return None
    entity = await resolver.resolve(schema.entity_model(ref.label).model_validate({"name": ref.name}))
    resolved.append(entity)
    return entity
