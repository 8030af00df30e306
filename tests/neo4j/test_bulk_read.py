"""Large reads (a label's every embedding) run on a blocking driver in a worker thread: the same
rows as the async driver's read, on every kind of driver a store can have."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import neo4j
import numpy as np
import pytest
from neo4j import AsyncGraphDatabase

from kag.errors import UnsafeQueryError
from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, seed_facts
from kag.graph.neo4j import Neo4jGraphStore
from kag.graph.neo4j_anchor import AnchorScorer
from tests.neo4j.test_exact_anchor import store

pytestmark = pytest.mark.neo4j


def same(a: Any, b: Any) -> bool:
    return bool(
        list(a.ids) == list(b.ids)
        and np.array_equal(a.matrix, b.matrix)
        and np.array_equal(a.norms, b.norms)
        and a.version == b.version
    )


async def test_bulk_loaded_matrices_equal_the_async_reads(
    neo4j_kb_factory: Callable[..., Any], neo4j_config: dict[str, str]
) -> None:
    kb = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    await kb.upsert(seed_facts())
    own = store(kb)
    bulk = await own.anchor_scorer.matrices(["City", "Country"])
    plain = await AnchorScorer(own.read, own.namespace).matrices(["City", "Country"])
    assert own._blocking is not None  # the store opened its blocking driver for the load
    assert all(same(bulk[label], plain[label]) for label in ("City", "Country"))
    assert bulk["City"].ids.shape[0] > 0 and bulk["City"].matrix.shape[1] == 384

    # a store of another namespace made from this one reads through the same blocking driver
    other = own.in_namespace("elsewhere")
    assert other._blocking_driver() is own._blocking

    # only read-only queries: the same EXPLAIN guard as every read
    with pytest.raises(UnsafeQueryError):
        await own.read_rows("MATCH (n:City) SET n.x = 1 RETURN n.id", {}, "a write in disguise")

    await own.aclose()
    assert own._blocking is None

    # a caller's blocking driver is used as is; behind a caller's async driver the read is the async one
    auth = (neo4j_config["user"], neo4j_config["password"])
    blocking = neo4j.GraphDatabase.driver(neo4j_config["uri"], auth=auth)
    async_driver = AsyncGraphDatabase.driver(neo4j_config["uri"], auth=auth)
    try:
        for driver in (blocking, async_driver):
            theirs = Neo4jGraphStore(neo4j_config["uri"], driver=driver, database=neo4j_config["database"] or None)
            await theirs.ensure_schema(["City", "Country"], [], 384)
            assert (theirs._blocking_driver() is blocking) == (driver is blocking)
            got = await theirs.anchor_scorer.matrices(["City", "Country"])
            assert all(same(got[label], plain[label]) for label in ("City", "Country"))
            assert theirs._blocking is None  # kag opened no driver of its own
    finally:
        blocking.close()
        await async_driver.close()
