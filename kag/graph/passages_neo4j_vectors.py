"""Vector search of Neo4j passages over the chunk matrix kept beside the driver.

Vector search is exact by default (``vector.similarity.cosine`` over the filtered chunks, which Neo4j
maps to ``[0, 1]`` as ``(1 + cos) / 2``), so it agrees with the memory store. It does not scan every
chunk in Cypher (about 10 us a chunk): the chunk embeddings are kept beside the driver as a float32
matrix (the ``Chunk`` entry of the graph store's ``anchor_scorer``, see :mod:`kag.graph.neo4j_anchor`),
numpy screens them, and only the chunks within a small margin of the ``k``-th best are scored by
Neo4j, so rows, order and scores are those of the full scan (:class:`ChunkMatrixSearch`).

``candidates=N`` opts into approximate search, over an index of that same matrix: by default
(``"pca"``) a screen over the matrix projected onto its 192 main directions
(:class:`kag.graph.ann.ProjectedIndex`), which picks the ``8 * N`` most promising chunks, scored in
full by numpy to keep the ``N`` best; with ``"ivf"`` an IVF index (:class:`kag.graph.ann.IVFIndex`),
the best rows of the lists holding about ``32 * N`` rows. Either index is built in a worker thread
on the first approximate search and carried over matrix reloads (:meth:`ChunkMatrixSearch.screen_for`,
:func:`remap`); the ``N`` are then screened and scored as above, so every returned score is exact.
:mod:`kag.graph.passages_neo4j` says when the store searches here and when in Cypher.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from kag._sync import LoopLock
from kag.graph.ann import IVFIndex, ProjectedIndex
from kag.graph.neo4j import ENTITY, Neo4jGraphStore
from kag.graph.neo4j_anchor import SCREEN, LabelMatrix, version_calls
from kag.graph.passages import PassageRow, sort_rows
from kag.query.cypher import IN_NAMESPACE, NAMESPACE
from kag.ranking.select import kth_largest

CHUNK = "Chunk"
# an exact search whose screen keeps more chunks than this (a flood of near-ties) scans in Cypher
RESCORE_CAP = 5_000
# the IVF index of approximate search probes lists holding this many times ``candidates`` rows
IVF_OVERSAMPLE = 32
# the projected screen: directions kept, and rows scored in full per candidate
PCA_DIMS = 192
PCA_OVERSAMPLE = 8
_BLOCK = 8192  # rows compared at a time when an IVF index is carried over a matrix reload
Approximate = Literal["pca", "ivf", "hnsw"]
APPROXIMATE_MODES = ("pca", "ivf", "hnsw")
# what every chunk search returns per chunk (the store's Cypher searches too): ``chunk_rows`` reads it
CHUNK_ROW = (
    f"RETURN c.id AS id, c {{.*, embedding: null, {NAMESPACE}: null}} AS props, score, "
    f"[(c)-[:MENTIONS]->(e:{ENTITY}) | e.id] AS mentions"
)

# scores the screened chunks: by (id, namespace), as ids are content hashes another namespace may hold too
_SCORED = (
    f"UNWIND $ids AS id MATCH (c:Chunk {{id: id, {IN_NAMESPACE}}})\n"
    "WITH c, vector.similarity.cosine(c.embedding, $vector) AS score\n"
    "ORDER BY score DESC, c.id ASC LIMIT $k\n"
)
_RESCORE = _SCORED + CHUNK_ROW
# ... and reads the Chunk version as AnchorScorer.versions does (count store: constant time), in one record
_RESCORE_VERSIONED = (
    version_calls(CHUNK, "chunks", "stamps")
    + f"CALL () {{\n{_SCORED}RETURN collect({{id: c.id, props: c {{.*, embedding: null, {NAMESPACE}: null}}, "
    f"score: score, mentions: [(c)-[:MENTIONS]->(e:{ENTITY}) | e.id]}}) AS rows\n}}\n"
    "RETURN stamps, chunks, rows"
)


def chunk_rows(records: Sequence[Any]) -> list[PassageRow]:
    """The passage rows of records with the columns of ``CHUNK_ROW``, best first."""
    return sort_rows([PassageRow.from_properties(r["props"], r["score"], r["mentions"]) for r in records])


@dataclass(frozen=True)
class VectorSearch:
    """One vector search: the query vector, ``k``, the filter (and its compiled condition and
    parameters) and ``candidates`` (approximate when set)."""

    vector: np.ndarray
    k: int
    where: Mapping[str, Any] | None
    cond: str
    params: dict[str, Any]
    candidates: int | None = None


@dataclass
class Screen:
    """An approximate index whose rows are positions into ``matrix``; ``built_rows``: the row count it
    was built at."""

    matrix: LabelMatrix
    index: IVFIndex | ProjectedIndex
    built_rows: int


class ChunkMatrixSearch:
    """The vector searches of one passage store that numpy answers from the cached chunk matrix.

    ``approximate`` is the index ``candidates=`` searches screen with (``"pca"`` or ``"ivf"``; the
    store never asks with ``"hnsw"``). The index is kept in :attr:`screen`.
    """

    def __init__(self, graph_store: Neo4jGraphStore, approximate: Approximate = "pca") -> None:
        self._graph = graph_store
        self.approximate: Approximate = approximate
        self._inverse: tuple[LabelMatrix, np.ndarray] | None = None  # 1 / norms of the cached chunk matrix
        self.screen: Screen | None = None  # built on the first approximate search, carried over reloads
        self._lock = LoopLock()  # per event loop: the store outlives an asyncio.run

    async def search(self, search: VectorSearch) -> list[PassageRow] | None:
        """The top ``k`` from the cached matrix (see :meth:`_search_matrix`); ``None`` when it cannot be used.

        With a matrix cached, the version check rides in the scoring query (one round trip, where two
        concurrent ones cost the server more); when the version changed, the answer is discarded and
        the search is redone on the reloaded matrix. After this store's own chunk writes the matrix is
        known stale, so it is refreshed first instead of scored (and screened) in vain.
        """
        scorer = self._graph.anchor_scorer
        last = self._inverse[0] if self._inverse is not None else None
        # this store wrote chunks since ``last`` was read: it is stale, so do not score on it first
        written = last is not None and last.own is not None and scorer.writes.snapshot(CHUNK) != last.own
        if last is not None and not written and scorer.cached.get(CHUNK) == last.version:  # not invalidated since
            found, now = await self._search_matrix(last, search, versioned=True)
            if now is None:  # answered without the scoring query
                now = (await scorer.versions([CHUNK]))[CHUNK]
            if now == last.version:
                return found
        current = await scorer.current([CHUNK])
        if current is None:  # reloading in the background (matrix_reload="background"): Cypher answers
            return None
        return (await self._search_matrix(current[CHUNK], search))[0]

    async def _search_matrix(
        self, matrix: LabelMatrix, search: VectorSearch, *, versioned: bool = False
    ) -> tuple[list[PassageRow] | None, tuple[int, int] | None]:
        """The top ``k`` of ``matrix``'s rows (the ``where`` ones), screened with numpy, the few near the cut
        scored by Neo4j (the scan's own expression, so the same rows, order and scores), or ``None`` to
        fall back; and, when ``versioned``, the ``Chunk`` version read by the scoring query (``None`` when
        it did not run).

        Exact by default. With ``candidates`` and no filter, only the approximate index's ``candidates``
        best rows are screened (approximate); a filter restricts the rows first, so that search is exact.
        """
        vec, k, where, cond, params, candidates = (
            search.vector,
            search.k,
            search.where,
            search.cond,
            search.params,
            search.candidates,
        )
        if matrix.matrix.shape[0] == 0 or matrix.matrix.shape[1] != vec.shape[0]:
            return None, None
        if self._inverse is None or self._inverse[0] is not matrix:
            self._inverse = (matrix, (1.0 / matrix.norms).astype(np.float32))
        inverse = self._inverse[1]
        rows: np.ndarray | None = None
        if where:
            res = await self._graph.read(f"MATCH (c:Chunk) WHERE {cond} RETURN c.id AS id", params, "filtering chunks")
            wanted = {r["id"] for r in res.records}
            rows = np.flatnonzero(np.fromiter((i in wanted for i in matrix.ids), dtype=bool, count=len(matrix.ids)))
            if rows.shape[0] == 0:
                return [], None
        q = vec.astype(np.float32)
        if candidates is not None and rows is None:
            rows = (await self.screen_for(matrix)).search(matrix.matrix, q, max(candidates, k), matrix.norms)
        # the screen ranks by cos * |q| in float32 (|q| is common to all rows): one pass over the matrix
        sub = matrix.matrix if rows is None else matrix.matrix[rows]
        approx = (sub @ q) * (inverse if rows is None else inverse[rows])
        margin = 4 * SCREEN * float(np.linalg.norm(q))  # 2 * SCREEN on the (1 + cos) / 2 scale
        if approx.shape[0] > k:
            cut = kth_largest(approx, k)
            near = np.flatnonzero(approx >= cut - margin)  # float32 screen vs Neo4j's cosine: far below the margin
        else:
            near = np.arange(approx.shape[0])
        if near.shape[0] > RESCORE_CAP:
            return None, None
        picked = near if rows is None else rows[near]
        res = await self._graph.read(
            _RESCORE_VERSIONED if versioned else _RESCORE,
            {"ids": matrix.ids[picked].tolist(), "vector": params["vector"], "k": k, "ns": params["ns"]},
            "searching chunks by vector",
        )
        if not versioned:
            return chunk_rows(res.records), None
        record = res.records[0]
        return chunk_rows(record["rows"]), (int(record["stamps"]), int(record["chunks"]))

    async def screen_for(self, matrix: LabelMatrix) -> IVFIndex | ProjectedIndex:
        """The approximate index over ``matrix``: built on first use, rebuilt when the row count moved by
        more than a fifth since the build, otherwise carried over from the last matrix (the projection
        copies the columns of the rows a refresh kept and projects the others, or re-projects a
        reloaded matrix; IVF follows the rows by id, see :func:`remap`).

        Built in a worker thread (up to seconds at 100k chunks), one search at a time, so the event
        loop keeps serving and concurrent searches do not build it twice.
        """
        async with self._lock:
            held = self.screen
            if held is not None and held.matrix is matrix:
                return held.index
            rows = matrix.matrix.shape[0]
            resized = held is not None and held.matrix.matrix.shape[1] != matrix.matrix.shape[1]  # re-embedded
            if held is None or resized or abs(rows - held.built_rows) > held.built_rows // 5:
                index: IVFIndex | ProjectedIndex
                if self.approximate == "ivf":
                    index = await asyncio.to_thread(IVFIndex, matrix.matrix, np.arange(rows), oversample=IVF_OVERSAMPLE)
                else:
                    index = await asyncio.to_thread(
                        ProjectedIndex, matrix.matrix, dims=PCA_DIMS, oversample=PCA_OVERSAMPLE
                    )
                self.screen = Screen(matrix, index, rows)
            elif isinstance(held.index, IVFIndex):
                moved = await asyncio.to_thread(remap, held.index, held.matrix, matrix)
                self.screen = Screen(matrix, moved, held.built_rows)
            elif (source := matrix.origins.get(held.matrix.serial)) is not None:  # refreshed from it
                projected = await asyncio.to_thread(held.index.followed, matrix.matrix, source)
                self.screen = Screen(matrix, projected, held.built_rows)
            else:
                projected = await asyncio.to_thread(held.index.moved, matrix.matrix)
                self.screen = Screen(matrix, projected, held.built_rows)
            return self.screen.index


def remap(index: IVFIndex, old: LabelMatrix, new: LabelMatrix) -> IVFIndex:
    """``index`` (positions into ``old``) moved onto ``new``, a reload of the same label.

    A reload may order the rows differently, so every listed row is followed by its id: ids gone
    are dropped, and ids not listed (added since the build) or whose vector changed (a document
    rewritten with other embeddings) become the always-scanned extra rows.
    """
    position = {chunk_id: row for row, chunk_id in enumerate(new.ids.tolist())}
    moved = np.fromiter(
        (position.get(chunk_id, -1) for chunk_id in old.ids[index.members].tolist()),
        dtype=np.int64,
        count=index.members.shape[0],
    )
    kept = moved >= 0
    same = np.zeros_like(kept)
    for start in range(0, kept.shape[0], _BLOCK):  # blocks: bounded temporaries
        part = slice(start, start + _BLOCK)
        rows = np.flatnonzero(kept[part]) + start
        same[rows] = (old.matrix[index.members[rows]] == new.matrix[moved[rows]]).all(axis=1)
    lists = np.repeat(np.arange(index.lists), np.diff(index.indptr))[same]  # members are grouped by list
    out = copy.copy(index)
    out.members = moved[same]
    out.rows = out.members
    out.indptr = np.concatenate([[0], np.cumsum(np.bincount(lists, minlength=index.lists))]).astype(np.int64)
    out.sorted_rows = np.sort(out.members)
    out.extra = np.setdiff1d(np.arange(new.ids.shape[0]), out.sorted_rows, assume_unique=True)
    return out
