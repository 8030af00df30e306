"""The embedded store's compact relationship columns, its file format and its approximate index."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kag.errors import EmbeddingError, InvalidInputError, StoreFormatError
from kag.graph.ann import IVFIndex
from kag.graph.base import SOURCES, NodeRecord, RelationRecord
from kag.graph.compact import MISSING, IdColumn, PropTable, dump_column, load_column, pack_document, unpack_document
from kag.graph.memory import MemoryGraphStore
from kag.query.plan import HopSpec, NodeSpec, QueryPlan

DIMS = 16


def _vec(rng: np.random.Generator) -> np.ndarray:
    v = rng.standard_normal(DIMS).astype(np.float32)
    return v / np.linalg.norm(v)


def _graph(seed: int = 0, nodes: int = 60, rels: int = 400) -> tuple[list[NodeRecord], list[RelationRecord]]:
    rng = np.random.default_rng(seed)
    node_recs = [
        NodeRecord(f"n{i:03d}", "A" if i % 3 else "B", {"name": f"node {i}", "rank": i}, _vec(rng))
        for i in range(nodes)
    ]
    values: list[Any] = [1, 2.5, "x", True, None, [1, 2], "é ü"]
    rel_recs = []
    for j in range(rels):
        props: dict[str, Any] = {"label": "R" if j % 2 else "S", "w": int(rng.integers(0, 10_000))}
        if j % 5 == 0:
            props["mixed"] = values[j % len(values)]
        if j % 7 == 0:
            props[SOURCES] = [f"c{j % 4}", "c9"]
        start, end = (int(x) for x in rng.integers(0, nodes, size=2))
        rel_recs.append(
            RelationRecord(
                f"r_{j:05d}_é" if j % 11 == 0 else f"r_{j:05d}", props["label"], f"n{start:03d}", f"n{end:03d}", props
            )
        )
    return node_recs, rel_recs


async def _store(seed: int = 0, **options: Any) -> MemoryGraphStore:
    store = MemoryGraphStore(**options)
    nodes, rels = _graph(seed)
    await store.upsert(nodes, rels[:150])
    await store.upsert([], rels[150:])
    return store


def test_id_column_finds_ranks_and_forgets() -> None:
    col = IdColumn()
    rng = np.random.default_rng(1)
    ids = [f"id-{int(x)}-{'z' * int(x % 9)}" for x in rng.permutation(10_000)]
    col.append(ids[:6000])  # bulk: sorted in at once
    for i in range(6000, 10_000, 100):  # small appends: found through the recent dict, merged later
        col.append(ids[i : i + 100])
    found = col.find_many([*ids, "absent", "id-" + "9" * 80])
    assert found.tolist() == [*range(10_000), -1, -1]
    assert col.find("ümlaut") is None
    ranks = col.ranks()
    assert [ids[p] for p in np.argsort(ranks)] == sorted(ids)
    col.kill(5)
    assert col.find(ids[5]) is None and col.live == 9_999 and col.id_of(5) is None
    again = col.append([ids[5]])
    assert col.find(ids[5]) == int(again[0]) == 10_000


def test_trailing_nul_ids_are_refused_before_any_change() -> None:
    store = MemoryGraphStore()
    nodes = [NodeRecord("a", "A", {}, np.ones(4, np.float32)), NodeRecord("b", "A", {}, np.ones(4, np.float32))]
    with pytest.raises(InvalidInputError, match="NUL"):
        store.apply_upsert(nodes, [RelationRecord("r\x00", "R", "a", "b", {})])
    assert not store.has_node("a")


def test_prop_table_merges_provenance_and_keeps_none() -> None:
    table = PropTable()
    first = table.add([0, 1])
    table.fill(first, [{"a": 1, SOURCES: ["y", "x", "x"]}, {"b": None}], SOURCES)
    table.merge(0, {SOURCES: ["z", "x"], "a": 2}, SOURCES)
    assert table.get(0) == {"a": 2, SOURCES: ["x", "y", "z"]}
    assert table.get(1) == {"b": None}
    assert table.value(1, "a") is MISSING


@pytest.mark.parametrize(
    "values",
    [
        ["R", "R", MISSING, "R"],
        [1, -(2**62), MISSING, 7],
        [1.5, MISSING, -0.25],
        [True, 1, "1", None, [1, "a"], MISSING],
        [MISSING, MISSING],
    ],
)
def test_columns_round_trip_through_the_packed_format(values: list[Any]) -> None:
    doc = unpack_document(pack_document({"col": dump_column(values)}))
    back = load_column(doc["col"], len(values))
    assert [type(v) for v in back] == [type(v) for v in values]
    assert back == values


async def test_store_reads_match_the_records_written() -> None:
    store = await _store()
    nodes, rels = _graph()
    latest: dict[str, RelationRecord] = {r.id: r for r in rels}
    got = await store.get_relations(list(latest))
    assert set(got) == set(latest)
    for rid, rec in latest.items():
        start, end, props = got[rid]
        assert (start, end) == (rec.start, rec.end)
        want = dict(rec.properties)
        if SOURCES in want:
            want[SOURCES] = sorted(set(want[SOURCES]))
        assert props == want
    counts = await store.counts()
    assert counts["relations"] == len(latest) and counts["nodes"] == len(nodes)
    assert counts["R"] + counts["S"] == len(latest) and counts["A"] + counts["B"] == len(nodes)
    view = store.graph
    assert view.number_of_edges() == len(latest) and view.number_of_nodes() == len(nodes)
    last = rels[-1]
    assert view.edges[last.start, last.end, last.id]["label"] == last.label


async def test_deletes_drop_relations_and_ids_come_back() -> None:
    store = await _store()
    _, rels = _graph()
    victim = rels[0]
    node = victim.start
    touching = {r.id for r in rels if node in (r.start, r.end)}
    assert await store.delete([rels[1].id, node, "nope"]) == 2
    left = await store.get_relations([r.id for r in rels])
    assert not touching & set(left) and rels[1].id not in left
    assert (await store.counts())["relations"] == len({r.id for r in rels} - touching - {rels[1].id})
    await store.upsert([NodeRecord(node, "A", {}, np.ones(DIMS, np.float32))], [victim])
    start, end, props = (await store.get_relations([victim.id]))[victim.id]
    assert (start, end) == (victim.start, victim.end) and props["w"] == victim.properties["w"]


async def test_retract_removes_provenance_and_unsupported_relations() -> None:
    store = await _store()
    _, rels = _graph()
    with_sources = [r for r in rels if SOURCES in r.properties]
    removed = store.retract({"c9", "c0", "c1", "c2", "c3"})
    assert removed["relations"] >= 1
    left = await store.get_relations([r.id for r in with_sources])
    assert not left  # every one lost all of its provenance and none was upserted directly
    assert (await store.counts())["relations"] == len({r.id for r in rels}) - len({r.id for r in with_sources})


@pytest.mark.parametrize("name", ["kb.kag", "kb.json"])
async def test_save_and_load_round_trip(tmp_path: Path, name: str) -> None:
    store = await _store()
    _, rels = _graph()
    await store.delete([rels[3].id, "n007"])
    path = tmp_path / name
    store.save(path)
    assert path.read_bytes().startswith(b"KAGSTORE") == (name == "kb.kag")
    again = MemoryGraphStore(path)
    assert await again.counts() == await store.counts()
    ids = [r.id for r in rels]
    assert await again.get_relations(ids) == await store.get_relations(ids)
    node_ids = [f"n{i:03d}" for i in range(60)]
    assert await again.get_nodes(node_ids) == await store.get_nodes(node_ids)
    rng = np.random.default_rng(5)
    for _ in range(5):
        q = _vec(rng)
        plan = QueryPlan(
            nodes=(NodeSpec(("A",), ("q",), (q,)), NodeSpec(("A", "B"))),
            hops=(HopSpec(("R", "S")),),
            k=15,
            threshold=0.3,
        )
        assert again.evaluate(plan).rows == store.evaluate(plan).rows
    # writes after a load behave as before it
    await again.upsert([], [RelationRecord("r_new", "R", "n001", "n002", {"w": 1})])
    assert (await again.get_relations(["r_new"]))["r_new"] == ("n001", "n002", {"w": 1})


async def test_a_version_1_file_still_loads(tmp_path: Path) -> None:
    vec = np.arange(DIMS, dtype="<f4") + 1
    doc = {
        "format": "kag-memory-store",
        "version": 1,
        "dimensions": DIMS,
        "nodes": [
            {"id": i, "label": "A", "props": {"name": i}, "embedding": base64.b64encode(vec.tobytes()).decode()}
            for i in ("a", "b")
        ],
        "relations": [{"id": "r1", "label": "R", "start": "a", "end": "b", "props": {"w": 3}}],
    }
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    store = MemoryGraphStore(path)
    assert await store.get_relations(["r1"]) == {"r1": ("a", "b", {"w": 3})}
    store.save()  # a .json name stays JSON
    assert json.loads(path.read_text())["relations"] == doc["relations"]
    assert await MemoryGraphStore(path).get_relations(["r1"]) == {"r1": ("a", "b", {"w": 3})}
    compact = store.save(tmp_path / "old.kag")  # any other name: the compact format
    assert compact.read_bytes().startswith(b"KAGSTORE")
    assert await MemoryGraphStore(compact).get_relations(["r1"]) == {"r1": ("a", "b", {"w": 3})}


async def test_a_json_name_gives_a_readable_json_file(tmp_path: Path) -> None:
    store = await _store()
    path = store.save(tmp_path / "kb.JSON")  # the extension is matched without case
    doc = json.loads(path.read_text(encoding="utf-8"))
    nodes, _ = store.records()
    first = doc["nodes"][0]
    assert (first["id"], first["label"], first["props"]) == (nodes[0].id, nodes[0].label, nodes[0].properties)
    vector = np.frombuffer(base64.b64decode(first["embedding"]), dtype="<f4")
    assert np.array_equal(vector, nodes[0].embedding)
    assert len(doc["relations"]) == (await store.counts())["relations"]


async def test_an_empty_json_store_keeps_its_dimensions_and_labels(tmp_path: Path) -> None:
    store = MemoryGraphStore(tmp_path / "kb.json")
    await store.ensure_schema(["A"], ["R"], DIMS)
    store.save()
    again = MemoryGraphStore(tmp_path / "kb.json")
    with pytest.raises(EmbeddingError):  # the dimensions came back with the file
        await again.ensure_schema(["A"], ["R"], DIMS + 1)


async def test_damaged_files_are_refused(tmp_path: Path) -> None:
    store = await _store()
    path = tmp_path / "kb.kag"
    store.save(path)
    data = path.read_bytes()
    for bad in (data[: len(data) // 2], data[:20], data.replace(b'"count"', b'"cuont"', 1)):
        broken = tmp_path / "broken.json"
        broken.write_bytes(bad)
        with pytest.raises(StoreFormatError):
            MemoryGraphStore(broken)


def _clustered(n: int, clusters: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((clusters, 32)).astype(np.float32)
    rows = centers[rng.integers(0, clusters, size=n)] + 0.6 * rng.standard_normal((n, 32)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_ivf_recall_against_exact() -> None:
    matrix = _clustered(20_000, 50, seed=3)
    rows = np.arange(matrix.shape[0])
    index = IVFIndex(matrix, rows)
    rng = np.random.default_rng(4)
    hits = total = 0
    for _ in range(30):
        q = matrix[int(rng.integers(0, matrix.shape[0]))] + 0.1 * rng.standard_normal(32).astype(np.float32)
        q /= np.linalg.norm(q)
        exact = set(np.argsort(-(matrix @ q))[:10].tolist())
        got = index.search(matrix, q, 100)
        assert got.shape[0] == 100 and np.all(np.diff(got) > 0)
        hits += len(exact & set(got.tolist()))
        total += 10
    assert hits / total >= 0.95


async def test_candidates_use_the_index_only_when_opted_in() -> None:
    matrix = _clustered(3_000, 20, seed=6)
    nodes = [NodeRecord(f"e{i:05d}", "E", {"i": i}, matrix[i]) for i in range(matrix.shape[0])]
    exact_store, approx_store = MemoryGraphStore(), MemoryGraphStore(approximate_min_rows=1_000)
    for store in (exact_store, approx_store):
        await store.upsert(nodes, [])
    rng = np.random.default_rng(8)
    agree = 0
    for _ in range(20):
        q = matrix[int(rng.integers(0, 3_000))]
        exact = QueryPlan(nodes=(NodeSpec(("E",), ("q",), (q,)),), hops=(), k=10, threshold=0.0)
        approx = QueryPlan(nodes=exact.nodes, hops=(), k=10, threshold=0.0, candidates=50)
        want = exact_store.evaluate(exact).rows
        assert exact_store.evaluate(approx).rows == want  # no index: candidates change nothing
        got = approx_store.evaluate(approx).rows
        assert len(got) == 10 and ("E",) in approx_store.evaluator.ann  # the IVF index served the anchor
        scores = {r.node_ids[0]: r.score for r in want}
        # every returned score is exact: the same as the exact plan's for the rows both return
        assert all(r.score == scores[r.node_ids[0]] for r in got if r.node_ids[0] in scores)
        agree += len(scores.keys() & {r.node_ids[0] for r in got})
    assert agree / 200 >= 0.9


async def test_the_approximate_index_follows_writes_without_a_rebuild() -> None:
    matrix = _clustered(3_000, 20, seed=9)
    store = MemoryGraphStore(approximate_min_rows=1_000)
    await store.upsert([NodeRecord(f"e{i:05d}", "E", {}, matrix[i]) for i in range(3_000)], [])
    q = matrix[17]
    plan = QueryPlan(nodes=(NodeSpec(("E",), ("q",), (q,)),), hops=(), k=5, threshold=0.0, candidates=50)
    first = store.evaluate(plan).rows
    index = store.evaluator.ann[("E",)]
    # a new node equal to the query, and the best old one deleted: both seen at once
    await store.upsert([NodeRecord("new", "E", {}, q)], [])
    await store.delete([first[0].node_ids[0]])
    rows = store.evaluate(plan).rows
    assert store.evaluator.ann[("E",)] is index  # not rebuilt
    assert rows[0].node_ids[0] == "new" and rows[0].score == pytest.approx(1.0)
    assert first[0].node_ids[0] not in {r.node_ids[0] for r in rows}


@pytest.mark.parametrize(("threshold", "k"), [(0.0, 7), (0.6, 50), (0.55, 3)])
async def test_a_large_label_scored_in_place_matches_brute_force(threshold: float, k: int) -> None:
    # label A holds most rows (scored over the whole matrix, the other rows ruled out in place);
    # deleted rows and B rows must never come back, and scores are the exact cosines
    rng = np.random.default_rng(21)
    vectors = [_vec(rng) for _ in range(400)]
    store = MemoryGraphStore()
    await store.upsert([NodeRecord(f"n{i:03d}", "B" if i % 10 == 0 else "A", {}, v) for i, v in enumerate(vectors)], [])
    gone = {f"n{i:03d}" for i in range(1, 400, 37)}
    await store.delete(sorted(gone))
    for trial in range(5):
        q = _vec(rng) if trial else vectors[5]
        plan = QueryPlan(nodes=(NodeSpec(("A",), ("q",), (q,)),), hops=(), k=k, threshold=threshold)
        got = [(r.node_ids[0], r.score) for r in store.evaluate(plan).rows]
        want = []
        for i, v in enumerate(vectors):
            nid = f"n{i:03d}"
            if i % 10 == 0 or nid in gone:
                continue
            cos = float(v.astype(np.float64) @ q.astype(np.float64)) / (
                float(np.linalg.norm(v.astype(np.float64))) * float(np.linalg.norm(q.astype(np.float64)))
            )
            score = min(1.0, max(0.0, (1.0 + cos) / 2.0))
            if np.float32(score) >= np.float32(threshold):
                want.append((nid, score))
        want.sort(key=lambda t: (-t[1], t[0]))
        assert [i for i, _ in got] == [i for i, _ in want[:k]]
        assert [s for _, s in got] == pytest.approx([s for _, s in want[:k]], abs=1e-12)


async def test_a_memory_uri_naming_a_json_file_saves_json(tmp_path: Path) -> None:
    from kag.graph.factory import open_store

    nodes, rels = _graph(nodes=6, rels=8)
    for name, json_file in (("kb.json", True), ("kb.kag", False)):
        store = open_store(f"memory://{tmp_path / name}")
        assert isinstance(store, MemoryGraphStore)
        await store.upsert(nodes, rels)
        data = store.save().read_bytes()
        assert data.startswith(b"{") == json_file and data.startswith(b"KAGSTORE") != json_file
        reopened = open_store(f"memory://{tmp_path / name}")
        assert await reopened.counts() == await store.counts()
