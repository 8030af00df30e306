"""The embedded store's files: plain JSON for a ``.json`` name, the compact format for any other.

:func:`json_document` is format version 1 (one object per node and per relation, embeddings as
base64 float32), :func:`compact_document` version 2 (relationship properties column by column,
ids, endpoints and embeddings as raw arrays, packed by :func:`kag.graph.compact.pack_document`).
:func:`load_file` reads either, sniffing the content rather than trusting the name, and refuses a
damaged file with a :class:`~kag.errors.StoreFormatError`.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import numpy as np

from kag.errors import StoreFormatError
from kag.graph.base import NodeRecord, RelationRecord
from kag.graph.compact import MAGIC, GrowArray, IdColumn, PropTable, checked_array, unpack_document
from kag.graph.memory_columns import GraphColumns

__all__ = ["FORMAT", "VERSION", "compact_document", "json_document", "load_file"]

FORMAT = "kag-memory-store"
VERSION = 2  # 1: one JSON object per item (still read, and written for a .json name); 2: columnar


def json_document(cols: GraphColumns) -> dict[str, Any]:
    """The version-1 layout (what ``load_file`` reads back): one JSON object per node and relation."""
    nodes, relations = cols.records()
    return {
        "format": FORMAT,
        "version": 1,
        "dimensions": cols.dims,
        "labels": list(cols.label_names),
        "nodes": [
            {
                "id": n.id,
                "label": n.label,
                "props": n.properties,
                "embedding": base64.b64encode(np.asarray(n.embedding, dtype="<f4").tobytes()).decode("ascii"),
            }
            for n in nodes
        ],
        "relations": [
            {"id": r.id, "label": r.label, "start": r.start, "end": r.end, "props": r.properties} for r in relations
        ],
    }


def compact_document(cols: GraphColumns) -> dict[str, Any]:
    """The version-2 layout for :func:`kag.graph.compact.pack_document`: arrays stay arrays (raw bytes)."""
    node_pos = np.asarray([p for p, i in enumerate(cols.node_ids) if i is not None], dtype=np.int64)
    new_node = np.full(len(cols.node_ids) + 1, -1, dtype=np.int64)
    new_node[node_pos] = np.arange(node_pos.shape[0])
    emb = cols.emb[node_pos] if node_pos.shape[0] else np.zeros((0, cols.dims or 0), dtype=np.float32)
    nodes = {
        "ids": [cols.node_ids[p] for p in node_pos.tolist()],
        "label": np.asarray(cols.node_label, dtype=np.int32)[node_pos],
        "props": [cols.node_props[p] for p in node_pos.tolist()],
        "embeddings": np.ascontiguousarray(emb, dtype=np.float32),
    }
    rel_pos = np.flatnonzero(cols.rel_label.view >= 0)
    new_rel = np.full(cols.rels.size, -1, dtype=np.int64)
    new_rel[rel_pos] = np.arange(rel_pos.shape[0])
    order = cols.rels.sorted_positions()
    order = new_rel[order[new_rel[order] >= 0]]
    codes = cols.rel_label.view[rel_pos]
    slots = np.zeros(rel_pos.shape[0], dtype=np.int32)
    tables = {}
    for code in np.unique(codes).tolist():
        sel = np.flatnonzero(codes == code)  # new positions of this type's edges
        slots[sel] = np.arange(sel.shape[0])
        columns = cols.rel_props[code].dump(cols.rel_slot.view[rel_pos[sel]])
        tables[cols.label_names[code]] = {"positions": sel.astype(np.int32), "columns": columns}
    relations = {
        "count": int(rel_pos.shape[0]),
        "ids": cols.rels.raw(rel_pos),
        "order": order.astype(np.int32),
        "start": new_node[cols.rel_src.view[rel_pos]].astype(np.int32),
        "end": new_node[cols.rel_dst.view[rel_pos]].astype(np.int32),
        "type": codes.astype(np.int32),
        "slot": slots,
        "props": tables,
    }
    return {
        "format": FORMAT,
        "version": VERSION,
        "dimensions": cols.dims,
        "labels": list(cols.label_names),
        "nodes": nodes,
        "relations": relations,
    }


def load_file(cols: GraphColumns, path: Path) -> None:
    """Load the store file at ``path`` (either format) into empty ``cols``; ``StoreFormatError`` when damaged."""
    try:
        data = path.read_bytes()
        doc = unpack_document(data) if data.startswith(MAGIC) else json.loads(data)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise StoreFormatError(
            f"{path} is not a kag memory store file ({exc}); delete it or pass another path."
        ) from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise StoreFormatError(f"{path} is not a kag memory store file (missing format marker).")
    if doc.get("version") not in (1, VERSION):
        raise StoreFormatError(f"{path} has store version {doc.get('version')!r}; this kag reads 1 and {VERSION}.")
    try:
        if doc["version"] == 1:
            _load_v1(cols, path, doc)
        else:
            _load_columns(cols, path, doc)
    except StoreFormatError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise StoreFormatError(f"{path} is a damaged kag memory store file ({exc!r}).") from exc


def _load_v1(cols: GraphColumns, path: Path, doc: dict[str, Any]) -> None:
    """The version-1 layout: one JSON object per node and per relation."""
    dims = doc["dimensions"]
    if dims is not None:  # an empty store keeps its dimensions and declared labels too
        cols.set_dims(int(dims))
    for label in doc.get("labels", []):
        cols.code(str(label))
    nodes, rels = [], []
    for n in doc["nodes"]:
        vec = np.frombuffer(base64.b64decode(n["embedding"]), dtype="<f4").astype(np.float32)
        if dims is None or vec.shape != (dims,) or not np.isfinite(vec).all():
            raise StoreFormatError(f"{path}: node {n.get('id')!r} has a bad embedding.")
        nodes.append(NodeRecord(str(n["id"]), str(n["label"]), dict(n["props"]), vec))
    for r in doc["relations"]:
        rels.append(RelationRecord(str(r["id"]), str(r["label"]), str(r["start"]), str(r["end"]), dict(r["props"])))
    cols.upsert(nodes, rels)


def _load_columns(cols: GraphColumns, path: Path, doc: dict[str, Any]) -> None:
    """The columnar layout :meth:`save` writes."""
    dims = doc["dimensions"]
    for label in doc["labels"]:
        cols.code(str(label))
    n_labels = len(cols.label_names)
    nodes = doc["nodes"]
    ids = [str(i) for i in nodes["ids"]]
    count = len(ids)
    codes = checked_array(nodes["label"], np.int32, count)
    emb = np.asarray(nodes["embeddings"])
    if emb.dtype != np.float32 or emb.shape != (count, dims or 0):
        raise StoreFormatError(f"{path}: the node embeddings do not match; the file is damaged.")
    props = nodes["props"]
    if len(props) != count or len(set(ids)) != count or (count and (codes.min() < 0 or codes.max() >= n_labels)):
        raise StoreFormatError(f"{path}: the node columns do not match; the file is damaged.")
    if count and (dims is None or not np.isfinite(emb).all()):
        raise StoreFormatError(f"{path}: the node embeddings are damaged.")
    if dims is not None:
        cols.set_dims(int(dims))
        matrix = np.zeros((max(16, count), int(dims)), dtype=np.float32)
        matrix[:count] = emb
        cols.emb = matrix
        cols.norm = np.ones(matrix.shape[0], dtype=np.float64)
        # row by row, exactly as an upsert computes them (the same float64 norms, bit for bit)
        cols.norm[:count] = [float(np.linalg.norm(row.astype(np.float64))) for row in matrix[:count]]
    cols.node_ids = list(ids)
    cols.node_pos = {i: p for p, i in enumerate(ids)}
    cols.node_label = codes.tolist()
    cols.node_props = [dict(p) for p in props]
    rels = doc["relations"]
    m = int(rels["count"])
    order = checked_array(rels["order"], np.int32, m).astype(np.int64)
    cols.rels = IdColumn.from_raw(rels["ids"], order)
    src, dst = checked_array(rels["start"], np.int32, m), checked_array(rels["end"], np.int32, m)
    types, slots = checked_array(rels["type"], np.int32, m), checked_array(rels["slot"], np.int32, m)
    if cols.rels.size != m or (
        m
        and (
            min(src.min(), dst.min(), types.min()) < 0
            or max(src.max(), dst.max()) >= count
            or types.max() >= n_labels
            or np.bincount(order, minlength=m).max() != 1
        )
    ):
        raise StoreFormatError(f"{path}: the relation columns do not match; the file is damaged.")
    cols.rel_src, cols.rel_dst = GrowArray(np.int32, src), GrowArray(np.int32, dst)
    cols.rel_label, cols.rel_slot = GrowArray(np.int32, types), GrowArray(np.int32, slots)
    for label, table in rels["props"].items():
        code = cols.labels[str(label)]
        positions = checked_array(table["positions"], np.int32, None).astype(np.int64)
        if positions.shape[0] and (
            positions.max() >= m
            or not np.array_equal(types[positions], np.full(positions.shape[0], code))
            or not np.array_equal(slots[positions], np.arange(positions.shape[0]))
        ):
            raise StoreFormatError(f"{path}: the properties of {label!r} do not match; the file is damaged.")
        cols.rel_props[code] = PropTable.load(positions, table["columns"])
    if m and any(int(c) not in cols.rel_props for c in np.unique(types).tolist()):
        raise StoreFormatError(f"{path}: relation properties are missing; the file is damaged.")
    cols.changed()
