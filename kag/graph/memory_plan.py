"""Plan evaluation of the embedded store: vectorized similarity, masks and joins over its columns.

:class:`PlanEvaluator` runs a bound :class:`~kag.query.plan.QueryPlan` over the
:class:`~kag.graph.memory_columns.GraphColumns` of a :class:`~kag.graph.memory.MemoryGraphStore`,
with exactly the semantics documented in ``kag.query.plan`` (the parity suites hold it to Neo4j's
rows, order and scores). A numpy side index (label codes, id ranks, per-type edge arrays, CSR
adjacency, field columns) is built on the first plan after a write and kept while the columns'
write count stays the same; approximate anchors use an IVF index per label (:mod:`kag.graph.ann`).
Never a Python loop over nodes. Not thread-safe: the store's lock makes searches exclusive with writes.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from kag.errors import EmbeddingError
from kag.graph.ann import IVFIndex
from kag.graph.base import PlanResult, PlanRow
from kag.graph.memory_columns import GraphColumns
from kag.query.plan import HopSpec, NodeSpec, QueryPlan
from kag.ranking.select import kth_largest

__all__ = ["INLINE_FLOATS", "PlanEvaluator"]

# float32 screening margin on the [0, 1] score scale (float32 dot error for unit vectors is ~1e-6)
_SCREEN = 1e-4
# a similarity search reading at most this many floats (64 MB, a few ms) runs on the event loop
INLINE_FLOATS = 16_000_000
# the plan's comparison operators, applied to object arrays (Python comparisons, element by element)
_COMPARE = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


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
    others: dict[tuple[str, ...], np.ndarray] = field(default_factory=dict)  # labels -> every other position
    # labels -> (mask, factor: 1 where the mask is set) of a node pattern without texts or filters (read-only)
    masks: dict[tuple[str, ...], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
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


class PlanEvaluator:
    """Evaluates plans over one store's columns (see the module docstring)."""

    def __init__(self, columns: GraphColumns, approximate_min_rows: int | None = None) -> None:
        self.columns = columns
        self.approximate_min_rows = approximate_min_rows
        self._index: _Index | None = None
        self._index_at = -1  # the columns' write count the index was built at
        self.ann: dict[tuple[str, ...], IVFIndex] = {}  # labels -> the IVF index of their rows

    def _build_index(self) -> _Index:
        if self._index is not None and self._index_at == self.columns.writes:
            return self._index
        label_code = np.asarray(self.columns.node_label, dtype=np.int32)
        node_rank = _ranks(self.columns.node_ids)
        rel_rank = self.columns.rels.ranks()
        rel_label = self.columns.rel_label.view
        src, dst = self.columns.rel_src.view, self.columns.rel_dst.view
        edges = {}
        if rel_label.size:
            # group the live edges by type with one sort (not one pass over all edges per type)
            live = np.flatnonzero(rel_label >= 0).astype(np.int32)
            by_type = live[np.argsort(rel_label[live], kind="stable")]
            codes = rel_label[by_type]
            bounds = np.flatnonzero(np.diff(codes)) + 1
            for sel in np.split(by_type, bounds) if by_type.size else []:
                edges[int(rel_label[sel[0]])] = (src[sel], dst[sel], sel)
        alive = label_code >= 0
        unit = bool(np.all(np.abs(self.columns.norm[: label_code.shape[0]][alive] - 1.0) < 1e-5))
        self._index = _Index(label_code, node_rank, rel_rank, edges, unit_rows=unit)
        self._index_at = self.columns.writes
        return self._index

    def _rows_of(self, idx: _Index, labels: tuple[str, ...]) -> np.ndarray:
        rows = idx.rows.get(labels)
        if rows is None:
            codes = [self.columns.labels[label] for label in labels if label in self.columns.labels]
            rows = idx.rows[labels] = np.flatnonzero(np.isin(idx.label_code, np.asarray(codes, dtype=np.int32)))
        return rows

    def _others_of(self, idx: _Index, labels: tuple[str, ...], rows: np.ndarray) -> np.ndarray:
        """Every node position (deleted ones too) that is not one of ``labels``' ``rows``."""
        others = idx.others.get(labels)
        if others is None:
            keep = np.ones(idx.label_code.shape[0], dtype=bool)
            keep[rows] = False
            others = idx.others[labels] = np.flatnonzero(keep)
        return others

    def _scored_rows(
        self,
        idx: _Index,
        spec: NodeSpec,
        threshold: float,
        limit: int | None = None,
        candidates: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Node positions matching ``spec`` (label and every text's threshold) and their score factors.

        Scores are exact float64 cosines ``dot / (|a| |q|)``, like Neo4j's. They are
        found fast: a float32 matrix-vector product screens the rows, and only rows
        within ``_SCREEN`` of the threshold (or, with ``limit``, of the ``limit``-th
        best score) are recomputed in float64. The float32 error is far below that
        margin, so no row that can pass or rank is ever left out.

        ``candidates`` (approximate mode, the anchor only): the first text's rows come from
        the label's IVF index when the store has one for labels this large (see
        ``approximate_min_rows``), then are scored exactly like the others.
        """
        n = idx.label_code.shape[0]
        rows = label_rows = self._rows_of(idx, spec.labels)
        part: np.ndarray | None = None  # the score factors so far; None while every one is 1
        for j, vec in enumerate(spec.vectors if rows.shape[0] else ()):
            links = spec.link_of(j)
            if links is not None:  # linked entities: their given scores, nothing else matches
                ones = np.ones(rows.shape[0], dtype=np.float64)
                rows, part = self._linked_rows(rows, ones if part is None else part, links, threshold)
                continue
            if self.columns.dims is not None and vec.shape[0] != self.columns.dims:
                raise EmbeddingError(f"query vector has {vec.shape[0]} dimensions, the store {self.columns.dims}.")
            q64 = np.asarray(vec, dtype=np.float64)
            q_norm = float(np.linalg.norm(q64))
            q32 = q64.astype(np.float32)
            if j == 0 and candidates is not None:
                near_rows = self._approximate(idx, spec.labels, rows, q32, candidates)
                if near_rows is not None:
                    rows = near_rows
            # a large label is cheaper to score in place than to copy out of the matrix
            whole = rows.shape[0] == n
            if whole:
                dots = self.columns.emb[:n] @ q32
            elif 4 * rows.shape[0] < n:
                dots = self.columns.emb[rows] @ q32
            elif part is None and idx.unit_rows and rows is label_rows:
                # unit rows, the label's own rows: rule the few other rows out in place rather
                # than gather every score of the label (a pass over the label saved)
                dots = self.columns.emb[:n] @ q32
                dots[self._others_of(idx, spec.labels, rows)] = -np.inf
                whole = True  # positions and rows coincide now
            else:
                dots = (self.columns.emb[:n] @ q32)[rows]
            # screen on a scale monotonic in the score: for unit rows the raw float32 dots, where
            # score = 0.5 + dot / (2 |q|), so no pass over the rows converts them first
            if idx.unit_rows:
                scale = 2.0 * q_norm
                approx, offset = dots, 0.5
            else:
                scale = 1.0
                approx, offset = (1.0 + dots / (self.columns.norm[rows] * q_norm)) / 2.0, 0.0
            floor = (threshold - _SCREEN - offset) * scale
            margin = 2 * _SCREEN * scale
            if limit is not None and len(spec.vectors) == 1:
                passing = approx if threshold - _SCREEN <= 0.0 else approx[approx >= floor]
                if passing.shape[0] > limit:  # only rows near the limit-th best can rank
                    floor = max(floor, kth_largest(passing, limit) - margin)
            near = np.flatnonzero(approx >= floor)
            rows, part = (near if whole else rows[near]), (None if part is None else part[near])
            exact = (self.columns.emb[rows].astype(np.float64) @ q64) / (self.columns.norm[rows] * q_norm)
            sims = np.clip((1.0 + exact) / 2.0, 0.0, 1.0)
            # compared at float32 precision, as Neo4j reports cosines: the same decision at the threshold
            keep = sims.astype(np.float32) >= np.float32(threshold)
            rows, part = rows[keep], (sims[keep] if part is None else part[keep] * sims[keep])
        return rows, (np.ones(rows.shape[0], dtype=np.float64) if part is None else part)

    def _approximate(
        self, idx: _Index, labels: tuple[str, ...], rows: np.ndarray, q32: np.ndarray, candidates: int
    ) -> np.ndarray | None:
        """The IVF index's ``candidates`` rows for ``q32``, or ``None`` to scan (no index wanted)."""
        if self.approximate_min_rows is None or len(labels) != 1 or rows.shape[0] < self.approximate_min_rows:
            return None
        ann = self.ann.get(labels)
        if ann is None or abs(rows.shape[0] - ann.rows.shape[0]) > ann.rows.shape[0] // 5:
            ann = self.ann[labels] = IVFIndex(self.columns.emb, rows)
            ann.version = self.columns.writes
        elif ann.version != self.columns.writes:
            ann.refresh(rows, self.columns.writes)
        found = ann.search(self.columns.emb, q32, candidates, None if idx.unit_rows else self.columns.norm)
        # rows deleted (or relabelled) since the build are not the label's rows any more
        at = np.minimum(np.searchsorted(rows, found), rows.shape[0] - 1)
        return found[rows[at] == found]

    def _linked_rows(
        self, rows: np.ndarray, part: np.ndarray, links: Mapping[str, float], threshold: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Keep the ``rows`` that are linked entities scoring at least ``threshold``, times their scores."""
        score = np.full(len(self.columns.node_ids), np.nan, dtype=np.float64)
        for entity_id, value in links.items():
            pos = self.columns.node_pos.get(entity_id)
            if pos is not None:
                score[pos] = value
        sims = score[rows]
        keep = ~np.isnan(sims) & (sims.astype(np.float32) >= np.float32(threshold))
        return rows[keep], part[keep] * sims[keep]

    def _node_mask(
        self, idx: _Index, spec: NodeSpec, threshold: float, candidates: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``_scored_rows`` (and the spec's field filters) as a boolean mask and a factor array
        (meaningful where the mask is set).

        The arrays of a plain label pattern are cached until the next write: callers never
        change them in place.
        """
        plain = not spec.texts and not spec.filters
        if plain and spec.labels in idx.masks:
            return idx.masks[spec.labels]
        n = idx.label_code.shape[0]
        rows, part = self._scored_rows(idx, spec, threshold, candidates=candidates)
        if spec.filters:
            keep = self._passes(idx, spec, rows)
            rows, part = rows[keep], part[keep]
        mask = np.zeros(n, dtype=bool)
        mask[rows] = True
        # read only where the mask is set: zeros elsewhere cost no pass over the array (ones would)
        factor = np.zeros(n, dtype=np.float64)
        factor[rows] = part
        if plain:
            idx.masks[spec.labels] = (mask, factor)
        return mask, factor

    def _adjacency(self, idx: _Index, hop: HopSpec) -> _Adjacency:
        key = (hop.relation_labels, hop.both_ways)
        cached = idx.adjacency.get(key)
        if cached is not None:
            return cached
        n = idx.label_code.shape[0]
        labels = [
            label
            for label in hop.relation_labels
            if label in self.columns.labels and self.columns.labels[label] in idx.edges
        ]
        parts = [idx.edges[self.columns.labels[label]] for label in labels]
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

    def cheap(self, plan: QueryPlan) -> bool:
        """Whether ``plan`` is a small similarity search over a built index (cheaper inline than in a thread)."""
        idx = self._index if self._index_at == self.columns.writes else None
        if idx is None or plan.hops or not plan.bound:
            return False
        node = plan.nodes[0]
        rows = idx.rows.get(node.labels)
        work = (
            (idx.label_code.shape[0] if rows is None else rows.shape[0]) * (self.columns.dims or 0) * len(node.vectors)
        )
        return work <= INLINE_FLOATS and not (plan.candidates is not None and node.labels not in self.ann)

    def evaluate(self, plan: QueryPlan) -> PlanResult:
        """Run a bound plan synchronously."""
        if not plan.bound:
            raise ValueError("bind the plan's vectors before executing it")
        idx = self._build_index()
        if not plan.hops:  # similarity search: no masks over the whole graph needed
            node = plan.nodes[0]
            plain = not node.filters and plan.order is None
            rows, score = self._scored_rows(
                idx, node, plan.threshold, limit=plan.k if plain else None, candidates=plan.candidates
            )
            if node.filters:
                keep = self._passes(idx, node, rows)
                rows, score = rows[keep], score[keep]
            return self._finish(idx, plan, [rows], [], [], score)
        # approximate mode narrows the anchor (the first row node with texts), as on Neo4j
        anchor = next((i for i in plan.row_nodes if plan.nodes[i].texts), None) if plan.row_hops else None
        masks = [
            self._node_mask(idx, n, plan.threshold, plan.candidates if i == anchor else None)
            for i, n in enumerate(plan.nodes)
        ]
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
            node_id = self.columns.node_ids[int(pos)]
            props = self.columns.node_props[int(pos)]
            value = props.get(name) if node_id is not None and props is not None else None
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
        node_ids, node_props = self.columns.node_ids, self.columns.node_props
        if len(nodes) == 1 and not rels:  # a similarity search: one node per row (its hot path, kept short)
            picked, scores = nodes[0][chosen].tolist(), score[chosen].tolist()
            return PlanResult(
                rows=[
                    PlanRow((node_ids[p] or "",), (dict(node_props[p] or {}),), (), (), (), s)
                    for p, s in zip(picked, scores, strict=True)
                ]
            )
        # the chosen rows' columns at once (a few numpy gathers), then one PlanRow per row
        node_pos = [n[chosen].tolist() for n in nodes]
        ids_cols = [[node_ids[p] or "" for p in col] for col in node_pos]
        props_cols = [[dict(node_props[p] or {}) for p in col] for col in node_pos]
        rel_pos = [r[chosen] for r in rels]
        rel_ids = [self.columns.rels.ids_of(r) for r in rel_pos]
        tables = self.columns.rel_props
        rel_props = [
            [
                tables[code].get(slot)
                for code, slot in zip(
                    self.columns.rel_label.view[r].tolist(), self.columns.rel_slot.view[r].tolist(), strict=True
                )
            ]
            for r in rel_pos
        ]
        forward = [[bool(x) for x in f[chosen].tolist()] for f in fwds]
        scores = score[chosen].tolist()
        return PlanResult(
            rows=[
                PlanRow(
                    node_ids=tuple([c[j] for c in ids_cols]),
                    node_props=tuple([c[j] for c in props_cols]),
                    rel_ids=tuple([c[j] for c in rel_ids]),
                    rel_props=tuple([c[j] for c in rel_props]),
                    rel_forward=tuple([c[j] for c in forward]),
                    score=scores[j],
                )
                for j in range(len(scores))
            ]
        )


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
        kth = kth_largest(score, k)
        candidates = np.flatnonzero(score >= kth)  # keeps every row tied with the k-th
    sort_keys = [key[candidates] for key in reversed(keys)] + [-score[candidates]]
    if first is not None:
        sort_keys.append(first[candidates])
    order = np.lexsort(sort_keys)
    return candidates[order[:k]]
