"""The projected screen of approximate passage search (``kag.graph.ann.ProjectedIndex``)."""

from __future__ import annotations

import numpy as np

from kag.graph.ann import ProjectedIndex

DIMS = 384


def _clustered(n: int, seed: int, clusters: int = 80) -> np.ndarray:
    """Rows around ``clusters`` centres in 384 dimensions: structure the main directions capture, and
    isotropic noise they do not (so 128 directions are a real approximation)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, DIMS)).astype(np.float32)
    rows = centres[rng.integers(0, clusters, n)] + 0.5 * rng.standard_normal((n, DIMS)).astype(np.float32)
    return rows.astype(np.float32)


def _exact(matrix: np.ndarray, q: np.ndarray, k: int) -> set[int]:
    cos = (matrix @ q) / np.linalg.norm(matrix, axis=1)
    return set(np.argsort(-cos, kind="stable")[:k].tolist())


def test_recall_against_exact_and_the_shape_of_an_answer() -> None:
    matrix = _clustered(20_000, seed=1)
    norms = np.linalg.norm(matrix, axis=1)
    index = ProjectedIndex(matrix, dims=128, oversample=16)  # a third of the dimensions: an approximation
    assert index.columns.shape == (128, 20_000) and index.directions.shape == (DIMS, 128)
    rng = np.random.default_rng(2)
    hits = 0
    for _ in range(30):
        q = matrix[int(rng.integers(0, 20_000))] + 0.3 * rng.standard_normal(DIMS).astype(np.float32)
        got = index.search(matrix, q, 100, norms)
        assert got.shape == (100,) and np.all(np.diff(got) > 0)  # distinct positions, sorted
        hits += len(_exact(matrix, q, 10) & set(got.tolist()))
    assert hits / 300 >= 0.95
    # fewer rows than candidates: every row
    small = ProjectedIndex(matrix[:50])
    assert small.search(matrix[:50], matrix[3], 100).tolist() == list(range(50))


def test_the_screen_ranks_by_cosine_whatever_the_row_lengths() -> None:
    unit = _clustered(5_000, seed=3)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    scales = np.random.default_rng(4).uniform(0.1, 10.0, size=(5_000, 1)).astype(np.float32)
    scaled = unit * scales
    a, b = ProjectedIndex(unit), ProjectedIndex(scaled)
    for i in (0, 17, 4_321):
        q = unit[i]
        assert np.array_equal(a.search(unit, q, 40), b.search(scaled, q, 40, np.linalg.norm(scaled, axis=1)))


def test_a_reload_is_projected_onto_the_same_directions() -> None:
    matrix = _clustered(3_000, seed=5)
    index = ProjectedIndex(matrix)
    rng = np.random.default_rng(6)
    # the reload lost 100 rows, gained 10 new ones, re-embedded one, and came back shuffled
    fresh = rng.standard_normal((10, DIMS)).astype(np.float32)
    reloaded = np.vstack([matrix[100:], fresh])
    reloaded[500] = fresh[3] * 2.0
    order = rng.permutation(reloaded.shape[0])
    reloaded = reloaded[order]
    moved = index.moved(reloaded)
    assert moved.directions is index.directions and moved.columns.shape == (index.dims, reloaded.shape[0])
    assert index.columns.shape == (index.dims, 3_000)  # the original is left as it was
    norms = np.linalg.norm(reloaded, axis=1)
    for vector in (fresh[7], fresh[3]):
        top = moved.search(reloaded, vector, 5, norms)
        best = top[np.argmax((reloaded[top] @ vector) / norms[top])]
        assert np.allclose(reloaded[best] / norms[best], vector / np.linalg.norm(vector), atol=1e-6)


def test_a_refresh_is_followed_column_by_column() -> None:
    matrix = _clustered(3_000, seed=4)
    index = ProjectedIndex(matrix, dims=96)
    rng = np.random.default_rng(9)
    # the refreshed rows: some deleted, the rest reordered, two re-embedded, three new
    kept = rng.permutation(np.setdiff1d(np.arange(3_000), [5, 77, 2_999]))
    new_rows = _clustered(3, seed=8)
    refreshed = np.concatenate([matrix[kept], new_rows])
    source = np.concatenate([kept, [-1, -1, -1]])
    for row in (10, 400):
        refreshed[row] = new_rows[0] * 2.0
        source[row] = -1
    followed = index.followed(refreshed, source)
    assert followed.directions is index.directions and followed.columns.shape == (96, refreshed.shape[0])
    assert index.columns.shape == (96, 3_000)  # the index it came from is left as it was
    keep = source >= 0
    assert np.array_equal(followed.columns[:, keep], index.columns[:, source[keep]])  # copied, not recomputed
    assert np.allclose(followed.columns, index.project(refreshed), atol=1e-5)  # what a full projection gives
    assert not np.allclose(followed.columns[:, 10], index.columns[:, kept[10]], atol=1e-3)  # re-embedded


def test_rows_appended_or_changed_in_place_are_followed_too() -> None:
    matrix = _clustered(2_000, seed=5)
    index = ProjectedIndex(matrix, dims=64)
    refreshed = np.concatenate([matrix, _clustered(4, seed=6)])
    refreshed[7] = refreshed[2_001] * 3.0  # re-embedded where it stood
    source = np.concatenate([np.arange(2_000), [-1, -1, -1, -1]])
    source[7] = -1
    followed = index.followed(refreshed, source)
    assert followed.columns.shape == (64, 2_004) and index.columns.shape == (64, 2_000)
    assert np.array_equal(followed.columns[:, :7], index.columns[:, :7])
    assert np.allclose(followed.columns, index.project(refreshed), atol=1e-5)
    assert not np.allclose(followed.columns[:, 7], index.columns[:, 7], atol=1e-3)
    shrunk = index.followed(matrix[:1_500], np.arange(1_500))  # the last rows deleted
    assert np.array_equal(shrunk.columns, index.columns[:, :1_500])
