"""A server that dies mid-ingest: typed error, then a re-run converges to identical counts.

This test kills the real server (SIGKILL, like a crash), restarts it with the
project's script and re-runs the same ingest. It runs last among the Neo4j tests
(with test_zz_outage_http.py) and leaves the server running whatever happens: the
restart is tried again if it fails (tests.neo4j_support.start_server).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from kag.errors import BackendUnavailableError
from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, City, Country, IsCityOf
from tests.neo4j_support import kill_server, server_pid, start_server

# a restart of the killed server can take minutes on a loaded machine (neo4j.sh waits while it makes progress)
pytestmark = [pytest.mark.neo4j, pytest.mark.timeout(900)]


def facts() -> list[IsCityOf]:
    return [
        IsCityOf(subj=City(name=f"Town {i}", population=i), obj=Country(name=f"Land {i % 97}")) for i in range(12_000)
    ]


async def test_server_killed_mid_ingest_then_rerun(
    neo4j_kb_factory: Callable[..., Any], neo4j_config: dict[str, str]
) -> None:
    if server_pid() is None:
        pytest.fail("this test needs the server started by deploy/neo4j/neo4j.sh (make test)", pytrace=False)
    kb = await neo4j_kb_factory(
        entity_models=ENTITY_MODELS,
        relation_models=RELATION_MODELS,
        batch_size=256,
        max_retries=2,
        backoff=0.05,
        max_transaction_retry_time=1.0,
        connection_timeout=2.0,
    )
    kb.store.batch_size = 200  # type: ignore[attr-defined]
    probe = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    ingest = asyncio.create_task(kb.upsert(facts()))
    try:
        for _ in range(600):  # wait until the first batches have landed, then crash the server
            await asyncio.sleep(0.05)
            if (await probe.counts()).get("City", 0) > 0:
                break
        assert not ingest.done(), "the ingest finished before the server could be stopped; make it larger"
        kill_server()
        with pytest.raises(BackendUnavailableError, match="can simply be re-run"):
            await asyncio.wait_for(ingest, timeout=120)
    finally:
        await asyncio.to_thread(start_server)
    await kb.aclose()
    await probe.aclose()
    partial = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    before = await partial.counts()
    assert before.get("IsCityOf", 0) < 12_000  # the crash really interrupted the ingest
    await partial.upsert(facts())
    after = await partial.counts()
    assert after["City"] == 12_000 and after["Country"] == 97 and after["IsCityOf"] == 12_000
    assert after["nodes"] == 12_097 and after["relations"] == 12_000
