"""How ``Neo4jGraphStore.bulk_upsert`` orders its relation batches beside the node batches (no server):
a relation is handed out only once every node batch holding one of its endpoints has committed, and
failures stop the whole load instead of leaving a writer waiting."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from kag.graph.base import NodeRecord, RelationRecord
from kag.graph.neo4j_bulk_schedule import RelationSchedule, first_failure


def node(i: str) -> NodeRecord:
    return NodeRecord(i, "City", {"name": i}, np.zeros(4, dtype=np.float32))


def rel(i: str, start: str, end: str, label: str = "NearTo") -> RelationRecord:
    return RelationRecord(i, label, start, end, {})


PARTS = [[node("a"), node("b")], [node("c"), node("d")], [node("e")]]


async def test_relations_wait_for_the_batches_of_both_endpoints() -> None:
    relations = [
        rel("r_old", "x", "y"),  # both stored before the call: ready at once
        rel("r_ae", "a", "e"),  # needs batch 2
        rel("r_ab", "a", "b", "Borders"),  # batch 0 alone
        rel("r_cx", "c", "x"),  # batch 1 and a stored node
    ]
    plan = RelationSchedule(PARTS, relations)
    assert [r.id for r in await plan.next(10) or []] == ["r_old"]
    waiting = asyncio.ensure_future(plan.next(10))
    await asyncio.sleep(0)
    plan.done(1)  # batch 1 before batch 0: r_cx still waits, since batch 0 has not committed
    await asyncio.sleep(0)
    assert not waiting.done()
    plan.done(0)
    assert [r.id for r in await waiting] == ["r_ab", "r_cx"]  # by level, each level by type
    waiting = asyncio.ensure_future(plan.next(10))
    await asyncio.sleep(0)
    assert not waiting.done()
    plan.done(2)
    assert [r.id for r in await waiting] == ["r_ae"]
    assert await plan.next(10) is None


async def test_a_ready_backlog_is_cut_into_batches_of_the_size_asked() -> None:
    relations = [rel(f"r{i}", "a", "b") for i in range(5)]
    plan = RelationSchedule(PARTS, relations)
    for k in range(3):
        plan.done(k)
    sizes = []
    while (batch := await plan.next(2)) is not None:
        sizes.append(len(batch))
    assert sizes == [2, 2, 1]


async def test_no_relations_and_no_nodes_end_at_once() -> None:
    assert await RelationSchedule([], []).next(5) is None
    assert await RelationSchedule(PARTS, []).next(5) is None


async def test_the_first_failure_cancels_the_rest_and_is_raised() -> None:
    cancelled: set[str] = set()

    async def slow() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.add("slow")
            raise

    async def bad() -> None:
        await asyncio.sleep(0)
        raise ValueError("batch 3 failed")

    plan = RelationSchedule(PARTS, [rel("r", "a", "e")])

    async def relate() -> None:  # would wait forever for batch 2 without the cancel
        try:
            await plan.next(10)
        except asyncio.CancelledError:
            cancelled.add("relate")
            raise

    with pytest.raises(ValueError, match="batch 3 failed"):
        await asyncio.wait_for(first_failure([slow(), bad(), relate()]), timeout=5)
    assert cancelled == {"slow", "relate"}  # stopped before the error reached the caller


async def test_jobs_that_succeed_all_run_to_the_end() -> None:
    finished: list[int] = []

    async def job(i: int) -> None:
        await asyncio.sleep(0.001 * (3 - i))
        finished.append(i)

    await first_failure([job(i) for i in range(3)])
    assert sorted(finished) == [0, 1, 2]
