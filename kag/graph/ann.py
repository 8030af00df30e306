"""An approximate nearest-neighbour index for the embedded store: IVF on numpy.

Opt-in (``MemoryGraphStore(approximate_min_rows=...)``) and used only by plans that
ask for it with ``candidates`` — the same knob as the Neo4j store's approximate mode,
where the anchor's candidates come from the label's HNSW index and are then scored
exactly. Here a coarse quantizer (spherical k-means, about ``4 * sqrt(n)`` centroids)
splits a label's rows into lists; a query scores the centroids, scans the rows of the
best lists (enough of them to hold ``oversample * candidates`` rows, 32 x by default) and returns the
``candidates`` rows of highest similarity. The store then scores those rows exactly,
so every returned score is exact; only rows outside the probed lists can be missed.

Writes do not rebuild it: rows added later are scanned exactly with the probed lists,
deleted rows are dropped by the store, and a re-embedded row stays in the list of its
old vector. The store rebuilds the index when the label's row count has moved by more
than a fifth since the build.
"""

from __future__ import annotations

import math

import numpy as np

_BLOCK = 8192  # rows per block of the assignment products (bounds the temporaries)


class IVFIndex:
    """Inverted lists over ``rows`` (positions into ``matrix``), built with spherical k-means."""

    def __init__(
        self,
        matrix: np.ndarray,
        rows: np.ndarray,
        *,
        lists: int | None = None,
        iterations: int = 5,
        oversample: int = 32,
        min_probe: int = 4,
        seed: int = 0,
    ) -> None:
        self.rows = np.asarray(rows, dtype=np.int64)
        self.oversample = oversample
        self.min_probe = min_probe
        n = self.rows.shape[0]
        self.lists = max(1, min(n, lists if lists is not None else int(4 * math.sqrt(n))))
        rng = np.random.default_rng(seed)
        vectors = _unit(matrix[self.rows]) if n else np.zeros((0, matrix.shape[1]), dtype=np.float32)
        # k-means on a sample (32 rows per list is plenty for the centroids), then assign every row
        sample = vectors[rng.choice(n, size=min(n, 32 * self.lists), replace=False)] if n else vectors
        centroids = sample[rng.choice(sample.shape[0], size=self.lists, replace=False)] if n else sample
        for _ in range(iterations):
            assign = _nearest(sample, centroids)
            sums = np.zeros_like(centroids)
            np.add.at(sums, assign, sample)
            empty = np.bincount(assign, minlength=self.lists) == 0
            sums[empty] = centroids[empty]  # an empty list keeps its centroid
            centroids = _unit(sums)
        self.centroids = np.ascontiguousarray(centroids, dtype=np.float32)
        assign = _nearest(vectors, self.centroids) if n else np.zeros(0, dtype=np.int64)
        order = np.argsort(assign, kind="stable")
        self.members = self.rows[order]  # rows grouped by list
        self.indptr = np.concatenate([[0], np.cumsum(np.bincount(assign, minlength=self.lists))]).astype(np.int64)
        self.sorted_rows = np.sort(self.rows)
        self.extra = np.zeros(0, dtype=np.int64)  # rows written after the build: always scanned
        self.version: object = None

    def refresh(self, rows: np.ndarray, version: object) -> None:
        """Take the label's current ``rows`` (sorted): rows added since the build are scanned exactly."""
        self.extra = np.setdiff1d(rows, self.sorted_rows, assume_unique=True)
        self.version = version

    def search(
        self, matrix: np.ndarray, query: np.ndarray, candidates: int, norms: np.ndarray | None = None
    ) -> np.ndarray:
        """Positions (into ``matrix``) of the ``candidates`` probed rows most similar to ``query``, sorted.

        ``norms``: the rows' norms, when they are not unit vectors (similarity is cosine).
        """
        n = self.rows.shape[0]
        if n + self.extra.shape[0] <= candidates:
            return np.sort(np.concatenate([self.rows, self.extra]))
        q = np.asarray(query, dtype=np.float32)
        ranked = np.argsort(-(self.centroids @ q), kind="stable")
        sizes = (self.indptr[1:] - self.indptr[:-1])[ranked]
        want = min(n, self.oversample * candidates)
        probe = max(self.min_probe, int(np.searchsorted(np.cumsum(sizes), want)) + 1)
        chosen = ranked[:probe]
        parts = [self.members[self.indptr[c] : self.indptr[c + 1]] for c in chosen.tolist()]
        pool = np.concatenate([*parts, self.extra])
        if pool.shape[0] <= candidates:
            return np.sort(pool)
        # a single-threaded kernel: BLAS threads cost more than they save on a few thousand rows
        dots = np.einsum("ij,j->i", matrix[pool], q)
        if norms is not None:
            dots = dots / norms[pool]
        top = np.argpartition(-dots, candidates - 1)[:candidates]
        return np.sort(pool[top])

    def nbytes(self) -> int:
        """Bytes held by the index (the vectors themselves stay in the store's matrix)."""
        return int(self.rows.nbytes + self.centroids.nbytes + self.members.nbytes + self.indptr.nbytes)


def _unit(vectors: np.ndarray) -> np.ndarray:
    v = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return v / norms


def _nearest(vectors: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Index of the most similar centroid of each row."""
    out = np.empty(vectors.shape[0], dtype=np.int64)
    for start in range(0, vectors.shape[0], _BLOCK):
        out[start : start + _BLOCK] = np.argmax(vectors[start : start + _BLOCK] @ centroids.T, axis=1)
    return out
