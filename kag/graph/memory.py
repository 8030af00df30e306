"""The embedded default store: node dicts, compact relationship columns and numpy indexes.

Nodes are property dicts plus rows of one float32 embedding matrix; relationships are
columns (:mod:`kag.graph.compact`: ids in a fixed-width bytes array, int32 endpoints
and types, properties column by column per type), about 140 bytes per edge where a
networkx edge cost ~750. ``MemoryGraphStore.graph`` still gives a networkx view. The
columns and their writes are :mod:`kag.graph.memory_columns`, the files
:mod:`kag.graph.memory_file`, and plans are evaluated by :mod:`kag.graph.memory_plan`
(vectorized similarity, masks and joins over a numpy side index rebuilt lazily after
writes, never a Python loop over nodes, with exactly the semantics of ``kag.query.plan``).
This module is the store: its API, its lock and when work leaves the event loop.

Searches run in a worker thread (``asyncio.to_thread``) so a heavy one never stalls
the event loop (a server keeps answering), except a similarity search of one small scan
(a few milliseconds), where the thread handoff would cost about as much as the scan;
:attr:`MemoryGraphStore.lock` makes every search and every write exclusive, so a write
never changes the arrays a search reads.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any, TypeVar

import networkx as nx
import numpy as np

from kag._sync import LoopLock
from kag.errors import ConfigError, StoreFormatError
from kag.files import atomic_write_bytes, atomic_write_json
from kag.graph.base import NodeRecord, PlanResult, RelationRecord
from kag.graph.compact import pack_document
from kag.graph.memory_columns import GraphColumns
from kag.graph.memory_file import compact_document, json_document, load_file
from kag.graph.memory_plan import PlanEvaluator
from kag.query.plan import QueryPlan
from kag.runtime import paused_gc

_R = TypeVar("_R")


async def run_locked(lock: asyncio.Lock | LoopLock, fn: Callable[..., _R], *args: Any) -> _R:
    """``fn(*args)`` in a worker thread while holding ``lock`` (until the thread ends, even if cancelled)."""
    async with lock:
        work = asyncio.ensure_future(asyncio.to_thread(fn, *args))
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            # a thread cannot be stopped: keep the lock until it returns, so no write overlaps it
            await asyncio.wait({work})
            raise


class MemoryGraphStore:
    """In-process graph store; ``path`` makes it persistent (``save()`` / autoload).

    The file's name picks its format (see :meth:`save`): ``memory://kb.json`` writes plain JSON,
    any other name (``memory://kb.kag``) the compact binary format, faster and smaller for large
    graphs. Opening reads either, whatever the name.

    Nodes are a list of property dicts plus an embedding matrix; relationships are
    compact columns (:mod:`kag.graph.compact`): about 100 bytes per edge instead of the
    ~750 a networkx edge costs. :attr:`graph` gives a networkx view when one is wanted.

    ``approximate_min_rows`` opts into approximate search (see :mod:`kag.graph.ann`): a
    plan with ``candidates`` (``kb.triplet_search(..., candidates=N)``) takes its anchor's
    candidates from an IVF index of the anchor's label when that label has at least this
    many nodes, then scores them exactly. ``None`` (the default): always exact.
    """

    # a memory store holds one namespace (tenant): this is only its name (see kag.graph.factory)
    namespace: str = "default"

    def __init__(self, path: str | os.PathLike[str] | None = None, *, approximate_min_rows: int | None = None) -> None:
        self.path = Path(path) if path else None
        self.uri = f"memory://{self.path}" if self.path else "memory://"
        self._approximate_min_rows = approximate_min_rows
        self._clear_state()
        # held by each search (in a worker thread) and each write (on the loop), here and in
        # the attached passage store; one lock per event loop, so the store outlives an asyncio.run
        self.lock = LoopLock()
        if self.path is not None and not self.path.parent.is_dir():
            raise ConfigError(
                f"memory://{self.path}: the directory {self.path.parent} does not exist; create it first."
            )
        if self.path is not None and self.path.exists():
            self._load(self.path)

    def _clear_state(self) -> None:
        """Empty columns and no derived index (what :meth:`reset` and ``__init__`` start from)."""
        self.columns = GraphColumns()
        self._nx: nx.MultiDiGraph | None = None
        self._nx_at = -1
        self.evaluator = PlanEvaluator(self.columns, self._approximate_min_rows)

    # -- views ------------------------------------------------------------------
    @property
    def graph(self) -> nx.MultiDiGraph:
        """A networkx snapshot of the graph (node attrs ``label``/``props``, edge key = id), read-only.

        Built on first access after a write; changing it does not change the store.
        """
        if self._nx is None or self._nx_at != self.columns.writes:
            g = nx.MultiDiGraph()
            for pos, node_id in enumerate(self.columns.node_ids):
                if node_id is not None:
                    g.add_node(
                        node_id,
                        label=self.columns.label_names[self.columns.node_label[pos]],
                        props=self.columns.node_props[pos],
                    )
            for pos in np.flatnonzero(self.columns.rels.alive).tolist():
                rel_id, label, start, end, props = self.columns.relation_at(pos)
                g.add_edge(start, end, key=rel_id, label=label, props=props)
            self._nx, self._nx_at = g, self.columns.writes
        return self._nx

    def has_node(self, node_id: str) -> bool:
        """Whether a node with this id is stored."""
        return self.columns.has_node(node_id)

    def node_token(self, node_id: str) -> int | None:
        """A value that stays the same while this very node exists (a re-created node gets another)."""
        return self.columns.node_token(node_id)

    def node_at(self, node_id: str) -> tuple[str, dict[str, Any], np.ndarray] | None:
        """``(label, properties, embedding)`` of a stored node (the live properties dict), or ``None``."""
        return self.columns.node_at(node_id)

    def node_rows(self, ids: Sequence[str] | None = None) -> list[tuple[str, str, dict[str, Any]]]:
        """``(id, label, properties copy)`` of every node in insertion order, or of the stored ones of
        ``ids`` in the order given."""
        return self.columns.node_rows(ids)

    def records(self) -> tuple[list[NodeRecord], list[RelationRecord]]:
        """Every node (with its embedding) and relation as the records an ``upsert`` takes, in insertion order."""
        return self.columns.records()

    def relation_pos(self, rel_id: str) -> int | None:
        """The position of a stored relation, or ``None``."""
        return self.columns.relation_pos(rel_id)

    def relation_at(self, pos: int) -> tuple[str, str, str, str, dict[str, Any]]:
        """``(id, type, start id, end id, properties copy)`` of the live relation at ``pos``."""
        return self.columns.relation_at(pos)

    # -- schema ---------------------------------------------------------------
    async def ensure_schema(
        self, entity_labels: Sequence[str], relation_labels: Sequence[str], dimensions: int
    ) -> None:
        async with self.lock:
            self.apply_schema((*entity_labels, *relation_labels), dimensions)

    # -- write-through hooks ------------------------------------------------------
    # What a store that also persists each write elsewhere builds on (kag.graph.sqlite): each
    # hook applies one change to the in-memory copy, synchronously, and the caller holds `lock`.
    # The async writes below are these hooks under the lock.
    @property
    def dimensions(self) -> int | None:
        """The embedding dimensions of the stored nodes (``None`` until the first schema or node)."""
        return self.columns.dims

    def apply_schema(self, labels: Sequence[str], dimensions: int) -> None:
        """Fix the dimensions (``EmbeddingError`` when they differ) and declare ``labels``."""
        self.columns.set_dims(dimensions)
        for label in labels:
            self.columns.code(label)

    def apply_upsert(self, nodes: Sequence[NodeRecord], relations: Sequence[RelationRecord]) -> None:
        """:meth:`upsert` without the lock; also how a store loads the records of its file."""
        self.columns.upsert(nodes, relations)

    def apply_delete(self, ids: Sequence[str]) -> int:
        """:meth:`delete` without the lock."""
        return self.columns.delete(ids)

    def reset(self) -> None:
        """Forget the in-memory copy (path, URI, namespace and lock stay): then load it again."""
        self._clear_state()

    # -- writes ---------------------------------------------------------------
    async def upsert(self, nodes: Sequence[NodeRecord], relations: Sequence[RelationRecord]) -> None:
        async with self.lock:
            with paused_gc():  # a dict or two per row and no cycles (0.47 -> 0.31 s for 136k rows)
                self.columns.upsert(nodes, relations)

    async def delete(self, ids: Sequence[str]) -> int:
        async with self.lock:
            return self.columns.delete(ids)

    def retract(self, chunk_ids: Collection[str]) -> dict[str, int]:
        """Remove ``chunk_ids`` from every item's provenance; delete the items left without any.

        An item is deleted when its provenance becomes empty and it was never upserted
        directly (see ``kag.graph.base.DIRECT``); an entity goes with its relations.
        Call it holding :attr:`lock`. Returns ``{"entities": n, "relations": m}`` removed.
        """
        return self.columns.retract(chunk_ids)

    def provenance_of(self, chunk_ids: Collection[str]) -> tuple[list[str], list[str]]:
        """Ids of the nodes and relations whose provenance names any of ``chunk_ids``."""
        return self.columns.provenance_of(chunk_ids)

    # -- reads ----------------------------------------------------------------
    async def get_nodes(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        out = {}
        for i in ids:
            pos = self.columns.node_pos.get(i)
            if pos is not None:
                out[i] = dict(self.columns.node_props[pos] or {})
        return out

    async def get_relations(self, ids: Sequence[str]) -> dict[str, tuple[str, str, dict[str, Any]]]:
        out = {}
        unique = list(dict.fromkeys(ids))
        for i, pos in zip(unique, self.columns.rels.find_many(unique).tolist(), strict=True):
            if pos >= 0:
                _, _, start, end, props = self.relation_at(pos)
                out[i] = (start, end, props)
        return out

    async def counts(self) -> dict[str, int]:
        out: dict[str, int] = {"nodes": len(self.columns.node_pos), "relations": self.columns.rels.live}
        for codes in (
            np.asarray(self.columns.node_label, dtype=np.int64),
            self.columns.rel_label.view.astype(np.int64),
        ):
            live = codes[codes >= 0]
            for code, count in zip(*np.unique(live, return_counts=True), strict=True):
                name = self.columns.label_names[int(code)]
                out[name] = out.get(name, 0) + int(count)
        return out

    async def neighborhood(
        self, ids: Sequence[str], depth: int = 1, limit: int = 200
    ) -> tuple[dict[str, dict[str, Any]], list[tuple[str, str, str]]]:
        """Nodes (id -> properties) and edges (start, end, type) within ``depth`` hops of ``ids``."""
        keep = [self.columns.node_pos[i] for i in dict.fromkeys(ids) if i in self.columns.node_pos]
        src, dst = self.columns.rel_src.view, self.columns.rel_dst.view
        live = np.flatnonzero(self.columns.rel_label.view >= 0)
        seen, frontier = set(keep), list(keep)
        for _ in range(depth):
            if not frontier or len(seen) >= limit:
                break
            mask = np.zeros(len(self.columns.node_ids), dtype=bool)
            mask[frontier] = True
            out_e, in_e = live[mask[src[live]]], live[mask[dst[live]]]
            # per frontier node: its successors, then its predecessors, in edge order
            pairs = np.concatenate([src[out_e], dst[in_e]]), np.concatenate([dst[out_e], src[in_e]])
            side = np.concatenate([np.zeros(out_e.shape[0]), np.ones(in_e.shape[0])])
            rank = {n: r for r, n in enumerate(frontier)}
            order = sorted(range(pairs[0].shape[0]), key=lambda j: (rank[int(pairs[0][j])], side[j], j))
            nxt = []
            for j in order:
                m = int(pairs[1][j])
                if m not in seen and len(seen) < limit:
                    seen.add(m)
                    nxt.append(m)
            frontier = nxt
        nodes = {}
        for pos in sorted(seen, key=lambda p: self.columns.node_ids[p] or ""):
            node_id = self.columns.node_ids[pos]
            assert node_id is not None
            nodes[node_id] = dict(self.columns.node_props[pos] or {})
        inside = np.zeros(len(self.columns.node_ids), dtype=bool)
        inside[list(seen)] = True
        both = live[inside[src[live]] & inside[dst[live]]]
        edges = sorted(
            (
                self.columns.node_ids[int(src[p])] or "",
                self.columns.node_ids[int(dst[p])] or "",
                self.columns.label_names[int(code)],
            )
            for p, code in zip(both.tolist(), self.columns.rel_label.view[both].tolist(), strict=True)
        )
        return nodes, edges

    async def aclose(self) -> None:
        return None

    # -- plan evaluation ------------------------------------------------------
    async def execute(self, plan: QueryPlan) -> PlanResult:
        # CPU-bound: off the event loop, exclusive with writes; a small similarity search (index
        # built, no hops, one scan of at most INLINE_FLOATS) runs inline: handing it to a thread
        # costs about as much as the scan
        if not self.lock.locked() and self.evaluator.cheap(plan):
            async with self.lock:
                return self.evaluate(plan)
        return await run_locked(self.lock, self.evaluate, plan)

    def evaluate(self, plan: QueryPlan) -> PlanResult:
        """Run a bound plan synchronously (see :class:`kag.graph.memory_plan.PlanEvaluator`)."""
        return self.evaluator.evaluate(plan)

    @property
    def approximate_min_rows(self) -> int | None:
        """The fewest nodes a label needs before its anchor candidates come from an IVF index (None: never)."""
        return self.evaluator.approximate_min_rows

    @approximate_min_rows.setter
    def approximate_min_rows(self, value: int | None) -> None:
        self._approximate_min_rows = self.evaluator.approximate_min_rows = value

    # -- persistence ----------------------------------------------------------
    def save(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write the store to ``path`` (default: the path it was opened with), atomically.

        The name picks the format. A name ending in ``.json`` gets plain JSON (one object per
        node and per relation, embeddings as base64 float32): any JSON tool reads it, but it is
        larger and slower for big graphs. Any other name (``kb.kag``, ``kb.db``) gets the compact
        format: a JSON header (node ids and properties, relationship properties column by column)
        and the arrays (ids, endpoints, embeddings) as raw bytes, so a million edges save and load
        in about a second (see ``kag.graph.compact.pack_document``). Both are read back by either
        name: opening sniffs the content, not the name.
        """
        target = Path(path) if path else self.path
        if target is None:
            raise StoreFormatError("this store has no file; pass a path to save(), e.g. save('kb.kag').")
        if target.suffix.lower() == ".json":
            return atomic_write_json(target, json_document(self.columns))
        try:
            data = pack_document(compact_document(self.columns))
        except ValueError as exc:
            raise StoreFormatError(f"cannot save {target}: {exc} (a stored value is NaN or infinite).") from exc
        return atomic_write_bytes(target, data)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> MemoryGraphStore:
        """Open a saved store (raises ``StoreFormatError`` on a malformed file)."""
        if not Path(path).exists():
            raise StoreFormatError(f"no store file at {path}.")
        return cls(path)

    def _load(self, path: Path) -> None:
        load_file(self.columns, path)
