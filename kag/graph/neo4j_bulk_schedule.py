"""The order of a Neo4j bulk upsert's transactions (:meth:`kag.graph.neo4j.Neo4jGraphStore.bulk_upsert`).

Node batches run side by side, because Neo4j updates the vector index when each transaction
commits, which is most of a node's cost. Relation batches run one after another beside them:
relations in two transactions that share a node deadlock on its relationship locks. Each relation
batch is handed out as soon as every node batch holding one of its endpoints has committed
(:class:`RelationSchedule`), so it only touches committed nodes and never waits on a node batch's
locks. The first failure stops the whole load (:func:`first_failure`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from kag.graph.base import NodeRecord, RelationRecord

# the Neo4j store's logger (docs/development.md names it for retries and slow statements)
log = logging.getLogger("kag.graph.neo4j")


async def write_in_batches(
    parts: Sequence[Sequence[NodeRecord]],
    relations: Sequence[RelationRecord],
    *,
    write_nodes: Callable[[Sequence[NodeRecord]], Awaitable[None]],
    write_relations: Callable[[list[RelationRecord]], Awaitable[None]],
    concurrency: int,
    relation_batch_size: int,
) -> None:
    """Write the node batches ``parts`` ``concurrency`` at a time and, beside them, ``relations`` in
    batches of up to ``relation_batch_size``, one after another, each once its endpoints' node batches
    have committed. Raises the first failure once no batch is still running."""
    plan = RelationSchedule(parts, relations)
    gate = asyncio.Semaphore(concurrency)

    async def write(k: int) -> None:
        async with gate:
            await write_nodes(parts[k])
        plan.done(k)

    async def relate() -> None:
        while (ready := await plan.next(relation_batch_size)) is not None:
            await write_relations(ready)

    await first_failure([write(k) for k in range(len(parts))] + [relate()])


class RelationSchedule:
    """Hands out relation batches as soon as the node batches holding their endpoints have committed.

    A relation's level is the last node batch of this call that holds one of its endpoints (-1 when
    neither is in the call: they are stored already). Relations are written one batch at a time, so
    relation transactions never lock each other's nodes, and a relation batch only touches nodes
    whose batches have committed, so it never waits on a node batch's locks either.
    """

    def __init__(self, parts: Sequence[Sequence[NodeRecord]], relations: Sequence[RelationRecord]) -> None:
        batch_of = {n.id: k for k, part in enumerate(parts) for n in part}
        levels: dict[int, list[RelationRecord]] = defaultdict(list)
        for r in relations:
            levels[max(batch_of.get(r.start, -1), batch_of.get(r.end, -1))].append(r)
        # grouped by type within a level: a batch holds few types, and each type is one statement
        self._levels = {k: sorted(rows, key=lambda r: r.label) for k, rows in levels.items()}
        self._order = sorted(self._levels)
        self._committed = [False] * len(parts)
        self._prefix = -1  # every node batch up to here has committed
        self._changed = asyncio.Event()
        self._pending: list[RelationRecord] = []

    def done(self, k: int) -> None:
        """Node batch ``k`` committed."""
        self._committed[k] = True
        while self._prefix + 1 < len(self._committed) and self._committed[self._prefix + 1]:
            self._prefix += 1
        self._changed.set()

    async def next(self, size: int) -> list[RelationRecord] | None:
        """Up to ``size`` relations whose endpoints are all written (waiting until some are); None
        once every relation was handed out. Whatever is ready goes at once: while that batch is
        written, later node batches commit and the next one fills up."""
        while True:
            while self._order and self._order[0] <= self._prefix:
                self._pending.extend(self._levels.pop(self._order.pop(0)))
            if self._pending:
                batch, self._pending = self._pending[:size], self._pending[size:]
                return batch
            if not self._order:
                return None
            self._changed.clear()
            await self._changed.wait()


async def first_failure(jobs: Sequence[Coroutine[Any, Any, None]]) -> None:
    """Run ``jobs`` side by side and raise the first failure, as ``gather`` would, but cancel the
    others and wait until they have stopped first, so no batch is still writing once this returns.
    (A transaction running in a worker thread, on a blocking driver, cannot be stopped: its task
    ends when that transaction has; see :class:`~kag.graph.neo4j_blocking_driver.BlockingSession`.)"""
    tasks = [asyncio.ensure_future(job) for job in jobs]
    try:
        for finished in asyncio.as_completed(tasks):
            await finished
    finally:
        for task in tasks:
            task.cancel()
        for outcome in await asyncio.gather(*tasks, return_exceptions=True):
            if isinstance(outcome, Exception):  # each is logged: only the first is raised
                log.debug("bulk write batch failed: %r", outcome)
