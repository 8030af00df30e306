"""A caller's blocking ``neo4j.Driver`` runs each transaction in a worker thread, which no
cancellation can stop: a cancelled write must end with its transaction, never before it."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import neo4j
import pytest

from kag.graph.neo4j import Neo4jGraphStore

pytestmark = pytest.mark.neo4j


async def test_a_cancelled_write_ends_once_its_transaction_has(neo4j_config: dict[str, str]) -> None:
    auth = (neo4j_config["user"], neo4j_config["password"])
    database = neo4j_config["database"] or None
    blocking = neo4j.GraphDatabase.driver(neo4j_config["uri"], auth=auth)
    tag = uuid.uuid4().hex
    store = Neo4jGraphStore(neo4j_config["uri"], driver=blocking, database=database)
    started = asyncio.Event()
    loop = asyncio.get_running_loop()

    async def work(tx: Any) -> None:  # runs on the worker thread's own loop
        loop.call_soon_threadsafe(started.set)
        await asyncio.sleep(0.5)
        await (await tx.run("CREATE (:KagCancelProbe {tag: $tag})", {"tag": tag})).consume()

    async def write() -> None:
        async with store.session() as session:
            await session.execute_write(work)

    def probes() -> int:
        records, _, _ = blocking.execute_query(
            "MATCH (n:KagCancelProbe {tag: $tag}) RETURN count(n) AS n", tag=tag, database_=database
        )
        return int(records[0]["n"])

    try:
        task = asyncio.create_task(write())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # the task ended only after the thread's transaction committed and its session closed:
        # the write is there now, not a moment after the caller was told the call was over
        assert probes() == 1
    finally:
        blocking.execute_query("MATCH (n:KagCancelProbe {tag: $tag}) DELETE n", tag=tag, database_=database)
        blocking.close()
