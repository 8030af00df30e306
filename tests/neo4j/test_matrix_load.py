"""A label's embedding matrix loads in batches of ``LOAD_BATCH`` nodes per record: the same ids,
vectors and norms as reading the nodes one per row, across batch boundaries, with vectors of
another length (written outside kag) left out as before."""

from __future__ import annotations

import numpy as np
import pytest

from kag.graph.base import NodeRecord
from kag.graph.neo4j import ENTITY, Neo4jGraphStore
from kag.graph.neo4j_anchor import LOAD_BATCH, AnchorScorer, _vector_batch
from kag.query.cypher import quote
from tests.neo4j.conftest import fresh_namespace

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
