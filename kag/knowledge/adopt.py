"""Make an existing Neo4j graph that kag did not write searchable, in place.

``kag schema --from neo4j://...`` (:mod:`kag.graph.introspect`) turns a graph's labels and
properties into Entity/Relation models; :func:`embed_in_place` then gives the nodes and
relationships of those models what kag's searches need, without copying anything:

* each node of a declared label gets the shared ``KagEntity`` label and kag's bookkeeping
  properties: ``id`` (the model's stable id), ``label``, ``kag_ns`` (the knowledge base's
  namespace), ``kag_direct`` (so deleting documents never removes it) and ``embedding``
  (its search text through the knowledge base's embedder);
* each relationship of a declared type between adopted nodes gets ``id``, ``label``,
  ``kag_ns`` and ``kag_direct``.

The graph's own labels, properties and relationships are left as they are. A node or
relationship is *skipped* (and reported, never changed) when it fails its model's
validation, when it already holds one of kag's properties with another value (an ``id`` of
its own, say), or when its key fields give the same id as another one. Running it again
adopts only what is new: adopted items carry ``kag_ns``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pydantic

from kag.datamodels.base import Entity
from kag.errors import ConfigError
from kag.graph.base import DIRECT, unflatten
from kag.graph.neo4j import ENTITY, Neo4jGraphStore, plain_properties
from kag.graph.neo4j_anchor import version_bump
from kag.knowledge.base import KnowledgeBase
from kag.query.cypher import IN_NAMESPACE, NAMESPACE, quote
from kag.validation import check_int

__all__ = ["AdoptReport", "embed_in_place"]

log = logging.getLogger(__name__)


@dataclass
class AdoptReport:
    """What :func:`embed_in_place` adopted, per label and type, and what it skipped and why."""

    entities: dict[str, int] = field(default_factory=dict)
    relations: dict[str, int] = field(default_factory=dict)
    skipped: list[tuple[str, str, str]] = field(default_factory=list)
    """``(label or type, element id, reason)`` of every item left unchanged."""

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON data."""
        return {
            "entities": dict(self.entities),
            "relations": dict(self.relations),
            "skipped": [{"label": a, "element_id": b, "reason": c} for a, b, c in self.skipped],
        }


async def embed_in_place(kb: KnowledgeBase, *, batch_size: int = 500) -> AdoptReport:
    """Adopt the nodes and relationships of ``kb``'s declared models in its Neo4j graph (see the module docstring).

    Raises:
        ConfigError: ``kb`` is not on Neo4j, or ``batch_size`` is not positive.
    """
    store = kb.store
    if not isinstance(store, Neo4jGraphStore):
        raise ConfigError("embed_in_place() adopts nodes of a Neo4j graph; this knowledge base is not on Neo4j.")
    check_int(batch_size, name="batch_size")
    await kb.ensure_ready()  # constraints and the per-label vector indexes exist first
    report = AdoptReport()
    for label in kb.schema.entity_labels:
        report.entities[label] = await _adopt_nodes(kb, store, label, batch_size, report)
    for label, spec in kb.schema.relations.items():
        report.relations[label] = await _adopt_relations(kb, store, label, spec.model, batch_size, report)
    kb.revision += 1  # name indexes and caches built from the graph are stale now
    log.info("adopted %s entities and %s relations in place", report.entities, report.relations)
    return report


def _conflict(props: dict[str, Any], wanted: dict[str, Any]) -> str | None:
    for key, value in wanted.items():
        if key in props and props[key] is not None and props[key] != value:
            return f"it already has its own {key!r} property"
    return None


async def _adopt_nodes(
    kb: KnowledgeBase, store: Neo4jGraphStore, label: str, batch_size: int, report: AdoptReport
) -> int:
    model = kb.schema.entity_model(label)
    ns = store.namespace
    skip: list[str] = []
    adopted = 0
    read = (
        f"MATCH (n:{quote(label)}) WHERE n.{quote(NAMESPACE)} IS NULL AND NOT elementId(n) IN $skip "
        "RETURN elementId(n) AS eid, properties(n) AS props LIMIT $batch"
    )
    write = (
        "UNWIND $rows AS row MATCH (n) WHERE elementId(n) = row.eid "
        f"SET n:{quote(ENTITY)}, n.id = row.id, n.label = $label, n.{quote(NAMESPACE)} = $ns, "
        f"n.{quote(DIRECT)} = true, n.embedding = row.embedding\n"
        + version_bump(label)  # a stamp: every store's cached matrix of the label reloads
    )
    while True:
        res = await store.run(read, {"skip": skip, "batch": batch_size}, write=False, what="reading nodes to adopt")
        if not res.records:
            return adopted
        entities: list[tuple[str, Entity]] = []
        for record in res.records:
            eid, props = record["eid"], plain_properties(record["props"])
            try:
                entity = model.model_validate({**unflatten(model, props), "label": label})
            except pydantic.ValidationError as exc:
                _skip(report, skip, label, eid, f"it does not fit {model.__name__}: {exc.errors()[0]['msg']}")
                continue
            reason = _conflict(props, {"id": entity.id, "label": label})
            if reason is None and props.get("embedding") is not None:
                reason = "it already has its own 'embedding' property"
            if reason is not None:
                _skip(report, skip, label, eid, reason)
                continue
            entities.append((eid, entity))
        entities = await _unique(store, entities, label, skip, report)
        if entities:
            vectors = await kb.embed([e.search_text() for _, e in entities])
            rows = [
                {"eid": eid, "id": e.id, "embedding": [float(x) for x in vectors[i]]}
                for i, (eid, e) in enumerate(entities)
            ]
            await store.write_transaction([(write, {"rows": rows, "label": label, "ns": ns})], f"adopting {label}")
            adopted += len(rows)


async def _unique(
    store: Neo4jGraphStore,
    entities: list[tuple[str, Entity]],
    label: str,
    skip: list[str],
    report: AdoptReport,
) -> list[tuple[str, Entity]]:
    """Drop entities whose id another node of this namespace has (already adopted, or earlier in the batch)."""
    res = await store.run(
        f"UNWIND $ids AS id MATCH (n:{quote(ENTITY)} {{id: id, {IN_NAMESPACE}}}) RETURN DISTINCT n.id AS id",
        {"ids": [e.id for _, e in entities], "ns": store.namespace},
        write=False,
        what="checking ids to adopt",
    )
    taken = {r["id"] for r in res.records}
    out = []
    for eid, entity in entities:
        if entity.id in taken:
            _skip(report, skip, label, eid, f"its key fields give the id of another node ({entity.id})")
            continue
        taken.add(entity.id)
        out.append((eid, entity))
    return out


async def _adopt_relations(
    kb: KnowledgeBase,
    store: Neo4jGraphStore,
    label: str,
    model: Any,
    batch_size: int,
    report: AdoptReport,
) -> int:
    spec = kb.schema.relation_spec(label)
    ns = store.namespace
    node = f"{quote(ENTITY)} {{{IN_NAMESPACE}}}"
    skip: list[str] = []
    adopted = 0
    read = (
        f"MATCH (a:{node})-[r:{quote(label)}]->(b:{node}) "
        f"WHERE r.{quote(NAMESPACE)} IS NULL AND a.label IN $subj AND b.label IN $obj AND NOT elementId(r) IN $skip "
        "RETURN elementId(r) AS eid, properties(r) AS props, a {.*, embedding: null} AS a, "
        "b {.*, embedding: null} AS b LIMIT $batch"
    )
    write = (
        "UNWIND $rows AS row MATCH ()-[r]->() WHERE elementId(r) = row.eid "
        f"SET r.id = row.id, r.label = $label, r.{quote(NAMESPACE)} = $ns, r.{quote(DIRECT)} = true "
        "RETURN count(*) AS n"
    )
    params = {"subj": list(spec.subj_labels), "obj": list(spec.obj_labels), "ns": ns}
    while True:
        res = await store.run(read, {**params, "skip": skip, "batch": batch_size}, write=False, what="reading")
        if not res.records:
            return adopted
        rows: list[dict[str, Any]] = []
        for record in res.records:
            eid, props = record["eid"], plain_properties(record["props"])
            try:
                subj, obj = _entity(kb, plain_properties(record["a"])), _entity(kb, plain_properties(record["b"]))
                relation = model.model_validate({**unflatten(model, props), "subj": subj, "obj": obj})
            except pydantic.ValidationError as exc:
                _skip(report, skip, label, eid, f"it does not fit {model.__name__}: {exc.errors()[0]['msg']}")
                continue
            reason = _conflict(props, {"id": relation.id, "label": label})
            if reason is not None:
                _skip(report, skip, label, eid, reason)
                continue
            rows.append({"eid": eid, "id": relation.id})
        rows = _first_of_each(rows, label, skip, report)
        if rows:  # an id another relationship of this type already has (adopted or written by kag)
            found = await store.run(
                f"MATCH ()-[r:{quote(label)} {{{IN_NAMESPACE}}}]->() WHERE r.id IN $ids RETURN r.id AS id",
                {"ids": [row["id"] for row in rows], "ns": ns},
                write=False,
                what="checking ids to adopt",
            )
            taken = {r["id"] for r in found.records}
            for row in rows:
                if row["id"] in taken:
                    _skip(report, skip, label, row["eid"], f"its id is another relationship's ({row['id']})")
            rows = [row for row in rows if row["id"] not in taken]
        if rows:
            await store.write_transaction([(write, {"rows": rows, "label": label, "ns": ns})], f"adopting {label}")
            adopted += len(rows)


def _entity(kb: KnowledgeBase, props: dict[str, Any]) -> Entity:
    model = kb.schema.entity_model(str(props.get("label", "")))
    return model.model_validate(unflatten(model, props))


def _first_of_each(rows: Sequence[dict[str, Any]], label: str, skip: list[str], report: AdoptReport) -> list[Any]:
    """Two parallel relationships with the same key give one id: the first is adopted, the others skipped."""
    seen: set[str] = set()
    out = []
    for row in rows:
        if row["id"] in seen:
            _skip(report, skip, label, row["eid"], f"a parallel relationship already has its id ({row['id']})")
            continue
        seen.add(row["id"])
        out.append(row)
    return out


def _skip(report: AdoptReport, skip: list[str], label: str, eid: str, reason: str) -> None:
    skip.append(eid)
    report.skipped.append((label, eid, reason))
