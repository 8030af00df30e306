"""Approximate passage search on Neo4j (``candidates=N``): the projected screen (default) and the IVF
index over the cached chunk matrix.

Every score either returns is Neo4j's exact score; recall is high; writes by another store are seen;
filters and the namespace hold. Both are carried over matrix reloads: the projection re-projects the
reloaded rows, the IVF index follows them by chunk id, which a reordered reload must not break.
"""

from __future__ import annotations

import numpy as np
import pytest

from kag.errors import ConfigError
from kag.graph.ann import IVFIndex, ProjectedIndex
from kag.graph.neo4j import Neo4jGraphStore
from kag.graph.neo4j_anchor import LabelMatrix
from kag.graph.passages import ChunkRecord, DocumentRecord
from kag.graph.passages_neo4j import PCA_DIMS, Neo4jPassageStore
from kag.graph.passages_neo4j_vectors import remap
from tests.neo4j.conftest import DIMS, count_loads, fresh_namespace, passage_store

pytestmark = pytest.mark.neo4j
N = 3000
CANDIDATES = 20  # the IVF probes about 32 * 20 = 640 of the 3,000 rows, the screen scores 160 in full

# two writers of one namespace, and a store searching in the mode under test
Writers = tuple[Neo4jPassageStore, Neo4jPassageStore, Neo4jPassageStore]


@pytest.fixture(params=["pca", "ivf"])
def mode(request: pytest.FixtureRequest) -> str:
    """The approximate index under test."""
    return str(request.param)


@pytest.fixture
def writers(stores: tuple[Neo4jPassageStore, Neo4jPassageStore], mode: str) -> Writers:
    """The two writers of ``stores`` and a store on the first one's driver and namespace whose
    approximate searches use ``mode``."""
    writer, other = stores
    return writer, other, Neo4jPassageStore(writer.graph_store, approximate=mode)  # type: ignore[arg-type]


def _clustered(rng: np.random.Generator, n: int, clusters: int = 60) -> np.ndarray:
    """Rows around ``clusters`` centres: the structure real embeddings have and an IVF index relies on."""
    centres = rng.standard_normal((clusters, DIMS)).astype(np.float32)
    rows = centres[rng.integers(0, clusters, n)] + 0.6 * rng.standard_normal((n, DIMS)).astype(np.float32)
    return rows.astype(np.float32)


def _doc(name: str, vectors: np.ndarray, langs: list[str] | None = None) -> tuple[DocumentRecord, list[ChunkRecord]]:
    doc = DocumentRecord(id=f"doc_{name}", source=name, title=name, text_hash=name)
    langs = langs or ["en"] * len(vectors)
    chunks = [
        ChunkRecord(f"chk_{name}_{i:05d}", doc.id, i, f"text {i}", 0, 6, name, name, {"lang": langs[i]}, vec)
        for i, vec in enumerate(vectors)
    ]
    return doc, chunks


async def _seeded(
    store: Neo4jPassageStore, seed: int, langs: list[str] | None = None
) -> tuple[np.random.Generator, np.ndarray, list[ChunkRecord]]:
    """``N`` clustered chunks of one document written to ``store``: the generator, their vectors, the chunks."""
    rng = np.random.default_rng(seed)
    base = _clustered(rng, N)
    doc, chunks = _doc("a", base, langs)
    await store.write([doc], chunks, [])
    return rng, base, chunks


async def _recall(store: Neo4jPassageStore, queries: np.ndarray, k: int = 5) -> float:
    """Recall@k of approximate against exact search; also checks every approximate score is exact."""
    hits = 0
    for q in queries:
        exact = await store.vector_search(q, k)
        approx = await store.vector_search(q, k, candidates=CANDIDATES)
        assert len(approx) == k
        scores = {r.chunk_id: r.score for r in await store.vector_search(q, N, ids=[r.chunk_id for r in approx])}
        assert [r.score for r in approx] == [scores[r.chunk_id] for r in approx]  # Neo4j's own scores
        assert [r.score for r in approx] == sorted((r.score for r in approx), reverse=True)
        hits += len({r.chunk_id for r in exact} & {r.chunk_id for r in approx})
    return hits / (k * len(queries))


async def test_approximate_scores_are_exact_and_recall_is_high(writers: Writers, mode: str) -> None:
    writer, _, store = writers
    rng, base, _ = await _seeded(writer, 3)
    queries = base[rng.choice(N, 30, replace=False)] + 0.3 * rng.standard_normal((30, DIMS)).astype(np.float32)
    recall = await _recall(store, queries)
    assert recall >= 0.95
    held = store.vectors.screen
    assert held is not None and held.built_rows == N  # the matrix path ran (not HNSW)
    if mode == "ivf":
        assert isinstance(held.index, IVFIndex)
        probed = held.index.search(held.matrix.matrix, queries[0], CANDIDATES * 32)
        assert probed.shape[0] < N  # it probes part of the rows only
    else:  # the screen reads part of the 384 dimensions of every row
        assert isinstance(held.index, ProjectedIndex) and PCA_DIMS < DIMS
        assert held.index.columns.shape == (PCA_DIMS, N)
    # a query equal to a stored chunk finds it first, with Neo4j's score for an identical vector
    top = await store.vector_search(base[123], 1, candidates=CANDIDATES)
    assert top[0].chunk_id == "chk_a_00123" and top[0].score == pytest.approx(1.0)


async def test_writes_by_another_store_are_seen_and_the_index_is_carried_over(writers: Writers) -> None:
    writer, other, store = writers
    rng, base, _ = await _seeded(writer, 4)
    probe = rng.standard_normal(DIMS).astype(np.float32)
    await store.vector_search(probe, 3, candidates=CANDIDATES)  # builds the approximate index
    built = store.vectors.screen
    assert built is not None
    # another driver adds a chunk equal to the probe: approximate search must find it at once
    doc_b, chunks_b = _doc("b", probe.reshape(1, -1))
    await other.write([doc_b], chunks_b, [])
    got = await store.vector_search(probe, 3, candidates=CANDIDATES)
    assert got[0].chunk_id == "chk_b_00000" and got[0].score == pytest.approx(1.0)
    assert store.vectors.screen is not None and store.vectors.screen.index is not built.index  # carried over ...
    assert store.vectors.screen.built_rows == N  # ... not rebuilt
    # ... and deletes it: gone at once
    await other.delete_documents([doc_b.id])
    assert all(r.chunk_id != "chk_b_00000" for r in await store.vector_search(probe, 3, candidates=CANDIDATES))
    # the rows of the carried index still point at the right chunks after reloads
    queries = base[rng.choice(N, 20, replace=False)] + 0.3 * rng.standard_normal((20, DIMS)).astype(np.float32)
    assert await _recall(store, queries) >= 0.95
    # a document rewritten with other vectors: the new vector is found (scanned, or in its old list)
    doc_c, chunks_c = _doc("a", np.vstack([probe, base[1:]]))
    await other.write([doc_c], chunks_c, [])
    top = await store.vector_search(probe, 1, candidates=CANDIDATES)
    assert top[0].chunk_id == "chk_a_00000" and top[0].score == pytest.approx(1.0)


async def test_own_writes_refresh_the_matrix_and_the_screen_follows(writers: Writers, mode: str) -> None:
    writer, _, store = writers  # the writer shares the searching store's driver, scorer and own-write log
    rng, base, _ = await _seeded(writer, 8)
    probe = rng.standard_normal(DIMS).astype(np.float32)
    await store.vector_search(probe, 3, candidates=CANDIDATES)
    scorer = writer.graph_store.anchor_scorer
    loads = count_loads(scorer)
    doc_b, chunks_b = _doc("b", probe.reshape(1, -1))  # added
    await writer.write([doc_b], chunks_b, [])
    got = await store.vector_search(probe, 3, candidates=CANDIDATES)
    assert got[0].chunk_id == "chk_b_00000" and got[0].score == pytest.approx(1.0)
    before, screen = scorer._labels["Chunk"], store.vectors.screen
    rows_before = before.matrix.copy()
    doc_c, chunks_c = _doc("c", base[:200] + 0.01)  # added, then deleted below
    await writer.write([doc_c], chunks_c, [])
    assert (await store.vector_search(base[7] + 0.01, 1, candidates=CANDIDATES))[0].chunk_id == "chk_c_00007"
    after = scorer._labels["Chunk"]
    # appended into the room behind the rows (kag.graph.spare): nothing copied, the older matrix unchanged
    assert np.shares_memory(after.matrix, before.matrix) and np.array_equal(before.matrix, rows_before)
    assert np.array_equal(after.matrix[N + 1 :], base[:200] + 0.01)
    if mode == "pca":
        assert screen is not None and store.vectors.screen is not None
        assert np.shares_memory(store.vectors.screen.index.columns, screen.index.columns)  # type: ignore[union-attr]
    # b rewritten (its row re-embedded, one more) and c deleted: the kept rows are gathered by id
    doc_b, chunks_b = _doc("b", np.vstack([-probe, base[5]]))
    await writer.write([doc_b], chunks_b, [])
    await writer.delete_documents([doc_c.id])
    gone = await store.vector_search(base[7] + 0.01, 5, candidates=CANDIDATES)
    assert all(not r.chunk_id.startswith("chk_c") for r in gone)  # deleted: not found
    held = store.vectors.screen
    assert held is not None
    assert loads == []  # every change came from this store: refreshed by ids, never loaded whole
    assert held.matrix.origins and held.matrix.ids.shape == (N + 2,)
    assert held.built_rows == N  # carried over, not rebuilt
    if mode == "pca":  # the screen followed the refresh column by column
        assert isinstance(held.index, ProjectedIndex) and held.index.columns.shape == (PCA_DIMS, N + 2)
        assert np.allclose(held.index.columns, held.index.project(held.matrix.matrix), atol=1e-5)
    top = await store.vector_search(-probe, 1, candidates=CANDIDATES)
    assert top[0].chunk_id == "chk_b_00000" and top[0].score == pytest.approx(1.0)
    queries = base[rng.choice(N, 20, replace=False)] + 0.3 * rng.standard_normal((20, DIMS)).astype(np.float32)
    assert await _recall(store, queries) >= 0.95


async def test_the_screen_follows_refreshes_made_by_exact_searches_in_between(
    stores: tuple[Neo4jPassageStore, Neo4jPassageStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = stores[0]
    store = Neo4jPassageStore(writer.graph_store, approximate="pca")  # type: ignore[arg-type]
    rng, base, _ = await _seeded(writer, 9)
    await store.vector_search(base[0], 3, candidates=CANDIDATES)  # the screen is built over this matrix
    built = store.vectors.screen
    assert built is not None

    def reprojected(*_: object) -> ProjectedIndex:
        raise AssertionError("the screen was re-projected whole instead of followed")

    monkeypatch.setattr(ProjectedIndex, "moved", reprojected)
    follows: list[int] = []
    follow = ProjectedIndex.followed

    def counted(index: ProjectedIndex, matrix: np.ndarray, source: np.ndarray) -> ProjectedIndex:
        follows.append(matrix.shape[0])
        return follow(index, matrix, source)

    monkeypatch.setattr(ProjectedIndex, "followed", counted)
    extra = _clustered(rng, 6)
    for n in range(3):  # each write refreshed by an exact search, which leaves the screen behind
        doc, chunks = _doc(f"x{n}", extra[2 * n : 2 * n + 2])
        await writer.write([doc], chunks, [])
        assert (await store.vector_search(extra[2 * n], 1))[0].chunk_id == f"chk_x{n}_00000"
    await writer.delete_documents(["doc_x0"])  # and a deletion: the kept rows move up
    top = await store.vector_search(extra[5], 1, candidates=CANDIDATES)  # four refreshes behind the screen
    assert follows == [N + 4]  # once, onto the refreshed matrix (the stale one is not screened first)
    assert top[0].chunk_id == "chk_x2_00001" and top[0].score == pytest.approx(1.0)
    held = store.vectors.screen
    assert held is not None and held.built_rows == N and held.matrix.ids.shape == (N + 4,)
    assert isinstance(held.index, ProjectedIndex) and isinstance(built.index, ProjectedIndex)
    assert held.index.directions is built.index.directions  # the same projection, carried over
    assert np.allclose(held.index.columns, held.index.project(held.matrix.matrix), atol=1e-5)
    assert all(r.chunk_id != "chk_x0_00000" for r in await store.vector_search(extra[0], 3, candidates=CANDIDATES))


async def test_growth_by_more_than_a_fifth_rebuilds(writers: Writers) -> None:
    writer, other, store = writers
    rng = np.random.default_rng(6)
    doc, chunks = _doc("a", _clustered(rng, 1000))
    await writer.write([doc], chunks, [])
    probe = rng.standard_normal(DIMS).astype(np.float32)
    await store.vector_search(probe, 3, candidates=CANDIDATES)
    assert store.vectors.screen is not None and store.vectors.screen.built_rows == 1000
    first = store.vectors.screen.index
    doc_b, chunks_b = _doc("b", _clustered(rng, 100))  # a tenth more: carried over
    await other.write([doc_b], chunks_b, [])
    await store.vector_search(probe, 3, candidates=CANDIDATES)
    assert store.vectors.screen.built_rows == 1000 and store.vectors.screen.index is not first
    doc_c, chunks_c = _doc("c", _clustered(rng, 200))  # 1,300 rows: rebuilt
    await other.write([doc_c], chunks_c, [])
    await store.vector_search(probe, 3, candidates=CANDIDATES)
    assert store.vectors.screen.built_rows == 1300


async def test_filters_are_respected(writers: Writers) -> None:
    writer, _, store = writers
    _, base, chunks = await _seeded(writer, 8, [["en", "fr", "de"][i % 3] for i in range(N)])
    for q in base[:5]:
        got = await store.vector_search(q, 5, where={"lang": "fr"}, candidates=CANDIDATES)
        exact = await store.vector_search(q, 5, where={"lang": "fr"})
        assert len(got) == 5 and all(r.metadata["lang"] == "fr" for r in got)
        assert [(r.chunk_id, r.score) for r in got] == [(r.chunk_id, r.score) for r in exact]
        ids = [c.id for c in chunks[:40]]
        scoped = await store.vector_search(q, 5, ids=ids, candidates=CANDIDATES)
        assert len(scoped) == 5 and {r.chunk_id for r in scoped} <= set(ids)


async def test_namespaces_do_not_cross(neo4j_config: dict[str, str]) -> None:
    ns_a, ns_b = fresh_namespace(), fresh_namespace()
    a, b = passage_store(neo4j_config, ns_a), passage_store(neo4j_config, ns_b)
    try:
        await a.ensure_schema(DIMS)
        await b.ensure_schema(DIMS)
        rng = np.random.default_rng(10)
        base = _clustered(rng, 1000)
        other = _clustered(rng, 1000)
        # the same document and chunk ids in both namespaces, with different vectors
        doc_a, chunks_a = _doc("a", base)
        doc_b, chunks_b = _doc("a", other)
        await a.write([doc_a], chunks_a, [])
        await b.write([doc_b], chunks_b, [])
        for q, want in ((base[7], a), (other[7], b)):
            for store in (a, b):
                got = await store.vector_search(q, 3, candidates=CANDIDATES)
                exact = await store.vector_search(q, 3)
                assert [(r.chunk_id, r.score) for r in got] == [(r.chunk_id, r.score) for r in exact]
                if store is want:  # its own vector: found with the score of an identical vector
                    assert got[0].chunk_id == "chk_a_00007" and got[0].score == pytest.approx(1.0)
                else:  # the same id in the other namespace scores against that namespace's vector
                    assert got[0].score < 0.99
        assert a.vectors.screen is not None and a.vectors.screen.built_rows == 1000
    finally:
        await a.clear()
        await b.clear()
        await a.graph_store.aclose()
        await b.graph_store.aclose()


async def test_hnsw_option_and_validation(stores: tuple[Neo4jPassageStore, Neo4jPassageStore]) -> None:
    store, _ = stores
    rng = np.random.default_rng(12)
    base = _clustered(rng, 200)
    doc, chunks = _doc("a", base)
    await store.write([doc], chunks, [])
    hnsw = Neo4jPassageStore(store.graph_store, approximate="hnsw")
    got = await hnsw.vector_search(base[9], 3, candidates=50)
    assert got[0].chunk_id == "chk_a_00009" and got[0].score == pytest.approx(1.0)
    assert hnsw.vectors.screen is None  # the HNSW index answered, no index over the matrix was built
    with pytest.raises(ConfigError):
        Neo4jPassageStore(store.graph_store, approximate="lsh")  # type: ignore[arg-type]


def test_remap_follows_ids_through_a_reordered_reload() -> None:
    rng = np.random.default_rng(1)
    matrix = _clustered(rng, 500)
    ids = np.array([f"c{i:04d}" for i in range(500)], dtype=object)
    index = IVFIndex(matrix, np.arange(500), lists=20)
    # the reload lost c0000..c0009, gained n0..n4, and came back shuffled
    kept = np.arange(10, 500)
    fresh = rng.standard_normal((5, DIMS)).astype(np.float32)
    order = rng.permutation(495)
    new_ids = np.concatenate([ids[kept], np.array([f"n{i}" for i in range(5)], dtype=object)])[order]
    new_matrix = np.vstack([matrix[kept], fresh])[order]
    old = LabelMatrix((0, 500), ids, matrix, np.linalg.norm(matrix, axis=1).astype(np.float64))
    j = next(i for i, chunk_id in enumerate(new_ids) if chunk_id.startswith("c"))
    new_matrix[j] = fresh[0]  # one kept chunk re-embedded: it must be scanned, not looked for in its old list
    new = LabelMatrix((1, 495), new_ids, new_matrix, np.linalg.norm(new_matrix, axis=1).astype(np.float64))
    moved = remap(index, old, new)
    for lst in range(index.lists):
        before = {ids[r] for r in index.members[index.indptr[lst] : index.indptr[lst + 1]]} - set(ids[:10])
        after = {new_ids[r] for r in moved.members[moved.indptr[lst] : moved.indptr[lst + 1]]}
        assert before - {new_ids[j]} == after  # every list keeps its chunks, by id
    # the new chunks and the re-embedded one are always scanned
    assert sorted(new_ids[moved.extra]) == sorted([new_ids[j]] + [f"n{i}" for i in range(5)])
    top = moved.search(new_matrix, fresh[2], 5)
    assert "n2" in set(new_ids[top])


async def test_vectors_of_another_length_rebuild_the_index(mode: str) -> None:
    graph = Neo4jGraphStore("neo4j://127.0.0.1:1")  # never connected: the index lives beside the driver
    store = Neo4jPassageStore(graph, approximate=mode)  # type: ignore[arg-type]
    rng = np.random.default_rng(3)
    ids = np.array([f"c{i:03d}" for i in range(300)], dtype=object)

    def matrix(version: int, dims: int) -> LabelMatrix:
        rows = rng.standard_normal((300, dims)).astype(np.float32)
        return LabelMatrix((version, 300), ids, rows, np.linalg.norm(rows, axis=1).astype(np.float64))

    first = await store.vectors.screen_for(matrix(0, 16))
    again = await store.vectors.screen_for(matrix(1, 16))  # same length, same count: carried over
    assert again is not first and store.vectors.screen is not None and store.vectors.screen.built_rows == 300
    wider = matrix(2, 32)  # every chunk re-embedded with another embedder: rebuilt, not carried over
    index = await store.vectors.screen_for(wider)
    assert index.search(wider.matrix, wider.matrix[7], 10, wider.norms).shape == (10,)
    assert 7 in index.search(wider.matrix, wider.matrix[7], 10, wider.norms).tolist()
    await graph.aclose()
