"""Exact similarity scores for Neo4j triplet searches, computed beside the driver.

Scanning a label with ``vector.similarity.cosine`` in Cypher costs about 10 µs per
node: at a million edges (34k cities) an exact search took 240 ms. This module keeps,
per entity label, the label's ids and embeddings as a float32 matrix (the exact
values stored: kag writes float32 vectors) with float64 norms, and scores a plan's
similarity texts with numpy exactly as the memory store does (a float32 screen, then
``(1 + cos) / 2`` recomputed in float64 for the rows near the threshold, decided at
float32 precision). The scores go to Neo4j as parameters: the plan's texts become
linked texts (``id -> score`` maps, see ``NodeSpec.links``), so the compiled Cypher
starts from the anchor's ids through the id index and looks the other sides' scores
up by id. Rows, order and scores are those of the memory store, bit for bit.

For a plan ranked by score (no ``order_by``, not a count) only the best anchors are
sent first (``first_anchors``, growing eightfold): every other factor of a row score
is at most 1, so when the ``k``-th row scores above what any left-out anchor could
reach the answer is final; otherwise the search is repeated with more anchors, and
at last with all of them.

Consistency rule. Every statement of an ``upsert`` that writes entities of a label
also creates, in the same transaction, one stamp node labelled ``KagWrites_<label>``
(:func:`version_bump`): the label's write counter is the number of its stamps. Stamps
are created, never updated, so concurrent writers never wait on one counter's lock.
A search first reads, in one query, each needed label's stamp count and node count
(both from Neo4j's count store, constant time); when either differs from the cached
matrix's, the label is reloaded before scoring. So a search sees every write committed before it started that was made
through kag, by any process or driver, and any change of a label's node count made by
anyone. A write outside kag (raw Cypher) that changes embeddings, or that creates as
many nodes of a label as it deletes, is not seen until
:meth:`AnchorScorer.invalidate` is called (or the next kag upsert of that label).
Writes that commit while a search runs may be seen by its traversal but not by its
scores, as Neo4j's read-committed isolation allows for any single query.

Cost: after a write to a label its matrix is reloaded (one query returning every id and
embedding of the label, ``LOAD_BATCH`` nodes per record, each record made a float32 block as it
arrives: 2.4-2.5 s and 413 MiB peak RSS for 100k 384-d chunk vectors, where one record per node
took 5.7-6.0 s and 1.7 GiB). When the stamps grew by exactly this store's own writes (nobody
else stamped the label meanwhile; see :mod:`kag.graph.neo4j_write_counters`), the matrix is refreshed
instead: the label's id list (deleted nodes drop out) and the embeddings of the nodes this store
wrote, the other rows kept: 0.06-0.09 s for the first search after a one-city upsert at 34k
cities, 0.13-0.15 s for an exact passage search after adding a document at 100k chunks. By default
(``Neo4jGraphStore(matrix_reload="background")``) the reload runs in a background task and
the searches that arrive meanwhile run as plain Cypher, scoring with
``vector.similarity.cosine`` (the same rows and scores, about 10 µs per scored node), so
no search waits for a load; ``matrix_reload="wait"`` makes the first search after a write
wait for it instead. The matrices take ``4 * dimensions`` bytes per node beside the driver.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from kag.datamodels.base import RESERVED_LABEL_PREFIX, check_identifier
from kag.errors import EmbeddingError
from kag.graph.neo4j_write_counters import OwnWrites, Snapshot
from kag.graph.spare import Spare, gathered, grown
from kag.query.cypher import IN_NAMESPACE, NAMESPACE_MAP, quote, quote_name
from kag.query.plan import QueryPlan
from kag.ranking.select import kth_largest

log = logging.getLogger(__name__)
_SERIALS = itertools.count()
STAMP = RESERVED_LABEL_PREFIX  # + label: one stamp node per statement that wrote nodes of the label
SCREEN = 1e-4  # float32 screening margin on the [0, 1] score scale, as in the memory store
ORIGINS = 4  # refresh steps a refreshed matrix maps its rows back through (8 bytes per row each)
MAP_CAP = 50_000  # a non-anchor side with more passing nodes keeps its cosine in Cypher
FIRST_ANCHORS = 64  # anchors sent in the first try of a ranked search with hops (at least k)
GROWTH = 8  # how much the anchor set grows after a try that could not prove its answer
REFRESH_MIN = 1000  # a refresh reads back at most this many written nodes, or a quarter of the label

# a matrix load returns this many nodes per record: one record per node made reading 100k chunk
# embeddings 2-2.7x slower (the driver's cost per record, and garbage collection passes over the
# lists of every record held until the end), where each batch is now a float32 block on arrival
LOAD_BATCH = 256

# reads a query that is proven read-only: (text, params, purpose) -> records
Reader = Callable[[str, dict[str, Any], str], Awaitable[Any]]
# reads a large result, converting each row (its values) as it arrives: (text, params, purpose, convert) -> rows
BulkReader = Callable[[str, dict[str, Any], str, Callable[[list[Any]], Any]], Awaitable[list[Any]]]


def stamp_label(label: str) -> str:
    """The quoted label of ``label``'s write stamps (``KagWrites_<label>``)."""
    return quote_name(STAMP + check_identifier(label, "label"))


def version_bump(label: str) -> str:
    """Cypher that ends a node-writing statement: stamps a write of ``label``, returns the rows written as ``n``.

    Appended to the statement that merges the nodes, so the stamp commits with them.
    """
    return f"WITH count(*) AS n\nCREATE (:{stamp_label(label)})\nRETURN n"


def version_calls(label: str, count: str, stamps: str) -> str:
    """Cypher subqueries that read ``label``'s version into the columns ``count`` (its nodes) and
    ``stamps`` (its write stamps): counts of a label alone come from Neo4j's count store, no scan."""
    return (
        f"CALL () {{ MATCH (n:{quote(label)}) RETURN count(n) AS {count} }}\n"
        f"CALL () {{ MATCH (w:{stamp_label(label)}) RETURN count(w) AS {stamps} }}\n"
    )


@dataclass
class LabelMatrix:
    """One label's ids and embeddings as the store held them at ``version``."""

    version: tuple[int, int]  # (write stamps, node count)
    ids: np.ndarray  # object array of str
    matrix: np.ndarray  # (n, d) float32
    norms: np.ndarray  # (n,) float64, each np.linalg.norm of the row in float64 (as the memory store)
    loaded_s: float = 0.0
    # the store's own-write counters when ``version`` was read (None: a write was in flight)
    own: Snapshot | None = None
    _positions: dict[str, int] | None = field(default=None, repr=False, compare=False)
    serial: int = field(default_factory=lambda: next(_SERIALS))
    # a refreshed matrix: for the matrices it descends from (serial, newest first, ORIGINS at most),
    # each row's position there when its vector is the same (-1: read back), so indexes built over
    # an ancestor can follow it instead of starting over
    origins: dict[int, np.ndarray] = field(default_factory=dict, repr=False, compare=False)
    spare: Spare | None = field(default=None, repr=False, compare=False)  # the buffer ``matrix`` leads, if any

    def positions(self) -> dict[str, int]:
        """Row of each id (built on first use)."""
        if self._positions is None:
            self._positions = {str(i): n for n, i in enumerate(self.ids.tolist())}
        return self._positions


@dataclass(frozen=True)
class Scored:
    """The nodes of some labels passing one text's threshold: ids and exact scores."""

    ids: np.ndarray
    scores: np.ndarray  # float64
    rest: float = 0.0  # with a limit: an upper bound of the scores of the passing nodes left out (0.0: none)


def threshold_boundary(threshold: float) -> float:
    """The smallest float64 ``s`` with ``float32(s) >= float32(threshold)``.

    The memory store decides at float32 precision; comparing float64 scores with this
    boundary in Cypher gives the same decisions, and float32 cosines (what Neo4j's
    ``vector.similarity.cosine`` returns) are decided exactly as against ``float32(threshold)``.
    """
    t32 = np.float32(threshold)
    below = np.nextafter(t32, np.float32(-np.inf))
    mid = (float(below) + float(t32)) / 2.0  # exact in float64
    if np.float32(mid) < t32:
        mid = float(np.nextafter(mid, np.inf))
    return mid


@dataclass(frozen=True)
class Screen:
    """One text's float32 screen over some labels' matrices (kept to rescore at other cuts)."""

    vector: np.ndarray  # float64
    norm: float
    parts: list[tuple[LabelMatrix, np.ndarray]]  # each matrix and its approximate scores


def screen(matrices: list[LabelMatrix], vector: np.ndarray) -> Screen:
    """Approximate scores of every row of ``matrices`` (a float32 matrix-vector product)."""
    q64 = np.asarray(vector, dtype=np.float64)
    q_norm = float(np.linalg.norm(q64))
    q32 = q64.astype(np.float32)
    parts: list[tuple[LabelMatrix, np.ndarray]] = []
    for m in matrices:
        if not m.ids.shape[0]:
            continue
        if m.matrix.shape[1] != q64.shape[0]:
            raise EmbeddingError(f"query vector has {q64.shape[0]} dimensions, the store {m.matrix.shape[1]}.")
        # einsum runs on one core: BLAS threads spin against other work on a busy server (measured on 2
        # cores under load: p50 23 ms against 28, p95 42 ms against 223 end to end at 1M edges)
        dots = np.einsum("ij,j->i", m.matrix, q32)
        parts.append((m, (1.0 + dots / (m.norms * q_norm)) / 2.0))
    return Screen(q64, q_norm, parts)


def rescore(screened: Screen, threshold: float, limit: int | None = None) -> Scored:
    """The rows passing ``threshold`` with their exact scores, as ``MemoryGraphStore._scored_rows`` computes
    them (bit-identical): the rows within ``SCREEN`` of the threshold (with ``limit``: of the ``limit``-th
    best score too) recomputed in float64 and decided at float32 precision."""
    if not screened.parts:
        return Scored(np.zeros(0, dtype=object), np.zeros(0, dtype=np.float64))
    floor, rest = threshold - SCREEN, 0.0
    if limit is not None:
        every = np.concatenate([approx for _, approx in screened.parts])
        passing = every[every >= floor]
        if passing.shape[0] > limit:  # only rows near the limit-th best can rank
            floor = max(floor, kth_largest(passing, limit) - 2 * SCREEN)
            rest = min(1.0, float(passing[passing < floor].max(initial=-1.0)) + SCREEN)
    ids: list[np.ndarray] = []
    scores: list[np.ndarray] = []
    for m, approx in screened.parts:
        near = np.flatnonzero(approx >= floor)
        exact = (m.matrix[near].astype(np.float64) @ screened.vector) / (m.norms[near] * screened.norm)
        sims = np.clip((1.0 + exact) / 2.0, 0.0, 1.0)
        keep = sims.astype(np.float32) >= np.float32(threshold)
        ids.append(m.ids[near[keep]])
        scores.append(sims[keep])
    return Scored(np.concatenate(ids), np.concatenate(scores), max(rest, 0.0))


def score_text(matrices: list[LabelMatrix], vector: np.ndarray, threshold: float, limit: int | None = None) -> Scored:
    """Nodes of ``matrices`` scoring at least ``threshold`` against ``vector``, with their exact scores."""
    return rescore(screen(matrices, vector), threshold, limit)


@dataclass(frozen=True)
class ExactPlan:
    """A plan with exact linked scores, and how far its anchor was cut."""

    plan: QueryPlan
    anchor: int | None  # the position whose ids the Cypher starts from
    excluded_best: float  # the best anchor score left out (0.0: none left out)
    other_max: float  # an upper bound of the product of every other factor of a row score


class AnchorScorer:
    """Per-label embedding matrices of one Neo4j store, validated against the labels' write stamps.

    A store reads one namespace, so its matrices hold that namespace's nodes only. The version
    (stamps, node count) is the label's in the whole database (constant-time counts): a write in
    any namespace reloads the matrix, which costs time, never correctness.
    """

    def __init__(
        self,
        reader: Reader,
        namespace: str | None = None,
        *,
        background: bool = False,
        bulk_reader: BulkReader | None = None,
    ) -> None:
        self._read = reader
        # reads a label's every id and embedding (rows of values); faster than ``reader`` for that
        self._bulk_read = bulk_reader
        self.namespace = namespace
        # reload a stale matrix in a background task and let the caller answer from Cypher meanwhile
        self.background = background
        self._labels: dict[str, LabelMatrix] = {}
        self._loading: dict[str, asyncio.Task[None]] = {}
        # the store's own writes per label: a stale matrix only they changed is refreshed by their ids
        self.writes = OwnWrites()

    def invalidate(self, labels: Iterable[str] | None = None) -> None:
        """Forget the cached matrices (of ``labels``, or all): the next search reloads them.

        Call it after changing embeddings outside kag (raw Cypher) without adding or deleting nodes.
        """
        if labels is None:
            self._labels.clear()
        else:
            for label in labels:
                self._labels.pop(label, None)

    @property
    def cached(self) -> dict[str, tuple[int, int]]:
        """The cached labels and the ``(write stamps, node count)`` version each was loaded at."""
        return {label: m.version for label, m in self._labels.items()}

    async def versions(self, labels: list[str]) -> dict[str, tuple[int, int]]:
        """Each label's ``(write stamps, node count)``, read in one query."""
        parts = [version_calls(label, f"c{i}", f"v{i}") for i, label in enumerate(labels)]
        cols = ", ".join(f"c{i}, v{i}" for i in range(len(labels)))
        res = await self._read("".join(parts) + f"RETURN {cols}", {}, "reading label versions")
        rec = res.records[0]
        return {label: (int(rec[f"v{i}"]), int(rec[f"c{i}"])) for i, label in enumerate(labels)}

    async def matrices(self, labels: Iterable[str]) -> dict[str, LabelMatrix]:
        """The current matrices of ``labels``, reloading the ones whose version changed (and waiting)."""
        found = await self.current(labels, wait=True)
        assert found is not None
        return found

    async def current(self, labels: Iterable[str], *, wait: bool | None = None) -> dict[str, LabelMatrix] | None:
        """The current matrices of ``labels``; ``None`` while one is being reloaded in the background.

        ``wait`` (default: not :attr:`background`) reloads a missing or stale matrix before
        returning. Otherwise its reload starts in a background task and ``None`` comes back at
        once, so the caller answers this search from Cypher (the same rows, Neo4j's float32 cosines
        for scores, slower) instead of waiting seconds for a large label to load.
        """
        wait = not self.background if wait is None else wait
        wanted = sorted(set(labels))
        before = {label: self.writes.snapshot(label) for label in wanted}
        now = await self.versions(wanted)
        # own-write counters that belong to this version: no write of the label ran while it was read
        own = {label: snap if (snap := self.writes.snapshot(label)) == before[label] else None for label in wanted}
        stale = [label for label in wanted if (m := self._labels.get(label)) is None or m.version != now[label]]
        for label in list(stale):  # only this store's writes since the load: read back just those nodes
            refreshed = await self._refresh(label, now[label], own[label])
            if refreshed is not None:
                self._labels[label] = refreshed
                stale.remove(label)
        if stale and not wait:
            for label in stale:
                self._reload_later(label, now[label], own[label])
            return None
        for label in stale:
            self._labels[label] = await self._load(label, now[label], own[label])
        return {label: self._labels[label] for label in wanted}

    def _reload_later(self, label: str, version: tuple[int, int], own: Snapshot | None) -> None:
        """Start loading ``label`` at ``version`` unless a load of it is already running (a search
        after that one finishes checks the version again)."""
        running = self._loading.get(label)
        if running is not None and not running.done():
            return

        async def reload() -> None:
            try:
                self._labels[label] = await self._load(label, version, own)
            except Exception as exc:  # the searches go on from Cypher; the next one tries again
                log.warning("reloading the %s embeddings failed (%s); searches use Cypher meanwhile", label, exc)

        self._loading[label] = asyncio.ensure_future(reload())

    async def settle(self) -> None:
        """Wait for the background reloads in flight (a benchmark's or a test's warm-up)."""
        running = [task for task in self._loading.values() if not task.done()]
        if running:
            await asyncio.gather(*running, return_exceptions=True)

    def cancel(self) -> None:
        """Stop the background reloads in flight (the store is closing)."""
        for task in self._loading.values():
            task.cancel()
        self._loading.clear()

    async def _refresh(self, label: str, version: tuple[int, int], own: Snapshot | None) -> LabelMatrix | None:
        """The cached matrix of ``label`` brought to ``version`` by reading back only the nodes this
        store wrote since it was loaded (and the label's ids, for deletions), or ``None`` when that
        cannot be proven to give what a full load would (see :mod:`kag.graph.neo4j_write_counters`)."""
        cached = self._labels.get(label)
        if cached is None or cached.own is None or own is None or cached.matrix.shape[0] == 0:
            return None
        written = self.writes.written_between(label, cached.own, own, version[0] - cached.version[0])
        if written is None or len(written) > max(REFRESH_MIN, cached.matrix.shape[0] // 4):
            return None
        started = time.perf_counter()
        in_ns = "" if self.namespace is None else f" {NAMESPACE_MAP}"
        by_id = "id: id" if self.namespace is None else f"id: id, {IN_NAMESPACE}"
        params: dict[str, Any] = {"ids": sorted(written)}
        if self.namespace is not None:
            params["ns"] = self.namespace
        what = f"refreshing the {label} embeddings"
        res = await self._read(
            # every node of the label (its ids come from the id index): a node without an embedding,
            # which the full load leaves out, reads as unknown below and makes this a full load
            f"MATCH (n:{quote(label)}{in_ns}) RETURN collect(n.id) AS ids",
            params,
            what,
        )
        current = [str(i) for i in res.records[0]["ids"]]
        fetched: dict[str, np.ndarray] = {}
        if written:
            res = await self._read(
                f"UNWIND $ids AS id MATCH (n:{quote(label)} {{{by_id}}}) WHERE n.embedding IS NOT NULL "
                "RETURN n.id AS id, n.embedding AS e",
                params,
                what,
            )
            fetched = {str(r["id"]): np.asarray(r["e"], dtype=np.float32) for r in res.records}
        dims = cached.matrix.shape[1]
        if any(v.shape != (dims,) for v in fetched.values()):
            return None  # a vector of another length: the full load decides which rows stay
        # the cached rows keep their order (a full load's order is the store's, which reuses the slots
        # of deleted nodes; results never depend on it): deleted rows drop out, new ones go last
        old = cached.ids.shape[0]
        before = cached.positions()
        added = [node_id for node_id in current if node_id not in before]
        if any(node_id not in fetched for node_id in added):
            return None  # a node nobody told this store about (written outside kag): a full load
        present: set[str] | None = None
        if unread := [node_id for node_id in written if node_id in before and node_id not in fetched]:
            present = set(current)  # deleted since, or still there without its embedding (a full load)
            if any(node_id in present for node_id in unread):
                return None
        n = len(current)
        if n - len(added) == old:  # none deleted: the new rows go into the room behind the old ones
            appended = all(before.get(node_id, old) >= old for node_id in fetched)  # no old row rewritten
            matrix, spare = grown(cached.matrix, cached.spare if appended else None, old, n)
            source = np.concatenate([np.arange(old), np.full(n - old, -1)])
            norms = np.concatenate([cached.norms, np.zeros(n - old, dtype=np.float64)])
            ids = np.concatenate([cached.ids, np.array(added, dtype=object)])
            positions = dict(before)
            positions.update((node_id, old + k) for k, node_id in enumerate(added))
        else:  # rows deleted: the kept ones gathered
            present = set(current) if present is None else present
            kept = np.flatnonzero(np.fromiter((i in present for i in cached.ids.tolist()), dtype=bool, count=old))
            matrix, spare = gathered(cached.matrix, kept, n)
            source = np.concatenate([kept, np.full(n - kept.shape[0], -1)])
            norms = np.concatenate([cached.norms[kept], np.zeros(n - kept.shape[0], dtype=np.float64)])
            ids = np.concatenate([cached.ids[kept], np.array(added, dtype=object)])
            positions = {node_id: k for k, node_id in enumerate(ids.tolist())}
        matrix[source.shape[0] - len(added) :] = 0.0  # every new row is read back below
        for node_id, vector in fetched.items():
            row = positions.get(node_id)
            if row is not None:  # deleted again since: not in the id list
                source[row] = -1
                matrix[row] = vector
                norms[row] = float(np.linalg.norm(vector.astype(np.float64)))  # as the full load: row by row
        seconds = time.perf_counter() - started
        log.debug("refreshed %d of %d %s embeddings in %.3fs", len(fetched), len(current), label, seconds)
        origins = {cached.serial: source}
        for serial, older in list(cached.origins.items())[: ORIGINS - 1]:  # composed: a row kept in both steps
            origins[serial] = np.where(source >= 0, older[np.maximum(source, 0)], -1)
        return LabelMatrix(version, ids, matrix, norms, seconds, own, positions, origins=origins, spare=spare)

    async def _load(self, label: str, version: tuple[int, int], own: Snapshot | None = None) -> LabelMatrix:
        started = time.perf_counter()
        in_ns = "" if self.namespace is None else f" {NAMESPACE_MAP}"
        # node references first (small), then the ids and vectors of LOAD_BATCH nodes per record
        query = (
            f"MATCH (n:{quote(label)}{in_ns}) WHERE n.embedding IS NOT NULL WITH collect(n) AS nodes\n"
            "UNWIND range(0, size(nodes) - 1, $batch) AS start WITH nodes[start..start + $batch] AS part\n"
            "RETURN [n IN part | n.id] AS ids, [n IN part | n.embedding] AS vectors"
        )
        params: dict[str, Any] = {"batch": LOAD_BATCH}
        if self.namespace is not None:
            params["ns"] = self.namespace
        what = f"loading the {label} embeddings"
        if self._bulk_read is not None:
            batches = await self._bulk_read(query, params, what, _vector_batch)
        else:
            batches = [_vector_batch(list(r.values())) for r in (await self._read(query, params, what)).records]
        # Neo4j cannot score a vector of another length: only the rows of the longest one stay (as before)
        dims = max((d for groups in batches for d in groups), default=0)
        kept = [groups[dims] for groups in batches if dims in groups]
        ids = np.array([i for part_ids, _ in kept for i in part_ids], dtype=object)
        matrix = np.concatenate([block for _, block in kept]) if kept else np.zeros((0, 0), dtype=np.float32)
        # row by row, as the memory store computes each norm (a batched norm may round differently)
        norms = np.array([float(np.linalg.norm(row.astype(np.float64))) for row in matrix], dtype=np.float64)
        seconds = time.perf_counter() - started
        log.info("loaded %d %s embeddings in %.2fs", len(ids), label, seconds)
        return LabelMatrix(version, ids, matrix, norms, seconds, own)

    async def prepare(self, plan: QueryPlan) -> Prepared | None:
        """``plan``'s row sides scored here (``None`` when no side is scored by cosine)."""
        positions = plan.row_nodes if plan.row_hops else (0,)
        texts = [(i, j) for i in positions for j in range(len(plan.nodes[i].texts)) if plan.nodes[i].link_of(j) is None]
        if not texts:
            return None
        mats = await self.current({label for i, _ in texts for label in plan.nodes[i].labels})
        if mats is None:  # reloading in the background: this search runs in Cypher
            return None
        links: dict[int, list[Mapping[str, float] | None]] = {}
        other_max = 1.0
        lazy: Screen | None = None
        anchor = next((i for i in positions if plan.nodes[i].texts), None) if plan.row_hops else 0
        for i in positions:
            spec = plan.nodes[i]
            links[i] = []
            for j in range(len(spec.texts)):
                given = spec.link_of(j)
                if given is not None:
                    links[i].append(given)
                    if i != anchor:
                        other_max *= max(1.0, max(given.values(), default=0.0))
                    continue
                matrices = [mats[label] for label in spec.labels]
                if i == anchor and len(spec.texts) == 1:
                    lazy = screen(matrices, spec.vectors[j])  # rescored per cut: only the rows that can rank
                    links[i].append(None)
                    continue
                s = score_text(matrices, spec.vectors[j], plan.threshold)
                if i != anchor and s.ids.shape[0] > MAP_CAP:
                    links[i].append(None)  # too many to send: Neo4j scores this side by cosine
                    continue
                links[i].append(_as_map(s))
        return Prepared(plan, anchor, links, other_max, lazy)


def _as_map(s: Scored) -> dict[str, float]:
    return dict(zip(s.ids.tolist(), s.scores.tolist(), strict=True))


@dataclass
class Prepared:
    """A plan's exact linked scores, ready to be cut at the anchor."""

    plan: QueryPlan
    anchor: int | None
    links: dict[int, list[Mapping[str, float] | None]]
    other_max: float  # an upper bound of the product of the non-anchor factors of a row score
    lazy: Screen | None = None  # the anchor's one text, screened once and rescored per cut

    def cut(self, first: int | None) -> ExactPlan:
        """The plan with the anchor's best ``first`` ids only (``None``: all of them)."""
        nodes = list(self.plan.nodes)
        excluded = 0.0
        for i, links in self.links.items():
            if i == self.anchor and self.lazy is not None:
                # the screen keeps every row within 2 * SCREEN of the first-th best: the ones left
                # out score clearly lower, which is what lets a short answer be proven
                s = rescore(self.lazy, self.plan.threshold, limit=first)
                links, excluded = [_as_map(s)], s.rest
            elif i == self.anchor:
                links, excluded = _cut_anchor(links, first)
            nodes[i] = replace(nodes[i], links=tuple(links))
        return ExactPlan(replace(self.plan, nodes=tuple(nodes)), self.anchor, excluded, self.other_max)


def _cut_anchor(
    links: list[Mapping[str, float] | None], first: int | None
) -> tuple[list[Mapping[str, float] | None], float]:
    """Keep the anchor's best ``first`` ids (ties at the cut kept) in every text's map.

    Returns the maps and the best combined anchor score left out (0.0 when none is).
    """
    maps = [m for m in links if m is not None]
    if first is None or not maps:
        return links, 0.0
    common = set(maps[0]).intersection(*maps[1:]) if len(maps) > 1 else set(maps[0])
    if len(common) <= first:
        return [None if m is None else {k: m[k] for k in common} for m in links], 0.0
    ids = list(common)
    part = np.ones(len(ids), dtype=np.float64)
    for m in maps:
        part *= np.array([m[k] for k in ids], dtype=np.float64)
    order = np.argsort(-part, kind="stable")
    cut = part[order[first - 1]]
    keep = part >= cut - 2 * SCREEN  # near-ties too: what is left out then scores clearly lower
    excluded = float(part[~keep].max()) if (~keep).any() else 0.0
    chosen = {ids[int(x)] for x in np.flatnonzero(keep)}
    return [None if m is None else {k: m[k] for k in chosen} for m in links], excluded


def proven(rows_scores: list[float], k: int, exact: ExactPlan, sides: int) -> bool:
    """Whether a cut anchor's answer is final: ``k`` rows, the last above any left-out anchor's best row."""
    if exact.excluded_best <= 0.0:
        return True
    if len(rows_scores) < k:
        return False
    bound = (exact.excluded_best * exact.other_max) ** (1.0 / sides)
    # the margin covers a float32 cosine side rounded a hair above 1.0
    return rows_scores[-1] > bound * (1.0 + 1e-6) and not math.isnan(rows_scores[-1])


def _vector_batch(values: list[Any]) -> dict[int, tuple[list[str], np.ndarray]]:
    """One record of a matrix load (ids, vectors) as float32 blocks by vector length (one, unless a
    writer outside kag stored vectors of other lengths), in the record's order."""
    ids, vectors = values
    try:
        block = np.asarray(vectors, dtype=np.float32)
    except ValueError:  # lengths differ within the batch
        block = None
    if block is not None and block.ndim == 2:
        return {block.shape[1]: (list(ids), block)} if block.shape[0] else {}
    groups: dict[int, tuple[list[str], list[Any]]] = {}
    for node_id, vector in zip(ids, vectors, strict=True):
        part = groups.setdefault(len(vector), ([], []))
        part[0].append(node_id)
        part[1].append(vector)
    return {d: (i, np.asarray(v, dtype=np.float32).reshape(len(i), d)) for d, (i, v) in groups.items()}
