"""The embedded default store: a networkx ``MultiDiGraph`` plus numpy indexes.

networkx holds the graph (node and relationship properties, adjacency); a
numpy side index holds the embedding matrix, label codes, id ranks and
per-type edge arrays, rebuilt lazily after writes. Plans are evaluated with
vectorized similarity, masks and joins — never a Python loop over nodes — and
follow exactly the semantics documented in ``kag.query.plan``.

Searches run in a worker thread (``asyncio.to_thread``) so a heavy one never stalls
the event loop (a server keeps answering); :attr:`MemoryGraphStore.lock` makes every
search and every write exclusive, so a write never changes the arrays a search reads.
"""

from __future__ import annotations

import asyncio
import base64
import json
import operator
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import networkx as nx
import numpy as np

from kag.errors import ConfigError, EmbeddingError, StoreFormatError
from kag.files import atomic_write_json
from kag.graph.base import DIRECT, SOURCES, NodeRecord, PlanResult, PlanRow, RelationRecord
from kag.query.plan import HopSpec, NodeSpec, QueryPlan

FORMAT = "kag-memory-store"
# float32 screening margin on the [0, 1] score scale (float32 dot error for unit vectors is ~1e-6)
_SCREEN = 1e-4
VERSION = 1
# the plan's comparison operators, applied to object arrays (Python comparisons, element by element)
_COMPARE = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


_R = TypeVar("_R")


async def run_locked(lock: asyncio.Lock, fn: Callable[..., _R], *args: Any) -> _R:
    """``fn(*args)`` in a worker thread while holding ``lock`` (until the thread ends, even if cancelled)."""
    async with lock:
        work = asyncio.ensure_future(asyncio.to_thread(fn, *args))
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            # a thread cannot be stopped: keep the lock until it returns, so no write overlaps it
            await asyncio.wait({work})
            raise


@dataclass
class _Adjacency:
    """Edges of some relationship types as CSR by start node (and a permutation by end node).

    Built once per (types, direction) after each write; a bidirectional hop holds
    every relationship from both of its ends.
    """

    src: np.ndarray
    dst: np.ndarray
    rel: np.ndarray
    fwd: np.ndarray
    indptr: np.ndarray  # edges of start node i: [indptr[i], indptr[i + 1])
    by_dst: np.ndarray  # edge positions ordered by end node
    indptr_dst: np.ndarray


@dataclass
class _Index:
    """Arrays derived from the graph; rebuilt lazily after writes."""

    label_code: np.ndarray  # int32 per node position, -1 when deleted
    node_rank: np.ndarray  # rank of the node id in sorted order
    rel_rank: np.ndarray  # rank of the relation id in sorted order
    edges: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]  # type code -> (src, dst, rel)
    unit_rows: bool = False  # every stored embedding has norm 1 (to float32 precision)
    rows: dict[tuple[str, ...], np.ndarray] = field(default_factory=dict)  # labels -> node positions
    adjacency: dict[tuple[tuple[str, ...], tuple[str, ...]], _Adjacency] = field(default_factory=dict)
    # (labels, field, kind) -> (set, values) over all node positions: the field's value where a
    # node of those labels has one of that kind ("number" or "string"), else a placeholder
    columns: dict[tuple[tuple[str, ...], str, str], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


def _gather(indptr: np.ndarray, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For CSR ``indptr``: (index into ``nodes``, edge position) of every edge of ``nodes``."""
    starts = indptr[nodes]
    counts = indptr[nodes + 1] - starts
    total = int(counts.sum())
    owner = np.repeat(np.arange(nodes.shape[0]), counts)
    offsets = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    return owner, np.repeat(starts, counts) + offsets


def _csr(keys: np.ndarray, n: int) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(np.bincount(keys, minlength=n))]).astype(np.int64)


class MemoryGraphStore:
    """In-process graph store; ``path`` makes it persistent (``save()`` / autoload)."""

    # a memory store holds one namespace (tenant): this is only its name (see kag.graph.factory)
    namespace: str = "default"

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path else None
        self.uri = f"memory://{self.path}" if self.path else "memory://"
        self.graph = nx.MultiDiGraph()
        self._node_pos: dict[str, int] = {}
        self._node_ids: list[str | None] = []
        self._node_label: list[int] = []
        self._labels: dict[str, int] = {}
        self._label_names: list[str] = []
        # float32 rows (embedders give float32); scores are screened in float32 and then
        # recomputed exactly in float64, as Neo4j computes them, for the rows that can matter
        self._emb = np.zeros((0, 0), dtype=np.float32)
        self._norm = np.zeros(0, dtype=np.float64)
        self._dims: int | None = None
        self._rel_pos: dict[str, int] = {}
        self._rel_ids: list[str | None] = []
        self._rel_src: list[int] = []
        self._rel_dst: list[int] = []
        self._rel_label: list[int] = []
        self._index: _Index | None = None
        # held by each search (in a worker thread) and each write (on the loop), here and in
        # the attached passage store; it binds to a loop only while contended
        self.lock = asyncio.Lock()
        if self.path is not None and not self.path.parent.is_dir():
            raise ConfigError(
                f"memory://{self.path}: the directory {self.path.parent} does not exist; create it first."
            )
        if self.path is not None and self.path.exists():
            self._load(self.path)

    # -- schema ---------------------------------------------------------------
    async def ensure_schema(
        self, entity_labels: Sequence[str], relation_labels: Sequence[str], dimensions: int
    ) -> None:
        async with self.lock:
            self._set_dims(dimensions)
            for label in (*entity_labels, *relation_labels):
                self._code(label)

    def _set_dims(self, dimensions: int) -> None:
        if self._dims is None:
            self._dims = dimensions
            self._emb = np.zeros((max(16, len(self._node_ids)), dimensions), dtype=np.float32)
            self._norm = np.ones(self._emb.shape[0], dtype=np.float64)
        elif self._dims != dimensions:
            raise EmbeddingError(
                f"this store holds {self._dims}-dimensional embeddings but the embedder gives "
                f"{dimensions}; use the embedder the store was built with, or rebuild it."
            )

    def _code(self, label: str) -> int:
        code = self._labels.get(label)
        if code is None:
            code = self._labels[label] = len(self._label_names)
            self._label_names.append(label)
        return code

    # -- writes ---------------------------------------------------------------
    async def upsert(self, nodes: Sequence[NodeRecord], relations: Sequence[RelationRecord]) -> None:
        async with self.lock:
            self._upsert(nodes, relations)

    def _upsert(self, nodes: Sequence[NodeRecord], relations: Sequence[RelationRecord]) -> None:
        for rec in nodes:
            self._set_dims(int(rec.embedding.shape[0]))
        missing = {r.start for r in relations} | {r.end for r in relations}
        missing -= {n.id for n in nodes}
        missing -= self._node_pos.keys()
        if missing:
            raise StoreFormatError(f"relations refer to unknown nodes: {sorted(missing)[:5]}")
        for rec in nodes:
            pos = self._node_pos.get(rec.id)
            if pos is None:
                pos = self._node_pos[rec.id] = len(self._node_ids)
                self._node_ids.append(rec.id)
                self._node_label.append(self._code(rec.label))
                self.graph.add_node(rec.id, label=rec.label, props={})
                if pos >= self._emb.shape[0]:
                    grown = np.zeros((max(16, 2 * self._emb.shape[0]), self._emb.shape[1]), dtype=np.float32)
                    grown[: self._emb.shape[0]] = self._emb
                    self._emb = grown
                    norms = np.ones(grown.shape[0], dtype=np.float64)
                    norms[: self._norm.shape[0]] = self._norm
                    self._norm = norms
            props = self.graph.nodes[rec.id]["props"]
            _merge_props(props, rec.properties)
            self._emb[pos] = rec.embedding
            self._norm[pos] = float(np.linalg.norm(self._emb[pos].astype(np.float64)))
        for rel in relations:
            if rel.id not in self._rel_pos:
                self._rel_pos[rel.id] = len(self._rel_ids)
                self._rel_ids.append(rel.id)
                self._rel_src.append(self._node_pos[rel.start])
                self._rel_dst.append(self._node_pos[rel.end])
                self._rel_label.append(self._code(rel.label))
                self.graph.add_edge(rel.start, rel.end, key=rel.id, label=rel.label, props={})
            _merge_props(self.graph.edges[rel.start, rel.end, rel.id]["props"], rel.properties)
        if nodes or relations:
            self._index = None

    async def delete(self, ids: Sequence[str]) -> int:
        async with self.lock:
            return self._delete(ids)

    def _delete(self, ids: Sequence[str]) -> int:
        found = 0
        unique = list(dict.fromkeys(ids))
        # relations named first, as Neo4j deletes them (so a relation named with its endpoint counts)
        for item in [i for i in unique if i in self._rel_pos] + [i for i in unique if i not in self._rel_pos]:
            if item in self._node_pos:
                found += 1
                for u, v, key in list(self.graph.in_edges(item, keys=True)) + list(
                    self.graph.out_edges(item, keys=True)
                ):
                    self._drop_rel(key)
                    if self.graph.has_edge(u, v, key):
                        self.graph.remove_edge(u, v, key)
                pos = self._node_pos.pop(item)
                self._node_ids[pos] = None
                self._node_label[pos] = -1
                self.graph.remove_node(item)
            elif item in self._rel_pos:
                found += 1
                pos = self._rel_pos[item]
                start, end = self._node_ids[self._rel_src[pos]], self._node_ids[self._rel_dst[pos]]
                self._drop_rel(item)
                self.graph.remove_edge(start, end, item)
        if found:
            self._index = None
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
        doomed_rels = [key for _, _, key, data in self.graph.edges(keys=True, data=True) if _retract(data, chunks)]
        doomed_nodes = [node for node, data in self.graph.nodes(data=True) if _retract(data, chunks)]
        rels = self._delete(doomed_rels)
        before = self.graph.number_of_edges()
        nodes = self._delete(doomed_nodes)
        self._index = None
        return {"entities": nodes, "relations": rels + before - self.graph.number_of_edges()}

    def _drop_rel(self, rel_id: str) -> None:
        pos = self._rel_pos.pop(rel_id, None)
        if pos is not None:
            self._rel_ids[pos] = None
            self._rel_label[pos] = -1

    # -- reads ----------------------------------------------------------------
    async def get_nodes(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        return {i: dict(self.graph.nodes[i]["props"]) for i in ids if i in self._node_pos}

    async def get_relations(self, ids: Sequence[str]) -> dict[str, tuple[str, str, dict[str, Any]]]:
        out = {}
        for i in ids:
            pos = self._rel_pos.get(i)
            if pos is None:
                continue
            start, end = self._node_ids[self._rel_src[pos]], self._node_ids[self._rel_dst[pos]]
            assert start is not None and end is not None
            out[i] = (start, end, dict(self.graph.edges[start, end, i]["props"]))
        return out

    async def counts(self) -> dict[str, int]:
        out: dict[str, int] = {"nodes": len(self._node_pos), "relations": len(self._rel_pos)}
        for _, data in self.graph.nodes(data=True):
            out[data["label"]] = out.get(data["label"], 0) + 1
        for _, _, data in self.graph.edges(data=True):
            out[data["label"]] = out.get(data["label"], 0) + 1
        return out

    async def neighborhood(
        self, ids: Sequence[str], depth: int = 1, limit: int = 200
    ) -> tuple[dict[str, dict[str, Any]], list[tuple[str, str, str]]]:
        """Nodes (id -> properties) and edges (start, end, type) within ``depth`` hops of ``ids``."""
        keep = [i for i in dict.fromkeys(ids) if i in self._node_pos]
        seen, frontier = set(keep), list(keep)
        for _ in range(depth):
            nxt = []
            for n in frontier:
                for m in (*self.graph.successors(n), *self.graph.predecessors(n)):
                    if m not in seen and len(seen) < limit:
                        seen.add(m)
                        nxt.append(m)
            frontier = nxt
        nodes = {n: dict(self.graph.nodes[n]["props"]) for n in sorted(seen)}
        edges = sorted((u, v, d["label"]) for u, v, d in self.graph.subgraph(seen).edges(data=True))
        return nodes, edges

    async def aclose(self) -> None:
        return None

    # -- plan evaluation ------------------------------------------------------
    def _build_index(self) -> _Index:
        if self._index is not None:
            return self._index
        label_code = np.asarray(self._node_label, dtype=np.int32)
        node_rank = _ranks(self._node_ids)
        rel_rank = _ranks(self._rel_ids)
        rel_label = np.asarray(self._rel_label, dtype=np.int32)
        src = np.asarray(self._rel_src, dtype=np.int64)
        dst = np.asarray(self._rel_dst, dtype=np.int64)
        edges = {}
        for code in np.unique(rel_label[rel_label >= 0]) if rel_label.size else []:
            sel = np.flatnonzero(rel_label == code)
            edges[int(code)] = (src[sel], dst[sel], sel)
        alive = label_code >= 0
        unit = bool(np.all(np.abs(self._norm[: label_code.shape[0]][alive] - 1.0) < 1e-5))
        self._index = _Index(label_code, node_rank, rel_rank, edges, unit_rows=unit)
        return self._index

    def _rows_of(self, idx: _Index, labels: tuple[str, ...]) -> np.ndarray:
        rows = idx.rows.get(labels)
        if rows is None:
            codes = [self._labels[label] for label in labels if label in self._labels]
            rows = idx.rows[labels] = np.flatnonzero(np.isin(idx.label_code, np.asarray(codes, dtype=np.int32)))
        return rows

    def _scored_rows(
        self, idx: _Index, spec: NodeSpec, threshold: float, limit: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Node positions matching ``spec`` (label and every text's threshold) and their score factors.

        Scores are exact float64 cosines ``dot / (|a| |q|)``, like Neo4j's. They are
        found fast: a float32 matrix-vector product screens the rows, and only rows
        within ``_SCREEN`` of the threshold (or, with ``limit``, of the ``limit``-th
        best score) are recomputed in float64. The float32 error is far below that
        margin, so no row that can pass or rank is ever left out.
        """
        n = idx.label_code.shape[0]
        rows = self._rows_of(idx, spec.labels)
        part = np.ones(rows.shape[0], dtype=np.float64)
        if not spec.vectors or not rows.shape[0]:
            return rows, part
        for j, vec in enumerate(spec.vectors):
            links = spec.link_of(j)
            if links is not None:  # linked entities: their given scores, nothing else matches
                rows, part = self._linked_rows(rows, part, links, threshold)
                continue
            if self._dims is not None and vec.shape[0] != self._dims:
                raise EmbeddingError(f"query vector has {vec.shape[0]} dimensions, the store {self._dims}.")
            q64 = np.asarray(vec, dtype=np.float64)
            q_norm = float(np.linalg.norm(q64))
            q32 = q64.astype(np.float32)
            # a large label is cheaper to score in place than to copy out of the matrix
            if rows.shape[0] == n:
                dots = self._emb[:n] @ q32
            else:
                dots = (self._emb[:n] @ q32)[rows] if 4 * rows.shape[0] >= n else self._emb[rows] @ q32
            if idx.unit_rows:  # stored rows are unit vectors: screen in float32 without the norms
                approx = dots * np.float32(0.5 / q_norm) + np.float32(0.5)
            else:
                approx = (1.0 + dots / (self._norm[rows] * q_norm)) / 2.0
            floor = threshold - _SCREEN
            if limit is not None and len(spec.vectors) == 1:
                passing = approx if floor <= 0.0 else approx[approx >= floor]
                if passing.shape[0] > limit:  # only rows near the limit-th best can rank
                    floor = max(floor, float(np.partition(passing, passing.shape[0] - limit)[-limit]) - 2 * _SCREEN)
            near = np.flatnonzero(approx >= floor)
            rows, part = rows[near], part[near]
            exact = (self._emb[rows].astype(np.float64) @ q64) / (self._norm[rows] * q_norm)
            sims = np.clip((1.0 + exact) / 2.0, 0.0, 1.0)
            # compared at float32 precision, as Neo4j reports cosines: the same decision at the threshold
            keep = sims.astype(np.float32) >= np.float32(threshold)
            rows, part = rows[keep], part[keep] * sims[keep]
        return rows, part

    def _linked_rows(
        self, rows: np.ndarray, part: np.ndarray, links: Mapping[str, float], threshold: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Keep the ``rows`` that are linked entities scoring at least ``threshold``, times their scores."""
        score = np.full(len(self._node_ids), np.nan, dtype=np.float64)
        for entity_id, value in links.items():
            pos = self._node_pos.get(entity_id)
            if pos is not None:
                score[pos] = value
        sims = score[rows]
        keep = ~np.isnan(sims) & (sims.astype(np.float32) >= np.float32(threshold))
        return rows[keep], part[keep] * sims[keep]

    def _node_mask(self, idx: _Index, spec: NodeSpec, threshold: float) -> tuple[np.ndarray, np.ndarray]:
        """``_scored_rows`` (and the spec's field filters) as a boolean mask and a factor array."""
        n = idx.label_code.shape[0]
        rows, part = self._scored_rows(idx, spec, threshold)
        if spec.filters:
            keep = self._passes(idx, spec, rows)
            rows, part = rows[keep], part[keep]
        mask = np.zeros(n, dtype=bool)
        mask[rows] = True
        factor = np.ones(n, dtype=np.float64)
        factor[rows] = part
        return mask, factor

    def _adjacency(self, idx: _Index, hop: HopSpec) -> _Adjacency:
        key = (hop.relation_labels, hop.both_ways)
        cached = idx.adjacency.get(key)
        if cached is not None:
            return cached
        n = idx.label_code.shape[0]
        labels = [
            label for label in hop.relation_labels if label in self._labels and self._labels[label] in idx.edges
        ]
        parts = [idx.edges[self._labels[label]] for label in labels]
        empty = np.zeros(0, dtype=np.int64)
        src = np.concatenate([p[0] for p in parts]) if parts else empty
        dst = np.concatenate([p[1] for p in parts]) if parts else empty
        rel = np.concatenate([p[2] for p in parts]) if parts else empty
        fwd = np.ones(src.shape[0], dtype=bool)
        if hop.both_ways:
            # bidirectional, or a symmetric type: an undirected pattern sees the relationship from
            # both of its ends, except a self-loop, which Neo4j matches once
            either = [np.full(p[0].shape[0], label in hop.both_ways) for label, p in zip(labels, parts, strict=True)]
            back = (np.concatenate(either) if either else np.zeros(0, dtype=bool)) & (src != dst)
            src, dst = np.concatenate([src, dst[back]]), np.concatenate([dst, src[back]])
            rel = np.concatenate([rel, rel[back]])
            fwd = np.concatenate([fwd, ~fwd[back]])
        order = np.argsort(src, kind="stable")
        src, dst, rel, fwd = src[order], dst[order], rel[order], fwd[order]
        by_dst = np.argsort(dst, kind="stable")
        adj = _Adjacency(src, dst, rel, fwd, _csr(src, n), by_dst, _csr(dst, n))
        idx.adjacency[key] = adj
        return adj

    async def execute(self, plan: QueryPlan) -> PlanResult:
        # CPU-bound: off the event loop, exclusive with writes
        return await run_locked(self.lock, self.evaluate, plan)

    def evaluate(self, plan: QueryPlan) -> PlanResult:
        """Run a bound plan synchronously."""
        if not plan.bound:
            raise ValueError("bind the plan's vectors before executing it")
        idx = self._build_index()
        if not plan.hops:  # similarity search: no masks over the whole graph needed
            node = plan.nodes[0]
            plain = not node.filters and plan.order is None
            rows, score = self._scored_rows(idx, node, plan.threshold, limit=plan.k if plain else None)
            if node.filters:
                keep = self._passes(idx, node, rows)
                rows, score = rows[keep], score[keep]
            return self._finish(idx, plan, [rows], [], [], score)
        masks = [self._node_mask(idx, n, plan.threshold) for n in plan.nodes]
        for h, hop in enumerate(plan.hops):
            if hop.negated:  # a filter on the hop's source: no matching relationship to a matching object
                src = plan.source(h)
                masks[src] = (masks[src][0] & ~self._has_match(idx, hop, masks[h + 1][0]), masks[src][1])
        row_hops = plan.row_hops
        if not row_hops:
            subjects = np.flatnonzero(masks[0][0])
            return self._finish(idx, plan, [subjects], [], [], masks[0][1][subjects])
        # first hop (it starts at position 0): expand from the side with fewer matching nodes, or
        # scan when both are large
        first = row_hops[0]
        adj = self._adjacency(idx, plan.hops[first])
        (m0, f0), (m1, f1) = masks[0], masks[first + 1]
        c0, c1 = int(np.count_nonzero(m0)), int(np.count_nonzero(m1))
        if 8 * min(c0, c1) >= m0.shape[0]:
            edge = np.flatnonzero(m0[adj.src] & m1[adj.dst])
        elif c1 < c0:
            edge = adj.by_dst[_gather(adj.indptr_dst, np.flatnonzero(m1))[1]]
            edge = edge[m0[adj.src[edge]]]
        else:
            edge = _gather(adj.indptr, np.flatnonzero(m0))[1]
            edge = edge[m1[adj.dst[edge]]]
        nodes = [adj.src[edge], adj.dst[edge]]
        rels = [adj.rel[edge]]
        fwds = [adj.fwd[edge]]
        column = {0: 0, first + 1: 1}  # position -> index into nodes
        factor = f0[nodes[0]] * f1[nodes[1]]
        for h in row_hops[1:]:
            adj = self._adjacency(idx, plan.hops[h])
            row, edge = _gather(adj.indptr, nodes[column[plan.source(h)]])
            keep = masks[h + 1][0][adj.dst[edge]]
            for prev in rels:  # relationships of one row are pairwise distinct
                keep &= prev[row] != adj.rel[edge]
            row, edge = row[keep], edge[keep]
            nodes = [x[row] for x in nodes] + [adj.dst[edge]]
            rels = [r[row] for r in rels] + [adj.rel[edge]]
            fwds = [f[row] for f in fwds] + [adj.fwd[edge]]
            column[h + 1] = len(nodes) - 1
            factor = factor[row] * masks[h + 1][1][nodes[-1]]
        score = factor if plan.sides == 1 else factor ** (1.0 / plan.sides)
        return self._finish(idx, plan, nodes, rels, fwds, score)

    def _has_match(self, idx: _Index, hop: HopSpec, objects: np.ndarray) -> np.ndarray:
        """Mask of the nodes with a relationship of ``hop`` to a node of the ``objects`` mask."""
        adj = self._adjacency(idx, hop)
        has = np.zeros(objects.shape[0], dtype=bool)
        has[adj.src[adj.by_dst[_gather(adj.indptr_dst, np.flatnonzero(objects))[1]]]] = True
        return has

    def _column(self, idx: _Index, labels: tuple[str, ...], name: str, kind: str) -> tuple[np.ndarray, np.ndarray]:
        """(set, values) of field ``name`` over all node positions, for the nodes of ``labels``.

        A value counts as set when it has the ``kind`` ("number": int or float, not bool;
        "string": str); elsewhere ``values`` holds a placeholder of that kind, so the column
        compares without errors and ``set`` decides.
        """
        key = (labels, name, kind)
        cached = idx.columns.get(key)
        if cached is not None:
            return cached
        n = idx.label_code.shape[0]
        present = np.zeros(n, dtype=bool)
        values = np.full(n, 0 if kind == "number" else "", dtype=object)
        for pos in self._rows_of(idx, labels):
            node_id = self._node_ids[int(pos)]
            value = self.graph.nodes[node_id]["props"].get(name) if node_id is not None else None
            ok = isinstance(value, str) if kind == "string" else isinstance(value, int | float)
            if ok and not isinstance(value, bool):
                present[pos], values[pos] = True, value
        idx.columns[key] = (present, values)
        return present, values

    def _passes(self, idx: _Index, spec: NodeSpec, rows: np.ndarray) -> np.ndarray:
        """Which ``rows`` pass every field filter of ``spec`` (a node without the field never does)."""
        keep = np.ones(rows.shape[0], dtype=bool)
        for f in spec.filters:
            kind = "string" if isinstance(f.value, str) else "number"
            present, values = self._column(idx, spec.labels, f.field, kind)
            left, right = values[rows], f.value
            if isinstance(right, str) and f.op not in ("=", "!="):
                # Neo4j orders a property against a parameter by UTF-16 code units (not code points)
                left, right = _UTF16(left), _utf16(right)
            # object arrays compare element by element as Python does: numbers exactly
            keep &= present[rows] & np.asarray(_COMPARE[f.op](left, right), dtype=bool)
        return keep

    def _order_key(self, idx: _Index, plan: QueryPlan, positions: np.ndarray) -> np.ndarray:
        """Rank of each row's ordering value (ties equal), missing values after all the others."""
        assert plan.order is not None
        spec = plan.order
        present, values = self._column(idx, plan.nodes[spec.node].labels, spec.field, spec.kind)
        has = present[positions]
        key = np.full(positions.shape[0], positions.shape[0] + 1, dtype=np.int64)
        if has.any():
            uniq, inverse = np.unique(values[positions[has]], return_inverse=True)
            inverse = inverse.astype(np.int64).reshape(-1)
            key[has] = (uniq.shape[0] - 1 - inverse) if spec.descending else inverse
        return key

    def _finish(
        self,
        idx: _Index,
        plan: QueryPlan,
        nodes: list[np.ndarray],
        rels: list[np.ndarray],
        fwds: list[np.ndarray],
        score: np.ndarray,
    ) -> PlanResult:
        if plan.count:
            total = int(score.shape[0])
            return PlanResult(rows=[], count=total if plan.limit is None else min(total, plan.limit))
        keys = []
        for i in range(len(nodes)):
            keys.append(idx.node_rank[nodes[i]])
            if i < len(rels):
                keys.append(idx.rel_rank[rels[i]])
        first = None
        if plan.order is not None:
            first = self._order_key(idx, plan, nodes[plan.row_nodes.index(plan.order.node)])
        chosen = _top_k(score, keys, plan.k, first)
        return PlanResult(rows=[self._row(nodes, rels, fwds, score, j) for j in chosen])

    def _row(
        self, nodes: list[np.ndarray], rels: list[np.ndarray], fwds: list[np.ndarray], score: np.ndarray, j: int
    ) -> PlanRow:
        node_ids = tuple(self._node_ids[int(n[j])] or "" for n in nodes)
        rel_ids = tuple(self._rel_ids[int(r[j])] or "" for r in rels)
        rel_props = []
        for r in rels:  # the stored endpoints: a hop may start from an earlier position than the last
            pos = int(r[j])
            start, end = self._node_ids[self._rel_src[pos]], self._node_ids[self._rel_dst[pos]]
            rel_props.append(dict(self.graph.edges[start, end, self._rel_ids[pos]]["props"]))
        return PlanRow(
            node_ids=node_ids,
            node_props=tuple(dict(self.graph.nodes[n]["props"]) for n in node_ids),
            rel_ids=rel_ids,
            rel_props=tuple(rel_props),
            rel_forward=tuple(bool(f[j]) for f in fwds),
            score=float(score[j]),
        )

    # -- persistence ----------------------------------------------------------
    def save(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write the store to ``path`` (default: the path it was opened with), atomically."""
        target = Path(path) if path else self.path
        if target is None:
            raise StoreFormatError("this store has no file; pass a path to save(), e.g. save('kb.json').")
        nodes = []
        for node_id, pos in self._node_pos.items():
            data = self.graph.nodes[node_id]
            vec = self._emb[pos].astype("<f4").tobytes()
            nodes.append(
                {
                    "id": node_id,
                    "label": data["label"],
                    "props": data["props"],
                    "embedding": base64.b64encode(vec).decode(),
                }
            )
        relations = [
            {"id": key, "label": data["label"], "start": u, "end": v, "props": data["props"]}
            for u, v, key, data in self.graph.edges(keys=True, data=True)
        ]
        doc = {"format": FORMAT, "version": VERSION, "dimensions": self._dims, "nodes": nodes, "relations": relations}
        return atomic_write_json(target, doc)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> MemoryGraphStore:
        """Open a saved store (raises ``StoreFormatError`` on a malformed file)."""
        if not Path(path).exists():
            raise StoreFormatError(f"no store file at {path}.")
        return cls(path)

    def _load(self, path: Path) -> None:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise StoreFormatError(
                f"{path} is not a kag memory store file ({exc}); delete it or pass another path."
            ) from exc
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise StoreFormatError(f"{path} is not a kag memory store file (missing format marker).")
        if doc.get("version") != VERSION:
            raise StoreFormatError(f"{path} has store version {doc.get('version')!r}; this kag reads {VERSION}.")
        try:
            dims = doc["dimensions"]
            nodes, rels = [], []
            for n in doc["nodes"]:
                vec = np.frombuffer(base64.b64decode(n["embedding"]), dtype="<f4").astype(np.float32)
                if dims is None or vec.shape != (dims,) or not np.isfinite(vec).all():
                    raise StoreFormatError(f"{path}: node {n.get('id')!r} has a bad embedding.")
                nodes.append(NodeRecord(str(n["id"]), str(n["label"]), dict(n["props"]), vec))
            for r in doc["relations"]:
                rels.append(
                    RelationRecord(str(r["id"]), str(r["label"]), str(r["start"]), str(r["end"]), dict(r["props"]))
                )
            self._upsert(nodes, rels)
        except StoreFormatError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise StoreFormatError(f"{path} is a damaged kag memory store file ({exc!r}).") from exc


def _merge_props(props: dict[str, Any], new: Mapping[str, Any]) -> None:
    """``SET n += new``, except provenance, which becomes the sorted union (as on Neo4j)."""
    before = props.get(SOURCES)
    props.update(new)
    if SOURCES in new:
        props[SOURCES] = sorted({*(before or []), *new[SOURCES]})


def _retract(data: dict[str, Any], chunks: set[str]) -> bool:
    """Drop ``chunks`` from an item's provenance; whether the item is left unsupported."""
    props = data["props"]
    before = props.get(SOURCES)
    if not before or chunks.isdisjoint(before):
        return False
    rest = [s for s in before if s not in chunks]
    if rest:
        props[SOURCES] = rest
        return False
    del props[SOURCES]  # as Neo4j: a property set to null is gone
    return not props.get(DIRECT)


def _utf16(text: str) -> str:
    """``text`` re-spelled so that code-point order is its UTF-16 code-unit order (two latin-1 chars a unit)."""
    return text.encode("utf-16-be", "surrogatepass").decode("latin-1")


_UTF16 = np.frompyfunc(_utf16, 1, 1)


def _ranks(ids: list[str | None]) -> np.ndarray:
    """Rank of each id in sorted order (deleted ids rank last)."""
    arr = np.asarray([i if i is not None else "\U0010ffff" for i in ids], dtype=object)
    order = np.argsort(arr, kind="stable")
    ranks = np.empty(len(ids), dtype=np.int64)
    ranks[order] = np.arange(len(ids))
    return ranks


def _top_k(score: np.ndarray, keys: list[np.ndarray], k: int, first: np.ndarray | None = None) -> np.ndarray:
    """Indices of the exact top-k rows by ``first`` (when given), then score desc, ties by ``keys`` in order."""
    n = score.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    candidates = np.arange(n)
    if n > k and first is None:
        kth = np.partition(score, n - k)[n - k]
        candidates = np.flatnonzero(score >= kth)  # keeps every row tied with the k-th
    sort_keys = [key[candidates] for key in reversed(keys)] + [-score[candidates]]
    if first is not None:
        sort_keys.append(first[candidates])
    order = np.lexsort(sort_keys)
    return candidates[order[:k]]
