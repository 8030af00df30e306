"""The embedded store's data: node rows and relationship columns, and the writes that change them.

:class:`GraphColumns` holds what a :class:`~kag.graph.memory.MemoryGraphStore` stores: node ids,
label codes, property dicts and one float32 embedding matrix (with float64 norms), and the
relationship columns of :mod:`kag.graph.compact` (ids, endpoints, type codes, properties column by
column per type). Its attributes are public to the memory store's modules: the plan evaluation
(:mod:`kag.graph.memory`) and the file formats (:mod:`kag.graph.memory_file`) read them in bulk.
Every write bumps :attr:`GraphColumns.writes`, which is how derived indexes know they are stale.
Not thread-safe: the store's lock makes writes exclusive with searches.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from kag.errors import EmbeddingError, StoreFormatError
from kag.graph.base import DIRECT, SOURCES, NodeRecord, RelationRecord
from kag.graph.compact import MISSING, GrowArray, IdColumn, PropTable, check_id

__all__ = ["GraphColumns"]


class GraphColumns:
    """Nodes and relationships of one embedded store (see the module docstring)."""

    def __init__(self) -> None:
        self.node_pos: dict[str, int] = {}
        self.node_ids: list[str | None] = []
        self.node_label: list[int] = []
        self.node_props: list[dict[str, Any] | None] = []
        self.labels: dict[str, int] = {}
        self.label_names: list[str] = []
        # float32 rows (embedders give float32); scores are screened in float32 and then
        # recomputed exactly in float64, as Neo4j computes them, for the rows that can matter
        self.emb = np.zeros((0, 0), dtype=np.float32)
        self.norm = np.zeros(0, dtype=np.float64)
        self.dims: int | None = None
        self.rels = IdColumn()
        self.rel_src = GrowArray()
        self.rel_dst = GrowArray()
        self.rel_label = GrowArray()  # type code, -1 once deleted
        self.rel_slot = GrowArray()  # row in the type's PropTable
        self.rel_props: dict[int, PropTable] = {}
        self.writes = 0  # bumped by every write (derived indexes catch up with it)

    def changed(self) -> None:
        """Record a write (indexes built from an older :attr:`writes` are stale)."""
        self.writes += 1

    def has_node(self, node_id: str) -> bool:
        """Whether a node with this id is stored."""
        return node_id in self.node_pos

    def node_token(self, node_id: str) -> int | None:
        """A value that stays the same while this very node exists (a re-created node gets another)."""
        return self.node_pos.get(node_id)

    def node_at(self, node_id: str) -> tuple[str, dict[str, Any], np.ndarray] | None:
        """``(label, properties, embedding)`` of a stored node (the live properties dict), or ``None``."""
        pos = self.node_pos.get(node_id)
        if pos is None:
            return None
        props = self.node_props[pos]
        assert props is not None
        return self.label_names[self.node_label[pos]], props, self.emb[pos]

    def node_rows(self, ids: Sequence[str] | None = None) -> list[tuple[str, str, dict[str, Any]]]:
        """``(id, label, properties copy)`` of every node in insertion order, or of the stored ones of
        ``ids`` in the order given."""
        if ids is not None:
            found = ((node_id, self.node_pos.get(node_id)) for node_id in dict.fromkeys(ids))
            return [
                (node_id, self.label_names[self.node_label[pos]], dict(self.node_props[pos] or {}))
                for node_id, pos in found
                if pos is not None
            ]
        return [
            (node_id, self.label_names[self.node_label[pos]], dict(self.node_props[pos] or {}))
            for pos, node_id in enumerate(self.node_ids)
            if node_id is not None
        ]

    def records(self) -> tuple[list[NodeRecord], list[RelationRecord]]:
        """Every node (with its embedding) and relation as the records an ``upsert`` takes, in insertion order."""
        nodes = [
            NodeRecord(node_id, self.label_names[self.node_label[pos]], dict(self.node_props[pos] or {}), self.emb[pos])
            for pos, node_id in enumerate(self.node_ids)
            if node_id is not None
        ]
        relations = []
        for pos in np.flatnonzero(self.rels.alive).tolist():
            rel_id, label, start, end, props = self.relation_at(pos)
            relations.append(RelationRecord(rel_id, label, start, end, dict(props)))
        return nodes, relations

    def relation_pos(self, rel_id: str) -> int | None:
        """The position of a stored relation, or ``None``."""
        return self.rels.find(rel_id)

    def relation_at(self, pos: int) -> tuple[str, str, str, str, dict[str, Any]]:
        """``(id, type, start id, end id, properties copy)`` of the live relation at ``pos``."""
        rel_id = self.rels.id_of(pos)
        code = int(self.rel_label.view[pos])
        start, end = self.node_ids[int(self.rel_src.view[pos])], self.node_ids[int(self.rel_dst.view[pos])]
        assert rel_id is not None and start is not None and end is not None and code >= 0
        props = self.rel_props[code].get(int(self.rel_slot.view[pos]))
        return rel_id, self.label_names[code], start, end, props

    def set_dims(self, dimensions: int) -> None:
        if self.dims is None:
            self.dims = dimensions
            self.emb = np.zeros((max(16, len(self.node_ids)), dimensions), dtype=np.float32)
            self.norm = np.ones(self.emb.shape[0], dtype=np.float64)
        elif self.dims != dimensions:
            raise EmbeddingError(
                f"this store holds {self.dims}-dimensional embeddings but the embedder gives "
                f"{dimensions}; use the embedder the store was built with, or rebuild it."
            )

    def code(self, label: str) -> int:
        code = self.labels.get(label)
        if code is None:
            code = self.labels[label] = len(self.label_names)
            self.label_names.append(label)
        return code

    def upsert(self, nodes: Sequence[NodeRecord], relations: Sequence[RelationRecord]) -> None:
        for rec in nodes:
            self.set_dims(int(rec.embedding.shape[0]))
        missing = {r.start for r in relations} | {r.end for r in relations}
        missing -= {n.id for n in nodes}
        missing -= self.node_pos.keys()
        if missing:
            raise StoreFormatError(f"relations refer to unknown nodes: {sorted(missing)[:5]}")
        for rel in relations:
            check_id(rel.id)  # refuse an unstorable id before anything changes
        for rec in nodes:
            pos = self.node_pos.get(rec.id)
            if pos is None:
                pos = self.node_pos[rec.id] = len(self.node_ids)
                self.node_ids.append(rec.id)
                self.node_label.append(self.code(rec.label))
                self.node_props.append({})
                if pos >= self.emb.shape[0]:
                    grown = np.zeros((max(16, 2 * self.emb.shape[0]), self.emb.shape[1]), dtype=np.float32)
                    grown[: self.emb.shape[0]] = self.emb
                    self.emb = grown
                    norms = np.ones(grown.shape[0], dtype=np.float64)
                    norms[: self.norm.shape[0]] = self.norm
                    self.norm = norms
            props = self.node_props[pos]
            assert props is not None
            _merge_props(props, rec.properties)
            self.emb[pos] = rec.embedding
            self.norm[pos] = float(np.linalg.norm(self.emb[pos].astype(np.float64)))
        if relations:
            self._upsert_relations(relations)
        if nodes or relations:
            self.changed()

    def _upsert_relations(self, relations: Sequence[RelationRecord]) -> None:
        found = self.rels.find_many([r.id for r in relations]).tolist()
        fresh: dict[str, RelationRecord] = {}
        for rec, pos in zip(relations, found, strict=True):
            if pos < 0 and rec.id not in fresh:
                fresh[rec.id] = rec
        labels, slots_view = self.rel_label, self.rel_slot
        if fresh:
            recs = list(fresh.values())
            positions = self.rels.append(list(fresh))
            new_pos = dict(zip(fresh, positions.tolist(), strict=True))
            codes = np.asarray([self.code(r.label) for r in recs], dtype=np.int32)
            slots = np.empty(len(recs), dtype=np.int32)
            for code in np.unique(codes).tolist():
                sel = np.flatnonzero(codes == code)
                table = self.rel_props.setdefault(code, PropTable())
                first = table.add(positions[sel].tolist())
                slots[sel] = first + np.arange(sel.shape[0])
                table.fill(first, [recs[i].properties for i in sel.tolist()], SOURCES)
            self.rel_src.extend([self.node_pos[r.start] for r in recs])
            self.rel_dst.extend([self.node_pos[r.end] for r in recs])
            labels.extend(codes)
            slots_view.extend(slots)
        if len(fresh) == len(relations):
            return
        # the records not written by the bulk fill above: existing relations, repeated ids
        for rec, pos in zip(relations, found, strict=True):
            if pos < 0:
                if fresh.get(rec.id) is rec:
                    continue
                pos = new_pos[rec.id]
            self.rel_props[int(labels.view[pos])].merge(int(slots_view.view[pos]), rec.properties, SOURCES)

    def delete(self, ids: Sequence[str]) -> int:
        unique = list(dict.fromkeys(ids))
        # relations named first, as Neo4j deletes them (so a relation named with its endpoint counts)
        rel_pos = [p for p in self.rels.find_many(unique).tolist() if p >= 0] if unique else []
        for pos in rel_pos:
            self._drop_rel(pos)
        doomed = [self.node_pos[i] for i in unique if i in self.node_pos]
        if doomed:
            mask = np.zeros(len(self.node_ids), dtype=bool)
            mask[doomed] = True
            labels = self.rel_label.view
            touching = (mask[self.rel_src.view] | mask[self.rel_dst.view]) & (labels >= 0)
            for pos in np.flatnonzero(touching).tolist():
                self._drop_rel(pos)
            for pos in doomed:
                node_id = self.node_ids[pos]
                assert node_id is not None
                del self.node_pos[node_id]
                self.node_ids[pos] = None
                self.node_label[pos] = -1
                self.node_props[pos] = None
        found = len(rel_pos) + len(doomed)
        if found:
            self.changed()
        return found

    def retract(self, chunk_ids: Collection[str]) -> dict[str, int]:
        """Remove ``chunk_ids`` from every item's provenance; delete the items left without any.

        An item is deleted when its provenance becomes empty and it was never upserted
        directly (see ``kag.graph.base.DIRECT``); an entity goes with its relations.
        Call it holding :attr:`lock`. Returns ``{"entities": n, "relations": m}`` removed.
        """
        chunks = set(chunk_ids)
        if not chunks:
            return {"entities": 0, "relations": 0}
        doomed_rels: list[int] = []
        for table in self.rel_props.values():
            for slot, before in list(table.slots_with(SOURCES)):
                if not before or chunks.isdisjoint(before):
                    continue
                rest = [s for s in before if s not in chunks]
                if rest:
                    table.set(slot, SOURCES, rest)
                    continue
                table.set(slot, SOURCES, MISSING)  # as Neo4j: a property set to null is gone
                direct = table.value(slot, DIRECT)
                pos = int(table.positions.view[slot])
                if not (direct is not MISSING and direct) and self.rel_label.view[pos] >= 0:
                    doomed_rels.append(pos)
        for pos in doomed_rels:
            self._drop_rel(pos)
        doomed_nodes = [
            node_id
            for node_id, props in zip(self.node_ids, self.node_props, strict=True)
            if node_id is not None and props is not None and _retract(props, chunks)
        ]
        before = self.rels.live
        nodes = self.delete(doomed_nodes)
        self.changed()
        return {"entities": nodes, "relations": len(doomed_rels) + before - self.rels.live}

    def provenance_of(self, chunk_ids: Collection[str]) -> tuple[list[str], list[str]]:
        """Ids of the nodes and relations whose provenance names any of ``chunk_ids``."""
        chunks = set(chunk_ids)
        nodes = [
            node_id
            for node_id, props in zip(self.node_ids, self.node_props, strict=True)
            if node_id is not None and props is not None and not chunks.isdisjoint(props.get(SOURCES) or ())
        ]
        rels = []
        for table in self.rel_props.values():
            for slot, value in table.slots_with(SOURCES):
                pos = int(table.positions.view[slot])
                if self.rel_label.view[pos] >= 0 and not chunks.isdisjoint(value or ()):
                    rel_id = self.rels.id_of(pos)
                    assert rel_id is not None
                    rels.append(rel_id)
        return nodes, rels

    def _drop_rel(self, pos: int) -> None:
        if self.rel_label.view[pos] < 0:
            return
        code = int(self.rel_label.view[pos])
        table = self.rel_props[code]
        slot = int(self.rel_slot.view[pos])
        for col in table.columns.values():  # free the values; the slot stays, dead
            col[slot] = MISSING
        self.rel_label.view[pos] = -1
        self.rels.kill(pos)


def _merge_props(props: dict[str, Any], new: Mapping[str, Any]) -> None:
    """``SET n += new``, except provenance, which becomes the sorted union (as on Neo4j)."""
    before = props.get(SOURCES)
    props.update(new)
    if SOURCES in new:
        props[SOURCES] = sorted({*(before or []), *new[SOURCES]})


def _retract(props: dict[str, Any], chunks: set[str]) -> bool:
    """Drop ``chunks`` from an item's provenance; whether the item is left unsupported."""
    before = props.get(SOURCES)
    if not before or chunks.isdisjoint(before):
        return False
    rest = [s for s in before if s not in chunks]
    if rest:
        props[SOURCES] = rest
        return False
    del props[SOURCES]  # as Neo4j: a property set to null is gone
    return not props.get(DIRECT)
