"""A label's embedding matrix loads in batches of ``LOAD_BATCH`` nodes per record: the same ids,
vectors and norms as reading the nodes one per row, across batch boundaries, with vectors of
another length (written outside kag) left out as before. After the store's own writes alone, a
stale matrix is refreshed by reading back just their nodes, and equals a full load; after anyone
else's write it is loaded whole."""

from __future__ import annotations

import numpy as np
import pytest

from kag.graph.base import NodeRecord
from kag.graph.neo4j import ENTITY, Neo4jGraphStore
from kag.graph.neo4j_anchor import LOAD_BATCH, AnchorScorer, LabelMatrix, _vector_batch
from kag.query.cypher import quote
from tests.neo4j.conftest import count_loads, fresh_namespace

pytestmark = pytest.mark.neo4j

DIMS = 8


def test_a_record_becomes_float32_blocks_by_length() -> None:
    same = _vector_batch([["a", "b"], [[1.0, 2.0], [3.0, 4.5]]])
    assert list(same) == [2]
    assert same[2][0] == ["a", "b"]
    assert same[2][1].dtype == np.float32 and same[2][1].tolist() == [[1.0, 2.0], [3.0, 4.5]]

    mixed = _vector_batch([["a", "b", "c", "d"], [[1.0, 2.0], [1.0, 2.0, 3.0], [5.0, 6.0], [7.0]]])
    assert sorted(mixed) == [1, 2, 3]
    assert mixed[2][0] == ["a", "c"] and mixed[2][1].tolist() == [[1.0, 2.0], [5.0, 6.0]]
    assert mixed[3][0] == ["b"] and mixed[3][1].shape == (1, 3)
    assert mixed[1][0] == ["d"] and mixed[1][1].shape == (1, 1)

    assert _vector_batch([[], []]) == {}


async def test_batched_load_equals_the_nodes_read_one_per_row(neo4j_config: dict[str, str]) -> None:
    ns = fresh_namespace()
    store = Neo4jGraphStore(
        neo4j_config["uri"],
        username=neo4j_config["user"],
        password=neo4j_config["password"],
        database=neo4j_config["database"],
        namespace=ns,
    )
    try:
        await store.ensure_schema(["Probe"], [], DIMS)
        n = 2 * LOAD_BATCH + 37  # three records, the last one partial
        rng = np.random.default_rng(11)
        vectors = rng.standard_normal((n, DIMS)).astype(np.float32)
        await store.upsert([NodeRecord(f"p{i}", "Probe", {"name": f"p{i}"}, vectors[i]) for i in range(n)], [])
        # nodes a raw-Cypher writer gave vectors of another length, one inside each batch: left out
        await store.run(
            f"UNWIND $rows AS row CREATE (x:{quote(ENTITY)}:Probe {{id: row.id, kag_ns: $ns, embedding: row.e}})",
            {"rows": [{"id": f"odd{j}", "e": [0.5] * (DIMS - 3)} for j in range(3)], "ns": ns},
            write=True,
            what="a test writing odd vectors",
        )

        loaded = (await store.anchor_scorer.matrices(["Probe"]))["Probe"]
        plain = (await AnchorScorer(store.read, store.namespace).matrices(["Probe"]))["Probe"]  # the async reader

        res = await store.read(
            "MATCH (p:Probe {kag_ns: $ns}) RETURN p.id AS id, p.embedding AS e", {"ns": ns}, "a test reading rows"
        )
        by_row = {r["id"]: np.asarray(r["e"], dtype=np.float32) for r in res.records if len(r["e"]) == DIMS}
        assert len(by_row) == n
        for got in (loaded, plain):
            assert sorted(got.ids.tolist()) == sorted(by_row)
            assert got.matrix.shape == (n, DIMS) and got.matrix.dtype == np.float32
            expected = np.stack([by_row[i] for i in got.ids])
            assert np.array_equal(got.matrix, expected)
            assert np.array_equal(got.matrix, vectors[[int(i[1:]) for i in got.ids]])  # what was written
            assert got.norms.tolist() == [float(np.linalg.norm(row.astype(np.float64))) for row in expected]
        assert loaded.ids.tolist() == plain.ids.tolist()

        # an empty label loads as an empty matrix
        await store.clear()
        store.anchor_scorer.invalidate()
        empty = (await store.anchor_scorer.matrices(["Probe"]))["Probe"]
        assert empty.ids.shape == (0,) and empty.matrix.shape[0] == 0
    finally:
        await store.clear()
        await store.aclose()


def same_rows(a: LabelMatrix, b: LabelMatrix) -> bool:
    """The same ids with the same vectors and norms (row order aside) and the same version."""
    order_a, order_b = np.argsort(a.ids.astype(str)), np.argsort(b.ids.astype(str))
    return bool(
        a.ids[order_a].tolist() == b.ids[order_b].tolist()
        and np.array_equal(a.matrix[order_a], b.matrix[order_b])
        and np.array_equal(a.norms[order_a], b.norms[order_b])
        and a.version == b.version
    )


def graph_store(config: dict[str, str], ns: str) -> Neo4jGraphStore:
    return Neo4jGraphStore(
        config["uri"], username=config["user"], password=config["password"], database=config["database"], namespace=ns
    )


async def test_own_writes_refresh_the_matrix_by_their_ids(neo4j_config: dict[str, str]) -> None:
    ns = fresh_namespace()
    store, other = graph_store(neo4j_config, ns), graph_store(neo4j_config, ns)
    try:
        for s in (store, other):
            await s.ensure_schema(["Probe"], [], DIMS)
        rng = np.random.default_rng(5)

        def nodes(ids: list[str]) -> list[NodeRecord]:
            vectors = rng.standard_normal((len(ids), DIMS)).astype(np.float32)
            return [NodeRecord(i, "Probe", {"name": i}, vectors[n]) for n, i in enumerate(ids)]

        await store.upsert(nodes([f"p{i}" for i in range(300)]), [])
        scorer = store.anchor_scorer
        loads = count_loads(scorer)
        first = (await scorer.matrices(["Probe"]))["Probe"]
        assert loads == ["Probe"] and first.ids.shape == (300,)

        # this store's own writes: vectors replaced, nodes added, nodes deleted (no stamp, fewer ids)
        await store.upsert(nodes(["p3", "p150", "new1", "new2"]), [])
        await store.bulk_upsert(nodes([f"bulk{i}" for i in range(40)]), [], batch_size=15)
        assert await store.delete(["p7", "p299"]) == 2
        refreshed = (await scorer.matrices(["Probe"]))["Probe"]
        assert loads == ["Probe"]  # refreshed, not loaded again
        assert refreshed is not first and refreshed.ids.shape == (340,)  # 300 + 2 + 40 - 2
        assert same_rows(refreshed, await AnchorScorer(store.read, ns)._load("Probe", refreshed.version))

        # another store (another driver, as another process) writes: its stamps are not this store's
        await other.upsert(nodes(["p4"]), [])
        again = (await scorer.matrices(["Probe"]))["Probe"]
        assert loads == ["Probe", "Probe"]  # loaded whole
        assert same_rows(again, await AnchorScorer(store.read, ns)._load("Probe", again.version))

        # own writes again after that: refreshed from the full load
        p5 = nodes(["p5"])
        await store.upsert(p5, [])
        last = (await scorer.matrices(["Probe"]))["Probe"]
        assert loads == ["Probe", "Probe"]
        assert same_rows(last, await AnchorScorer(store.read, ns)._load("Probe", last.version))
        assert np.array_equal(last.matrix[last.positions()["p5"]], p5[0].embedding)  # the new vector

        # nodes added only: the rows are kept in place and the new ones appended
        await store.upsert(nodes(["tail1", "tail2"]), [])
        grown = (await scorer.matrices(["Probe"]))["Probe"]
        assert loads == ["Probe", "Probe"] and grown.ids.tolist()[:-2] == last.ids.tolist()
        assert same_rows(grown, await AnchorScorer(store.read, ns)._load("Probe", grown.version))
        assert grown.positions() == {str(i): n for n, i in enumerate(grown.ids.tolist())}
        # appended into the room behind the rows: the earlier matrix shares them and is unchanged
        rows_before = grown.matrix.copy()
        await store.upsert(nodes(["tail3"]), [])
        longer = (await scorer.matrices(["Probe"]))["Probe"]
        assert np.shares_memory(longer.matrix, grown.matrix) and np.array_equal(grown.matrix, rows_before)
        assert same_rows(longer, await AnchorScorer(store.read, ns)._load("Probe", longer.version))

        # deleted then added: the store reuses deleted nodes' slots, the refresh keeps its own order
        assert await store.delete([f"p{i}" for i in range(10, 60)]) == 50
        await store.upsert(nodes([f"late{i}" for i in range(30)]), [])
        reused = (await scorer.matrices(["Probe"]))["Probe"]
        assert loads == ["Probe", "Probe"]
        kept = [i for i in longer.ids.tolist() if i not in {f"p{n}" for n in range(10, 60)}]
        assert reused.ids.tolist()[:-30] == kept and set(reused.ids.tolist()[-30:]) == {f"late{i}" for i in range(30)}
        assert same_rows(reused, await AnchorScorer(store.read, ns)._load("Probe", reused.version))

    finally:
        await store.clear()
        await store.aclose()
        await other.aclose()
